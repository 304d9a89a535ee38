/* SPDX-License-Identifier: MIT */
/* test-builds: static ubsan hardened */
/* realloc: growing and shrinking across all size ranges keeps the content
 * prefix; growing within malloc_usable_size returns the same pointer; moving
 * to a much larger size copies the content; huge blocks (8 MiB -> 64 MiB ->
 * 9 MiB, and huge -> small) keep their content; a buffer grown one byte at a
 * time (like a string builder) keeps every byte; a big block whose mapping
 * the program split grows too. */
#include "testutil.h"

#include <malloc.h>
#include <sys/mman.h>

static void grow_and_shrink_keep_prefix(void) {
  static const size_t sizes[] = {1,     7,      16,     17,     100,    1000,   4096,
                                 5000,  65536,  300000, 2 << 20, 3 << 20, 200000, 20000,
                                 2000,  200,    20,     1,      33,      70000,  17,
                                 9 << 20, 1000, 5 << 20, 64,    1};
  size_t i, cur = sizes[0];
  uint64_t seed = 1;
  unsigned char *p = malloc(cur);
  CHECK(p != NULL);
  fill_pattern(p, cur, seed);
  for (i = 1; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i], keep = n < cur ? n : cur;
    unsigned char *q = realloc(p, n);
    CHECK_MSG(q != NULL, "realloc(%zu -> %zu)", cur, n);
    CHECK_ALIGNED(q, 16);
    CHECK_MSG(malloc_usable_size(q) >= n, "realloc(%zu -> %zu): usable size %zu", cur, n,
              malloc_usable_size(q));
    CHECK_MSG(check_pattern(q, keep, seed) == SIZE_MAX, "realloc(%zu -> %zu) lost content", cur, n);
    p = q;
    cur = n;
    fill_pattern(p, cur, ++seed);
  }
  free(p);
}

/* glibc keeps this promise only below its mmap threshold: for a block of its
 * own mapping it asks mremap for a page more than the usable size, which can
 * move the block.  hakmem keeps it for every size. */
static void grow_within_usable_size_is_in_place(void) {
  size_t n, in_place_limit = hakmem_active() ? SIZE_MAX : 64 * 1024;
  if (in_place_limit != SIZE_MAX) NOTE("in-place growth checked up to 64 KiB only (glibc)");
  for (n = 1; n < ((size_t)16 << 20); n = n < 4096 ? n + 1 : n * 5 / 4) {
    unsigned char *p = malloc(n), *q;
    size_t us;
    CHECK(p != NULL);
    us = malloc_usable_size(p);
    fill_pattern(p, n, n);
    q = realloc(p, us);
    CHECK(q != NULL);
    CHECK_MSG(q == p || n > in_place_limit,
              "realloc(malloc(%zu), usable size %zu) moved the block", n, us);
    CHECK_PATTERN(q, n, n);
    /* Same size: in place as well. */
    p = q;
    q = realloc(p, us);
    CHECK(q != NULL);
    CHECK_MSG(q == p || n > in_place_limit, "realloc to the same size (%zu) moved the block", us);
    memset(q, 0x5C, us);
    free(q);
  }
}

static void move_to_larger_copies(void) {
  static const size_t from[] = {8, 64, 500, 4000, 60000};
  static const size_t to[] = {(size_t)1 << 20, (size_t)5 << 20, (size_t)40 << 20};
  size_t i, j;
  for (i = 0; i < sizeof from / sizeof from[0]; i++)
    for (j = 0; j < sizeof to / sizeof to[0]; j++) {
      /* A neighbour allocated after the block makes growing in place less
       * likely, whatever the allocator's layout. */
      unsigned char *p = malloc(from[i]), *q;
      void *neighbour = malloc(from[i]);
      CHECK(p != NULL && neighbour != NULL);
      fill_pattern(p, from[i], i * 10 + j);
      q = realloc(p, to[j]);
      CHECK(q != NULL);
      CHECK(malloc_usable_size(q) >= to[j]);
      CHECK_PATTERN(q, from[i], i * 10 + j);
      memset(q + from[i], 0x3C, to[j] - from[i]);
      free(neighbour);
      /* And back down to small: the prefix again. */
      p = realloc(q, from[i]);
      CHECK(p != NULL);
      CHECK_PATTERN(p, from[i], i * 10 + j);
      free(p);
    }
}

static void huge_blocks_keep_content(void) {
  unsigned char *p = malloc(8 * MiB), *q;
  CHECK(p != NULL);
  fill_pattern(p, 8 * MiB, 81);
  q = realloc(p, 64 * MiB);
  CHECK(q != NULL);
  CHECK_PATTERN(q, 8 * MiB, 81);
  fill_pattern(q, 64 * MiB, 82);
  p = realloc(q, 9 * MiB);
  CHECK(p != NULL);
  CHECK_PATTERN(p, 9 * MiB, 82);
  /* Sizes that are not page multiples, growing by small steps. */
  q = realloc(p, 9 * MiB + 1234);
  CHECK(q != NULL);
  CHECK_PATTERN(q, 9 * MiB, 82);
  fill_pattern(q, 9 * MiB + 1234, 83);
  p = realloc(q, 9 * MiB + 100000);
  CHECK(p != NULL);
  CHECK_PATTERN(p, 9 * MiB + 1234, 83);
  /* Huge to small. */
  q = realloc(p, 1000);
  CHECK(q != NULL);
  CHECK_PATTERN(q, 1000, 83);
  free(q);
  /* Small to huge. */
  p = malloc(3000);
  CHECK(p != NULL);
  fill_pattern(p, 3000, 84);
  q = realloc(p, 200 * MiB);
  CHECK(q != NULL);
  CHECK_PATTERN(q, 3000, 84);
  q[200 * MiB - 1] = 1;
  free(q);
}

/* Many huge blocks growing and shrinking at once, so that they cannot all
 * grow in place. */
static void interleaved_huge_reallocs(void) {
  enum { N = 6 };
  unsigned char *p[N];
  size_t size[N];
  rng_t rng = {99};
  int i, k;
  for (i = 0; i < N; i++) {
    size[i] = rng_range(&rng, 1 * MiB, 8 * MiB);
    p[i] = malloc(size[i]);
    CHECK(p[i] != NULL);
    fill_pattern(p[i], size[i], (uint64_t)i);
  }
  for (k = 0; k < 60; k++) {
    i = k % N;
    size_t n = rng_range(&rng, 512 * 1024, 24 * MiB), keep = n < size[i] ? n : size[i];
    unsigned char *q = realloc(p[i], n);
    CHECK(q != NULL);
    CHECK_PATTERN(q, keep, (uint64_t)i);
    fill_pattern(q, n, (uint64_t)i);
    p[i] = q;
    size[i] = n;
  }
  for (i = 0; i < N; i++) {
    CHECK_PATTERN(p[i], size[i], (uint64_t)i);
    free(p[i]);
  }
}

static void byte_by_byte_growth(void) {
  enum { MAX = 300000 };
  unsigned char *p = NULL;
  size_t n;
  for (n = 1; n <= MAX; n++) {
    unsigned char *q = realloc(p, n);
    CHECK_MSG(q != NULL, "realloc to %zu", n);
    q[n - 1] = (unsigned char)(n * 131 >> 3);
    p = q;
    if ((n & (n - 1)) == 0 || n % 65536 == 0) {
      size_t i;
      for (i = 1; i <= n; i++)
        CHECK_MSG(p[i - 1] == (unsigned char)(i * 131 >> 3), "byte %zu lost at size %zu", i - 1, n);
    }
  }
  for (n = 1; n <= MAX; n++) CHECK(p[n - 1] == (unsigned char)(n * 131 >> 3));
  free(p);
}

static void calloc_and_aligned_blocks_realloc(void) {
  size_t n;
  for (n = 1; n < ((size_t)4 << 20); n = n * 3 + 7) {
    unsigned char *p = calloc(n, 1), *q;
    CHECK(p != NULL);
    CHECK(find_not_byte(p, 0, n) == SIZE_MAX);
    q = realloc(p, n * 2);
    CHECK(q != NULL);
    CHECK(find_not_byte(q, 0, n) == SIZE_MAX);
    free(q);
    p = aligned_alloc(4096, n);
    CHECK(p != NULL);
    fill_pattern(p, n, n);
    q = realloc(p, n + 4096);
    CHECK(q != NULL);
    CHECK_PATTERN(q, n, n);
    q = realloc(q, n / 2 + 1);
    CHECK(q != NULL);
    CHECK_PATTERN(q, n / 2 + 1 < n ? n / 2 + 1 : n, n);
    free(q);
  }
}

/* A block above 128 MiB whose mapping the program split (a page of it
 * excluded from core dumps, another locked where mlock is allowed): growing
 * it still succeeds and keeps its content, moved by a copy where the pages
 * themselves cannot be moved. */
static void grow_a_split_big_block(void) {
  size_t size = (size_t)200 << 20;
  for (int how = 0; how < 2; how++) {
    unsigned char *p = malloc(size);
    CHECK(p != NULL);
    fill_pattern(p, size, 7);
    if (how == 0) CHECK_EQ(madvise((void *)(((uintptr_t)p + 8192) & ~(uintptr_t)4095), 4096, MADV_DONTDUMP), 0);
    bool locked = how == 1 && mlock(p, 4096) == 0;
    unsigned char *q = realloc(p, (size_t)300 << 20);
    CHECK_MSG(q != NULL, "realloc(200 MiB -> 300 MiB) of a split block: %s", strerror(errno));
    CHECK(check_pattern(q, size, 7) == SIZE_MAX);
    if (locked && q == p) munlock(q, 4096);
    free(q);
  }
}

int main(void) {
  test_init();
  RUN(grow_and_shrink_keep_prefix);
  RUN(grow_within_usable_size_is_in_place);
  RUN(move_to_larger_copies);
  RUN(huge_blocks_keep_content);
  RUN(interleaved_huge_reallocs);
  RUN(byte_by_byte_growth);
  RUN(calloc_and_aligned_blocks_realloc);
  RUN(grow_a_split_big_block);
  return 0;
}
