/* SPDX-License-Identifier: MIT */
/* hakmem only.  A program that builds a structure of many small blocks,
 * frees it whole and builds it again gets its blocks back from the batches
 * its frees parked, not from slabs made anew: a CPU parks up to 64 full
 * thread-cache lists of a class, and 24 lists' worth of blocks freed in a
 * row come back without a slab made. */
#include "testutil.h"

enum { SIZE = 200, LISTS = 24 };  /* 208 B: a class no start-up allocation uses */

static void rebuilt_from_parked(void) {
  /* a thread's list of 208 B blocks holds 64 KiB / 208 of them at most */
  size_t count = LISTS * (64 * 1024 / 208 + 1);
  void **p = calloc(count, sizeof *p);
  CHECK(p != NULL);
  unsigned long long made = 0, parked_hits = 0;
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < count; i++) {
      CHECK((p[i] = malloc(SIZE)) != NULL);
      memset(p[i], round, SIZE);
    }
    for (size_t i = 0; i < count; i++) free(p[i]);
    const hak_class_stats_t *c = class_stats(SIZE);
    printf("  round %d: %zu blocks freed, %llu slabs made, %llu refills from parked batches\n", round, count,
           c->slabs_made, c->parked_hits);
    if (round > 0) {
      CHECK_MSG(c->slabs_made == made, "slabs made anew: %llu -> %llu", made, c->slabs_made);
      CHECK(c->parked_hits > parked_hits);
    }
    made = c->slabs_made;
    parked_hits = c->parked_hits;
  }
  free(p);
}

int main(void) {
  test_init();
  RUN(rebuilt_from_parked);
  return 0;
}
