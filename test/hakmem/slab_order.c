/* SPDX-License-Identifier: MIT */
/* hakmem only.  Blocks freed in a random order and sent home lie on their
 * slabs' lists in that order; a refill that finds many there reads the slab
 * in address order instead, so the blocks come back out near one another
 * (the prefetcher follows them), every one of them once, and none of the
 * blocks still in the program's hands among them.  Freed so with nobody
 * taking them, they go home rather than wait in the transfer slots, where
 * they would come back in the order freed. */
#include "testutil.h"

#include <malloc.h>
#include <sched.h>

enum { SIZE = 176, N = 6000 };  /* 176 B: a class no start-up allocation uses */

static int by_address(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)*(char *const *)x, b = (uintptr_t)*(char *const *)y;
  return (a > b) - (a < b);
}

/* order[0..n): 0..n-1 shuffled */
static void shuffle(int *order, int n) {
  rng_t rng = {12345};
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)rng_below(&rng, (uint64_t)(i + 1));
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

/* How many of b[0..n) lie within 4 blocks of the one before. */
static int near_the_one_before(char *const *b, int n) {
  int near = 0;
  for (int i = 1; i < n; i++) near += labs((long)(b[i] - b[i - 1])) <= 4 * SIZE;
  return near;
}

static void freed_in_random_order_return_in_address_order(void) {
  static char *a[N], *b[N];
  static int order[N];
  for (int i = 0; i < N; i++) CHECK((a[i] = malloc(SIZE)) != NULL);
  shuffle(order, N);
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
  int got = N - kept;
  for (int i = 0; i < got; i++) {
    CHECK((b[i] = malloc(SIZE)) != NULL);
    memset(b[i], 0xa5, SIZE);
  }
  int near = near_the_one_before(b, got);
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

/* A structure of many blocks freed whole in a random order, no flush, and
 * built again: the few batches parked before the slots saw that nobody took
 * them come back in the order freed, the rest from the slabs in address
 * order.  (Were every batch the slots hold parked, about two thirds would
 * come back so: 13 883 of the 40 000 near the one before.)  Pinned: a
 * CPU's slots count their batches apart from the others'. */
static void structure_freed_in_random_order_built_again(void) {
  enum { M = 40000 };
  static char *a[M];
  static int order[M];
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpu = sched_getcpu();
  if (cpu >= 0) {
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof set, &set);  /* refused: moves are rare enough */
  }
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < M; i++) CHECK((a[i] = malloc(SIZE)) != NULL);
    if (round == 1) {
      int near = near_the_one_before(a, M);
      CHECK_MSG(near >= M * 8 / 10, "%d of %d blocks handed out near the one before", near, M);
    }
    shuffle(order, M);
    for (int i = 0; i < M; i++) free(a[order[i]]);
  }
  hak_heap_check();
}

static const self_case_t cases[] = {
    {"random_frees", freed_in_random_order_return_in_address_order, {NULL}},
    {"structure_built_again", structure_freed_in_random_order_built_again, {NULL}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 60);
}
