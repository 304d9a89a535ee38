/* SPDX-License-Identifier: MIT */
/* test-not-emulated: qemu-user wakes pthread_join before the thread is gone, which tgkill still finds */
/* hakmem only.  A thread whose first allocator call comes in the last round
 * of its key destructors gets a cache that nothing hands back (the C library
 * runs no further round).  When the thread's stack then goes away (here a
 * stack the program gave it, and unmaps), the statistics, fork, and the exit
 * of another thread must not touch that cache: each case reads or moves the
 * registry of live caches after the stack is gone. */
#include <limits.h>
#include <malloc.h>
#include <sys/wait.h>
#include "hakmem.h"
#include "testutil.h"

static pthread_key_t key;

/* Sets the key again for three rounds, then allocates for the first time. */
static void late_destructor(void *v) {
  long round = (long)v;
  if (round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    CHECK(pthread_setspecific(key, (void *)(round + 1)) == 0);
    return;
  }
  void *volatile p = malloc(100);
  free(p);
}

static void *arm(void *arg) {
  CHECK(pthread_setspecific(key, (void *)1L) == 0);
  return arg;
}

/* Runs a thread whose cache is set up in its last destructor round, on a
 * stack that is unmapped once it has ended. */
static void leak_a_cache(void) {
  CHECK(pthread_key_create(&key, late_destructor) == 0);
  run_on_own_stack(arm, NULL);
}

static void statistics_after_the_stack_is_gone(void) {
  free(malloc(100));  /* the main thread's cache */
  leak_a_cache();
  hak_stats_t s;
  hak_stats_get(&s);
  CHECK_EQ(s.threads, 1);
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.uordblks > 0);
}

static void fork_after_the_stack_is_gone(void) {
  free(malloc(100));
  leak_a_cache();
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    hak_stats_t s;
    hak_stats_get(&s);
    _exit(s.threads == 1 ? 0 : 1);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %s", describe_status(status));
}

/* A thread registered before the leaked cache exits after it: its entry's
 * place goes to the last one, the leaked cache's. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_open = PTHREAD_COND_INITIALIZER;
static bool open_gate;

static void *wait_for_gate(void *arg) {
  free(malloc(100));
  CHECK(pthread_mutex_lock(&gate_lock) == 0);
  while (!open_gate) CHECK(pthread_cond_wait(&gate_open, &gate_lock) == 0);
  CHECK(pthread_mutex_unlock(&gate_lock) == 0);
  return arg;
}

static void earlier_thread_exits_after(void) {
  free(malloc(100));
  pthread_t early;
  CHECK(pthread_create(&early, NULL, wait_for_gate, NULL) == 0);
  hak_stats_t s;
  do hak_stats_get(&s); while (s.threads < 2);  /* the main thread and the early one */
  leak_a_cache();
  CHECK(pthread_mutex_lock(&gate_lock) == 0);
  open_gate = true;
  CHECK(pthread_cond_signal(&gate_open) == 0);
  CHECK(pthread_mutex_unlock(&gate_lock) == 0);
  CHECK(pthread_join(early, NULL) == 0);
  hak_stats_get(&s);
  CHECK_EQ(s.threads, 1);
}

/* Where the check that a thread is alive is refused (a seccomp filter
 * answering EPERM to tgkill), live threads are taken for alive all the same:
 * rounds of threads exiting in the order they came keep the registry right
 * (a refusal taken for an ended thread dropped live ones, and a later exit
 * read outside the registry). */
static void *allocate_and_wait(void *arg) {
  free(malloc(100));
  pthread_barrier_wait(arg);  /* every thread has its cache */
  pthread_barrier_wait(arg);  /* the statistics are taken */
  return NULL;
}

static void signal_check_refused(void) {
  free(malloc(100));
  if (!refuse_syscall(SYS_tgkill, EPERM)) {
    printf("  skipped: no seccomp filter here\n");
    return;
  }
  for (int round = 0; round < 50; round++) {
    enum { T = 4 };
    pthread_barrier_t started;
    CHECK(pthread_barrier_init(&started, NULL, T + 1) == 0);
    pthread_t t[T];
    for (int i = 0; i < T; i++) CHECK(pthread_create(&t[i], NULL, allocate_and_wait, &started) == 0);
    pthread_barrier_wait(&started);
    hak_stats_t s;
    hak_stats_get(&s);
    CHECK_EQ(s.threads, 1 + T);  /* all alive, each with its cache */
    pthread_barrier_wait(&started);
    for (int i = 0; i < T; i++) CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(pthread_barrier_destroy(&started) == 0);
  }
  hak_stats_t s;
  hak_stats_get(&s);
  CHECK_EQ(s.threads, 1);
}

static const self_case_t cases[] = {
    {"statistics_after_the_stack_is_gone", statistics_after_the_stack_is_gone, {NULL}},
    {"fork_after_the_stack_is_gone", fork_after_the_stack_is_gone, {NULL}},
    {"earlier_thread_exits_after", earlier_thread_exits_after, {NULL}},
    {"signal_check_refused", signal_check_refused, {NULL}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 30);
}
