/* SPDX-License-Identifier: MIT */
/* test-builds: standard */
/* hakmem only.  The purger thread (balanced profile) is started on a slow
 * path, and creating it allocates: the new thread's TLS block, from a class
 * that depends on the C library and the modules loaded.  A refill that
 * started it before putting its batch in the thread's list lost the batch
 * the inner allocation put there, and the list's room no longer matched its
 * length (hak_heap_check, and the standard build's assertion at the next
 * flush).  Each size class up to 1 KiB is tried in a child of its own: the
 * purger starts once per process. */
#include <sys/wait.h>
#include "hakmem.h"
#include "testutil.h"

enum { BIG = 31, BIG_SIZE = 200 * 1024 };
static void *big[BIG];

static void *free_big(void *arg) {  /* a thread that never allocates: its frees poll nothing */
  for (int i = 0; i < BIG; i++) free(big[i]);
  return arg;
}

/* 6 MiB freed by another thread (over the 4 MiB that start the purger), every
 * list empty, then the first malloc of `size`: its refill starts the purger. */
static void refill_starts_purger(size_t size) {
  for (int i = 0; i < BIG; i++) {
    big[i] = malloc(BIG_SIZE);
    CHECK(big[i] != NULL);
    memset(big[i], 1, BIG_SIZE);
  }
  run_on_own_stack(free_big, NULL);  /* the purger then gets a new TLS block, allocated */
  hak_thread_flush();
  void *p = malloc(size);
  CHECK(p != NULL);
  hak_heap_check();  /* aborts if a list does not match its room */
  free(p);
  hak_thread_flush();
}

static void every_class_up_to_1k(void) {
  for (size_t size = 16; size <= 1024; size += 16) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      alarm(20);
      refill_starts_purger(size);
      _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "malloc(%zu) starting the purger: %s", size,
              describe_status(status));
  }
}

static const self_case_t cases[] = {
    {"every_class_up_to_1k", every_class_up_to_1k, {"HAKMEM_PROFILE=balanced"}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 120);
}
