/* SPDX-License-Identifier: MIT */
/* fixed_size: malloc and free of one size.  A ring of RING live blocks sits
 * between a block's malloc and its free, so the allocator cannot just hand the
 * block it was given back.  Each iteration frees the oldest block and mallocs
 * its replacement: two ops. */
#include "bench.h"

#define RING 64

int main(int argc, char **argv) {
  args_init(argc, "fixed_size [SIZE [ITERS]]", 2);
  uint64_t size = arg_u64(argc, argv, 1, 64, 1, 1u << 30);
  uint64_t iters = arg_u64(argc, argv, 2, 20000000, 1, UINT64_MAX);

  char *ring[RING];
  for (int i = 0; i < RING; i++) ring[i] = xmalloc(size);

  double t0 = now_sec();
  for (uint64_t i = 0; i < iters; i++) {
    char **slot = &ring[i % RING];
    free(*slot);
    char *p = xmalloc(size);
    p[0] = (char)i;
    *slot = p;
  }
  double seconds = now_sec() - t0;

  for (int i = 0; i < RING; i++) free(ring[i]);
  printf("RESULT bench=fixed_size size=%llu iters=%llu ring=%d", (unsigned long long)size,
         (unsigned long long)iters, RING);
  result_end(2.0 * (double)iters, seconds);
  return 0;
}
