/* SPDX-License-Identifier: MIT */
/* hakmem only.  A malloc that returns NULL for want of memory has tried
 * what malloc_trim would do first: the calling thread's cache handed back,
 * the blocks parked in the central cache sent home, what is free given back,
 * and one more try, even where nothing goes back to the OS
 * (HAKMEM_SS_MEM_LEAN_DECOMMIT=OFF).  So the same malloc after a
 * malloc_trim fails too.  And under OFF too, the mapping a freed block of
 * hundreds of MiB keeps for reuse goes back for a block of another size
 * that needs the room.  A malloc that fails under the limit does not try
 * thousands of places for a mapping the kernel refuses anywhere.  Runs under
 * RLIMIT_AS; and with the limit lowered after start-up, once the reserved
 * space's regions are taken, a large block from a short region of its own
 * is freed and trimmed as any other. */
#include <malloc.h>
#include "hakmem.h"
#include "testutil.h"

#define LIMIT ((rlim_t)256 << 20)

static int under_limit(void) {
  /* blocks of 1000 B parked in the central cache: their slabs empty once sent home */
  static void *parked[300];
  for (int i = 0; i < 300; i++) CHECK((parked[i] = malloc(1000)) != NULL);
  for (int i = 0; i < 300; i++) free(parked[i]);
  hak_thread_flush();
  /* a large block in this thread's cache: its units free once handed back */
  free(malloc(200000));
  size_t n = 0;
  while (malloc(60000)) n++;  /* kept: the address space runs out */
  int error = errno;
  malloc_trim(0);
  hak_os_stats_t a, b;
  hak_os_stats(&a);
  void *again = malloc(60000);
  hak_os_stats(&b);
  printf("  %zu blocks of 60000 B, then NULL; the same malloc after malloc_trim: %p, %llu mmap calls\n", n, again,
         b.mmap_calls - a.mmap_calls);
  CHECK_EQ(error, ENOMEM);
  CHECK_MSG(again == NULL, "malloc(60000) failed, then succeeded after malloc_trim");
  /* the kernel's ENOMEM ends the search for a place: no other would do */
  CHECK_MSG(b.mmap_calls - a.mmap_calls < 1000, "a malloc that fails made %llu mmap calls",
            b.mmap_calls - a.mmap_calls);
  return 0;
}

/* 150 MiB freed (kept mapped, too small to serve 200 MiB), then 200 MiB:
 * under 256 MiB of address space, only if the kept mapping goes. */
static int kept_mapping_given_back(void) {
  void *p = malloc((size_t)150 << 20);
  CHECK(p != NULL);
  memset(p, 1, 4096);
  free(p);
  void *q = malloc((size_t)200 << 20);
  printf("  150 MiB freed, then 200 MiB: %p\n", q);
  CHECK_MSG(q != NULL, "malloc(200 MiB) failed with 150 MiB free but kept mapped: errno %d", errno);
  free(q);
  return 0;
}

/* Six blocks of 126 MiB take the reserved space's regions, then the limit
 * leaves room for no other region of 128 MiB: a block of 600 KiB comes
 * from a short region of 4 MiB, mapped aligned as every region is. */
static void limit_lowered(void) {
  static void *big[6];
  for (int i = 0; i < 6; i++) CHECK((big[i] = malloc((126u << 20) - 4096)) != NULL);
  struct rlimit rl = {(rlim_t)(proc_status_kib("VmSize") + (80 << 10)) << 10, RLIM_INFINITY};
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
  char *p = malloc(600 << 10);
  CHECK(p != NULL);
  memset(p, 7, 600 << 10);
  CHECK(malloc_usable_size(p) >= 600 << 10);
  free(p);
  malloc_trim(0);
  for (int i = 0; i < 6; i++) free(big[i]);
  printf("  a block of 600 KiB with the limit lowered: freed and trimmed\n");
}

static void kept_mapping_goes_back_when_needed(void) {
  CHECK(setenv("HAKMEM_SS_MEM_LEAN_DECOMMIT", "OFF", 1) == 0);
  run_self_under_as_limit_arg(LIMIT, "kept", 60);
}

static void nothing_left_after_a_null(void) {
  CHECK(setenv("HAKMEM_SS_MEM_LEAN_DECOMMIT", "OFF", 1) == 0);
  run_self_under_as_limit(LIMIT, 60);
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return kept_mapping_given_back();
  if (argc > 1 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return under_limit();
  if (argc > 1 && strcmp(argv[1], "lowered") == 0) return limit_lowered(), 0;
  test_init();
  child_result_t res;
  const char *env[] = {NULL};
  run_self("lowered", env, 60, &res);
  printf("%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "limit lowered: %s", describe_status(res.status));
  RUN(nothing_left_after_a_null);
  RUN(kept_mapping_goes_back_when_needed);
  return 0;
}
