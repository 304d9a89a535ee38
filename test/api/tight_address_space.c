/* SPDX-License-Identifier: MIT */
/* test-builds: static standard */
/* test-timeout: 120 */
/* Blocks under a tight address-space limit (`ulimit -v`, set before exec),
 * each case in a process of its own:
 * - blocks of 2, 10 and 50 MiB under 100 000 KiB, and of 150 MiB under
 *   250 000 KiB, where the limit leaves room for each block and little else;
 * - a block of 200 MiB grown to 1 200 MiB under 3 000 000 KiB, where the
 *   room to grow it in place may lie past what hakmem's map covers (its
 *   ceiling is lower under a limit): it moves, its bytes kept;
 * - memory freed is address space to use again: under 300 000 KiB, blocks of
 *   40 KB until malloc fails, all freed, then blocks of 3 MiB until it
 *   fails, all freed, and each size again: as many as the first time (within
 *   5 %), and each failure a NULL with ENOMEM. */
#include "testutil.h"

#include <malloc.h>
#include <sys/resource.h>

static void one_block(size_t size) {
  char *p = malloc(size);
  CHECK_MSG(p != NULL, "malloc(%zu MiB): %s", size >> 20, strerror(errno));
  memset(p, 1, size);
  free(p);
}

/* Blocks of `size` until malloc fails; all freed again.  Returns how many. */
static size_t fill(size_t size, void **p, size_t cap) {
  size_t n = 0;
  errno = 0;
  while (n < cap && (p[n] = malloc(size)) != NULL) {
    ((volatile char *)p[n])[0] = 1;
    n++;
  }
  CHECK(n < cap);
  CHECK_ERRNO(ENOMEM);
  for (size_t i = 0; i < n; i++) free(p[i]);
  malloc_trim(0);
  return n;
}

static int limited(const char *which) {
  test_init();
  if (strcmp(which, "fit") == 0) {
    one_block(2 * MiB);
    one_block(10 * MiB);
    one_block(50 * MiB);
  } else if (strcmp(which, "fit_large") == 0) {
    one_block(150 * MiB);
  } else if (strcmp(which, "grow") == 0) {
    char *p = malloc(200 * MiB);
    CHECK(p != NULL);
    fill_pattern(p, 200 * MiB, 7);
    char *q = realloc(p, 1200 * MiB);
    CHECK_MSG(q != NULL, "realloc to 1200 MiB: %s", strerror(errno));
    CHECK_PATTERN(q, 200 * MiB, 7);
    free(q);
  } else {
    static void *p[20000];
    size_t small0 = fill(40000, p, 20000), big0 = fill(3 * MiB, p, 20000);
    size_t small1 = fill(40000, p, 20000), big1 = fill(3 * MiB, p, 20000);
    printf("  40 KB blocks: %zu (%zu MiB), then %zu; 3 MiB blocks: %zu, then %zu\n", small0, small0 * 40000 >> 20,
           small1, big0, big1);
    CHECK(small1 >= small0 * 95 / 100);
    CHECK(big1 >= big0 * 95 / 100);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return limited(argv[2]);
  test_init();
  run_self_under_as_limit_arg((rlim_t)100000 << 10, "fit", 60);
  run_self_under_as_limit_arg((rlim_t)250000 << 10, "fit_large", 60);
  run_self_under_as_limit_arg((rlim_t)3000000 << 10, "grow", 60);
  run_self_under_as_limit_arg((rlim_t)300000 << 10, "reuse", 60);
  return 0;
}
