/* SPDX-License-Identifier: MIT */
/* prodcons: every block is freed by another thread than the one that
 * allocated it.  PAIRS producer threads each malloc ITEMS blocks of a random
 * size in MIN..MAX, write their first byte and push them into a bounded
 * lock-free ring of RING entries of their own; a consumer thread per ring
 * pops and frees them.  Each side reads the other's index only when the ring
 * looks full or empty, so the ring costs little next to the allocator.
 *
 * Where the threads run decides the figure: a producer and its consumer on
 * one core hand blocks over through the cache, on two cores through memory,
 * and a scheduler free to choose splits the runs into two answers.  So the
 * threads are pinned (sched_setaffinity) to the CPUs the process may use:
 * while there are CPUs enough, each thread on one of its own (a producer and
 * its consumer on two cores); beyond that, pair i on CPU i modulo their
 * number, producer and consumer together.
 * 2 * PAIRS * ITEMS ops, timed from a common start to the last free. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "bench.h"

struct ring {
  _Alignas(64) _Atomic uint64_t head; /* written by the producer */
  _Alignas(64) _Atomic uint64_t tail; /* written by the consumer */
  _Alignas(64) uint64_t mask, items, seed, min, span;
  char **slots;
  int cpu[2];                         /* producer's, consumer's */
};

static pthread_barrier_t start;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* Spins a little, then yields: threads may share a core. */
static inline void backoff(unsigned *spins) {
  if (++*spins < 64) cpu_relax();
  else sched_yield();
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);  /* best effort: unpinned still runs */
}

static void *consume(void *arg) {
  struct ring *q = arg;
  pin(q->cpu[1]);
  pthread_barrier_wait(&start);
  uint64_t head = 0; /* the producer's index as last seen */
  for (uint64_t tail = 0; tail < q->items; tail++) {
    unsigned spins = 0;
    while (head == tail && (head = atomic_load_explicit(&q->head, memory_order_acquire)) == tail)
      backoff(&spins);
    free(q->slots[tail & q->mask]);
    atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
  }
  return NULL;
}

static void *produce(void *arg) {
  struct ring *q = arg;
  pin(q->cpu[0]);
  uint64_t rng = rng_init(q->seed), tail = 0; /* the consumer's index as last seen */
  pthread_barrier_wait(&start);
  for (uint64_t head = 0; head < q->items; head++) {
    char *p = xmalloc(q->min + below((uint32_t)rng_next(&rng), q->span));
    p[0] = (char)head;
    unsigned spins = 0;
    while (head - tail == q->mask + 1 &&
           head - (tail = atomic_load_explicit(&q->tail, memory_order_acquire)) == q->mask + 1)
      backoff(&spins);
    q->slots[head & q->mask] = p;
    atomic_store_explicit(&q->head, head + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, "prodcons [ITEMS [RING [SEED [MIN MAX [PAIRS]]]]]  (RING a power of two)", 6);
  if (argc == 5) usage();
  uint64_t items = arg_u64(argc, argv, 1, 5000000, 1, UINT64_MAX);
  uint64_t ring_size = arg_u64(argc, argv, 2, 1024, 1, 1u << 24);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min = arg_u64(argc, argv, 4, 16, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 5, 1024, min, 1u << 30);
  uint64_t pairs = arg_u64(argc, argv, 6, 1, 1, 64);
  if (ring_size & (ring_size - 1)) usage();

  cpu_set_t allowed;
  int cpus[CPU_SETSIZE], ncpus = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) cpus[ncpus++] = c;
  if (ncpus == 0) cpus[ncpus++] = 0;

  struct ring *q = aligned_alloc(64, pairs * sizeof *q);
  pthread_t *threads = calloc(2 * pairs, sizeof *threads);
  if (!q || !threads) out_of_memory(pairs * sizeof *q);
  pthread_barrier_init(&start, NULL, (unsigned)(2 * pairs + 1));
  for (uint64_t i = 0; i < pairs; i++) {
    struct ring *r = &q[i];
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    r->mask = ring_size - 1;
    r->items = items;
    r->seed = seed + i;
    r->min = min;
    r->span = max - min + 1;
    bool apart = 2 * pairs <= (uint64_t)ncpus;
    r->cpu[0] = cpus[apart ? 2 * i : i % (uint64_t)ncpus];
    r->cpu[1] = cpus[apart ? 2 * i + 1 : i % (uint64_t)ncpus];
    r->slots = calloc(ring_size, sizeof *r->slots);
    if (!r->slots) out_of_memory(ring_size * sizeof *r->slots);
    if (pthread_create(&threads[2 * i], NULL, consume, r) || pthread_create(&threads[2 * i + 1], NULL, produce, r)) {
      perror("pthread_create");
      return 1;
    }
  }
  pthread_barrier_wait(&start);
  double t0 = now_sec();
  for (uint64_t i = 0; i < 2 * pairs; i++) pthread_join(threads[i], NULL);
  double seconds = now_sec() - t0;

  for (uint64_t i = 0; i < pairs; i++) free(q[i].slots);
  free(q);
  free(threads);
  printf("RESULT bench=prodcons items=%llu ring=%llu seed=%llu min=%llu max=%llu pairs=%llu",
         (unsigned long long)items, (unsigned long long)ring_size, (unsigned long long)seed,
         (unsigned long long)min, (unsigned long long)max, (unsigned long long)pairs);
  result_end(2.0 * (double)(pairs * items), seconds);
  return 0;
}
