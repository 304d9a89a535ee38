/* SPDX-License-Identifier: MIT */
/* random_mixed: the reference benchmark.  WS slots; each iteration picks a
 * random slot and frees its block if it holds one, otherwise mallocs a block
 * of a random size in MIN..MAX and writes its first byte.  Every iteration is
 * one op.  The loop (mixed_run in workload.h) is kept minimal: its own cost
 * is the floor under every allocator's figure. */
#include "workload.h"

int main(int argc, char **argv) {
  args_init(argc, "random_mixed [ITERS [WS [SEED [MIN MAX]]]]", 5);
  if (argc == 5) usage();
  uint64_t iters = arg_u64(argc, argv, 1, 20000000, 1, UINT64_MAX);
  uint64_t ws = arg_u64(argc, argv, 2, 400, 1, 1u << 30);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min = arg_u64(argc, argv, 4, 16, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 5, 1040, min, 1u << 30);

  struct mixed m;
  mixed_init(&m, ws, seed, min, max);
  double t0 = now_sec();
  mixed_run(&m, iters);
  double seconds = now_sec() - t0;
  mixed_fini(&m);

  printf("RESULT bench=random_mixed iters=%llu ws=%llu seed=%llu min=%llu max=%llu",
         (unsigned long long)iters, (unsigned long long)ws, (unsigned long long)seed,
         (unsigned long long)min, (unsigned long long)max);
  result_end((double)iters, seconds);
  return 0;
}
