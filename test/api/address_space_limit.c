/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* A program started under an address-space limit (`ulimit -v`, as build
 * farms, judges and some CI runners set) can allocate.  The test runs itself
 * again with RLIMIT_AS at 1 GiB set before exec, so the limit holds from the
 * allocator's start-up on: small, large and huge blocks and a thread must
 * work, and a request beyond the limit must fail with ENOMEM, not abort.
 * With the address space used up, a realloc that shrinks a block still
 * succeeds, as glibc's does: where the block would move, it stays. */
#include "testutil.h"

#include <sys/resource.h>

#define LIMIT ((rlim_t)1 << 30)

static void *thread_main(void *arg) {
  void *p = malloc(1000);
  (void)arg;
  CHECK(p != NULL);
  free(p);
  return NULL;
}

/* What runs under the limit. */
static int limited(void) {
  static void *small[100000];
  void *large[100], *huge[4], *p;
  pthread_t t;
  int i;
  test_init();
  for (i = 0; i < 100000; i++) {
    small[i] = malloc(TAGGED_MIN + (size_t)i % 200);
    CHECK(small[i] != NULL);
    tagged_fill(small[i], TAGGED_MIN + (size_t)i % 200, (uint64_t)i);
  }
  for (i = 0; i < 100; i++) {
    large[i] = malloc(100000);
    CHECK(large[i] != NULL);
    tagged_fill(large[i], 100000, (uint64_t)i);
  }
  for (i = 0; i < 4; i++) {
    huge[i] = malloc(64 * MiB);
    CHECK(huge[i] != NULL);
    tagged_fill(huge[i], 64 * MiB, (uint64_t)i);
  }
  errno = 0;
  p = malloc(2 * (size_t)LIMIT);
  CHECK_MSG(p == NULL, "malloc(2 GiB) succeeded under a 1 GiB address-space limit");
  CHECK_ERRNO(ENOMEM);
  CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  for (i = 0; i < 100000; i++) {
    CHECK_TAGGED(small[i]);
    free(small[i]);
  }
  for (i = 0; i < 100; i++) {
    CHECK_TAGGED(large[i]);
    free(large[i]);
  }
  for (i = 0; i < 4; i++) {
    CHECK_TAGGED(huge[i]);
    free(huge[i]);
  }
  printf("  allocations under RLIMIT_AS = 1 GiB work\n");
  return 0;
}

/* Under the limit again, with every byte of it taken but two blocks'. */
static int shrunk_when_full(void) {
  static void *taken[1 << 16];
  size_t n = 0;
  void *block = malloc(12000), *big = malloc(8 * MiB);
  CHECK(block != NULL && big != NULL);
  fill_pattern(block, 12000, 1);
  fill_pattern(big, 8 * MiB, 2);
  for (size_t size = 60000; size >= 64; size /= 2)  /* then what is left of smaller sizes */
    while (n < sizeof taken / sizeof *taken && (taken[n] = malloc(size))) n++;
  CHECK_MSG(n < sizeof taken / sizeof *taken, "the address space did not run out");
  CHECK(malloc(2800) == NULL);
  errno = 0;
  void *shrunk = realloc(block, 2800), *shrunk_big = realloc(big, 3000);
  CHECK_ERRNO(0);  /* before printf, which may want a buffer */
  printf("  %zu blocks took the address space; realloc to 2800 B and 3000 B: %p %p\n", n, shrunk, shrunk_big);
  CHECK_MSG(shrunk != NULL && shrunk_big != NULL, "a shrinking realloc failed with the address space used up");
  CHECK(check_pattern(shrunk, 2800, 1) == SIZE_MAX && check_pattern(shrunk_big, 3000, 2) == SIZE_MAX);
  return 0;
}

static void started_under_limit(void) { run_self_under_as_limit(LIMIT, 60); }
static void shrinking_never_fails(void) { run_self_under_as_limit_arg(LIMIT / 4, "shrink", 60); }

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return shrunk_when_full();
  if (argc > 1 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return limited();
  test_init();
  RUN(started_under_limit);
  RUN(shrinking_never_fails);
  return 0;
}
