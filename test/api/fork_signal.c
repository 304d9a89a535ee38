/* SPDX-License-Identifier: MIT */
/* test-builds: static standard */
/* test-run: balanced HAKMEM_PROFILE=balanced */
/* fork from a signal handler in a program with one thread: the handler may
 * have interrupted malloc or free anywhere, a lock held, and fork must not
 * wait for it (glibc's malloc takes no lock in fork while the process has
 * one thread).  A timer interrupts a loop of mallocs and frees whose slow
 * paths take locks (blocks of 64 KiB to 1 MiB, and huge ones) many times a
 * millisecond; each signal forks, and the child exits at once.  Run also
 * in the balanced profile, whose purger thread makes the process one of two
 * threads: the fork must still not wait for a lock its own thread holds.  A
 * watchdog alarm turns a deadlock into a failure. */
#include "testutil.h"

#include <signal.h>
#include <sys/time.h>

enum { FORKS = 300, TIMEOUT = 30 };

static volatile sig_atomic_t forks, failures;

static void on_timer(int sig) {
  (void)sig;
  int saved = errno;
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) failures++;
  forks++;
  errno = saved;
}

/* The threads of this process. */
static int threads(void) { return (int)proc_status_kib("Threads"); }

static void fork_from_a_signal_handler(void) {
  const char *profile = getenv("HAKMEM_PROFILE");
  if (profile && strcmp(profile, "balanced") == 0 && hakmem_active()) {
    /* free memory enough for the purger thread to start */
    for (int i = 0; i < 8 && threads() < 2; i++) free(malloc(8 * MiB));
    printf("  threads: %d\n", threads());
    CHECK_MSG(threads() >= 2, "the balanced profile's purger thread did not start");
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_timer;
  sa.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGPROF, &sa, NULL) == 0);
  struct itimerval every = {{0, 200}, {0, 200}};  /* 200 us of CPU time */
  CHECK(setitimer(ITIMER_PROF, &every, NULL) == 0);
  alarm(TIMEOUT);
  rng_t rng = {1};
  void *slot[32] = {0};
  while (forks < FORKS) {
    void **s = &slot[rng_below(&rng, 32)];
    free(*s);
    uint64_t r = rng_below(&rng, 100);
    *s = malloc(r == 0 ? rng_size(&rng, 2 * MiB, 4 * MiB) : rng_size(&rng, 64 * 1024, 1 * MiB));
    CHECK(*s != NULL);
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  CHECK(setitimer(ITIMER_PROF, &off, NULL) == 0);
  alarm(0);
  for (int i = 0; i < 32; i++) free(slot[i]);
  printf("  %d forks from the handler\n", (int)forks);
  CHECK_EQ(failures, 0);
}

int main(void) {
  test_init();
  RUN(fork_from_a_signal_handler);
  return 0;
}
