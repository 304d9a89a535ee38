/* SPDX-License-Identifier: MIT */
/* test-builds: static standard hardened */
/* test-timeout: 60 */
/* Threads whose first allocator call comes in the last round of their key
 * destructors (the destructor re-arms itself three times, then mallocs and
 * frees), made and joined eight at a time on stacks of 64 MiB, which the C
 * library unmaps at the join rather than keep: meanwhile one thread reads
 * the statistics (mallinfo2) in a loop; then the main thread forks children
 * that exit at once.  Neither may read a cache from memory its thread no
 * longer owns: the process and every child must live. */
#include "testutil.h"

#include <malloc.h>
#include <stdatomic.h>
#include <pthread.h>

static pthread_key_t late_key;
static atomic_bool done;
static void *volatile sink;

static void late_destructor(void *value) {
  long round = (long)value;
  if (round < 4) {
    pthread_setspecific(late_key, (void *)(round + 1));
    return;
  }
  void *p[40];
  for (int i = 0; i < 40; i++) p[i] = malloc(16 + (size_t)i * 24);
  for (int i = 0; i < 40; i++) free(p[i]);
}

static void *late(void *arg) {
  pthread_setspecific(late_key, (void *)1L);
  return arg;
}

static void *reader(void *arg) {
  while (!atomic_load(&done)) {
    struct mallinfo2 m = mallinfo2();
    sink = (void *)m.uordblks;
  }
  return arg;
}

/* Threads made and joined eight at a time, `rounds` times. */
static void churn(int rounds) {
  pthread_attr_t attr;
  CHECK_EQ(pthread_attr_init(&attr), 0);
  CHECK_EQ(pthread_attr_setstacksize(&attr, (size_t)64 << 20), 0);
  for (int r = 0; r < rounds; r++) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++) CHECK_EQ(pthread_create(&t[i], &attr, late, NULL), 0);
    for (int i = 0; i < 8; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  }
  pthread_attr_destroy(&attr);
}

static void *churner(void *arg) {
  churn(400);
  atomic_store(&done, true);
  return arg;
}

int main(void) {
  test_init();
  CHECK_EQ(pthread_key_create(&late_key, late_destructor), 0);
  sink = malloc(32);
  /* the statistics read while the threads come and go */
  pthread_t r;
  CHECK_EQ(pthread_create(&r, NULL, reader, NULL), 0);
  churn(400);
  atomic_store(&done, true);
  CHECK_EQ(pthread_join(r, NULL), 0);
  /* forks meanwhile */
  atomic_store(&done, false);
  pthread_t c;
  CHECK_EQ(pthread_create(&c, NULL, churner, NULL), 0);
  int children = 0;
  while (!atomic_load(&done)) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      free(malloc(64));
      _exit(0);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: %s", children, describe_status(status));
    children++;
  }
  CHECK_EQ(pthread_join(c, NULL), 0);
  printf("  %d children, all exited cleanly\n", children);
  return 0;
}
