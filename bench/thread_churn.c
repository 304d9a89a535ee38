/* SPDX-License-Identifier: MIT */
/* thread_churn: threads that come and go, as in a server that starts a
 * thread per job.  ROUNDS rounds of THREADS threads each; a thread first
 * frees the blocks its predecessor of the last round handed over, then does
 * OPS replacements of random slots in an array of LIVE blocks (a free and a
 * malloc each), then frees half of its blocks and hands the other half to
 * its successor, and ends (churn_work in workload.h).  Sizes are mostly
 * small, with a tail of large and big blocks: 94 % 16..512 B, 5 % 512 B..32
 * KiB, 1 % 32 KiB..MAX (log-uniform within each range); every page of a
 * block is written once.  What it measures is what happens between the
 * allocator and the OS when threads exit (their caches handed back, their
 * memory reused or unmapped) and blocks cross threads.  An op is one malloc
 * or one free.  Reports the page faults of the loop (minflt) and the peak
 * RSS (maxrss_kb). */
#include <sys/resource.h>

#include "workload.h"

int main(int argc, char **argv) {
  args_init(argc, "thread_churn [ROUNDS [THREADS [OPS [LIVE [SEED [MAX]]]]]]", 6);
  uint64_t rounds = arg_u64(argc, argv, 1, 20, 1, 1u << 20);
  uint64_t threads = arg_u64(argc, argv, 2, 4, 1, 1024);
  uint64_t ops = arg_u64(argc, argv, 3, 100000, 1, UINT64_MAX);
  uint64_t live = arg_u64(argc, argv, 4, 1000, 2, 1u << 24);
  uint64_t seed = arg_u64(argc, argv, 5, 1, 0, UINT64_MAX);
  uint64_t max = arg_u64(argc, argv, 6, 2u << 20, 32768, 1ull << 32);

  churn_init(threads, ops, live, max);
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  double t0 = now_sec();
  for (uint64_t r = 0; r < rounds; r++) churn_round(seed, r);
  double seconds = now_sec() - t0;
  getrusage(RUSAGE_SELF, &after);
  churn_fini();

  printf("RESULT bench=thread_churn rounds=%llu threads=%llu ops=%llu live=%llu seed=%llu max=%llu minflt=%ld "
         "maxrss_kb=%ld",
         (unsigned long long)rounds, (unsigned long long)threads, (unsigned long long)ops,
         (unsigned long long)live, (unsigned long long)seed, (unsigned long long)max,
         after.ru_minflt - before.ru_minflt, after.ru_maxrss);
  result_end((double)atomic_load(&bench_ops_done), seconds);
  return 0;
}
