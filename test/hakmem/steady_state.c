/* SPDX-License-Identifier: MIT */
/* hakmem only.  In a steady state the allocator makes no system calls: after
 * a warm-up of a random mix of malloc and free (sizes 16 to 1040 bytes, a
 * working set of 400 blocks), one million more iterations of the same mix
 * must leave hak_os_stats' mmap, munmap, madvise and mremap counts unchanged.
 * And a process that grows to a few hundred MiB, gives it back and grows
 * again maps nothing after start-up: its SuperSlabs and huge regions come
 * from the address space reserved with the class map. */
#include <malloc.h>
#include "testutil.h"

enum { WORKING_SET = 400, WARMUP = 1000000, MEASURED = 1000000 };

static void *slot[WORKING_SET];

static void mix(rng_t *rng, int iterations) {
  int i;
  for (i = 0; i < iterations; i++) {
    int k = (int)rng_below(rng, WORKING_SET);
    size_t n = rng_range(rng, 16, 1040);
    free(slot[k]);
    slot[k] = malloc(n);
    CHECK(slot[k] != NULL);
    /* Touch both ends: the block is really used. */
    ((unsigned char *)slot[k])[0] = (unsigned char)i;
    ((unsigned char *)slot[k])[n - 1] = (unsigned char)i;
  }
}

static void no_os_calls_in_steady_state(void) {
  rng_t rng = {77};
  hak_os_stats_t a, b;
  int k;
  mix(&rng, WARMUP);
  hak_os_stats(&a);
  mix(&rng, MEASURED);
  hak_os_stats(&b);
  printf("  after warm-up: mmap %llu munmap %llu madvise %llu mremap %llu, mapped %llu KiB\n",
         a.mmap_calls, a.munmap_calls, a.madvise_calls, a.mremap_calls, a.mapped_bytes / 1024);
  printf("  after %d more: mmap %llu munmap %llu madvise %llu mremap %llu, mapped %llu KiB\n",
         MEASURED, b.mmap_calls, b.munmap_calls, b.madvise_calls, b.mremap_calls,
         b.mapped_bytes / 1024);
  CHECK_MSG(a.mmap_calls > 0, "hak_os_stats counted no mmap at all");
  CHECK_EQ(b.mmap_calls, a.mmap_calls);
  CHECK_EQ(b.munmap_calls, a.munmap_calls);
  CHECK_EQ(b.madvise_calls, a.madvise_calls);
  CHECK_EQ(b.mremap_calls, a.mremap_calls);
  for (k = 0; k < WORKING_SET; k++) free(slot[k]);
}

enum { SMALL = 25600, SMALL_SIZE = 4000, HUGE = 4 };
#define HUGE_SIZE ((size_t)50 << 20)

/* 100 MiB of small blocks and 200 MiB of huge ones, every page written. */
static void grow(void **small, void **huge) {
  for (int i = 0; i < SMALL; i++) {
    small[i] = malloc(SMALL_SIZE);
    CHECK(small[i] != NULL);
    memset(small[i], i, SMALL_SIZE);
  }
  for (int i = 0; i < HUGE; i++) {
    huge[i] = malloc(HUGE_SIZE);
    CHECK(huge[i] != NULL);
    memset(huge[i], i, HUGE_SIZE);
  }
}

static void release(void **small, void **huge) {
  for (int i = 0; i < SMALL; i++) free(small[i]);
  for (int i = 0; i < HUGE; i++) free(huge[i]);
  malloc_trim(0);
}

static void growth_maps_nothing(void) {
  static void *small[SMALL];
  void *huge[HUGE];
  hak_os_stats_t a, b, c, d;
  free(malloc(1));
  hak_os_stats(&a);
  grow(small, huge);
  hak_os_stats(&b);
  release(small, huge);
  hak_os_stats(&c);
  grow(small, huge);
  hak_os_stats(&d);
  release(small, huge);
  printf("  mmap %llu/%llu/%llu/%llu, munmap %llu/%llu/%llu/%llu, mapped %llu/%llu/%llu/%llu MiB "
         "(started, grown, given back, grown again)\n",
         a.mmap_calls, b.mmap_calls, c.mmap_calls, d.mmap_calls, a.munmap_calls, b.munmap_calls,
         c.munmap_calls, d.munmap_calls, a.mapped_bytes >> 20, b.mapped_bytes >> 20, c.mapped_bytes >> 20,
         d.mapped_bytes >> 20);
  CHECK_EQ(d.mmap_calls, a.mmap_calls);
  CHECK_EQ(d.munmap_calls, a.munmap_calls);
  CHECK(b.mapped_bytes >= a.mapped_bytes + ((size_t)290 << 20));
  CHECK_MSG(c.mapped_bytes + ((size_t)150 << 20) <= b.mapped_bytes, "malloc_trim gave back less than 150 MiB");
  CHECK(d.mapped_bytes >= c.mapped_bytes + ((size_t)140 << 20));
}

/* With HAKMEM_SS_MEM_LEAN_DECOMMIT=OFF free memory stays resident, and
 * counted so, until the program asks for it: malloc_trim gives it back. */
static void decommit_off_keeps_memory(void) {
  static void *small[SMALL];
  void *huge[HUGE];
  hak_stats_t s, t;
  hak_os_stats_t a, b;
  grow(small, huge);
  hak_os_stats(&a);
  for (int i = 0; i < SMALL; i++) free(small[i]);
  for (int i = 0; i < HUGE; i++) free(huge[i]);
  hak_thread_flush();
  hak_os_stats(&b);
  hak_stats_get(&s);
  int trimmed = malloc_trim(0);
  hak_stats_get(&t);
  printf("  freed: madvise %llu -> %llu, munmap %llu -> %llu, free resident %zu MiB; malloc_trim %d, then %zu MiB\n",
         a.madvise_calls, b.madvise_calls, a.munmap_calls, b.munmap_calls, s.free_resident_bytes >> 20, trimmed,
         t.free_resident_bytes >> 20);
  CHECK_EQ(b.madvise_calls, a.madvise_calls);
  CHECK_EQ(b.munmap_calls, a.munmap_calls);
  CHECK(s.free_resident_bytes >= ((size_t)250 << 20));
  CHECK_EQ(trimmed, 1);
  CHECK(t.free_resident_bytes < ((size_t)16 << 20));
}

int main(int argc, char **argv) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  if (argc > 1) {
    RUN(decommit_off_keeps_memory);
    return 0;
  }
  child_result_t res;
  const char *env[] = {"HAKMEM_SS_MEM_LEAN_DECOMMIT=OFF", NULL};
  run_self("off", env, 60, &res);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "decommit off: %s\n%s", describe_status(res.status),
            res.err);
  RUN(growth_maps_nothing);
  RUN(no_os_calls_in_steady_state);
  return 0;
}
