/* SPDX-License-Identifier: MIT */
/* prodcons: every block is freed by another thread than the one that
 * allocated it.  The main thread mallocs ITEMS blocks of a random size in
 * MIN..MAX, writes their first byte and pushes them into a bounded lock-free
 * ring of RING entries; a consumer thread pops and frees them.  Each side
 * reads the other's index only when the ring looks full or empty, so the ring
 * costs little next to the allocator.  2 * ITEMS ops, timed from the first
 * malloc to the last free. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench.h"

struct ring {
  _Alignas(64) _Atomic uint64_t head; /* written by the producer */
  _Alignas(64) _Atomic uint64_t tail; /* written by the consumer */
  _Alignas(64) uint64_t mask;
  uint64_t items;
  char **slots;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* Spins a little, then yields: the two threads may share one core. */
static inline void backoff(unsigned *spins) {
  if (++*spins < 64) cpu_relax();
  else sched_yield();
}

static void *consume(void *arg) {
  struct ring *q = arg;
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

int main(int argc, char **argv) {
  args_init(argc, "prodcons [ITEMS [RING [SEED [MIN MAX]]]]  (RING a power of two)", 5);
  if (argc == 5) usage();
  uint64_t items = arg_u64(argc, argv, 1, 5000000, 1, UINT64_MAX);
  uint64_t ring_size = arg_u64(argc, argv, 2, 1024, 1, 1u << 24);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min = arg_u64(argc, argv, 4, 16, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 5, 1024, min, 1u << 30);
  if (ring_size & (ring_size - 1)) usage();

  static struct ring q;
  q.mask = ring_size - 1;
  q.items = items;
  q.slots = calloc(ring_size, sizeof *q.slots);
  if (!q.slots) out_of_memory(ring_size * sizeof *q.slots);
  uint64_t span = max - min + 1;
  uint64_t rng = rng_init(seed);

  double t0 = now_sec();
  pthread_t consumer;
  if (pthread_create(&consumer, NULL, consume, &q)) {
    perror("pthread_create");
    return 1;
  }
  uint64_t tail = 0; /* the consumer's index as last seen */
  for (uint64_t head = 0; head < items; head++) {
    char *p = xmalloc(min + below((uint32_t)rng_next(&rng), span));
    p[0] = (char)head;
    unsigned spins = 0;
    while (head - tail == ring_size &&
           head - (tail = atomic_load_explicit(&q.tail, memory_order_acquire)) == ring_size)
      backoff(&spins);
    q.slots[head & q.mask] = p;
    atomic_store_explicit(&q.head, head + 1, memory_order_release);
  }
  pthread_join(consumer, NULL);
  double seconds = now_sec() - t0;

  free(q.slots);
  printf("RESULT bench=prodcons items=%llu ring=%llu seed=%llu min=%llu max=%llu",
         (unsigned long long)items, (unsigned long long)ring_size, (unsigned long long)seed,
         (unsigned long long)min, (unsigned long long)max);
  result_end(2.0 * (double)items, seconds);
  return 0;
}
