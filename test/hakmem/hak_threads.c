/* SPDX-License-Identifier: MIT */
/* test-builds: asan tsan */
/* test-timeout: 180 */
/* hakmem only: the prefixed API from many threads.  Producers allocate with
 * hak_malloc/hak_calloc/hak_aligned_alloc and pass blocks through queues to
 * consumers that verify, hak_realloc and hak_free them; threads swap blocks
 * through atomic slots; short-lived threads exit with blocks that others
 * free, some after hak_thread_flush.  Built against the normal library and
 * against a ThreadSanitizer build (with HAK_NO_OVERRIDE), where it makes
 * data races inside hakmem visible. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

enum { QUEUES = 2, PRODUCERS = 4, CONSUMERS = 4, ITEMS = 20000 };

static block_queue_t queues[QUEUES];
static _Atomic unsigned long long consumed;

static size_t random_size(rng_t *rng) {
  uint64_t r = rng_below(rng, 1000);
  if (r < 3) return rng_size(rng, 128 * 1024, 1 * MiB);
  if (r < 50) return rng_size(rng, 1025, 64 * 1024);
  return rng_size(rng, TAGGED_MIN, 1024);
}

static void *new_block(rng_t *rng) {
  size_t n = random_size(rng);
  void *p;
  switch (rng_below(rng, 4)) {
    case 0: p = hak_calloc(1, n); break;
    case 1: p = hak_aligned_alloc((size_t)1 << rng_range(rng, 4, 12), n); break;
    default: p = hak_malloc(n); break;
  }
  CHECK(p != NULL);
  tagged_fill(p, n, rng_next(rng));
  return p;
}

static void *producer(void *arg) {
  int id = (int)(uintptr_t)arg, i;
  rng_t rng = {(uint64_t)id + 1};
  block_queue_t *q = &queues[id % QUEUES];
  for (i = 0; i < ITEMS; i++) {
    block_queue_push(q, new_block(&rng));
    if (i % 1000 == 999) hak_thread_flush();
  }
  block_queue_producer_done(q);
  return NULL;
}

static void *consumer(void *arg) {
  int id = (int)(uintptr_t)arg;
  rng_t rng = {(uint64_t)id + 50};
  block_queue_t *q = &queues[id % QUEUES];
  void *p;
  while ((p = block_queue_pop(q)) != NULL) {
    size_t n = CHECK_TAGGED(p), cur = n;
    if (rng_below(&rng, 4) == 0) {
      size_t m = random_size(&rng);
      unsigned char *r = hak_realloc(p, m);
      uint64_t hdr[2];
      CHECK(r != NULL);
      memcpy(hdr, r, sizeof hdr);
      CHECK(check_pattern(r + 16, (m < n ? m : n) - 16, hdr[1]) == SIZE_MAX);
      p = r;
      cur = m;
    }
    if (rng_below(&rng, 2))
      hak_free(p);
    else
      hak_free_sized(p, cur);
    consumed++;
  }
  return NULL;
}

static void producers_and_consumers(void) {
  run_producers_consumers(queues, QUEUES, producer, PRODUCERS, consumer, CONSUMERS);
  CHECK_EQ(consumed, (unsigned long long)PRODUCERS * ITEMS);
}

/* ---- blocks swapped through atomic slots ---- */

enum { SWAPPERS = 6, SWAP_OPS = 30000, SLOTS = 32 };
static _Atomic(void *) slots[SLOTS];

static void *swapper(void *arg) {
  rng_t rng = {(uint64_t)(uintptr_t)arg + 500};
  void *mine[16] = {0};
  int i;
  for (i = 0; i < SWAP_OPS; i++) {
    void **m = &mine[rng_below(&rng, 16)];
    uint64_t op = rng_below(&rng, 4);
    if (!*m) {
      *m = new_block(&rng);
    } else if (op == 0) {
      CHECK_TAGGED(*m);
      hak_free(*m);
      *m = NULL;
    } else if (op == 1) {
      *m = atomic_exchange(&slots[rng_below(&rng, SLOTS)], *m);
      if (*m) CHECK_TAGGED(*m);
    } else {
      CHECK_TAGGED(*m);
    }
  }
  for (i = 0; i < 16; i++)
    if (mine[i]) hak_free(mine[i]);
  return NULL;
}

static void atomic_swaps(void) {
  pthread_t t[SWAPPERS];
  int i;
  for (i = 0; i < SWAPPERS; i++)
    CHECK(pthread_create(&t[i], NULL, swapper, (void *)(uintptr_t)i) == 0);
  for (i = 0; i < SWAPPERS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (i = 0; i < SLOTS; i++) {
    void *p = atomic_exchange(&slots[i], NULL);
    if (p) {
      CHECK_TAGGED(p);
      hak_free(p);
    }
  }
}

/* ---- threads that exit with blocks still live ---- */

enum { EXIT_ROUNDS = 40, EXIT_AT_ONCE = 4, LEFT = 200 };
static void *left_behind[EXIT_AT_ONCE][LEFT];

static void *short_lived(void *arg) {
  int id = (int)(uintptr_t)arg % EXIT_AT_ONCE, i;
  rng_t rng = {(uint64_t)(uintptr_t)arg + 900};
  void *tmp[300];
  for (i = 0; i < 300; i++) tmp[i] = new_block(&rng);
  for (i = 0; i < LEFT; i++) left_behind[id][i] = new_block(&rng);
  for (i = 0; i < 300; i++) {
    CHECK_TAGGED(tmp[i]);
    hak_free(tmp[i]);
  }
  if ((uintptr_t)arg % 2) hak_thread_flush();
  return NULL;
}

static void *cleaner(void *arg) {
  void **blocks = (void **)arg;
  int i;
  for (i = 0; i < LEFT; i++) {
    CHECK_TAGGED(blocks[i]);
    hak_free(blocks[i]);
  }
  return NULL;
}

static void thread_exit_with_live_blocks(void) {
  int round, k;
  for (round = 0; round < EXIT_ROUNDS; round++) {
    pthread_t t[EXIT_AT_ONCE];
    for (k = 0; k < EXIT_AT_ONCE; k++)
      CHECK(pthread_create(&t[k], NULL, short_lived,
                           (void *)(uintptr_t)(round * EXIT_AT_ONCE + k)) == 0);
    for (k = 0; k < EXIT_AT_ONCE; k++) CHECK(pthread_join(t[k], NULL) == 0);
    /* Freed by other threads (concurrently), after their owners are gone. */
    for (k = 0; k < EXIT_AT_ONCE; k++)
      CHECK(pthread_create(&t[k], NULL, cleaner, left_behind[k]) == 0);
    for (k = 0; k < EXIT_AT_ONCE; k++) CHECK(pthread_join(t[k], NULL) == 0);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  RUN(producers_and_consumers);
  RUN(atomic_swaps);
  RUN(thread_exit_with_live_blocks);
  return 0;
}
