/* SPDX-License-Identifier: MIT */
/* hakmem only.  When the kernel refuses an munmap (ENOMEM: splitting a
 * mapping would pass vm.max_map_count), the memory still goes back: a
 * block of 200 MiB, 64 MiB of it written, freed and trimmed leaves the
 * process's resident set, and stays counted as mapped, since it still is.
 * The refusal is made with a seccomp filter; skipped where seccomp filters
 * cannot be installed. */
#include <malloc.h>
#include "testutil.h"

enum { WRITTEN = 64 << 20 };

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  free(malloc(100));
  char *p = malloc((size_t)200 << 20);
  CHECK(p != NULL);
  memset(p, 1, WRITTEN);
  size_t before = proc_status_kib("VmRSS");
  if (!refuse_syscall(SYS_munmap, ENOMEM)) {
    printf("skip: no seccomp filter here (%s)\n", strerror(errno));
    return 77;
  }
  hak_os_stats_t held, after;
  CHECK(get_os_stats(&held));
  free(p);
  malloc_trim(0);
  CHECK(get_os_stats(&after));
  size_t rss = proc_status_kib("VmRSS");
  printf("  VmRSS %zu KiB with the block, %zu KiB after its free and a trim; mapped %llu -> %llu MiB\n", before, rss,
         held.mapped_bytes >> 20, after.mapped_bytes >> 20);
  CHECK_MSG(rss + (WRITTEN >> 10) / 2 < before, "the block's pages stayed resident");
  CHECK_MSG(after.mapped_bytes + ((size_t)100 << 20) > held.mapped_bytes, "memory still mapped counted as unmapped");
  void *q = malloc((size_t)200 << 20);  /* and the heap goes on */
  CHECK(q != NULL);
  memset(q, 2, 4096);
  free(q);
  return 0;
}
