/* SPDX-License-Identifier: MIT */
/* thread_churn: threads that come and go, as in a server that starts a
 * thread per job.  ROUNDS rounds of THREADS threads each; a thread first
 * frees the blocks its predecessor of the last round handed over, then does
 * OPS replacements of random slots in an array of LIVE blocks (a free and a
 * malloc each), then frees half of its blocks and hands the other half to
 * its successor, and ends.  Sizes are mostly small, with a tail of large and
 * big blocks: 94 % 16..512 B, 5 % 512 B..32 KiB, 1 % 32 KiB..MAX
 * (log-uniform within each range); every page of a block is written once.
 * What it measures is what happens between the allocator and the OS when
 * threads exit (their caches handed back, their memory reused or unmapped)
 * and blocks cross threads.  An op is one malloc or one free.  Reports the
 * page faults of the loop (minflt) and the peak RSS (maxrss_kb). */
#include <math.h>
#include <pthread.h>
#include <sys/resource.h>

#include "bench.h"

#define PAGE 4096

static uint64_t ops_per_thread, live, max_size;

struct job {
  char **inherited;  /* the predecessor's handed-over blocks, or NULL */
  char **handover;   /* what this thread leaves to its successor */
  uint64_t seed, ops;
};

static size_t log_range(uint64_t r, double lo, double hi) {
  return (size_t)exp(log(lo) + (log(hi) - log(lo)) * (double)(uint32_t)r / 4294967296.0);
}

static size_t draw_size(uint64_t r) {
  unsigned pick = (unsigned)below((uint32_t)(r >> 32), 100);
  if (pick < 94) return 16 + (size_t)below((uint32_t)r, 497);
  if (pick < 99) return log_range(r, 512, 32768);
  return log_range(r, 32768, (double)max_size);
}

static char *new_block(uint64_t *rng) {
  size_t size = draw_size(rng_next(rng));
  char *p = xmalloc(size);
  for (size_t off = 0; off < size; off += PAGE) p[off] = (char)size;
  p[size - 1] = 1;
  return p;
}

static void *work(void *arg) {
  struct job *j = arg;
  uint64_t rng = rng_init(j->seed), ops = 0;
  if (j->inherited) {
    for (uint64_t i = 0; i < live / 2; i++) free(j->inherited[i]);
    free(j->inherited);
    ops += live / 2 + 1;
  }
  char **slots = xmalloc(live * sizeof *slots);
  for (uint64_t i = 0; i < live; i++) slots[i] = new_block(&rng);
  ops += live + 1;
  for (uint64_t n = 0; n < ops_per_thread; n++) {
    char **slot = &slots[below((uint32_t)rng_next(&rng), live)];
    free(*slot);
    *slot = new_block(&rng);
  }
  ops += 2 * ops_per_thread;
  for (uint64_t i = live / 2; i < live; i++) free(slots[i]);
  ops += live - live / 2;
  j->handover = slots;  /* its first half, freed by the successor */
  j->ops = ops;
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, "thread_churn [ROUNDS [THREADS [OPS [LIVE [SEED [MAX]]]]]]", 6);
  uint64_t rounds = arg_u64(argc, argv, 1, 20, 1, 1u << 20);
  uint64_t threads = arg_u64(argc, argv, 2, 4, 1, 1024);
  ops_per_thread = arg_u64(argc, argv, 3, 100000, 1, UINT64_MAX);
  live = arg_u64(argc, argv, 4, 1000, 2, 1u << 24);
  uint64_t seed = arg_u64(argc, argv, 5, 1, 0, UINT64_MAX);
  max_size = arg_u64(argc, argv, 6, 2u << 20, 32768, 1ull << 32);

  struct job *jobs = calloc(threads, sizeof *jobs);
  pthread_t *tids = calloc(threads, sizeof *tids);
  if (!jobs || !tids) out_of_memory(threads * sizeof *jobs);
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  uint64_t ops = 0;

  double t0 = now_sec();
  for (uint64_t r = 0; r < rounds; r++) {
    for (uint64_t t = 0; t < threads; t++) {
      jobs[t].inherited = jobs[t].handover;
      jobs[t].handover = NULL;
      jobs[t].seed = seed + r * threads + t;
      if (pthread_create(&tids[t], NULL, work, &jobs[t])) {
        perror("pthread_create");
        return 1;
      }
    }
    for (uint64_t t = 0; t < threads; t++) {
      pthread_join(tids[t], NULL);
      ops += jobs[t].ops;
    }
  }
  double seconds = now_sec() - t0;

  getrusage(RUSAGE_SELF, &after);
  for (uint64_t t = 0; t < threads; t++) {
    for (uint64_t i = 0; i < live / 2; i++) free(jobs[t].handover[i]);
    free(jobs[t].handover);
  }
  printf("RESULT bench=thread_churn rounds=%llu threads=%llu ops=%llu live=%llu seed=%llu max=%llu minflt=%ld "
         "maxrss_kb=%ld",
         (unsigned long long)rounds, (unsigned long long)threads, (unsigned long long)ops_per_thread,
         (unsigned long long)live, (unsigned long long)seed, (unsigned long long)max_size,
         after.ru_minflt - before.ru_minflt, after.ru_maxrss);
  result_end((double)ops, seconds);
  return 0;
}
