/* SPDX-License-Identifier: MIT */
/* patterns: free orders.  Each round mallocs BLOCKS blocks of 16..128 bytes
 * (random sizes, drawn once before timing), writing the first byte of each,
 * then frees them all in the order of the pattern:
 *   lifo        last allocated first
 *   fifo        first allocated first
 *   interleave  every other block first, then the rest (a checkerboard)
 *   random      a random permutation, drawn once before timing
 * 2 * BLOCKS ops per round.  PATTERN `all` runs the four one after the other,
 * one RESULT line each. */
#include <string.h>

#include "bench.h"

enum pattern { LIFO, FIFO, INTERLEAVE, RANDOM };
#define NPATTERNS (RANDOM + 1)
static const char *const pattern_names[NPATTERNS] = {"lifo", "fifo", "interleave", "random"};

static void free_order(enum pattern pattern, uint32_t *order, uint64_t n, uint64_t *rng) {
  uint64_t k = 0;
  switch (pattern) {
  case LIFO:
    for (uint64_t i = n; i-- > 0;) order[k++] = (uint32_t)i;
    break;
  case FIFO:
    for (uint64_t i = 0; i < n; i++) order[k++] = (uint32_t)i;
    break;
  case INTERLEAVE:
    for (uint64_t i = 0; i < n; i += 2) order[k++] = (uint32_t)i;
    for (uint64_t i = 1; i < n; i += 2) order[k++] = (uint32_t)i;
    break;
  case RANDOM:
    for (uint64_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) {
      uint64_t j = below((uint32_t)rng_next(rng), i + 1);
      uint32_t t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    break;
  }
}

static void run(enum pattern pattern, uint64_t blocks, uint64_t rounds, uint64_t seed) {
  uint64_t rng = rng_init(seed);
  uint32_t *sizes = calloc(blocks, sizeof *sizes);
  uint32_t *order = calloc(blocks, sizeof *order);
  char **ptrs = calloc(blocks, sizeof *ptrs);
  if (!sizes || !order || !ptrs) out_of_memory(blocks * sizeof *ptrs);
  for (uint64_t i = 0; i < blocks; i++) sizes[i] = 16 + (uint32_t)below((uint32_t)rng_next(&rng), 113);
  free_order(pattern, order, blocks, &rng);

  double t0 = now_sec();
  for (uint64_t r = 0; r < rounds; r++) {
    for (uint64_t i = 0; i < blocks; i++) {
      char *p = xmalloc(sizes[i]);
      p[0] = (char)i;
      ptrs[i] = p;
    }
    for (uint64_t i = 0; i < blocks; i++) free(ptrs[order[i]]);
  }
  double seconds = now_sec() - t0;

  free(sizes);
  free(order);
  free(ptrs);
  printf("RESULT bench=patterns pattern=%s blocks=%llu rounds=%llu seed=%llu", pattern_names[pattern],
         (unsigned long long)blocks, (unsigned long long)rounds, (unsigned long long)seed);
  result_end(2.0 * (double)blocks * (double)rounds, seconds);
}

int main(int argc, char **argv) {
  args_init(argc, "patterns [lifo|fifo|interleave|random|all [BLOCKS [ROUNDS [SEED]]]]", 4);
  const char *name = argc > 1 ? argv[1] : "all";
  uint64_t blocks = arg_u64(argc, argv, 2, 1000, 1, UINT32_MAX);
  uint64_t rounds = arg_u64(argc, argv, 3, 10000, 1, UINT64_MAX);
  uint64_t seed = arg_u64(argc, argv, 4, 1, 0, UINT64_MAX);

  int ran = 0;
  for (enum pattern p = 0; p < NPATTERNS; p++) {
    if (strcmp(name, "all") == 0 || strcmp(name, pattern_names[p]) == 0) {
      run(p, blocks, rounds, seed);
      ran = 1;
    }
  }
  if (!ran) usage();
  return 0;
}
