/* SPDX-License-Identifier: MIT */
/* hk_os_tid (src/os/os.c): the calling thread's id, as gettid() says, in
 * the first thread, in threads started later, in a fork's child and in a
 * thread the child starts; with glibc, read from its thread descriptor
 * (hk_os_tid_init says so) rather than asked of the kernel. */
#include "unit.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static pid_t kernel_tid(void) { return (pid_t)syscall(SYS_gettid); }

static void *check_thread(void *main_tid) {
  CHECK_EQ(hk_os_tid(), kernel_tid());
  CHECK(hk_os_tid() != *(pid_t *)main_tid);
  return NULL;
}

static void check_threads(unsigned n) {
  pid_t self = hk_os_tid();
  pthread_t t[8];
  for (unsigned i = 0; i < n; i++) CHECK_EQ(pthread_create(&t[i], NULL, check_thread, &self), 0);
  for (unsigned i = 0; i < n; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
}

UNIT_TEST(descriptor_read) {
  free(malloc(1));  /* start-up done */
  if (dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid")) CHECK(hk_os_tid_init());
  CHECK_EQ(hk_os_tid(), kernel_tid());
}

UNIT_TEST(threads) { check_threads(8); }

UNIT_TEST(fork_child) {
  pid_t parent = hk_os_tid();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (hk_os_tid() != kernel_tid() || hk_os_tid() == parent) _exit(1);
    check_threads(2);
    _exit(0);
  }
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
