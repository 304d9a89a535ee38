/* SPDX-License-Identifier: MIT */
/* hakmem only.  Blocks freed in a random order and sent home lie on their
 * slabs' lists in that order; a refill that finds many there reads the slab
 * in address order instead, so the blocks come back out near one another
 * (the prefetcher follows them), every one of them once, and none of the
 * blocks still in the program's hands among them. */
#include "testutil.h"

enum { SIZE = 176, N = 6000 };  /* 176 B: a class no start-up allocation uses */

static int by_address(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)*(char *const *)x, b = (uintptr_t)*(char *const *)y;
  return (a > b) - (a < b);
}

static void freed_in_random_order_return_in_address_order(void) {
  static char *a[N], *b[N];
  static int order[N];
  rng_t rng = {12345};
  for (int i = 0; i < N; i++) {
    CHECK((a[i] = malloc(SIZE)) != NULL);
    order[i] = i;
  }
  for (int i = N - 1; i > 0; i--) {
    int j = (int)rng_below(&rng, (uint64_t)(i + 1));
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  /* a fifth stays in the program's hands, holding a pattern; the rest is
   * freed in the random order and sent home to the slabs */
  int kept = 0;
  for (int i = 0; i < N; i++) {
    char *p = a[order[i]];
    if (order[i] % 5 == 0) {
      fill_pattern(p, SIZE, (uint64_t)order[i]);
      kept++;
    } else {
      free(p);
    }
  }
  hak_thread_flush();
  malloc_trim(0);
  int got = N - kept, near = 0;
  for (int i = 0; i < got; i++) {
    CHECK((b[i] = malloc(SIZE)) != NULL);
    memset(b[i], 0xa5, SIZE);
    if (i > 0 && labs((long)(b[i] - b[i - 1])) <= 4 * SIZE) near++;
  }
  /* every block out once, none a kept one: all lie apart */
  static char *all[N];
  int n = 0;
  for (int i = 0; i < N; i++)
    if (i % 5 == 0) all[n++] = a[i];
  for (int i = 0; i < got; i++) all[n++] = b[i];
  qsort(all, (size_t)n, sizeof *all, by_address);
  for (int i = 1; i < n; i++) CHECK_MSG(all[i] - all[i - 1] >= SIZE, "blocks %p and %p overlap", all[i - 1], all[i]);
  for (int i = 0; i < N; i += 5) CHECK_PATTERN(a[i], SIZE, (uint64_t)i);
  /* in the frees' order about 4 pairs in a slab's 372 blocks lie this near */
  CHECK_MSG(near >= got * 8 / 10, "%d of %d blocks handed out near the one before", near, got);
  for (int i = 0; i < got; i++) free(b[i]);
  for (int i = 0; i < N; i += 5) free(a[i]);
  hak_heap_check();  /* aborts on a list that disagrees with its count */
}

static const self_case_t cases[] = {
    {"random_frees", freed_in_random_order_return_in_address_order, {NULL}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 60);
}
