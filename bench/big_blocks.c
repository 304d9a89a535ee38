/* SPDX-License-Identifier: MIT */
/* big_blocks: blocks of megabytes, replaced at random.  LIVE slots each hold
 * a block of MIN..MAX bytes (log-uniform: every size ratio equally likely);
 * each iteration frees the block of a random slot and mallocs a new one,
 * which it writes whole, as a program filling a buffer would.  An op is one
 * malloc or one free.  What it measures is the memory life-cycle: an
 * allocator that reuses freed memory without giving it back to the OS at once
 * takes no page faults and makes no system calls here; one that maps and
 * unmaps every block pays both.  Reports the page faults of the loop
 * (minflt) and the peak RSS of the process (maxrss_kb). */
#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

int main(int argc, char **argv) {
  args_init(argc, "big_blocks [ITERS [LIVE [SEED [MIN MAX]]]]", 5);
  if (argc == 5) usage();
  uint64_t iters = arg_u64(argc, argv, 1, 1000, 1, UINT64_MAX);
  uint64_t live = arg_u64(argc, argv, 2, 16, 1, 1u << 20);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min_size = arg_u64(argc, argv, 4, 1u << 20, 1, 1ull << 40);
  uint64_t max_size = arg_u64(argc, argv, 5, 64u << 20, min_size, 1ull << 40);
  double log_min = log((double)min_size), log_span = log((double)max_size) - log_min;

  char **slots = calloc(live, sizeof *slots);
  if (!slots) out_of_memory(live * sizeof *slots);
  uint64_t rng = rng_init(seed);
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);

  double t0 = now_sec();
  for (uint64_t i = 0; i < iters; i++) {
    uint64_t r = rng_next(&rng);
    char **slot = &slots[below((uint32_t)r, live)];
    free(*slot);
    size_t size = (size_t)exp(log_min + log_span * (double)(r >> 32) / 4294967296.0);
    if (size < min_size) size = min_size;
    *slot = xmalloc(size);
    memset(*slot, (int)i, size);
  }
  double seconds = now_sec() - t0;

  getrusage(RUSAGE_SELF, &after);
  for (uint64_t i = 0; i < live; i++) free(slots[i]);
  free(slots);
  printf("RESULT bench=big_blocks iters=%llu live=%llu seed=%llu min=%llu max=%llu minflt=%ld maxrss_kb=%ld",
         (unsigned long long)iters, (unsigned long long)live, (unsigned long long)seed,
         (unsigned long long)min_size, (unsigned long long)max_size, after.ru_minflt - before.ru_minflt,
         after.ru_maxrss);
  result_end(2.0 * (double)iters, seconds);
  return 0;
}
