/* SPDX-License-Identifier: MIT */
/* The workloads that more than one program runs: random_mixed's loop,
 * larson's server threads and thread_churn's threads that come and go.
 * Their own programs time a fixed amount of work; soak runs them for a
 * duration and reports every epoch; latency times some of their calls.
 *
 * Every malloc and free of a workload goes through BENCH_MALLOC and
 * BENCH_FREE, which a program may define before including this header
 * (latency.c times one call in 64 that way); by default they are malloc and
 * free themselves.  Work done is published in batches to bench_ops_done,
 * which another thread may read while the workload runs. */
#ifndef BENCH_WORKLOAD_H
#define BENCH_WORKLOAD_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "bench.h"

#ifndef BENCH_MALLOC
#define BENCH_MALLOC(size) malloc(size)
#define BENCH_FREE(p) free(p)
#endif

/* malloc and free calls done so far, all threads. */
static _Atomic uint64_t bench_ops_done;
/* Set to end the workloads that run until told (larson, soak's loops). */
static atomic_bool bench_stop;

static inline void publish(uint64_t ops) {
  atomic_fetch_add_explicit(&bench_ops_done, ops, memory_order_relaxed);
}

static inline bool stopped(void) { return atomic_load_explicit(&bench_stop, memory_order_relaxed); }

static inline void *checked_malloc(size_t size) {
  void *p = BENCH_MALLOC(size);
  if (__builtin_expect(p == NULL, 0)) out_of_memory(size);
  return p;
}

/* ---- random_mixed: WS slots; each iteration frees a random slot's block,
 * or mallocs MIN..MAX bytes into it and writes the first byte ---- */

struct mixed {
  void **slots;
  uint64_t ws, min, span, rng;
};

static inline void mixed_init(struct mixed *m, uint64_t ws, uint64_t seed, uint64_t min, uint64_t max) {
  m->slots = calloc(ws, sizeof *m->slots);
  if (!m->slots) out_of_memory(ws * sizeof *m->slots);
  m->ws = ws;
  m->min = min;
  m->span = max - min + 1;
  m->rng = rng_init(seed);
}

/* `iters` iterations, one op each.  The loop is kept minimal: its own cost
 * is the floor under every allocator's figure. */
static inline void mixed_run(struct mixed *m, uint64_t iters) {
  void **slots = m->slots;
  uint64_t ws = m->ws, min = m->min, span = m->span, rng = m->rng;
  for (uint64_t n = iters; n; n--) {
    uint64_t r = rng_next(&rng);
    void **slot = &slots[below((uint32_t)r, ws)];
    void *old = *slot;
    if (old) {
      *slot = NULL;
      BENCH_FREE(old);
    } else {
      char *p = BENCH_MALLOC(min + below((uint32_t)(r >> 32), span));
      p[0] = (char)n; /* a NULL from malloc crashes here: no check in the loop */
      *slot = p;
    }
  }
  m->rng = rng;
}

/* The final frees, outside the measurement: never timed. */
static inline void mixed_fini(struct mixed *m) {
  for (uint64_t i = 0; i < m->ws; i++) free(m->slots[i]);
  free(m->slots);
}

/* ---- larson: THREADS threads each replace random blocks of an array of
 * SLOTS; every HANDOFF_ROUNDS * SLOTS replacements a thread passes its
 * array to the next thread's mailbox (if empty) and starts a fresh one; a
 * thread finding an array in its mailbox frees its blocks, which another
 * thread allocated.  They run until bench_stop is set. ---- */

#define HANDOFF_ROUNDS 4

struct larson_worker {
  _Alignas(64) _Atomic(char **) mailbox;
  pthread_t thread;
  struct larson_worker *next;
  uint64_t seed;
};

static struct {
  uint64_t threads, slots, min, span;
  pthread_barrier_t start;
  struct larson_worker *workers;
} larson;

static inline char *larson_block(uint64_t *rng) {
  size_t size = larson.min + below((uint32_t)rng_next(rng), larson.span);
  char *p = checked_malloc(size);
  p[0] = (char)size;
  return p;
}

/* An array of fresh blocks: slots + 1 malloc calls. */
static inline char **larson_array(uint64_t *rng) {
  char **a = checked_malloc(larson.slots * sizeof *a);
  for (uint64_t i = 0; i < larson.slots; i++) a[i] = larson_block(rng);
  return a;
}

/* Frees an array and its blocks: slots + 1 free calls. */
static inline void larson_free_array(char **a) {
  for (uint64_t i = 0; i < larson.slots; i++) BENCH_FREE(a[i]);
  BENCH_FREE(a);
}

static void *larson_work(void *arg) {
  struct larson_worker *w = arg;
  uint64_t rng = rng_init(w->seed), slots = larson.slots;
  char **own = larson_array(&rng);
  pthread_barrier_wait(&larson.start); /* the clock starts now */
  for (uint64_t round = 1; !stopped(); round++) {
    for (uint64_t n = 0; n < slots; n++) {
      char **slot = &own[below((uint32_t)rng_next(&rng), slots)];
      BENCH_FREE(*slot);
      *slot = larson_block(&rng);
    }
    uint64_t ops = 2 * slots;
    if (round % HANDOFF_ROUNDS == 0) {
      char **received = atomic_exchange_explicit(&w->mailbox, NULL, memory_order_acquire);
      if (received) {
        larson_free_array(received);
        ops += slots + 1;
      }
      char **empty = NULL;
      if (atomic_compare_exchange_strong_explicit(&w->next->mailbox, &empty, own, memory_order_release,
                                                  memory_order_relaxed)) {
        own = larson_array(&rng);
        ops += slots + 1;
      }
    }
    publish(ops);
  }
  larson_free_array(own);
  publish(slots + 1);
  return NULL;
}

/* Starts the threads and returns once all have their first array: the
 * caller's clock starts then. */
static inline void larson_start(uint64_t threads, uint64_t slots, uint64_t seed, uint64_t min, uint64_t max) {
  larson.threads = threads;
  larson.slots = slots;
  larson.min = min;
  larson.span = max - min + 1;
  larson.workers = aligned_alloc(64, threads * sizeof *larson.workers);
  if (!larson.workers) out_of_memory(threads * sizeof *larson.workers);
  pthread_barrier_init(&larson.start, NULL, (unsigned)threads + 1);
  for (uint64_t t = 0; t < threads; t++) {
    struct larson_worker *w = &larson.workers[t];
    atomic_init(&w->mailbox, NULL);
    w->next = &larson.workers[(t + 1) % threads];
    w->seed = seed + t;
    if (pthread_create(&w->thread, NULL, larson_work, w)) {
      perror("pthread_create");
      exit(1);
    }
  }
  pthread_barrier_wait(&larson.start);
}

/* Waits for the threads once bench_stop is set (their last frees count). */
static inline void larson_join(void) {
  for (uint64_t t = 0; t < larson.threads; t++) pthread_join(larson.workers[t].thread, NULL);
}

/* Frees what is left in the mailboxes, outside the measurement. */
static inline void larson_fini(void) {
  for (uint64_t t = 0; t < larson.threads; t++) {
    char **left = atomic_load(&larson.workers[t].mailbox);
    if (!left) continue;
    for (uint64_t i = 0; i < larson.slots; i++) free(left[i]);
    free(left);
  }
  pthread_barrier_destroy(&larson.start);
  free(larson.workers);
}

/* ---- thread_churn: rounds of THREADS threads; a thread frees what its
 * predecessor handed over, replaces OPS random blocks of its LIVE (94 %
 * 16..512 B, 5 % up to 32 KiB, 1 % up to MAX, every page written), frees
 * half and hands the other half on, and ends ---- */

struct churn_job {
  char **inherited; /* the predecessor's handed-over blocks, or NULL */
  char **handover;  /* what this thread leaves to its successor */
  uint64_t seed;
};

static struct {
  uint64_t threads, ops, live, max;
  struct churn_job *jobs;
  pthread_t *tids;
} churn;

static inline size_t churn_log_range(uint64_t r, double lo, double hi) {
  return (size_t)exp(log(lo) + (log(hi) - log(lo)) * (double)(uint32_t)r / 4294967296.0);
}

static inline size_t churn_size(uint64_t r) {
  unsigned pick = (unsigned)below((uint32_t)(r >> 32), 100);
  if (pick < 94) return 16 + (size_t)below((uint32_t)r, 497);
  if (pick < 99) return churn_log_range(r, 512, 32768);
  return churn_log_range(r, 32768, (double)churn.max);
}

static inline char *churn_block(uint64_t *rng) {
  size_t size = churn_size(rng_next(rng));
  char *p = checked_malloc(size);
  for (size_t off = 0; off < size; off += 4096) p[off] = (char)size; /* every page */
  p[size - 1] = 1;
  return p;
}

/* Replacements between two publications of the work done. */
#define CHURN_BATCH 1024

static void *churn_work(void *arg) {
  struct churn_job *j = arg;
  uint64_t rng = rng_init(j->seed), live = churn.live;
  if (j->inherited) {
    for (uint64_t i = 0; i < live / 2; i++) BENCH_FREE(j->inherited[i]);
    BENCH_FREE(j->inherited);
    publish(live / 2 + 1);
  }
  char **slots = checked_malloc(live * sizeof *slots);
  for (uint64_t i = 0; i < live; i++) slots[i] = churn_block(&rng);
  publish(live + 1);
  for (uint64_t done = 0; done < churn.ops;) {
    uint64_t batch = churn.ops - done < CHURN_BATCH ? churn.ops - done : CHURN_BATCH;
    for (uint64_t n = 0; n < batch; n++) {
      char **slot = &slots[below((uint32_t)rng_next(&rng), live)];
      BENCH_FREE(*slot);
      *slot = churn_block(&rng);
    }
    publish(2 * batch);
    done += batch;
  }
  for (uint64_t i = live / 2; i < live; i++) BENCH_FREE(slots[i]);
  publish(live - live / 2);
  j->handover = slots; /* its first half, freed by the successor */
  return NULL;
}

static inline void churn_init(uint64_t threads, uint64_t ops, uint64_t live, uint64_t max) {
  churn.threads = threads;
  churn.ops = ops;
  churn.live = live;
  churn.max = max;
  churn.jobs = calloc(threads, sizeof *churn.jobs);
  churn.tids = calloc(threads, sizeof *churn.tids);
  if (!churn.jobs || !churn.tids) out_of_memory(threads * sizeof *churn.jobs);
}

/* Round r: THREADS threads started, then joined. */
static inline void churn_round(uint64_t seed, uint64_t r) {
  for (uint64_t t = 0; t < churn.threads; t++) {
    struct churn_job *j = &churn.jobs[t];
    j->inherited = j->handover;
    j->handover = NULL;
    j->seed = seed + r * churn.threads + t;
    if (pthread_create(&churn.tids[t], NULL, churn_work, j)) {
      perror("pthread_create");
      exit(1);
    }
  }
  for (uint64_t t = 0; t < churn.threads; t++) pthread_join(churn.tids[t], NULL);
}

/* Frees the last round's handovers, outside the measurement. */
static inline void churn_fini(void) {
  for (uint64_t t = 0; t < churn.threads; t++) {
    for (uint64_t i = 0; i < churn.live / 2; i++) free(churn.jobs[t].handover[i]);
    free(churn.jobs[t].handover);
  }
  free(churn.jobs);
  free(churn.tids);
}

#endif
