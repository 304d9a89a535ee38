/* SPDX-License-Identifier: MIT */
/* malloc_usable_size: at least the requested size for every size (each size
 * to 16 KiB, then sampled to 8 MiB, then a few huge ones), for malloc, calloc,
 * realloc and the aligned functions; the whole usable size belongs to the
 * block (it is filled while neighbouring blocks are live, and every block is
 * checked afterwards, so an overstated size shows as corruption); 0 for NULL. */
#include "testutil.h"

#include <malloc.h>

enum { BATCH = 64 };

/* Allocates count (<= BATCH) blocks of sizes first, first + step, ..., fills
 * each one's whole usable size, then verifies all of them. */
static void batch(size_t first, size_t step, int count, int how) {
  unsigned char *p[BATCH];
  size_t us[BATCH];
  int i;
  CHECK(count <= BATCH);
  for (i = 0; i < count; i++) {
    size_t n = first + (size_t)i * step;
    switch (how) {
      case 0: p[i] = malloc(n); break;
      case 1: p[i] = calloc(1, n); break;
      case 2: p[i] = n ? realloc(malloc(n / 2 + 1), n) : malloc(0); break; /* realloc(p, 0) frees */
      default: p[i] = aligned_alloc(64, n); break;
    }
    CHECK_MSG(p[i] != NULL, "allocation of %zu bytes (method %d)", n, how);
    us[i] = malloc_usable_size(p[i]);
    CHECK_MSG(us[i] >= n, "malloc_usable_size = %zu for a request of %zu bytes (method %d)", us[i],
              n, how);
    fill_pattern(p[i], us[i], (uint64_t)(uintptr_t)p[i]);
  }
  for (i = 0; i < count; i++) {
    CHECK_MSG(malloc_usable_size(p[i]) == us[i], "usable size of %p changed", (void *)p[i]);
    CHECK_PATTERN(p[i], us[i], (uint64_t)(uintptr_t)p[i]);
    free(p[i]);
  }
}

static void every_small_size(void) {
  size_t n;
  int how;
  for (how = 0; how < 4; how++)
    for (n = 0; n < 16384; n += BATCH) batch(n, 1, BATCH, how);
}

static void sampled_sizes(void) {
  int how;
  for (how = 0; how < 4; how++) {
    batch(16384 + 1, 8191, BATCH, how);             /* to 528 KiB */
    batch(16384 + 1 + 64 * 8191, 8191, BATCH, how); /* to 1 MiB */
    batch((size_t)1 << 20, 458757, 16, how);         /* to 8 MiB */
  }
}

static void huge_sizes(void) {
  static const size_t sizes[] = {((size_t)8 << 20) + 1, (size_t)32 << 20,
                                 ((size_t)64 << 20) - 4095, ((size_t)100 << 20) + 12345};
  size_t i;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = malloc(sizes[i]);
    size_t us;
    CHECK(p != NULL);
    us = malloc_usable_size(p);
    CHECK_MSG(us >= sizes[i], "usable %zu < %zu", us, sizes[i]);
    fill_pattern(p, us, sizes[i]);
    CHECK_PATTERN(p, us, sizes[i]);
    free(p);
  }
}

static void null_is_zero(void) { CHECK_EQ(malloc_usable_size(NULL), 0); }

int main(void) {
  test_init();
  RUN(every_small_size);
  RUN(sampled_sizes);
  RUN(huge_sizes);
  RUN(null_is_zero);
  return 0;
}
