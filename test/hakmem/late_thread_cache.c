/* SPDX-License-Identifier: MIT */
/* hakmem only.  A thread whose first allocator call comes in the last round
 * of its key destructors (here: a consumer freeing blocks other threads
 * allocated, from a destructor that re-arms itself for glibc's four rounds)
 * sets up a cache that hakmem's own key destructor never hands back.  The
 * next thread, given the same stack and TLS block (as glibc does with a
 * joined thread's stack), takes its place among the live caches: statistics
 * count the threads alive (main and that one) and return, where the registry
 * of caches used to loop for ever. */
#include "testutil.h"

#include <pthread.h>

static pthread_key_t consumer_key;
static void *blocks[200];
static pthread_barrier_t barrier;
static void *volatile sink;
static __thread int tls_probe;
static void *consumer_tls, *worker_tls;  /* where each thread's TLS block was */

static void consumer_destructor(void *value) {
  long round = (long)value;
  if (round < 4) {
    pthread_setspecific(consumer_key, (void *)(round + 1));
    return;
  }
  for (int i = 0; i < 200; i++) free(blocks[i]);
}

static void *consumer(void *arg) {
  consumer_tls = &tls_probe;
  pthread_setspecific(consumer_key, (void *)1L);
  return arg;
}

static void *worker(void *arg) {
  worker_tls = &tls_probe;
  sink = malloc(64);
  pthread_barrier_wait(&barrier);
  pthread_barrier_wait(&barrier);
  return arg;
}

int main(void) {
  static hak_stats_t s;
  test_init();
  CHECK_EQ(pthread_key_create(&consumer_key, consumer_destructor), 0);
  sink = malloc(32);
  for (int i = 0; i < 200; i++) blocks[i] = malloc(48);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, consumer, NULL), 0);
  pthread_join(t, NULL);
  CHECK_EQ(pthread_barrier_init(&barrier, NULL, 2), 0);
  CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
  pthread_barrier_wait(&barrier);
  alarm(10);
  hak_stats_get(&s);
  alarm(0);
  if (worker_tls == consumer_tls) {
    CHECK_EQ(s.threads, 2);
  } else {  /* the C library gave the worker another stack: the consumer's cache is still counted */
    printf("  the worker did not get the consumer's TLS block: %u threads counted\n", s.threads);
    CHECK(s.threads == 2 || s.threads == 3);
  }
  pthread_barrier_wait(&barrier);
  pthread_join(t, NULL);
  hak_stats_get(&s);
  if (worker_tls == consumer_tls) CHECK_EQ(s.threads, 1);
  else CHECK(s.threads == 1 || s.threads == 2);
  return 0;
}
