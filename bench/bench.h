/* SPDX-License-Identifier: MIT */
/* Helpers shared by the benchmark programs: arguments, a cheap PRNG, the
 * clock and the RESULT line.  Each program is a single .c file including this
 * header; none links an allocator, so any malloc can be swapped in with
 * LD_PRELOAD. */
#ifndef BENCH_H
#define BENCH_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static const char *bench_usage_line;

__attribute__((noreturn)) static inline void usage(void) {
  fprintf(stderr, "usage: %s\n", bench_usage_line);
  exit(2);
}

/* Records the usage line and rejects more than max_args arguments. */
static inline void args_init(int argc, const char *usage_line, int max_args) {
  bench_usage_line = usage_line;
  if (argc - 1 > max_args) usage();
}

/* Positional argument i as an integer in [lo, hi]; def when it is absent. */
static inline uint64_t arg_u64(int argc, char **argv, int i, uint64_t def, uint64_t lo, uint64_t hi) {
  if (i >= argc) return def;
  const char *s = argv[i];
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || *s == '-' || v < lo || v > hi) usage();
  return v;
}

/* Positional argument i as a number in (0, hi]; def when it is absent. */
static inline double arg_double(int argc, char **argv, int i, double def, double hi) {
  if (i >= argc) return def;
  char *end;
  double v = strtod(argv[i], &end);
  if (end == argv[i] || *end || !(v > 0 && v <= hi)) usage();
  return v;
}

/* xorshift64: three shifts and three xors per number. */
static inline uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* A non-zero PRNG state from any seed (one splitmix64 step). */
static inline uint64_t rng_init(uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z ? z : 1;
}

/* Maps 32 random bits to [0, n) with a multiply and a shift. */
static inline uint64_t below(uint32_t bits, uint64_t n) { return (uint64_t)bits * n >> 32; }

static inline double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The resident set of the process in KiB, or -1, read with raw system calls:
 * not even stdio's buffers are allocated, so any moment may call it. */
static inline long rss_kb(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long resident = 0;
  const char *p = buf;
  while (*p && *p != ' ') p++;
  for (p++; *p >= '0' && *p <= '9'; p++) resident = resident * 10 + (*p - '0');
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Gives stdout a buffer in static memory, line by line: the C library would
 * otherwise malloc one at the first printf, a call to the allocator under
 * test at a moment a program promises none (memory_return's idle phase,
 * soak's epochs).  Called before anything is printed. */
static inline void stdout_static_buffer(void) {
  static char buf[BUFSIZ];
  setvbuf(stdout, buf, _IOLBF, sizeof buf);
}

__attribute__((noinline, cold, noreturn)) static void out_of_memory(size_t size) {
  fprintf(stderr, "malloc(%zu) failed\n", size);
  exit(1);
}

static inline void *xmalloc(size_t size) {
  void *p = malloc(size);
  if (__builtin_expect(p == NULL, 0)) out_of_memory(size);
  return p;
}

/* Ends the RESULT line the caller started with its own fields.  An op is one
 * malloc or one free call. */
static inline void result_end(double ops, double seconds) {
  printf(" ops_per_sec=%.0f seconds=%.6f\n", ops / seconds, seconds);
}

#endif
