/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* mlockall(MCL_CURRENT | MCL_FUTURE), as a daemon guarding secrets or a
 * real-time program calls it, locks what the program uses, not the address
 * space an allocator reserves ahead: resident memory stays under 64 MiB,
 * the call takes well under a second, and blocks of small sizes come and go
 * as before.  Skipped (77) where mlockall is not allowed (unprivileged, with
 * the usual RLIMIT_MEMLOCK). */
#include "testutil.h"

#include <sys/mman.h>
#include <time.h>

int main(void) {
  test_init();
  free(malloc(100));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("SKIP: mlockall refused: %s\n", strerror(errno));
    return 77;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  size_t rss = proc_status_kib("VmRSS");
  printf("mlockall: %.3f s, VmRSS %zu KiB\n", seconds, rss);
  CHECK_MSG(rss < 64 * 1024, "VmRSS %zu KiB after mlockall", rss);
  CHECK_MSG(seconds < 1.0, "mlockall took %.3f s", seconds);
  void *p[1000];
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 1000; i++) {
      p[i] = malloc((size_t)(16 + i * 7 % 4000));
      CHECK(p[i] != NULL);
      memset(p[i], i, 16);
    }
    for (int i = 0; i < 1000; i++) free(p[i]);
  }
  rss = proc_status_kib("VmRSS");
  CHECK_MSG(rss < 64 * 1024, "VmRSS %zu KiB after small blocks", rss);
  CHECK_EQ(munlockall(), 0);
  return 0;
}
