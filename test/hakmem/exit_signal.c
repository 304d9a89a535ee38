/* SPDX-License-Identifier: MIT */
/* test-builds: standard */
/* hakmem only.  exit() from a signal handler that interrupted malloc or free
 * with one of hakmem's locks held, where the reports at exit (HAKMEM_STATS,
 * the heap profile's leaks) would take that lock: they are left out with a
 * line, and the process exits, rather than waiting for ever on a lock its
 * own thread holds.  Each child loops over mallocs and frees whose slow
 * paths take locks (blocks of 64 KiB to 1 MiB, and huge ones) until a
 * timer's handler calls exit(); one that has not exited in TIMEOUT seconds
 * is killed, and fails the test. */
#include "testutil.h"

#include <signal.h>
#include <sys/time.h>

enum { CHILDREN = 40, TIMEOUT = 10 };
static const char left_out[] = "hakmem: reports at exit left out";

static void on_timer(int sig) {
  (void)sig;
  exit(0);
}

static void churn_until_exit(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_timer;
  CHECK(sigaction(SIGPROF, &sa, NULL) == 0);
  struct itimerval once = {{0, 0}, {0, 2000 + getpid() % 3000}};  /* 2-5 ms of CPU time */
  CHECK(setitimer(ITIMER_PROF, &once, NULL) == 0);
  rng_t rng = {(uint64_t)getpid()};
  void *slot[32] = {0};
  for (;;) {
    void **s = &slot[rng_below(&rng, 32)];
    free(*s);
    uint64_t r = rng_below(&rng, 100);
    *s = malloc(r == 0 ? rng_size(&rng, 2 * MiB, 4 * MiB) : rng_size(&rng, 64 * 1024, 1 * MiB));
    CHECK(*s != NULL);
  }
}

static void exit_from_a_signal_handler(void) {
  const char *env[] = {"HAKMEM_STATS=1", "HAKMEM_PROF_LEAKS=1", "HAKMEM_PROF_SAMPLE=65536", NULL};
  unsigned interrupted = 0;
  for (int i = 0; i < CHILDREN; i++) {
    child_result_t res;
    run_self("churn", env, TIMEOUT, &res);
    CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "child %d: %s\n%s", i,
              describe_status(res.status), res.err);
    bool left = strstr(res.err, left_out) != NULL;
    /* the reports, or the line that says why not */
    CHECK_MSG(left || strstr(res.err, "hakmem"), "child %d wrote neither its reports nor why not", i);
    interrupted += left;
  }
  printf("  %u of %d exits came inside malloc or free\n", interrupted, CHILDREN);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "churn") == 0) churn_until_exit();
  test_init();
  RUN(exit_from_a_signal_handler);
  return 0;
}
