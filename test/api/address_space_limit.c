/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* A program started under an address-space limit (`ulimit -v`, as build
 * farms, judges and some CI runners set) can allocate.  The test runs itself
 * again with RLIMIT_AS at 1 GiB set before exec, so the limit holds from the
 * allocator's start-up on: small, large and huge blocks and a thread must
 * work, and a request beyond the limit must fail with ENOMEM, not abort. */
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

static void started_under_limit(void) { run_self_under_as_limit(LIMIT, 60); }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return limited();
  test_init();
  RUN(started_under_limit);
  return 0;
}
