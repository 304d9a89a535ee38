/* SPDX-License-Identifier: MIT */
/* test-builds: standard */
/* hakmem only.  The purger thread (balanced profile) is started on a slow
 * path, and creating it allocates: the new thread's TLS block, from a class
 * that depends on the C library and the modules loaded.  A refill that
 * started it before putting its batch in the thread's list lost the batch
 * the inner allocation put there, and the list's room no longer matched its
 * length (hak_heap_check, and the standard build's assertion at the next
 * flush).  Each size class up to 1 KiB is tried in a child of its own: the
 * purger starts once per process.  And a malloc starts it, once the heap
 * has held 4 MiB, before any free: never a free, as the C library frees a
 * joined thread's TLS under the lock of its stacks' cache, which creating
 * a thread takes (a free that started the purger there waited for ever),
 * and a program that frees its peak and then idles needs it already. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
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

/* Whether a thread of this process is named hakmem-purge: read without
 * allocating (opendir's buffer would be a malloc, which may start it). */
static bool purger_running(void) {
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
  CHECK(dir >= 0);
  char entries[4096], name[32];
  bool found = false;
  for (long n; !found && (n = syscall(SYS_getdents64, dir, entries, sizeof entries)) > 0;) {
    for (long at = 0; !found && at < n; at += ((struct dirent64 *)(entries + at))->d_reclen) {
      char path[300];
      snprintf(path, sizeof path, "%s/comm", ((struct dirent64 *)(entries + at))->d_name);
      int f = path[0] != '.' ? openat(dir, path, O_RDONLY) : -1;
      if (f < 0) continue;
      found = read(f, name, sizeof name) >= 12 && !strncmp(name, "hakmem-purge", 12);
      close(f);
    }
  }
  close(dir);
  return found;
}

static void malloc_starts_purger(void) {
  enum { N = 1000, SIZE = 3000 };
  static void *p[2 * N];
  for (int i = 0; i < N; i++) CHECK((p[i] = malloc(SIZE)) != NULL), memset(p[i], 1, SIZE);
  CHECK_MSG(!purger_running(), "a heap of 3 MB: the purger started");
  for (int i = N; i < 2 * N; i++) CHECK((p[i] = malloc(SIZE)) != NULL), memset(p[i], 1, SIZE);
  CHECK_MSG(purger_running(), "a heap of 6 MB, nothing freed: no purger thread");
  for (int i = 0; i < 2 * N; i++) free(p[i]);
}

static const self_case_t cases[] = {
    {"every_class_up_to_1k", every_class_up_to_1k, {"HAKMEM_PROFILE=balanced"}},
    {"malloc_starts_purger", malloc_starts_purger, {"HAKMEM_PROFILE=balanced"}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 120);
}
