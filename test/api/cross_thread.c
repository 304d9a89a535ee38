/* SPDX-License-Identifier: MIT */
/* test-builds: static standard ubsan hardened */
/* Cross-thread frees.  Producers allocate and fill blocks and pass them
 * through queues to consumers, which verify them and free them (some after a
 * realloc): every block is freed by a thread other than its owner, while the
 * owner keeps allocating.  Then blocks whose owners have exited are freed by
 * the main thread, and their memory must be reusable. */
#include "testutil.h"

enum { QUEUES = 4, PRODUCERS = 8, CONSUMERS = 8, ITEMS = 60000 };

static block_queue_t queues[QUEUES];

static size_t random_size(rng_t *rng) {
  uint64_t r = rng_below(rng, 1000);
  if (r < 3) return rng_size(rng, 64 * 1024, 2 * MiB);
  if (r < 60) return rng_size(rng, 1025, 64 * 1024);
  return rng_size(rng, TAGGED_MIN, 1024);
}

static _Atomic unsigned long long produced, consumed;

static void *producer(void *arg) {
  int id = (int)(uintptr_t)arg;
  rng_t rng = {(uint64_t)id + 100};
  block_queue_t *q = &queues[id % QUEUES];
  int i;
  for (i = 0; i < ITEMS; i++) {
    size_t n = random_size(&rng);
    void *p = malloc(n);
    CHECK(p != NULL);
    tagged_fill(p, n, rng_next(&rng));
    block_queue_push(q, p);
    produced++;
    /* Some allocations of its own in between, freed locally. */
    if (i % 16 == 0) free(malloc(rng_size(&rng, 1, 4096)));
  }
  block_queue_producer_done(q);
  return NULL;
}

static void *consumer(void *arg) {
  int id = (int)(uintptr_t)arg;
  rng_t rng = {(uint64_t)id + 200};
  block_queue_t *q = &queues[id % QUEUES];
  void *p;
  while ((p = block_queue_pop(q)) != NULL) {
    size_t n = CHECK_TAGGED(p);
    if (rng_below(&rng, 4) == 0) {
      /* realloc of a block that another thread allocated */
      size_t m = random_size(&rng);
      unsigned char *r = realloc(p, m);
      uint64_t hdr[2];
      CHECK(r != NULL);
      memcpy(hdr, r, sizeof hdr);
      CHECK(check_pattern(r + 16, (m < n ? m : n) - 16, hdr[1]) == SIZE_MAX);
      p = r;
    }
    free(p);
    consumed++;
  }
  return NULL;
}

static void producers_and_consumers(void) {
  run_producers_consumers(queues, QUEUES, producer, PRODUCERS, consumer, CONSUMERS);
  CHECK_EQ(produced, (unsigned long long)PRODUCERS * ITEMS);
  CHECK_EQ(consumed, produced);
}

enum { ORPHAN_THREADS = 8, ORPHANS = 4000 };
static void *orphans[ORPHAN_THREADS][ORPHANS];

static void *allocate_and_exit(void *arg) {
  int id = (int)(uintptr_t)arg, i;
  rng_t rng = {(uint64_t)id + 300};
  for (i = 0; i < ORPHANS; i++) {
    size_t n = random_size(&rng);
    orphans[id][i] = malloc(n);
    CHECK(orphans[id][i] != NULL);
    tagged_fill(orphans[id][i], n, rng_next(&rng));
  }
  return NULL;
}

/* Blocks outlive the threads that allocated them; the main thread frees them
 * and the next generation of threads allocates and verifies again. */
static void free_after_owner_exit(void) {
  int gen, t, i;
  for (gen = 0; gen < 4; gen++) {
    pthread_t th[ORPHAN_THREADS];
    for (t = 0; t < ORPHAN_THREADS; t++)
      CHECK(pthread_create(&th[t], NULL, allocate_and_exit, (void *)(uintptr_t)t) == 0);
    for (t = 0; t < ORPHAN_THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    for (t = 0; t < ORPHAN_THREADS; t++)
      for (i = 0; i < ORPHANS; i++) {
        CHECK_TAGGED(orphans[t][i]);
        free(orphans[t][i]);
      }
  }
}

int main(void) {
  test_init();
  RUN(producers_and_consumers);
  RUN(free_after_owner_exit);
  return 0;
}
