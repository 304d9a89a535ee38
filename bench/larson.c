/* SPDX-License-Identifier: MIT */
/* larson: a server-like workload, after Larson and Krishnan's benchmark.
 * Each of THREADS threads owns an array of SLOTS live blocks and replaces
 * random ones with new blocks of a random size in MIN..MAX (two ops each).
 * Every HANDOFF_ROUNDS * SLOTS replacements it passes its whole array to the
 * next thread's mailbox, if that is empty, and starts a fresh one; a thread
 * finding an array in its own mailbox frees all of its blocks, which another
 * thread allocated.  Runs for SECONDS; every malloc and free call is an op. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "bench.h"

#define HANDOFF_ROUNDS 4

struct worker {
  _Alignas(64) _Atomic(char **) mailbox;
  pthread_t thread;
  struct worker *next;
  uint64_t seed;
  uint64_t ops;
};

static uint64_t slots, min_size, span;
static atomic_bool stop;
static pthread_barrier_t start;

static char *new_block(uint64_t *rng) {
  size_t size = min_size + below((uint32_t)rng_next(rng), span);
  char *p = xmalloc(size);
  p[0] = (char)size;
  return p;
}

/* An array of fresh blocks: slots + 1 malloc calls. */
static char **new_array(uint64_t *rng) {
  char **a = xmalloc(slots * sizeof *a);
  for (uint64_t i = 0; i < slots; i++) a[i] = new_block(rng);
  return a;
}

/* Frees an array and its blocks: slots + 1 free calls. */
static void free_array(char **a) {
  for (uint64_t i = 0; i < slots; i++) free(a[i]);
  free(a);
}

static void *work(void *arg) {
  struct worker *w = arg;
  uint64_t rng = rng_init(w->seed), ops = 0;
  char **own = new_array(&rng);
  pthread_barrier_wait(&start); /* the clock starts now */
  for (uint64_t round = 1; !atomic_load_explicit(&stop, memory_order_relaxed); round++) {
    for (uint64_t n = 0; n < slots; n++) {
      char **slot = &own[below((uint32_t)rng_next(&rng), slots)];
      free(*slot);
      *slot = new_block(&rng);
    }
    ops += 2 * slots;
    if (round % HANDOFF_ROUNDS) continue;
    char **received = atomic_exchange_explicit(&w->mailbox, NULL, memory_order_acquire);
    if (received) {
      free_array(received);
      ops += slots + 1;
    }
    char **empty = NULL;
    if (atomic_compare_exchange_strong_explicit(&w->next->mailbox, &empty, own, memory_order_release,
                                                memory_order_relaxed)) {
      own = new_array(&rng);
      ops += slots + 1;
    }
  }
  free_array(own);
  w->ops = ops + slots + 1;
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, "larson [THREADS [SECONDS [SLOTS [SEED [MIN MAX]]]]]", 6);
  if (argc == 6) usage();
  uint64_t threads = arg_u64(argc, argv, 1, 2, 1, 1024);
  double duration = arg_double(argc, argv, 2, 1.0, 3600);
  slots = arg_u64(argc, argv, 3, 1000, 1, 1u << 24);
  uint64_t seed = arg_u64(argc, argv, 4, 1, 0, UINT64_MAX);
  min_size = arg_u64(argc, argv, 5, 16, 1, 1u << 30);
  uint64_t max_size = arg_u64(argc, argv, 6, 1024, min_size, 1u << 30);
  span = max_size - min_size + 1;

  struct worker *workers = aligned_alloc(64, threads * sizeof *workers);
  if (!workers) out_of_memory(threads * sizeof *workers);
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (uint64_t t = 0; t < threads; t++) {
    struct worker *w = &workers[t];
    atomic_init(&w->mailbox, NULL);
    w->next = &workers[(t + 1) % threads];
    w->seed = seed + t;
    if (pthread_create(&w->thread, NULL, work, w)) {
      perror("pthread_create");
      return 1;
    }
  }

  pthread_barrier_wait(&start);
  double t0 = now_sec();
  struct timespec nap = {(time_t)duration, (long)((duration - (double)(time_t)duration) * 1e9)};
  while (nanosleep(&nap, &nap) == -1 && errno == EINTR) {}
  atomic_store(&stop, true);
  uint64_t ops = 0;
  for (uint64_t t = 0; t < threads; t++) {
    pthread_join(workers[t].thread, NULL);
    ops += workers[t].ops;
  }
  double seconds = now_sec() - t0;

  for (uint64_t t = 0; t < threads; t++) {
    char **left = atomic_load(&workers[t].mailbox);
    if (left) free_array(left);
  }
  pthread_barrier_destroy(&start);
  free(workers);
  printf("RESULT bench=larson threads=%llu duration=%g slots=%llu seed=%llu min=%llu max=%llu",
         (unsigned long long)threads, duration, (unsigned long long)slots, (unsigned long long)seed,
         (unsigned long long)min_size, (unsigned long long)max_size);
  result_end((double)ops, seconds);
  return 0;
}
