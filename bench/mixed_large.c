/* SPDX-License-Identifier: MIT */
/* mixed_large: small and large blocks together, 8 B up to 1 MiB.  The scheme
 * of random_mixed (WS slots, each iteration frees or fills a random slot, one
 * op each) with log-uniform sizes: an octave [2^k, 2^(k+1)), k in 3..19, is
 * drawn uniformly, then a size within it, so most blocks are small while most
 * bytes are in large ones.  Each new block gets one write per 4 KiB page, so
 * the memory is really used and page faults show how much of it the
 * allocator gives back to the OS and takes again.  Reports the page faults of
 * the loop (minflt) and the peak RSS of the process (maxrss_kb). */
#include <sys/resource.h>

#include "bench.h"

#define MIN_SHIFT 3
#define OCTAVES 17 /* sizes 8 B .. 1 MiB - 1 */
#define PAGE 4096

/* The low 16 bits pick the octave, the high 16 the size within it. */
static size_t log_uniform_size(uint32_t bits) {
  unsigned shift = MIN_SHIFT + (unsigned)below(bits << 16, OCTAVES);
  return ((size_t)1 << shift) + ((size_t)(bits >> 16) << shift >> 16);
}

int main(int argc, char **argv) {
  args_init(argc, "mixed_large [ITERS [WS [SEED]]]", 3);
  uint64_t iters = arg_u64(argc, argv, 1, 200000, 1, UINT64_MAX);
  uint64_t ws = arg_u64(argc, argv, 2, 500, 1, 1u << 30);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);

  char **slots = calloc(ws, sizeof *slots);
  if (!slots) out_of_memory(ws * sizeof *slots);
  uint64_t rng = rng_init(seed);
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);

  double t0 = now_sec();
  for (uint64_t i = 0; i < iters; i++) {
    uint64_t r = rng_next(&rng);
    char **slot = &slots[below((uint32_t)r, ws)];
    if (*slot) {
      free(*slot);
      *slot = NULL;
    } else {
      size_t size = log_uniform_size((uint32_t)(r >> 32));
      char *p = xmalloc(size);
      for (size_t off = 0; off < size; off += PAGE) p[off] = (char)i;
      *slot = p;
    }
  }
  double seconds = now_sec() - t0;

  getrusage(RUSAGE_SELF, &after);
  for (uint64_t i = 0; i < ws; i++) free(slots[i]);
  free(slots);
  printf("RESULT bench=mixed_large iters=%llu ws=%llu seed=%llu minflt=%ld maxrss_kb=%ld",
         (unsigned long long)iters, (unsigned long long)ws, (unsigned long long)seed,
         after.ru_minflt - before.ru_minflt, after.ru_maxrss);
  result_end((double)iters, seconds);
  return 0;
}
