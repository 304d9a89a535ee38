/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* test-run: balanced HAKMEM_PROFILE=balanced */
/* fork in a process where another library registered fork handlers before
 * the allocator did (libatfork.so, linked to this program, registers them in
 * its constructor, which runs before the allocator's when it is preloaded or
 * linked into the program), and allocates in every one of them on the slow
 * paths: the C library runs that library's prepare handler after the
 * allocator's, and its parent and child handlers before the allocator's,
 * while the allocator's locks are held.  Each fork must complete, with
 * every handler done, in the parent and in the child, with another thread
 * allocating meanwhile.  The child's handler frees enough to start the
 * purger thread of the balanced profile: a child whose handler did so before
 * the allocator's (which resets the purger's state: the parent's thread does
 * not exist there) still has one at most as it goes on freeing. */
#include "testutil.h"

#include <dirent.h>
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

/* Threads of this process named as the allocator's purger. */
static int purger_threads(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  CHECK(d != NULL);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char path[64], name[32] = "";
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(name, sizeof name, f)) n += strcmp(name, "hakmem-purge\n") == 0;
    if (f) fclose(f);
  }
  closedir(d);
  return n;
}

static void forks_complete(void) {
  pthread_t t;
  for (int i = 1; i <= 20; i++) {
    /* the first fork before any other thread (and before the purger, which
     * the child's handler would start, in the child only) */
    if (i == 2) CHECK(pthread_create(&t, NULL, churn, NULL) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      alarm(20);
      if (atfork_ran(2) != 1) _exit(2);  /* the child handler ran here, once */
      for (int k = 0; k < 3; k++) {      /* enough free memory to start a purger */
        char *p = malloc(8 << 20);
        if (!p) _exit(3);
        memset(p, 1, 8 << 20);
        free(p);
      }
      _exit(purger_threads() <= 1 ? 0 : 4);
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
