/* SPDX-License-Identifier: MIT */
/* test-timeout: 300 */
/* Two threads free the same large block of 300 000 bytes at once (a double
 * free), then each mallocs one of the size, the second 2 ms later, so not
 * in the same instant: every attempt must end in abort() with a hakmem:
 * line.  A free whose overflow read the block's class from the class map
 * again, after the other free had given its units back (its entry cleared),
 * left it on the thread's list: both threads were handed the block, and no
 * line (about 4 attempts in 1 000).  Each attempt in a child of its own. */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>

#define ATTEMPTS 1500
#define SIZE 300000

static void *volatile block;
static void *got[2];
static pthread_barrier_t both;

static void *free_then_malloc(void *arg) {
  long me = (long)arg;
  free(opaque_ptr(malloc(64)));  /* each thread with a cache of its own */
  pthread_barrier_wait(&both);
  free(block);
  pthread_barrier_wait(&both);
  if (me) usleep(2000);
  got[me] = malloc(SIZE);
  return NULL;
}

static void attempt(void *arg) {
  block = malloc(SIZE);
  CHECK(block != NULL);
  CHECK_EQ(pthread_barrier_init(&both, NULL, 2), 0);
  pthread_t t[2];
  for (long i = 0; i < 2; i++) CHECK_EQ(pthread_create(&t[i], NULL, free_then_malloc, (void *)i), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  fprintf(stderr, "no abort: the threads got %p and %p\n", got[0], got[1]);
}

int main(void) {
  test_init();
  for (int i = 0; i < ATTEMPTS; i++) {
    child_result_t res;
    run_in_child(attempt, NULL, 30, &res);
    bool caught = WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGABRT && strstr(res.err, "hakmem: ");
    CHECK_MSG(caught, "attempt %d: %s, stderr: %s", i, describe_status(res.status), res.err);
  }
  printf("  %d double frees, each caught with a hakmem: line\n", ATTEMPTS);
  return 0;
}
