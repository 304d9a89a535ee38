/* SPDX-License-Identifier: MIT */
/* random_mixed: the reference benchmark.  WS slots; each iteration picks a
 * random slot and frees its block if it holds one, otherwise mallocs a block
 * of a random size in MIN..MAX and writes its first byte.  Every iteration is
 * one op.  The loop is kept minimal: its own cost is the floor under every
 * allocator's figure. */
#include "bench.h"

int main(int argc, char **argv) {
  args_init(argc, "random_mixed [ITERS [WS [SEED [MIN MAX]]]]", 5);
  if (argc == 5) usage();
  uint64_t iters = arg_u64(argc, argv, 1, 20000000, 1, UINT64_MAX);
  uint64_t ws = arg_u64(argc, argv, 2, 400, 1, 1u << 30);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min = arg_u64(argc, argv, 4, 16, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 5, 1040, min, 1u << 30);

  void **slots = calloc(ws, sizeof *slots);
  if (!slots) out_of_memory(ws * sizeof *slots);
  uint64_t span = max - min + 1;
  uint64_t rng = rng_init(seed);

  double t0 = now_sec();
  for (uint64_t n = iters; n; n--) {
    uint64_t r = rng_next(&rng);
    void **slot = &slots[below((uint32_t)r, ws)];
    void *old = *slot;
    if (old) {
      *slot = NULL;
      free(old);
    } else {
      char *p = malloc(min + below((uint32_t)(r >> 32), span));
      p[0] = (char)n; /* a NULL from malloc crashes here: no check in the loop */
      *slot = p;
    }
  }
  double seconds = now_sec() - t0;

  for (uint64_t i = 0; i < ws; i++) free(slots[i]);
  free(slots);
  printf("RESULT bench=random_mixed iters=%llu ws=%llu seed=%llu min=%llu max=%llu",
         (unsigned long long)iters, (unsigned long long)ws, (unsigned long long)seed,
         (unsigned long long)min, (unsigned long long)max);
  result_end((double)iters, seconds);
  return 0;
}
