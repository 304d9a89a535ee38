/* SPDX-License-Identifier: MIT */
/* hakmem only.  In a steady state the allocator makes no system calls: after
 * a warm-up of a random mix of malloc and free (sizes 16 to 1040 bytes, a
 * working set of 400 blocks), one million more iterations of the same mix
 * must leave hak_os_stats' mmap, munmap, madvise and mremap counts unchanged. */
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

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  RUN(no_os_calls_in_steady_state);
  return 0;
}
