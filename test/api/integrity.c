/* SPDX-License-Identifier: MIT */
/* test-builds: standard ubsan hardened */
/* Content integrity: thousands of live blocks of random sizes (1 B to 2 MiB,
 * plus huge ones of 4 to 64 MiB), each filled with a pattern of its own and
 * verified before it is freed; then a long random sequence of malloc, calloc,
 * aligned_alloc, realloc and free (fixed seed, so a failure reproduces) that
 * verifies every block it touches. */
#include "testutil.h"

#include <malloc.h>

typedef struct slot {
  unsigned char *p;
  size_t size;
  uint64_t seed;
} slot_t;

/* Mostly small blocks (up to 4 KiB), medium ones (to 256 KiB) with
 * probability medium/1000, large ones (to 2 MiB) with large/1000. */
static size_t random_size(rng_t *rng, int medium, int large) {
  uint64_t r = rng_below(rng, 1000);
  if (r < (uint64_t)large) return rng_size(rng, 256 * 1024 + 1, 2 * MiB);
  if (r < (uint64_t)(large + medium)) return rng_size(rng, 4097, 256 * 1024);
  return rng_size(rng, 1, 4096);
}

static void many_live_blocks(void) {
  enum { N = 10000 };
  static slot_t s[N];
  rng_t rng = {1};
  int i, round;
  for (round = 0; round < 2; round++) {
    for (i = 0; i < N; i++) {
      s[i].size = random_size(&rng, 90, 10);
      s[i].seed = rng_next(&rng);
      s[i].p = malloc(s[i].size);
      CHECK(s[i].p != NULL);
      fill_pattern(s[i].p, s[i].size, s[i].seed);
    }
    for (i = 0; i < N; i++) CHECK_PATTERN(s[i].p, s[i].size, s[i].seed);
    /* Free in a random order, verifying each block first. */
    for (i = N - 1; i >= 0; i--) {
      int j = (int)rng_below(&rng, (uint64_t)i + 1);
      slot_t t = s[j];
      s[j] = s[i];
      s[i] = t;
      CHECK_PATTERN(s[i].p, s[i].size, s[i].seed);
      free(s[i].p);
    }
  }
}

static void huge_blocks(void) {
  rng_t rng = {2};
  slot_t s[3];
  int i, k;
  for (i = 0; i < 3; i++) s[i].p = NULL;
  for (i = 0; i < 12; i++) {
    slot_t *b = &s[i % 3];
    if (b->p) {
      CHECK_PATTERN(b->p, b->size, b->seed);
      free(b->p);
    }
    b->size = rng_range(&rng, 4 * MiB, 64 * MiB);
    b->seed = rng_next(&rng);
    b->p = malloc(b->size);
    CHECK(b->p != NULL);
    fill_pattern(b->p, b->size, b->seed);
    for (k = 0; k < 3; k++)
      if (s[k].p) CHECK_PATTERN(s[k].p, s[k].size, s[k].seed);
  }
  for (i = 0; i < 3; i++) {
    CHECK_PATTERN(s[i].p, s[i].size, s[i].seed);
    free(s[i].p);
  }
}

/* One step of the random sequence on slot b. */
static void random_op(rng_t *rng, slot_t *b) {
  uint64_t op = rng_below(rng, 10);
  if (!b->p) {
    size_t n = random_size(rng, 40, 2);
    if (op < 6) {
      b->p = malloc(n);
    } else if (op < 8) {
      b->p = calloc(1, n);
      CHECK(b->p != NULL);
      CHECK_MSG(find_not_byte(b->p, 0, n) == SIZE_MAX, "calloc(1, %zu) not zeroed", n);
    } else {
      b->p = aligned_alloc((size_t)1 << rng_range(rng, 4, 12), n);
    }
    CHECK(b->p != NULL);
    b->size = n;
    b->seed = rng_next(rng);
    fill_pattern(b->p, n, b->seed);
  } else if (op < 6) {
    CHECK_PATTERN(b->p, b->size, b->seed);
    free(b->p);
    b->p = NULL;
  } else {
    /* realloc: grow a little, grow a lot, or shrink. */
    size_t n = op == 6 ? b->size + rng_range(rng, 1, 64)
             : op == 7 ? b->size * rng_range(rng, 2, 4)
                       : rng_range(rng, 1, b->size);
    size_t keep = n < b->size ? n : b->size;
    unsigned char *q;
    if (n > 2 * MiB) n = rng_range(rng, 1, 2 * MiB);
    keep = n < keep ? n : keep;
    q = realloc(b->p, n);
    CHECK_MSG(q != NULL, "realloc(%p, %zu)", (void *)b->p, n);
    CHECK_PATTERN(q, keep, b->seed);
    b->p = q;
    b->size = n;
    b->seed = rng_next(rng);
    fill_pattern(q, n, b->seed);
  }
}

static void random_sequence(void) {
  enum { SLOTS = 4000, OPS = 1000000 };
  static slot_t s[SLOTS];
  rng_t rng = {12345};
  int i;
  for (i = 0; i < OPS; i++) {
    /* Work on a sliding part of the slots, so that the live set shifts. */
    int base = (i / 100000) * 97 % SLOTS;
    random_op(&rng, &s[(base + (int)rng_below(&rng, SLOTS / 2)) % SLOTS]);
  }
  for (i = 0; i < SLOTS; i++)
    if (s[i].p) {
      CHECK_PATTERN(s[i].p, s[i].size, s[i].seed);
      free(s[i].p);
    }
}

int main(void) {
  test_init();
  RUN(many_live_blocks);
  RUN(huge_blocks);
  RUN(random_sequence);
  return 0;
}
