/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* fork in a process where another library registered fork handlers before
 * the allocator did (libatfork.so, linked to this program, registers them in
 * its constructor, which runs before the allocator's when it is preloaded or
 * linked into the program), and allocates in every one of them on the slow
 * paths: the C library runs that library's prepare handler after the
 * allocator's, and its parent and child handlers before the allocator's,
 * while the allocator's locks are held.  Each fork must complete, with
 * every handler done, in the parent and in the child, with another thread
 * allocating meanwhile. */
#include "testutil.h"

#include <stdatomic.h>
#include <sys/wait.h>

int atfork_ran(int which);

static atomic_bool stop;

static void *churn(void *arg) {
  size_t n = 0;
  while (!atomic_load(&stop)) {
    void *p = malloc(16 + n++ % 40000);
    CHECK(p != NULL);
    free(p);
  }
  return arg;
}

static void forks_complete(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, churn, NULL) == 0);
  for (int i = 1; i <= 20; i++) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      alarm(20);
      if (atfork_ran(2) != 1) _exit(2);  /* the child handler ran here, once */
      void *p = malloc(5000);
      free(p);
      _exit(p ? 0 : 3);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork %d: child %s", i, describe_status(status));
    CHECK_EQ(atfork_ran(0), i);
    CHECK_EQ(atfork_ran(1), i);
  }
  atomic_store(&stop, true);
  CHECK(pthread_join(t, NULL) == 0);
}

int main(void) {
  test_init();
  RUN(forks_complete);
  return 0;
}
