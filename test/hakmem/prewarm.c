/* SPDX-License-Identifier: MIT */
/* hakmem only, linked with libhakmem.a (it reads the thread cache itself).
 * Prewarm: with HAKMEM_TINY_PREWARM_C<k> / _ALL set, a new thread's cache
 * holds that many blocks of each class of the size range from its first
 * allocation on, capped at the class's capacity; lean mode never prewarms. */
#include "testutil.h"

#include "api/api.h"

static const size_t sizes[] = {16, 32, 48, 64, 100, 1000, 2048, 4096};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };
static int expected[NSIZES];

/* Blocks in the calling thread's cache for the class of `size`. */
static int cached(size_t size) {
  unsigned cls = hk_size_to_class(size);
  return hk_tc.cap[cls] - hk_tc.room[cls];
}

static void *new_thread(void *arg) {
  free(malloc(3000));  /* sets the thread's cache up, in a class none of the checks uses */
  for (int i = 0; i < NSIZES; i++)
    CHECK_MSG(cached(sizes[i]) == expected[i], "%zu-byte blocks: %d cached, %d expected", sizes[i],
              cached(sizes[i]), expected[i]);
  return arg;
}

/* A thread whose first call takes a block of a prewarmed class: the block
 * comes from the prewarmed list, which keeps the rest, its length what the
 * cache counts. */
static void *first_malloc_in_a_prewarmed_class(void *arg) {
  void *p = malloc(16);
  unsigned cls = hk_size_to_class(16);
  int listed = (int)hk_chain_length(hk_tc.head[cls], 1u << 20);
  CHECK_MSG(listed == cached(16), "16-byte blocks: %d on the list, %d counted", listed, cached(16));
  if (expected[0]) CHECK_MSG(listed == expected[0] - 1, "16-byte blocks: %d on the list, %d expected", listed,
                             expected[0] - 1);
  free(p);
  return arg;
}

typedef struct prewarm_case {
  const char *name;
  const char *env[4];
  int expected[NSIZES];
} prewarm_case_t;

static const prewarm_case_t cases[] = {
    {"none", {NULL}, {0, 0, 0, 0, 0, 0, 0, 0}},
    /* C2 is 33-64 B: the classes of 48 and 64 B */
    {"c2", {"HAKMEM_TINY_PREWARM_C2=64", NULL}, {0, 0, 64, 64, 0, 0, 0, 0}},
    /* _ALL up to 2 KiB, C7 (1025-2048 B) on its own; nothing above 2 KiB */
    {"all", {"HAKMEM_TINY_PREWARM_ALL=16", "HAKMEM_TINY_PREWARM_C7=2", NULL}, {16, 16, 16, 16, 16, 16, 2, 0}},
    /* capped at the class's capacity (128 blocks of 1 KiB) */
    {"capped", {"HAKMEM_TINY_PREWARM_C6=500", NULL}, {0, 0, 0, 0, 0, 128, 0, 0}},
    {"lean", {"HAKMEM_PROFILE=lean", "HAKMEM_TINY_PREWARM_ALL=16", NULL}, {0, 0, 0, 0, 0, 0, 0, 0}},
};

int main(int argc, char **argv) {
  test_init();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (argc > 1) {
      if (strcmp(argv[1], cases[i].name)) continue;
      pthread_t t;
      memcpy(expected, cases[i].expected, sizeof expected);
      CHECK(pthread_create(&t, NULL, new_thread, NULL) == 0);
      CHECK(pthread_join(t, NULL) == 0);
      CHECK(pthread_create(&t, NULL, first_malloc_in_a_prewarmed_class, NULL) == 0);
      CHECK(pthread_join(t, NULL) == 0);
      return 0;
    }
    child_result_t res;
    printf("  %s\n", cases[i].name);
    run_self(cases[i].name, cases[i].env, 30, &res);
    CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s: %s\n%s", cases[i].name,
              describe_status(res.status), res.err);
  }
  return 0;
}
