/* SPDX-License-Identifier: MIT */
/* test-builds: static standard ubsan hardened */
/* Threads: 16 threads run random sequences of malloc, calloc, realloc,
 * aligned_alloc and free on blocks that carry their own size and seed, and
 * verify every block they touch.  One op in ten swaps the block with a shared
 * table, so blocks also get verified, reallocated and freed by threads other
 * than the one that allocated them.  (On 2 cores this checks correctness
 * under preemption, not scalability.) */
#include "testutil.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

enum { THREADS = 16, SLOTS = 256, SHARED = 64, OPS = 150000 };

static _Atomic(void *) shared[SHARED];

static size_t random_size(rng_t *rng) {
  uint64_t r = rng_below(rng, 1000);
  if (r < 2) return rng_size(rng, 256 * 1024, 1 * MiB);
  if (r < 50) return rng_size(rng, 4097, 64 * 1024);
  return rng_size(rng, TAGGED_MIN, 4096);
}

static void *new_block(rng_t *rng) {
  size_t n = random_size(rng);
  void *p;
  switch (rng_below(rng, 8)) {
    case 0:
      p = calloc(1, n);
      CHECK(p != NULL);
      CHECK(find_not_byte(p, 0, n) == SIZE_MAX);
      break;
    case 1:
      p = aligned_alloc((size_t)1 << rng_range(rng, 4, 10), n);
      break;
    default:
      p = malloc(n);
      break;
  }
  CHECK(p != NULL);
  tagged_fill(p, n, rng_next(rng));
  return p;
}

static void *worker(void *arg) {
  rng_t rng = {(uint64_t)(uintptr_t)arg * 7919 + 1};
  void *slot[SLOTS] = {0};
  int i;
  for (i = 0; i < OPS; i++) {
    void **s = &slot[rng_below(&rng, SLOTS)];
    uint64_t op = rng_below(&rng, 10);
    if (!*s) {
      *s = new_block(&rng);
    } else if (op < 5) {
      CHECK_TAGGED(*s);
      free(*s);
      *s = NULL;
    } else if (op < 8) {
      size_t old = CHECK_TAGGED(*s), n = random_size(&rng);
      unsigned char *q = realloc(*s, n);
      uint64_t hdr[2];
      CHECK(q != NULL);
      /* The prefix survived; make it a complete tagged block again. */
      memcpy(hdr, q, sizeof hdr);
      CHECK(check_pattern(q + 16, (n < old ? n : old) - 16, hdr[1]) == SIZE_MAX);
      tagged_fill(q, n, rng_next(&rng));
      *s = q;
    } else if (op < 9) {
      /* Hand the block to whichever thread takes this shared entry next. */
      *s = atomic_exchange(&shared[rng_below(&rng, SHARED)], *s);
      if (*s) CHECK_TAGGED(*s);
    } else {
      CHECK_TAGGED(*s);
    }
  }
  for (i = 0; i < SLOTS; i++)
    if (slot[i]) {
      CHECK_TAGGED(slot[i]);
      free(slot[i]);
    }
  return NULL;
}

static void random_ops_in_threads(void) {
  pthread_t t[THREADS];
  int i;
  for (i = 0; i < THREADS; i++)
    CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  for (i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (i = 0; i < SHARED; i++) {
    void *p = atomic_exchange(&shared[i], NULL);
    if (p) {
      CHECK_TAGGED(p);
      free(p);
    }
  }
}

int main(void) {
  test_init();
  RUN(random_ops_in_threads);
  return 0;
}
