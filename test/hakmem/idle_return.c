/* SPDX-License-Identifier: MIT */
/* test-builds: standard */
/* hakmem only.  Memory that a call other than malloc and free hands back
 * goes back to the OS while the program then idles, as after a free: the
 * purger thread (balanced profile) sleeps while nothing is due, and such a
 * call must say that something is.  Two calls: hak_thread_flush, whose
 * blocks going home empty their slabs, and realloc shrinking a huge block
 * where it is, whose tail goes back to its region.  Each is waited for
 * WAIT_MS, many purge delays (100 ms); before, an idle process kept both. */
#include "hakmem.h"
#include "testutil.h"

enum { WAIT_MS = 2000, SETTLE_MS = 600, SIZES = 12 };
static hak_stats_t s;  /* 11 KiB: not on the stack */

static void idle_ms(unsigned ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&t, &t) != 0) CHECK(errno == EINTR);
}

/* The slabs of the classes of 2-16 KiB, which the program's other blocks do not use. */
static size_t slabs_2k_16k(void) {
  hak_stats_get(&s);
  size_t n = 0;
  for (unsigned i = 0; i < s.nclasses; i++)
    if (s.classes[i].block_size >= 2048 && s.classes[i].block_size <= 16384) n += s.classes[i].slabs;
  return n;
}

static size_t free_resident(void) {
  hak_stats_get(&s);
  return s.free_resident_bytes;
}

/* The purger started (the heap has held 4 MiB, on a malloc), and idle:
 * a thread more than the process had (qemu-user counts threads of its own). */
static void purger_idle(void) {
  size_t threads = proc_status_kib("Threads");
  for (int i = 0; i < 8 && proc_status_kib("Threads") <= threads; i++) free(opaque_ptr(malloc(8 * MiB)));
  CHECK_MSG(proc_status_kib("Threads") > threads, "the balanced profile's purger thread did not start");
  idle_ms(SETTLE_MS);
}

static void flushed_cache(void) {
  purger_idle();
  void *p[SIZES];
  for (int i = 0; i < SIZES; i++) p[i] = malloc(2048 + (size_t)i * 1200);  /* a slab each, kept by a block */
  for (int i = 0; i < SIZES; i++) free(p[i]);                                /* into this thread's cache */
  idle_ms(SETTLE_MS);
  size_t before = slabs_2k_16k();
  hak_thread_flush();
  size_t after = before;
  for (unsigned t = 0; t < WAIT_MS / 20 && after > before / 2; t += 1, idle_ms(20)) after = slabs_2k_16k();
  printf("  slabs of 2-16 KiB: %zu with the cache's blocks, %zu after its flush and an idle wait\n", before, after);
  CHECK(before >= SIZES / 2);
  CHECK_MSG(after <= before / 2, "the slabs the flush emptied stayed while the program idled");
}

static void shrunk_in_place(void) {
  purger_idle();
  char *p = malloc(32 * MiB);
  CHECK(p != NULL);
  memset(p, 1, 32 * MiB);
  idle_ms(SETTLE_MS);
  size_t before = free_resident();
  char *q = realloc(p, 4 * MiB);
  if (q != p) {
    NOTE("realloc moved the block: no tail given back in place here");
    free(q);
    return;
  }
  size_t cut = free_resident(), after = cut;
  for (unsigned t = 0; t < WAIT_MS / 20 && after > before + 4 * MiB; t += 1, idle_ms(20)) after = free_resident();
  printf("  free and resident: %zu KiB, %zu after the shrink, %zu after an idle wait\n", before >> 10, cut >> 10,
         after >> 10);
  CHECK_MSG(cut >= before + 16 * MiB, "the shrink gave back %zu KiB", (cut - before) >> 10);
  CHECK_MSG(after <= before + 4 * MiB, "the shrunk block's tail stayed resident while the program idled");
  free(q);
}

static const self_case_t cases[] = {
    {"flushed_cache", flushed_cache, {"HAKMEM_PROFILE=balanced", NULL}},
    {"shrunk_in_place", shrunk_in_place, {"HAKMEM_PROFILE=balanced", NULL}},
};

int main(int argc, char **argv) {
  if (argc == 1) test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof *cases, 60);
}
