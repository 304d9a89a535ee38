/* SPDX-License-Identifier: MIT */
/* prodcons_batch: producers and consumers that outnumber the CPUs and hand
 * blocks over a batch at a time, as the work queue of a thread pool does.
 * PRODUCERS threads each malloc BATCHES batches of BATCH blocks of MIN..MAX
 * bytes, write the first 16 bytes of each (the whole of a smaller one), and
 * push each batch whole into a queue of at most QUEUE batches guarded by a
 * mutex and two condition variables; CONSUMERS threads pop batches and free
 * every block.
 *
 * Unlike prodcons, whose threads are pinned a thread per CPU and pass blocks
 * one at a time through lock-free rings, these threads are left to the
 * scheduler and are more than the CPUs (two and two on a 2-CPU machine): a
 * thread that finds the queue full or empty sleeps on its condition
 * variable's futex until another wakes it, threads move between CPUs, and
 * the frees reach the allocator from another thread, thousands at a time,
 * while the producers go on allocating.  The batch arrays come from a pool
 * allocated before the clock starts, so the only allocator calls timed are
 * the blocks' own.  Two ops per block (its malloc and its free); the RESULT
 * line adds the blocks freed per second and the wall time per block. */
#include <pthread.h>
#include <string.h>

#include "bench.h"

static struct {
  pthread_mutex_t lock;
  pthread_cond_t not_full, not_empty;
  char ***ring;       /* the batches queued, `count` of them from `head` */
  uint64_t size, head, count;
  char ***spare;      /* emptied batch arrays, a stack of `nspare` */
  uint64_t nspare;
  uint64_t producing; /* producers not yet done */
} q = {.lock = PTHREAD_MUTEX_INITIALIZER, .not_full = PTHREAD_COND_INITIALIZER,
       .not_empty = PTHREAD_COND_INITIALIZER};

static uint64_t batches, batch_len, min, span;
static pthread_barrier_t start;

struct producer {
  pthread_t thread;
  char **batch; /* the array it fills */
  uint64_t seed;
};

static void *produce(void *arg) {
  struct producer *w = arg;
  uint64_t rng = rng_init(w->seed);
  char **batch = w->batch;
  pthread_barrier_wait(&start);
  for (uint64_t b = 0; b < batches; b++) {
    for (uint64_t i = 0; i < batch_len; i++) {
      size_t size = min + below((uint32_t)rng_next(&rng), span);
      char *p = xmalloc(size);
      memset(p, (int)i, size < 16 ? size : 16);
      batch[i] = p;
    }
    pthread_mutex_lock(&q.lock);
    while (q.count == q.size) pthread_cond_wait(&q.not_full, &q.lock);
    q.ring[(q.head + q.count++) % q.size] = batch;
    batch = q.spare[--q.nspare]; /* never empty: see main */
    pthread_cond_signal(&q.not_empty);
    pthread_mutex_unlock(&q.lock);
  }
  pthread_mutex_lock(&q.lock);
  if (--q.producing == 0) pthread_cond_broadcast(&q.not_empty);
  pthread_mutex_unlock(&q.lock);
  return NULL;
}

static void *consume(void *arg) {
  (void)arg;
  char **held = NULL; /* the batch last emptied, given back at the next pop */
  pthread_barrier_wait(&start);
  for (;;) {
    pthread_mutex_lock(&q.lock);
    if (held) q.spare[q.nspare++] = held;
    while (q.count == 0 && q.producing) pthread_cond_wait(&q.not_empty, &q.lock);
    if (q.count == 0) {
      pthread_mutex_unlock(&q.lock);
      return NULL;
    }
    held = q.ring[q.head];
    q.head = (q.head + 1) % q.size;
    q.count--;
    pthread_cond_signal(&q.not_full);
    pthread_mutex_unlock(&q.lock);
    for (uint64_t i = 0; i < batch_len; i++) free(held[i]);
  }
}

static void spawn(pthread_t *t, void *(*fn)(void *), void *arg) {
  int rc = pthread_create(t, NULL, fn, arg);
  if (rc) {
    fprintf(stderr, "pthread_create: %s\n", strerror(rc));
    exit(1);
  }
}

int main(int argc, char **argv) {
  args_init(argc, "prodcons_batch [BATCHES [BATCH [MIN MAX [PRODUCERS [CONSUMERS [QUEUE [SEED]]]]]]]", 8);
  if (argc == 4) usage();
  batches = arg_u64(argc, argv, 1, 2000, 1, UINT64_MAX);
  batch_len = arg_u64(argc, argv, 2, 4096, 1, 1u << 24);
  min = arg_u64(argc, argv, 3, 64, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 4, 64, min, 1u << 30);
  uint64_t producers = arg_u64(argc, argv, 5, 2, 1, 1024);
  uint64_t consumers = arg_u64(argc, argv, 6, 2, 1, 1024);
  uint64_t queue = arg_u64(argc, argv, 7, 100, 1, 1u << 20);
  uint64_t seed = arg_u64(argc, argv, 8, 1, 0, UINT64_MAX);
  span = max - min + 1;

  /* QUEUE + PRODUCERS + CONSUMERS arrays: each producer holds one, each
   * consumer at most one, the queue fewer than QUEUE when a producer pushes,
   * so the spare stack has one for it then. */
  uint64_t arrays = queue + producers + consumers;
  char **pool = xmalloc(arrays * batch_len * sizeof *pool);
  q.ring = xmalloc(queue * sizeof *q.ring);
  q.spare = xmalloc(arrays * sizeof *q.spare);
  struct producer *prod = xmalloc(producers * sizeof *prod);
  pthread_t *cons = xmalloc(consumers * sizeof *cons);
  q.size = queue;
  q.producing = producers;
  for (uint64_t a = producers; a < arrays; a++) q.spare[q.nspare++] = pool + a * batch_len;

  pthread_barrier_init(&start, NULL, (unsigned)(producers + consumers + 1));
  for (uint64_t i = 0; i < consumers; i++) spawn(&cons[i], consume, NULL);
  for (uint64_t i = 0; i < producers; i++) {
    prod[i].batch = pool + i * batch_len;
    prod[i].seed = seed + i;
    spawn(&prod[i].thread, produce, &prod[i]);
  }
  pthread_barrier_wait(&start);
  double t0 = now_sec();
  for (uint64_t i = 0; i < producers; i++) pthread_join(prod[i].thread, NULL);
  for (uint64_t i = 0; i < consumers; i++) pthread_join(cons[i], NULL);
  double seconds = now_sec() - t0;

  pthread_barrier_destroy(&start);
  free(pool);
  free(q.ring);
  free(q.spare);
  free(prod);
  free(cons);
  double blocks = (double)(producers * batches * batch_len);
  printf("RESULT bench=prodcons_batch batches=%llu batch=%llu min=%llu max=%llu producers=%llu consumers=%llu "
         "queue=%llu seed=%llu blocks_per_sec=%.0f ns_per_block=%.2f",
         (unsigned long long)batches, (unsigned long long)batch_len, (unsigned long long)min,
         (unsigned long long)max, (unsigned long long)producers, (unsigned long long)consumers,
         (unsigned long long)queue, (unsigned long long)seed, blocks / seconds, seconds * 1e9 / blocks);
  result_end(2.0 * blocks, seconds);
  return 0;
}
