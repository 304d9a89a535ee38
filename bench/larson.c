/* SPDX-License-Identifier: MIT */
/* larson: a server-like workload, after Larson and Krishnan's benchmark.
 * Each of THREADS threads owns an array of SLOTS live blocks and replaces
 * random ones with new blocks of a random size in MIN..MAX (two ops each).
 * Every HANDOFF_ROUNDS * SLOTS replacements it passes its whole array to the
 * next thread's mailbox, if that is empty, and starts a fresh one; a thread
 * finding an array in its own mailbox frees all of its blocks, which another
 * thread allocated (larson_work in workload.h).  Runs for SECONDS; every
 * malloc and free call is an op. */
#include "workload.h"

int main(int argc, char **argv) {
  args_init(argc, "larson [THREADS [SECONDS [SLOTS [SEED [MIN MAX]]]]]", 6);
  if (argc == 6) usage();
  uint64_t threads = arg_u64(argc, argv, 1, 2, 1, 1024);
  double duration = arg_double(argc, argv, 2, 1.0, 3600);
  uint64_t slots = arg_u64(argc, argv, 3, 1000, 1, 1u << 24);
  uint64_t seed = arg_u64(argc, argv, 4, 1, 0, UINT64_MAX);
  uint64_t min = arg_u64(argc, argv, 5, 16, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 6, 1024, min, 1u << 30);

  larson_start(threads, slots, seed, min, max);
  double t0 = now_sec();
  struct timespec nap = {(time_t)duration, (long)((duration - (double)(time_t)duration) * 1e9)};
  while (nanosleep(&nap, &nap) == -1 && errno == EINTR) {}
  atomic_store(&bench_stop, true);
  larson_join();
  double seconds = now_sec() - t0;
  larson_fini();

  printf("RESULT bench=larson threads=%llu duration=%g slots=%llu seed=%llu min=%llu max=%llu",
         (unsigned long long)threads, duration, (unsigned long long)slots, (unsigned long long)seed,
         (unsigned long long)min, (unsigned long long)max);
  result_end((double)atomic_load(&bench_ops_done), seconds);
  return 0;
}
