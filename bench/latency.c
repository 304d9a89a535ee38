/* SPDX-License-Identifier: MIT */
/* latency: the time of single malloc and free calls, sampled, where the
 * rare slow paths show (a cache refilled, a new mapping, a purge) that a
 * throughput figure averages away.  Runs random_mixed's loop and thread
 * churn's threads (workload.h) and times one call in 64 on average (at
 * random gaps of 1..127 calls, drawn anew in each process, so that a slow
 * path that recurs with a period is not always or never caught, and runs
 * pooled time different calls), each with the time-stamp counter
 * (lfence; rdtsc, calibrated against CLOCK_MONOTONIC) on x86-64 and with
 * clock_gettime elsewhere.  The cost of an empty timed pair is measured
 * (its median) and taken off every sample; the timer's resolution is
 * reported beside it.  Samples go into a log-scale histogram: 8 buckets per
 * power of two, so a figure is within 12.5 %.
 *
 *   latency [WORKLOAD [OPS [SEED]]]
 *
 * WORKLOAD: random_mixed, thread_churn or all (both, one after the other).
 * OPS: malloc and free calls to make, about: random_mixed runs OPS
 * iterations (400 slots, 16..1040 B); thread_churn runs rounds of 4 threads
 * with 1000 live blocks each (94 % 16..512 B, 5 % to 32 KiB, 1 % to 2 MiB)
 * and up to 100000 replacements each, as many as make OPS.
 *
 * For each workload, one `HIST workload=W op=malloc|free lo_ns=A hi_ns=B
 * count=N` line per non-empty bucket, then the RESULT line with the number
 * of samples and the percentiles of all the calls timed, malloc and free
 * together (the top of the bucket, at most the maximum): p50_ns, p90_ns,
 * p99_ns, p999_ns (99.9 %) and max_ns.  ops_per_sec is the throughput with
 * the timing on. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "bench.h"

#define BUCKETS 320 /* up to 2^41 ns */
#define GAP_MASK 127

enum { OP_MALLOC, OP_FREE, OPS };
static const char *const op_names[OPS] = {"malloc", "free"};

/* The calling thread's histograms, added to the totals when it ends. */
static __thread uint64_t hist[OPS][BUCKETS];
static __thread uint32_t countdown = 1;
static __thread uint64_t gap_rng;
static __thread bool registered;
static uint64_t totals[OPS][BUCKETS];
static _Atomic uint64_t max_ns;
static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static _Atomic uint64_t thread_seeds;
static double ns_per_tick = 1.0;
static uint64_t overhead_ns, resolution_ns;

#if defined(__x86_64__)
#define TIMER "tsc"
/* Fenced: the call timed neither starts before the first read nor ends
 * after the second. */
static inline uint64_t ticks(void) {
  uint32_t lo, hi;
  __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
  return (uint64_t)hi << 32 | lo;
}

/* Unfenced, to see the counter's steps. */
static inline uint64_t raw_ticks(void) {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t)hi << 32 | lo;
}
#else
#define TIMER "clock_gettime"
static inline uint64_t ticks(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t raw_ticks(void) { return ticks(); }
#endif

/* Bucket of a value: exact below 8, then 8 buckets per power of two. */
static unsigned bucket_of(uint64_t v) {
  if (v < 8) return (unsigned)v;
  unsigned e = 63 - (unsigned)__builtin_clzll(v);
  unsigned b = 8 * (e - 2) + (unsigned)((v >> (e - 3)) & 7);
  return b < BUCKETS ? b : BUCKETS - 1;
}

static uint64_t bucket_lo(unsigned b) { return b < 8 ? b : (uint64_t)(8 + b % 8) << (b / 8 - 1); }
static uint64_t bucket_hi(unsigned b) { return b < 8 ? b : bucket_lo(b) + ((uint64_t)1 << (b / 8 - 1)) - 1; }

static void merge_thread(void) {
  pthread_mutex_lock(&totals_lock);
  for (int op = 0; op < OPS; op++)
    for (unsigned b = 0; b < BUCKETS; b++) totals[op][b] += hist[op][b];
  pthread_mutex_unlock(&totals_lock);
  memset(hist, 0, sizeof hist);
}

static void on_thread_exit(void *arg) {
  (void)arg;
  merge_thread();
}

/* The countdown reached 0: whether to time this call.  A thread's first
 * call is never timed; it draws the first gap. */
static __attribute__((noinline)) bool sample_now(void) {
  bool first = !registered;
  if (first) {
    registered = true;
    pthread_setspecific(exit_key, &registered); /* merge_thread at exit */
    gap_rng = rng_init(atomic_fetch_add(&thread_seeds, 1));
  }
  countdown = 1 + (uint32_t)(rng_next(&gap_rng) & GAP_MASK);
  return !first;
}

static __attribute__((noinline)) void record(int op, uint64_t t0, uint64_t t1) {
  if (t1 < t0) return; /* the counter went back: another CPU's, not a time */
  double ns = (double)(t1 - t0) * ns_per_tick;
  uint64_t v = ns > (double)overhead_ns ? (uint64_t)ns - overhead_ns : 0;
  hist[op][bucket_of(v)]++;
  uint64_t seen = atomic_load_explicit(&max_ns, memory_order_relaxed);
  while (v > seen &&
         !atomic_compare_exchange_weak_explicit(&max_ns, &seen, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static inline void *sampled_malloc(size_t size) {
  if (__builtin_expect(--countdown, 1) || !sample_now()) return malloc(size);
  uint64_t t0 = ticks();
  void *p = malloc(size);
  uint64_t t1 = ticks();
  record(OP_MALLOC, t0, t1);
  return p;
}

static inline void sampled_free(void *p) {
  if (__builtin_expect(--countdown, 1) || !sample_now()) {
    free(p);
    return;
  }
  uint64_t t0 = ticks();
  free(p);
  uint64_t t1 = ticks();
  record(OP_FREE, t0, t1);
}

#define BENCH_MALLOC(size) sampled_malloc(size)
#define BENCH_FREE(p) sampled_free(p)
#include "workload.h"

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Nanoseconds per tick, from the ticks and CLOCK_MONOTONIC over 20 ms; the
 * cost of an empty timed pair (the median of 4096); the timer's resolution,
 * the smallest step it takes (a counter that moves in steps of 10 ns makes
 * every sample a multiple of 10 ns). */
static void calibrate(void) {
  double c0 = now_sec();
  uint64_t k0 = ticks();
  while (now_sec() - c0 < 0.02) {}
  uint64_t k1 = ticks();
  ns_per_tick = (now_sec() - c0) * 1e9 / (double)(k1 - k0);

  enum { PAIRS = 4096 };
  static uint64_t empty[PAIRS];
  for (int i = 0; i < PAIRS; i++) {
    uint64_t t0 = ticks();
    uint64_t t1 = ticks();
    empty[i] = (uint64_t)((double)(t1 - t0) * ns_per_tick);
  }
  qsort(empty, PAIRS, sizeof *empty, compare_u64);
  overhead_ns = empty[PAIRS / 2];
  /* the smallest step the counter takes */
  uint64_t step = UINT64_MAX;
  for (int i = 0; i < PAIRS; i++) {
    uint64_t a = raw_ticks(), b;
    while ((b = raw_ticks()) == a) {}
    if (b > a && b - a < step) step = b - a;
  }
  resolution_ns = (uint64_t)llround((double)step * ns_per_tick);
}

/* The value at quantile q (nearest rank) of the two histograms together. */
static uint64_t percentile(uint64_t samples, double q) {
  uint64_t rank = (uint64_t)ceil(q * (double)samples), seen = 0;
  for (unsigned b = 0; b < BUCKETS; b++) {
    seen += totals[OP_MALLOC][b] + totals[OP_FREE][b];
    if (seen >= rank && seen) return bucket_hi(b) < max_ns ? bucket_hi(b) : atomic_load(&max_ns);
  }
  return atomic_load(&max_ns);
}

/* Prints the histograms and the RESULT line of one workload, then clears
 * them.  `params` are the workload's fields. */
static void report(const char *workload, const char *params, uint64_t ops, double seconds) {
  merge_thread();
  uint64_t samples = 0;
  for (int op = 0; op < OPS; op++)
    for (unsigned b = 0; b < BUCKETS; b++) {
      if (!totals[op][b]) continue;
      samples += totals[op][b];
      printf("HIST workload=%s op=%s lo_ns=%llu hi_ns=%llu count=%llu\n", workload, op_names[op],
             (unsigned long long)bucket_lo(b), (unsigned long long)bucket_hi(b), (unsigned long long)totals[op][b]);
    }
  printf("RESULT bench=latency workload=%s %s timer=%s resolution_ns=%llu overhead_ns=%llu samples=%llu "
         "p50_ns=%llu p90_ns=%llu p99_ns=%llu p999_ns=%llu max_ns=%llu",
         workload, params, TIMER, (unsigned long long)resolution_ns, (unsigned long long)overhead_ns,
         (unsigned long long)samples,
         (unsigned long long)percentile(samples, 0.5), (unsigned long long)percentile(samples, 0.9),
         (unsigned long long)percentile(samples, 0.99), (unsigned long long)percentile(samples, 0.999),
         (unsigned long long)max_ns);
  result_end((double)ops, seconds);
  fflush(stdout);
  memset(totals, 0, sizeof totals);
  atomic_store(&max_ns, 0);
  atomic_store(&bench_ops_done, 0);
}

static void run_mixed(uint64_t ops, uint64_t seed) {
  struct mixed m;
  mixed_init(&m, 400, seed, 16, 1040);
  double t0 = now_sec();
  mixed_run(&m, ops);
  double seconds = now_sec() - t0;
  mixed_fini(&m);
  char params[128];
  snprintf(params, sizeof params, "ops=%llu seed=%llu ws=400 min=16 max=1040", (unsigned long long)ops,
           (unsigned long long)seed);
  report("random_mixed", params, ops, seconds);
}

static void run_churn(uint64_t ops, uint64_t seed) {
  enum { THREADS = 4, LIVE = 1000, MAX_OPS = 100000 };
  uint64_t per_thread = ops / (2 * THREADS);
  if (per_thread > MAX_OPS) per_thread = MAX_OPS;
  if (per_thread == 0) per_thread = 1;
  uint64_t rounds = ops / (2 * THREADS * per_thread);
  if (rounds == 0) rounds = 1;
  churn_init(THREADS, per_thread, LIVE, 2u << 20);
  double t0 = now_sec();
  for (uint64_t r = 0; r < rounds; r++) churn_round(seed, r);
  double seconds = now_sec() - t0;
  churn_fini();
  char params[160];
  snprintf(params, sizeof params, "ops=%llu seed=%llu rounds=%llu threads=%d thread_ops=%llu live=%d max=%u",
           (unsigned long long)ops, (unsigned long long)seed, (unsigned long long)rounds, THREADS,
           (unsigned long long)per_thread, LIVE, 2u << 20);
  report("thread_churn", params, atomic_load(&bench_ops_done), seconds);
}

int main(int argc, char **argv) {
  args_init(argc, "latency [random_mixed|thread_churn|all [OPS [SEED]]]", 3);
  const char *workload = argc > 1 ? argv[1] : "all";
  bool all = strcmp(workload, "all") == 0;
  if (!all && strcmp(workload, "random_mixed") && strcmp(workload, "thread_churn")) usage();
  uint64_t ops = arg_u64(argc, argv, 2, 20000000, 1, UINT64_MAX);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);

  if (pthread_key_create(&exit_key, on_thread_exit)) {
    perror("pthread_key_create");
    return 1;
  }
  /* Gaps drawn anew in each process: runs pooled time different calls. */
  atomic_store(&thread_seeds, (uint64_t)getpid() << 32);
  calibrate();
  if (all || strcmp(workload, "random_mixed") == 0) run_mixed(ops, seed);
  if (all || strcmp(workload, "thread_churn") == 0) run_churn(ops, seed);
  return 0;
}
