/* SPDX-License-Identifier: MIT */
/* big_blocks: blocks of megabytes, replaced at random.  LIVE slots each hold
 * a block of MIN..MAX bytes (log-uniform: every size ratio equally likely);
 * each iteration frees the block of a random slot and mallocs a new one,
 * which it writes whole, as a program filling a buffer would.  An op is one
 * malloc or one free.  What it measures is the memory life-cycle: an
 * allocator that reuses freed memory without giving it back to the OS at once
 * takes no page faults and makes no system calls here; one that maps and
 * unmaps every block pays both.  Reports the page faults of the loop
 * (minflt) and the peak RSS of the process (maxrss_kb).
 *
 * With THREADS, that many threads each run ITERS iterations over LIVE slots
 * of their own, at once; with WRITE "first", only a block's first byte is
 * written: the allocator's own cost, where several threads take and give
 * back blocks of megabytes at a high rate (buffers of a server's requests). */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

typedef struct worker {
  uint64_t iters, live, seed, min_size, max_size;
  int whole;  /* write a block whole, else its first byte */
  pthread_t tid;
  double start, end;  /* its loop's */
} worker_t;

static pthread_barrier_t start;

static void *replace_blocks(void *arg) {
  worker_t *w = arg;
  double log_min = log((double)w->min_size), log_span = log((double)w->max_size) - log_min;
  char **slots = calloc(w->live, sizeof *slots);
  if (!slots) out_of_memory(w->live * sizeof *slots);
  uint64_t rng = rng_init(w->seed);
  pthread_barrier_wait(&start);
  w->start = now_sec();
  for (uint64_t i = 0; i < w->iters; i++) {
    uint64_t r = rng_next(&rng);
    char **slot = &slots[below((uint32_t)r, w->live)];
    free(*slot);
    size_t size = (size_t)exp(log_min + log_span * (double)(r >> 32) / 4294967296.0);
    if (size < w->min_size) size = w->min_size;
    *slot = xmalloc(size);
    if (w->whole) memset(*slot, (int)i, size);
    else **slot = (char)i;
  }
  w->end = now_sec();
  pthread_barrier_wait(&start);
  for (uint64_t i = 0; i < w->live; i++) free(slots[i]);
  free(slots);
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, "big_blocks [ITERS [LIVE [SEED [MIN MAX [THREADS [whole|first]]]]]]", 7);
  if (argc == 5) usage();
  uint64_t iters = arg_u64(argc, argv, 1, 1000, 1, UINT64_MAX);
  uint64_t live = arg_u64(argc, argv, 2, 16, 1, 1u << 20);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min_size = arg_u64(argc, argv, 4, 1u << 20, 1, 1ull << 40);
  uint64_t max_size = arg_u64(argc, argv, 5, 64u << 20, min_size, 1ull << 40);
  uint64_t threads = arg_u64(argc, argv, 6, 1, 1, 1024);
  const char *write = argc > 7 ? argv[7] : "whole";
  if (strcmp(write, "whole") && strcmp(write, "first")) usage();

  /* the first worker is the main thread, as in a program of one thread */
  worker_t *workers = calloc(threads, sizeof *workers);
  if (!workers) out_of_memory(threads * sizeof *workers);
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  for (uint64_t t = 0; t < threads; t++) {
    workers[t] = (worker_t){iters, live, seed + t, min_size, max_size, !strcmp(write, "whole"), 0, 0, 0};
    if (t && pthread_create(&workers[t].tid, NULL, replace_blocks, &workers[t])) {
      fprintf(stderr, "big_blocks: pthread_create failed\n");
      return 1;
    }
  }
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  replace_blocks(&workers[0]);
  getrusage(RUSAGE_SELF, &after);
  double first = workers[0].start, last = workers[0].end;
  for (uint64_t t = 1; t < threads; t++) {
    pthread_join(workers[t].tid, NULL);
    first = workers[t].start < first ? workers[t].start : first;
    last = workers[t].end > last ? workers[t].end : last;
  }
  double seconds = last - first;
  free(workers);
  printf("RESULT bench=big_blocks iters=%llu live=%llu seed=%llu min=%llu max=%llu threads=%llu write=%s "
         "minflt=%ld maxrss_kb=%ld",
         (unsigned long long)iters, (unsigned long long)live, (unsigned long long)seed,
         (unsigned long long)min_size, (unsigned long long)max_size, (unsigned long long)threads, write,
         after.ru_minflt - before.ru_minflt, after.ru_maxrss);
  result_end(2.0 * (double)iters * (double)threads, seconds);
  return 0;
}
