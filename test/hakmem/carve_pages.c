/* SPDX-License-Identifier: MIT */
/* hakmem only.  A slab carves its blocks a page's worth at a time, and where
 * its pages are small and new it writes them in with one system call
 * (MADV_POPULATE_WRITE) rather than a page fault each: the same pages, no
 * more.  With every SuperSlab on small pages (HAKMEM_SS_THP=0) and with the
 * speed profile's first SuperSlab, the pages resident in a class's slab are
 * those its carved blocks lie on, however many blocks the thread took. */
#include <sys/mman.h>
#include "testutil.h"

#define UNIT ((uintptr_t)64 << 10)

/* Pages resident in the 64 KiB unit that holds p (mincore), and the
 * highest of them plus one. */
static size_t resident(const void *p, size_t *top) {
  unsigned char vec[UNIT / 4096];
  uintptr_t unit = (uintptr_t)p & ~(UNIT - 1);
  CHECK(mincore((void *)unit, UNIT, vec) == 0);
  size_t n = 0;
  *top = 0;
  for (size_t i = 0; i < sizeof vec; i++)
    if (vec[i] & 1) n++, *top = i + 1;
  return n;
}

/* Takes blocks of 208 B (a class no start-up allocation uses) a few at a
 * time; after each step the unit's resident pages are a run from its start
 * up to the page of the last block carved, which the cache's blocks show. */
static void only_carved_pages(void) {
  enum { SIZE = 200, STEPS = 4, PER_STEP = 40 };
  static void *p[STEPS * PER_STEP];
  uintptr_t hi = 0;
  for (int s = 0; s < STEPS; s++) {
    for (int k = s * PER_STEP; k < (s + 1) * PER_STEP; k++) {
      CHECK((p[k] = malloc(SIZE)) != NULL);
      memset(p[k], 0x5a, SIZE);
      CHECK_MSG(((uintptr_t)p[k] & ~(UNIT - 1)) == ((uintptr_t)p[0] & ~(UNIT - 1)), "block %d in another unit", k);
      if ((uintptr_t)p[k] + SIZE > hi) hi = (uintptr_t)p[k] + SIZE;
    }
    size_t top, n = resident(p[0], &top);
    uintptr_t unit = (uintptr_t)p[0] & ~(UNIT - 1);
    size_t used = (hi - unit + 4095) / 4096;  /* pages up to the last block handed out */
    CHECK_MSG(n == top, "step %d: %zu pages resident, not a run from the unit's start (top %zu)", s, n, top);
    /* the cache holds at most a page's worth carved beyond the blocks handed out */
    CHECK_MSG(top >= used && top <= used + 1, "step %d: pages up to %zu resident, blocks up to page %zu", s, top, used);
  }
  for (int k = 0; k < STEPS * PER_STEP; k++) free(p[k]);
}

static const self_case_t cases[] = {
    {"small_pages", only_carved_pages, {"HAKMEM_SS_THP=0", NULL}},
    {"speed", only_carved_pages, {NULL}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 60);
}
