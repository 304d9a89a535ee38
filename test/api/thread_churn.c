/* SPDX-License-Identifier: MIT */
/* Thread churn: thousands of short-lived threads, a few at a time, each
 * allocating blocks of mixed sizes, freeing most of them, handing the rest to
 * the main thread (which verifies and frees them later) and exiting.  After a
 * first round has warmed the allocator up, further rounds must not make the
 * footprint grow (hakmem's committed bytes, or VmRSS under another allocator):
 * what a thread leaves behind at exit has to be reused by later threads. */
#include "testutil.h"

#include <pthread.h>

enum {
  THREADS_PER_ROUND = 1500,
  AT_ONCE = 8,
  BLOCKS = 200,   /* per thread */
  HANDED = 40,    /* of which this many go to the main thread */
};

/* Footprint growth allowed over two rounds after the warm-up.  A leak of
 * only 8 KiB per thread exceeds it. */
#define GROWTH_LIMIT (24 * MiB)

static pthread_mutex_t handed_lock = PTHREAD_MUTEX_INITIALIZER;
static void *handed[AT_ONCE * HANDED];
static size_t handed_count;

static void *short_thread(void *arg) {
  rng_t rng = {(uint64_t)(uintptr_t)arg};
  void *mine[BLOCKS];
  int i;
  for (i = 0; i < BLOCKS; i++) {
    uint64_t r = rng_below(&rng, 100);
    size_t n = r < 2 ? rng_size(&rng, 32768, 300000) : rng_size(&rng, TAGGED_MIN, 2048);
    mine[i] = malloc(n);
    CHECK(mine[i] != NULL);
    tagged_fill(mine[i], n, rng_next(&rng));
  }
  for (i = 0; i < BLOCKS - HANDED; i++) {
    CHECK_TAGGED(mine[i]);
    free(mine[i]);
  }
  pthread_mutex_lock(&handed_lock);
  for (; i < BLOCKS; i++) handed[handed_count++] = mine[i];
  pthread_mutex_unlock(&handed_lock);
  return NULL;
}

static void churn_round(int round) {
  int done;
  for (done = 0; done < THREADS_PER_ROUND; done += AT_ONCE) {
    pthread_t t[AT_ONCE];
    size_t i;
    int k;
    for (k = 0; k < AT_ONCE; k++) {
      uint64_t seed = (uint64_t)round * 1000003 + (uint64_t)(done + k);
      CHECK(pthread_create(&t[k], NULL, short_thread, (void *)(uintptr_t)seed) == 0);
    }
    for (k = 0; k < AT_ONCE; k++) CHECK(pthread_join(t[k], NULL) == 0);
    CHECK_EQ(handed_count, AT_ONCE * HANDED);
    for (i = 0; i < handed_count; i++) {
      CHECK_TAGGED(handed[i]);
      free(handed[i]);
    }
    handed_count = 0;
  }
}

static void churn_does_not_grow_memory(void) {
  size_t base, after;
  int round;
  churn_round(0);
  base = heap_footprint();
  for (round = 1; round <= 2; round++) {
    churn_round(round);
    after = heap_footprint();
    printf("  round %d: %s %zu KiB -> %zu KiB\n", round, footprint_name(), base / 1024,
           after / 1024);
  }
  CHECK_MSG(after < base + GROWTH_LIMIT,
            "%s grew by %zu KiB over %d threads after the warm-up (limit %zu KiB)",
            footprint_name(), (after - base) / 1024, 2 * THREADS_PER_ROUND, GROWTH_LIMIT / 1024);
}

int main(void) {
  test_init();
  RUN(churn_does_not_grow_memory);
  return 0;
}
