/* SPDX-License-Identifier: MIT */
/* thread_once: threads that live for one allocation, as in a server that
 * starts a thread per short request.  THREADS threads in all, ALIVE at a
 * time (the main thread joins the oldest before starting the next); each
 * callocs one block of SIZE bytes, writes its first byte, swaps it into a
 * shared slot (an atomic exchange) and frees the block it took out, which
 * another thread allocated (the first thread's, one the main thread put
 * there before the clock started), and exits.
 *
 * With a single call of each per thread, what is measured is the allocator's
 * set-up of a thread (its thread cache or heap, claimed or created at the
 * first call) and its tear-down at the thread's exit (the cache flushed, the
 * heap handed back or abandoned), beside the system's own cost of a thread,
 * the same for every allocator.  The stacks are small (STACK) so that
 * glibc's cache of stacks keeps all of them, and the system's cost is no
 * mmap per thread.  Two ops per thread (a calloc and a free); the RESULT
 * line adds threads per second and microseconds per thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "bench.h"

#define STACK (256 << 10)

static _Atomic(char *) slot;
static size_t size;

static void *once(void *arg) {
  (void)arg;
  char *p = calloc(1, size);
  if (!p) out_of_memory(size);
  p[0] = 1;
  free(atomic_exchange_explicit(&slot, p, memory_order_acq_rel));
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, "thread_once [THREADS [ALIVE [SIZE]]]", 3);
  uint64_t threads = arg_u64(argc, argv, 1, 5000, 1, UINT64_MAX);
  uint64_t alive = arg_u64(argc, argv, 2, 10, 1, 1024);
  size = arg_u64(argc, argv, 3, 128, 1, 1u << 30);

  pthread_t *tids = xmalloc(alive * sizeof *tids);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, STACK);
  char *first = xmalloc(size);
  first[0] = 1;
  atomic_init(&slot, first);

  double t0 = now_sec();
  for (uint64_t i = 0; i < threads; i++) {
    pthread_t *t = &tids[i % alive];
    if (i >= alive) pthread_join(*t, NULL);
    int rc = pthread_create(t, &attr, once, NULL);
    if (rc) {
      fprintf(stderr, "pthread_create: %s\n", strerror(rc));
      return 1;
    }
  }
  for (uint64_t i = threads > alive ? threads - alive : 0; i < threads; i++) pthread_join(tids[i % alive], NULL);
  double seconds = now_sec() - t0;

  free(atomic_load(&slot)); /* the last thread's block */
  pthread_attr_destroy(&attr);
  free(tids);
  printf("RESULT bench=thread_once threads=%llu alive=%llu size=%zu threads_per_sec=%.0f us_per_thread=%.3f",
         (unsigned long long)threads, (unsigned long long)alive, size, (double)threads / seconds,
         seconds * 1e6 / (double)threads);
  result_end(2.0 * (double)threads, seconds);
  return 0;
}
