/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* test-not-emulated: mlockall locks the emulator's own memory too (170 MiB of qemu-user's) */
/* mlockall, as a daemon guarding secrets or a real-time program calls it,
 * locks what the program uses, not the address space an allocator reserves
 * ahead (each case in a child process of its own):
 * - MCL_CURRENT | MCL_FUTURE: resident memory stays under 64 MiB, and
 *   blocks of small sizes come and go;
 * - MCL_CURRENT alone: blocks of 300 KiB and 3 MiB allocated afterwards are
 *   not locked, so they do not fill more than they use (under 64 MiB);
 * - free(NULL) on another thread all along the call does not fault.
 * Skipped (77) where mlockall is not allowed (unprivileged, with the usual
 * RLIMIT_MEMLOCK). */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

static void check_rss(const char *when) {
  size_t rss = proc_status_kib("VmRSS");
  printf("  %s: VmRSS %zu KiB\n", when, rss);
  CHECK_MSG(rss < 64 * 1024, "VmRSS %zu KiB %s", rss, when);
}

static void current_and_future(void *arg) {
  CHECK_EQ(mlockall(MCL_CURRENT | MCL_FUTURE), 0);
  check_rss("after mlockall(MCL_CURRENT | MCL_FUTURE)");
  void *p[1000];
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 1000; i++) {
      p[i] = malloc((size_t)(16 + i * 7 % 4000));
      CHECK(p[i] != NULL);
      memset(p[i], i, 16);
    }
    for (int i = 0; i < 1000; i++) free(p[i]);
  }
  check_rss("after small blocks");
}

static void current_only(void *arg) {
  CHECK_EQ(mlockall(MCL_CURRENT), 0);
  char *a = opaque_ptr(malloc(300 << 10)), *b = opaque_ptr(malloc(3 << 20));
  CHECK(a != NULL && b != NULL);
  memset(a, 1, 4096);
  memset(b, 1, 4096);
  check_rss("after mlockall(MCL_CURRENT) and blocks of 300 KiB and 3 MiB");
  free(a);
  free(b);
}

static atomic_bool stop;

static void *free_null(void *arg) {
  void *volatile null = NULL;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) free(null);
  return arg;
}

static void free_null_meanwhile(void *arg) {
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, free_null, NULL), 0);
  for (int i = 0; i < 20; i++) {
    CHECK_EQ(mlockall(MCL_CURRENT), 0);
    CHECK_EQ(munlockall(), 0);
  }
  atomic_store(&stop, true);
  pthread_join(t, NULL);
}

int main(void) {
  test_init();
  free(malloc(100));
  if (mlockall(MCL_CURRENT) != 0) {
    printf("SKIP: mlockall refused: %s\n", strerror(errno));
    return 77;
  }
  CHECK_EQ(munlockall(), 0);
  run_child_ok("MCL_CURRENT | MCL_FUTURE", current_and_future, NULL);
  run_child_ok("MCL_CURRENT", current_only, NULL);
  run_child_ok("free(NULL) during mlockall", free_null_meanwhile, NULL);
  return 0;
}
