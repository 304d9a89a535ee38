/* SPDX-License-Identifier: MIT */
/* test-builds: standard ubsan hardened */
/* Thread exit.  Threads, one after the other, allocate and free a lot and
 * exit: what they cached must be reused, so the footprint (hakmem's
 * committed bytes, or VmRSS) stays flat over hundreds of them.  Also, a thread's TLS
 * destructors (pthread keys, run after the thread's own exit path has begun)
 * may still malloc and free, including blocks of other threads, and a thread
 * may free at exit what the main thread allocated. */
#include "testutil.h"

#include <pthread.h>

enum { THREADS = 400, LIVE = 3000 };

/* Footprint growth allowed from thread 50 to thread 400.  Each thread holds
 * about 1.5 MiB at its peak: keeping even a tenth of it after exit exceeds
 * the limit. */
#define GROWTH_LIMIT (16 * MiB)

static void *busy_thread(void *arg) {
  rng_t rng = {(uint64_t)(uintptr_t)arg};
  static __thread void *live[LIVE];
  int round, i;
  for (round = 0; round < 3; round++) {
    for (i = 0; i < LIVE; i++) {
      size_t n = rng_size(&rng, TAGGED_MIN, 1024);
      live[i] = malloc(n);
      CHECK(live[i] != NULL);
      tagged_fill(live[i], n, (uint64_t)i);
    }
    for (i = 0; i < LIVE; i++) {
      CHECK_TAGGED(live[i]);
      free(live[i]);
    }
  }
  return NULL;
}

static void exiting_threads_are_reused(void) {
  size_t base = 0, after;
  int i;
  for (i = 0; i < THREADS; i++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, busy_thread, (void *)(uintptr_t)(i + 1)) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    if (i == 49) base = heap_footprint();
  }
  after = heap_footprint();
  printf("  %s after 50 threads %zu KiB, after %d threads %zu KiB\n", footprint_name(),
         base / 1024, THREADS, after / 1024);
  CHECK_MSG(after < base + GROWTH_LIMIT, "%s grew by %zu KiB over %d exited threads",
            footprint_name(), (after - base) / 1024, THREADS - 50);
}

/* ---- allocation in TLS destructors ---- */

static pthread_key_t key;
static _Atomic int destructor_calls;
static void *from_main[64];

/* Runs at thread exit, up to PTHREAD_DESTRUCTOR_ITERATIONS times: frees the
 * value, allocates (a new value for the next iteration, and a block it frees
 * at once), and frees a block of the main thread. */
static void key_destructor(void *value) {
  int iteration = (int)CHECK_TAGGED(value) - 100;
  void *tmp = malloc(5000);
  CHECK(tmp != NULL);
  memset(tmp, 1, 5000);
  free(value);
  free(tmp);
  destructor_calls++;
  if (iteration < 3) {
    void *next = malloc((size_t)(100 + iteration + 1));
    CHECK(next != NULL);
    tagged_fill(next, (size_t)(100 + iteration + 1), 5);
    CHECK(pthread_setspecific(key, next) == 0);
  }
}

static void *thread_with_key(void *arg) {
  void *v = malloc(100);
  void **mine = (void **)arg;
  CHECK(v != NULL);
  tagged_fill(v, 100, 5);
  CHECK(pthread_setspecific(key, v) == 0);
  /* Blocks the main thread allocated, freed here. */
  CHECK_TAGGED(*mine);
  free(*mine);
  return NULL;
}

static void tls_destructors_allocate(void) {
  int i;
  CHECK(pthread_key_create(&key, key_destructor) == 0);
  for (i = 0; i < 64; i++) {
    from_main[i] = malloc(64 + (size_t)i * 100);
    CHECK(from_main[i] != NULL);
    tagged_fill(from_main[i], 64 + (size_t)i * 100, (uint64_t)i);
  }
  for (i = 0; i < 64; i++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_with_key, &from_main[i]) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  CHECK_EQ(destructor_calls, 64 * 4);
  CHECK(pthread_key_delete(key) == 0);
  /* The allocator is still sound. */
  for (i = 0; i < 1000; i++) {
    void *p = malloc((size_t)i + TAGGED_MIN);
    CHECK(p != NULL);
    tagged_fill(p, (size_t)i + TAGGED_MIN, 1);
    CHECK_TAGGED(p);
    free(p);
  }
}

/* A thread that exits with pthread_exit from deep inside, with blocks still
 * allocated that the main thread frees. */
static void *exit_midway(void *arg) {
  void **out = (void **)arg;
  int i;
  for (i = 0; i < 100; i++) {
    out[i] = malloc(200 + (size_t)i);
    CHECK(out[i] != NULL);
    tagged_fill(out[i], 200 + (size_t)i, 9);
  }
  pthread_exit(NULL);
}

static void pthread_exit_leaves_blocks(void) {
  void *blocks[100];
  int k, i;
  for (k = 0; k < 50; k++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, exit_midway, blocks) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    for (i = 0; i < 100; i++) {
      CHECK_TAGGED(blocks[i]);
      free(blocks[i]);
    }
  }
}

int main(void) {
  test_init();
  RUN(exiting_threads_are_reused);
  RUN(tls_destructors_allocate);
  RUN(pthread_exit_leaves_blocks);
  return 0;
}
