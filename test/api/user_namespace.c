/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* test-env: HAKMEM_PROFILE=balanced */
/* test-not-emulated: qemu-user runs threads of its own, and the kernel refuses a new user namespace to a process of more than one */
/* A program of one thread may make a new user namespace (unshare, setns),
 * as sandboxes and container tools do, which the kernel refuses (EINVAL)
 * to a process of more than one thread: the balanced profile's purger
 * thread, started once the heap has held 4 MiB, must not make it one.
 * Each case in a child process of its own, whose heap has held 16 MiB:
 * - unshare(CLONE_NEWUSER) succeeds, and the purger thread comes back
 *   (with hakmem: the process has two threads before and after);
 * - setns into another process's new user namespace succeeds.
 * Skipped (77) where this kernel or its sandbox refuses user namespaces. */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static unsigned threads(void) {
  unsigned n = 0;
  DIR *d = opendir("/proc/self/task");
  CHECK(d != NULL);
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* The heap holds 16 MiB, then blocks of other sizes come and go: with
 * hakmem's balanced profile, one of these mallocs starts the purger. */
static void heap_held(void) {
  char *p[16];
  for (int i = 0; i < 16; i++) {
    p[i] = opaque_ptr(malloc(1 << 20));
    CHECK(p[i] != NULL);
    memset(p[i], i, 1 << 20);
  }
  for (int i = 0; i < 16; i++) free(p[i]);
  for (size_t size = 16; size <= 64 << 10; size *= 2) free(opaque_ptr(malloc(size)));
}

static void expect_threads(const char *when) {
  unsigned n = threads(), want = hakmem_active() ? 2 : 1;
  printf("  %s: %u threads\n", when, n);
  CHECK_MSG(n == want, "%u threads %s, not %u", n, when, want);
}

static void new_user_namespace(void *arg) {
  heap_held();
  expect_threads("before unshare");
  CHECK_MSG(unshare(CLONE_NEWUSER) == 0, "unshare(CLONE_NEWUSER): %s", strerror(errno));
  heap_held();
  expect_threads("after unshare");
}

static void join_user_namespace(void *arg) {
  heap_held();
  expect_threads("before setns");
  CHECK_MSG(setns(*(int *)arg, CLONE_NEWUSER) == 0, "setns(CLONE_NEWUSER): %s", strerror(errno));
}

int main(void) {
  test_init();
  /* a process that holds a new user namespace for setns, made before the
   * heap grows, so that its one thread is the kernel's to judge */
  int ready[2];
  CHECK(pipe(ready) == 0);
  fflush(NULL);
  pid_t holder = fork();
  CHECK(holder >= 0);
  if (holder == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  /* gone with the test, should a check fail */
    char ok = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char ok = 'n';
  CHECK(read(ready[0], &ok, 1) == 1);
  if (ok != 'y') {
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    printf("skip: this kernel or sandbox refuses a new user namespace\n");
    return 77;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/user", (int)holder);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  CHECK_MSG(fd >= 0, "%s: %s", path, strerror(errno));
  run_child_ok("unshare(CLONE_NEWUSER)", new_user_namespace, NULL);
  run_child_ok("setns(CLONE_NEWUSER)", join_user_namespace, &fd);
  close(fd);
  kill(holder, SIGKILL);
  waitpid(holder, NULL, 0);
  return 0;
}
