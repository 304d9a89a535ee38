/* SPDX-License-Identifier: MIT */
/* tiny_hot: the hot path for small blocks.  Each cycle mallocs BATCH blocks of
 * SIZE bytes, writing the first byte of each, then frees them in the same
 * order; 2 * BATCH ops per cycle. */
#include "bench.h"

int main(int argc, char **argv) {
  args_init(argc, "tiny_hot [SIZE [BATCH [CYCLES]]]", 3);
  uint64_t size = arg_u64(argc, argv, 1, 16, 1, 1u << 30);
  uint64_t batch = arg_u64(argc, argv, 2, 100, 1, 1u << 30);
  uint64_t cycles = arg_u64(argc, argv, 3, 200000, 1, UINT64_MAX);

  char **blocks = calloc(batch, sizeof *blocks);
  if (!blocks) out_of_memory(batch * sizeof *blocks);

  double t0 = now_sec();
  for (uint64_t c = 0; c < cycles; c++) {
    for (uint64_t i = 0; i < batch; i++) {
      char *p = xmalloc(size);
      p[0] = (char)i;
      blocks[i] = p;
    }
    for (uint64_t i = 0; i < batch; i++) free(blocks[i]);
  }
  double seconds = now_sec() - t0;

  free(blocks);
  printf("RESULT bench=tiny_hot size=%llu batch=%llu cycles=%llu", (unsigned long long)size,
         (unsigned long long)batch, (unsigned long long)cycles);
  result_end(2.0 * (double)batch * (double)cycles, seconds);
  return 0;
}
