/* SPDX-License-Identifier: MIT */
/* test-env: HAKMEM_TINY_FRONT_DUMP=1 */
/* test-not-emulated: qemu-user forking while threads start and exit fails its own assertions (cpu_exec: cpu == current_cpu) and hangs */
/* hakmem only.  fork while other threads exit and print their per-class
 * traffic (HAKMEM_TINY_FRONT_DUMP, under a lock of its own): the child must
 * be able to start and join a thread of its own, whose exit prints too.  A
 * lock held by an exiting thread at the fork stays held in the child unless
 * the fork handlers take it first. */
#include "testutil.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sys/wait.h>

static void *volatile sink;
static atomic_bool stop;

static void *worker(void *arg) {
  sink = malloc(64);
  free(sink);
  return arg;
}

static void *spawner(void *arg) {
  while (!atomic_load(&stop)) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
    pthread_join(t, NULL);
  }
  return arg;
}

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  int err = dup(2), null = open("/dev/null", O_WRONLY);
  CHECK(err >= 0 && null >= 0);
  dup2(null, 2);  /* the threads' traffic, one table each */
  pthread_t s;
  CHECK_EQ(pthread_create(&s, NULL, spawner, NULL), 0);
  int hung = 0;
  for (int i = 0; i < 40; i++) {
    usleep(5000);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      alarm(5);
      pthread_t t;
      if (pthread_create(&t, NULL, worker, NULL) != 0) _exit(2);
      pthread_join(t, NULL);
      _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    bool alarm_rang = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
    hung += alarm_rang;
    CHECK_MSG(alarm_rang || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "a child: %s", describe_status(status));
  }
  atomic_store(&stop, true);
  pthread_join(s, NULL);
  dup2(err, 2);
  CHECK_MSG(hung == 0, "%d of 40 children hung starting a thread after the fork", hung);
  return 0;
}
