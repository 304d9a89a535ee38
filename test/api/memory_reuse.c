/* SPDX-License-Identifier: MIT */
/* test-env: HAKMEM_PURGE_DELAY_MS=0 HAKMEM_SS_THP=0 */
/* Freed memory is reused across size classes and size ranges: 256 MiB of
 * 1000-byte blocks are allocated and freed (in a scrambled order, as real
 * programs do), then 256 MiB of 3000-byte blocks, of 200 KB blocks and of
 * 5 MiB blocks.  Each later phase must fit mostly in the memory the first one
 * left behind: its peak footprint may exceed the first phase's by at most
 * 64 MiB.  The footprint is the resident set (VmRSS), what a program pays
 * for: address space an allocator keeps reserved but has given back to the OS
 * does not count.  SuperSlabs stay on small pages (HAKMEM_SS_THP=0), so that
 * the footprint is the memory touched: on huge pages, which the speed profile
 * trades for fewer page faults, the untouched tails of large blocks' runs
 * would be resident too.  What remains after each phase is printed. */
#include "testutil.h"

#define PHASE_BYTES (256 * MiB)
#define SLACK (64 * MiB)

static void *blocks[PHASE_BYTES / 1000 + 1];

/* Allocates PHASE_BYTES in blocks of `size`, touches them, frees them in a
 * scrambled order; returns the footprint while they were all live. */
static size_t resident_bytes(void) { return proc_status_kib("VmRSS") * 1024; }

static size_t phase(size_t size, uint64_t seed) {
  size_t n = PHASE_BYTES / size, i, peak;
  rng_t rng = {seed};
  for (i = 0; i < n; i++) {
    blocks[i] = malloc(size);
    CHECK(blocks[i] != NULL);
    memset(blocks[i], (int)(i & 0xff), size);
  }
  peak = resident_bytes();
  for (i = n; i > 1; i--) {
    size_t j = (size_t)rng_below(&rng, i);
    void *t = blocks[j];
    blocks[j] = blocks[i - 1];
    blocks[i - 1] = t;
  }
  for (i = 0; i < n; i++) free(blocks[i]);
  return peak;
}

static void freed_memory_is_reused(void) {
  static const size_t sizes[] = {1000, 3000, 200000, 5 * MiB};
  size_t first = 0, peak, end;
  size_t k;
  for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    peak = phase(sizes[k], k + 1);
    end = resident_bytes();
    printf("  %zu-byte blocks: VmRSS %zu MiB with 256 MiB live, %zu MiB after freeing\n", sizes[k],
            peak / MiB, end / MiB);
    if (k == 0) first = peak;
    CHECK_MSG(peak < first + SLACK,
              "%zu-byte blocks needed %zu MiB on top of the %zu MiB the first phase left",
              sizes[k], (peak - first) / MiB, first / MiB);
  }
}

int main(void) {
  test_init();
  RUN(freed_memory_is_reused);
  return 0;
}
