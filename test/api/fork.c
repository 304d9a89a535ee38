/* SPDX-License-Identifier: MIT */
/* test-builds: static standard */
/* fork from a multi-threaded process: while worker threads allocate and free
 * in a loop (small, large and huge blocks, some freed across threads), the
 * main thread forks again and again.  Each child must be able to malloc,
 * free blocks inherited from the parent, start a thread that allocates, and
 * fork once more; a watchdog alarm() turns a deadlock (a lock held by a
 * thread that does not exist in the child) into a failure. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

enum { WORKERS = 4, FORKS = 100, CHILD_TIMEOUT = 20 };

static atomic_int stop;
static _Atomic(void *) exchange_slot;

static void *worker(void *arg) {
  rng_t rng = {(uint64_t)(uintptr_t)arg + 1};
  void *slot[64] = {0};
  while (!atomic_load(&stop)) {
    int i = (int)rng_below(&rng, 64);
    if (slot[i]) {
      CHECK_TAGGED(slot[i]);
      free(slot[i]);
      slot[i] = NULL;
    } else {
      uint64_t r = rng_below(&rng, 1000);
      size_t n = r == 0   ? rng_size(&rng, 4 * MiB, 8 * MiB)
               : r < 20 ? rng_size(&rng, 64 * 1024, 1 * MiB)
                         : rng_size(&rng, TAGGED_MIN, 4096);
      slot[i] = malloc(n);
      CHECK(slot[i] != NULL);
      tagged_fill(slot[i], n, r);
      if (r % 8 == 0) {
        /* Swap with another worker: cross-thread frees during the forks. */
        slot[i] = atomic_exchange(&exchange_slot, slot[i]);
      }
    }
  }
  for (int i = 0; i < 64; i++)
    if (slot[i]) free(slot[i]);
  return NULL;
}

static void *child_thread(void *arg) {
  int i;
  (void)arg;
  for (i = 0; i < 1000; i++) {
    void *p = malloc(TAGGED_MIN + (size_t)i * 7);
    CHECK(p != NULL);
    tagged_fill(p, TAGGED_MIN + (size_t)i * 7, 3);
    CHECK_TAGGED(p);
    free(p);
  }
  return NULL;
}

/* What a child does; exits 0 on success. */
static void child_main(void *inherited) {
  pthread_t t;
  void *p[100];
  int i;
  pid_t pid;
  int status;
  alarm(CHILD_TIMEOUT);
  CHECK_TAGGED(inherited);
  free(inherited);
  for (i = 0; i < 100; i++) {
    size_t n = i == 99 ? 8 * MiB : TAGGED_MIN + (size_t)i * 300;
    p[i] = malloc(n);
    CHECK(p[i] != NULL);
    tagged_fill(p[i], n, (uint64_t)i);
  }
  for (i = 0; i < 100; i++) {
    CHECK_TAGGED(p[i]);
    free(p[i]);
  }
  CHECK(pthread_create(&t, NULL, child_thread, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  /* A grandchild, forked from a process that has had two threads. */
  pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    free(malloc(100));
    _exit(0);
  }
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "grandchild %s",
            describe_status(status));
  _exit(0);
}

static void fork_while_threads_allocate(void) {
  pthread_t t[WORKERS];
  int i;
  for (i = 0; i < WORKERS; i++)
    CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  for (i = 0; i < FORKS; i++) {
    child_result_t res;
    void *inherited = malloc(1000 + (size_t)i);
    CHECK(inherited != NULL);
    tagged_fill(inherited, 1000 + (size_t)i, (uint64_t)i);
    run_in_child(child_main, inherited, CHILD_TIMEOUT, &res);
    if (res.err[0]) fprintf(stderr, "stderr of child %d:\n%s", i, res.err);
    CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "child %d %s%s", i,
              describe_status(res.status),
              WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGALRM
                  ? " (deadlock: the watchdog fired)" : "");
    /* The parent's copy is still intact and ours to free. */
    CHECK_TAGGED(inherited);
    free(inherited);
  }
  atomic_store(&stop, 1);
  for (i = 0; i < WORKERS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  free(atomic_exchange(&exchange_slot, NULL));
}

int main(void) {
  test_init();
  RUN(fork_while_threads_allocate);
  return 0;
}
