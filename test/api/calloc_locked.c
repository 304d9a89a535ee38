/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* test-run: no_delay HAKMEM_PURGE_DELAY_MS=0 */
/* calloc returns zeros where the kernel refuses to give memory back: pages
 * locked with mlock keep their contents through MADV_DONTNEED's refusal, so
 * memory freed while locked and handed out again by calloc must be cleared
 * by the allocator itself (blocks of 4 MiB and 300 KiB, given back by a free
 * and by malloc_trim).  Skipped (77) where mlock is not allowed that much. */
#include "testutil.h"

#include <malloc.h>
#include <sys/mman.h>

static bool locked_then_calloc(size_t n, bool trim) {
  unsigned char *p = malloc(n);
  CHECK(p != NULL);
  memset(p, 0xaa, n);
  if (mlock(p, n) != 0) {
    free(p);
    return false;
  }
  free(p);
  if (trim) malloc_trim(0);
  for (int i = 0; i < 4; i++) {
    unsigned char *q = calloc(1, n);
    CHECK(q != NULL);
    size_t at = find_not_byte(q, 0, n);
    CHECK_MSG(at == SIZE_MAX, "calloc(1, %zu) after a locked free: byte %zu is 0x%02x", n, at, q[at]);
    memset(q, 0xbb, n);
    free(q);
  }
  munlock(p, n);
  return true;
}

int main(void) {
  test_init();
  bool any = false;
  any |= locked_then_calloc(4 << 20, false);
  any |= locked_then_calloc(4 << 20, true);
  any |= locked_then_calloc(300000, true);
  if (!any) {
    printf("SKIP: mlock of 300 KiB refused (RLIMIT_MEMLOCK)\n");
    return 77;
  }
  return 0;
}
