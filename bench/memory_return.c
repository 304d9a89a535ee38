/* SPDX-License-Identifier: MIT */
/* memory_return: how fast a program's memory goes back once it has freed it
 * and sits idle.  Allocates PEAK MiB of blocks of MIN..MAX bytes
 * (log-uniform), writing each whole, frees them all in a random order, then
 * calls the allocator no more: every INTERVAL ms for SECONDS it samples the
 * resident set (read with raw system calls, and printed through a stdout
 * whose buffer is static, so that not even stdio's buffers are allocated).
 * Prints the RSS at the peak and after freeing, then one
 * `SAMPLE t_ms=... rss_kb=...` line per sample, then the RESULT line: the
 * time the RSS took to fall below 10 % of the peak (or -1) and the last
 * sample.  ops_per_sec is the malloc and free calls per second of the fill
 * and free phases. */
#include <string.h>
#include <math.h>

#include "bench.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  args_init(argc, "memory_return [PEAK_MIB [SECONDS [INTERVAL_MS [SEED [MIN MAX]]]]]", 6);
  if (argc == 6) usage();
  uint64_t peak_mib = arg_u64(argc, argv, 1, 1024, 1, 1u << 20);
  uint64_t seconds = arg_u64(argc, argv, 2, 5, 0, 3600);
  uint64_t interval = arg_u64(argc, argv, 3, 100, 1, 60000);
  uint64_t seed = arg_u64(argc, argv, 4, 1, 0, UINT64_MAX);
  uint64_t min_size = arg_u64(argc, argv, 5, 16, 1, 1u << 30);
  uint64_t max_size = arg_u64(argc, argv, 6, 32768, min_size, 1u << 30);
  double log_min = log((double)min_size), log_span = log((double)max_size) - log_min;
  stdout_static_buffer(); /* the first printf comes after the frees */

  uint64_t rng = rng_init(seed), target = peak_mib << 20, total = 0;
  size_t cap = 1 << 16, count = 0;
  char **blocks = xmalloc(cap * sizeof *blocks);
  long start_kb = rss_kb();
  double t0 = now_sec();
  while (total < target) {
    size_t size = (size_t)exp(log_min + log_span * (double)(uint32_t)rng_next(&rng) / 4294967296.0);
    if (count == cap) {
      blocks = realloc(blocks, (cap *= 2) * sizeof *blocks);
      if (!blocks) out_of_memory(cap * sizeof *blocks);
    }
    blocks[count] = xmalloc(size);
    memset(blocks[count++], 1, size);
    total += size;
  }
  long peak_kb = rss_kb();
  for (size_t i = count; i > 1; i--) {
    size_t j = (size_t)below((uint32_t)rng_next(&rng), i);
    char *t = blocks[j];
    blocks[j] = blocks[i - 1];
    blocks[i - 1] = t;
  }
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  free(blocks);
  double busy = now_sec() - t0;
  long freed_kb = rss_kb();
  printf("PEAK start_kb=%ld peak_kb=%ld freed_kb=%ld blocks=%zu\n", start_kb, peak_kb, freed_kb, count);

  long below_at = freed_kb < peak_kb / 10 ? 0 : -1, last = freed_kb;
  for (uint64_t t = interval; t <= seconds * 1000; t += interval) {
    sleep_ms((long)interval);
    last = rss_kb();
    printf("SAMPLE t_ms=%llu rss_kb=%ld\n", (unsigned long long)t, last);
    if (below_at < 0 && last < peak_kb / 10) below_at = (long)t;
  }
  printf("RESULT bench=memory_return peak_mib=%llu seconds=%llu interval_ms=%llu seed=%llu min=%llu max=%llu "
         "peak_kb=%ld freed_kb=%ld final_kb=%ld below_10pct_ms=%ld",
         (unsigned long long)peak_mib, (unsigned long long)seconds, (unsigned long long)interval,
         (unsigned long long)seed, (unsigned long long)min_size, (unsigned long long)max_size, peak_kb, freed_kb,
         last, below_at);
  result_end(2.0 * (double)count, busy);
  return 0;
}
