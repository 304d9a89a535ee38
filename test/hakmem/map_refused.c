/* SPDX-License-Identifier: MIT */
/* hakmem only.  When the kernel refuses to make memory writable (mprotect
 * failing with ENOMEM: the commit limit reached under overcommit 2, say),
 * malloc fails cleanly, NULL with ENOMEM, where it needs a new page of its
 * class map for a new stretch of the address space; it does not abort.  The
 * refusal is made with a seccomp filter, after start-up; skipped where
 * seccomp filters cannot be installed. */
#include "testutil.h"

int main(void) {
  test_init();
  free(malloc(100));
  if (!refuse_syscall(SYS_mprotect, ENOMEM)) {  /* from now on */
    printf("skip: no seccomp filter here (%s)\n", strerror(errno));
    return 77;
  }
  /* 60000 B blocks, not written: 4 GiB of address space at most, past
   * many a stretch of 256 MiB that a page of the map records */
  size_t n = 0;
  void *p;
  errno = 0;
  while (n < 70000 && (p = malloc(60000)) != NULL) n++;
  int error = errno;  /* before printf, whose buffer is a malloc too */
  printf("  %zu blocks of 60000 B, then %s\n", n, n < 70000 ? strerror(error) : "the end of the test");
  CHECK_MSG(n < 70000, "mprotect refused, yet 4 GiB of blocks came");
  CHECK_EQ(error, ENOMEM);
  return 0;
}
