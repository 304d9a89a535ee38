/* SPDX-License-Identifier: MIT */
/* Run search (src/internal.h).  hk_find_run_best places huge blocks in
 * regions: the fewest cold units first, then the shortest stretch of free
 * units, then the nearest to a stretch's end, then the lowest start.
 * hk_find_run places slabs in SuperSlabs: the fewest cold units, the lowest
 * start for one unit and the highest for more.  Both only at allowed starts,
 * -1 when nothing fits. */
#include "unit.h"

static uint64_t bits(unsigned at, unsigned n) { return hk_bits(at, n); }

/* The same choice made by brute force, one start at a time. */
static int reference(uint64_t free, uint64_t warm, unsigned n, uint64_t starts, unsigned limit, unsigned *cold,
                     unsigned *slack) {
  int best = -1;
  unsigned best_edge = 0;
  for (unsigned i = 0; i + n <= 64; i++) {
    if (!(starts >> i & 1) || (free & bits(i, n)) != bits(i, n)) continue;
    unsigned lo = i, hi = i + n;
    while (lo > 0 && (free >> (lo - 1) & 1)) lo--;
    while (hi < 64 && (free >> hi & 1)) hi++;
    unsigned c = (unsigned)__builtin_popcountll(bits(i, n) & ~warm), s = hi - lo - n;
    unsigned e = hk_min(i - lo, hi - n - i);
    if (best < 0 || c < *cold || (c == *cold && (s < *slack || (s == *slack && e < best_edge))))
      best = (int)i, *cold = c, *slack = s, best_edge = e;
  }
  return best >= 0 && *cold <= limit ? best : -1;
}

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static int find(uint64_t free, uint64_t warm, unsigned n, uint64_t starts) {
  unsigned cold, slack;
  return hk_find_run_best(free, warm, n, starts, n, &cold, &slack);
}

UNIT_TEST(nothing_fits) {
  CHECK_EQ(find(0, 0, 1, ~0ull), -1);
  CHECK_EQ(find(bits(3, 4) | bits(10, 4), ~0ull, 5, ~0ull), -1);     /* two stretches of 4 */
  CHECK_EQ(find(bits(0, 8), ~0ull, 4, 1ull << 5), -1);               /* the only start allowed is too late */
  CHECK_EQ(find(~0ull, 0, 64, ~0ull), 0);                            /* all of it */
  CHECK_EQ(find(~0ull & ~1ull, 0, 64, ~0ull), -1);
}

UNIT_TEST(resident_units_before_fresh_ones) {
  unsigned cold, slack;
  /* a one-unit hole that is cold, a long stretch that is warm */
  CHECK_EQ(hk_find_run_best(bits(5, 1) | bits(20, 10), bits(20, 10), 1, ~0ull, 1, &cold, &slack), 20);
  CHECK_EQ(cold, 0);
  CHECK_EQ(slack, 9);
  /* within a stretch: the window with the fewest cold units, wherever it is */
  CHECK_EQ(hk_find_run_best(bits(10, 20), bits(17, 3), 3, ~0ull, 3, &cold, &slack), 17);
  CHECK_EQ(cold, 0);
  CHECK_EQ(hk_find_run_best(bits(10, 20), bits(17, 3), 5, ~0ull, 5, &cold, &slack), 15);  /* the nearer end on a tie */
  CHECK_EQ(cold, 2);
}

UNIT_TEST(short_runs_fill_holes) {
  uint64_t free = bits(2, 1) | bits(8, 6) | bits(30, 3) | bits(40, 20);
  CHECK_EQ(find(free, ~0ull, 1, ~0ull), 2);   /* the one-unit hole */
  CHECK_EQ(find(free, ~0ull, 2, ~0ull), 30);  /* the three-unit stretch, not the six */
  CHECK_EQ(find(free, ~0ull, 3, ~0ull), 30);
  CHECK_EQ(find(free, ~0ull, 6, ~0ull), 8);   /* an exact fit */
  CHECK_EQ(find(free, ~0ull, 7, ~0ull), 40);  /* only the long one: at its start */
}

UNIT_TEST(a_stretch_is_cut_at_its_end) {
  CHECK_EQ(find(bits(10, 30), ~0ull, 4, ~0ull), 10);
  CHECK_EQ(find(bits(10, 30), bits(30, 10), 4, ~0ull), 36);       /* warm only at its top */
  CHECK_EQ(find(bits(10, 30), ~0ull, 4, bits(11, 29)), 36);       /* its first start not allowed */
}

UNIT_TEST(only_allowed_starts) {
  uint64_t even = 0x5555555555555555ull;
  CHECK_EQ(find(bits(3, 4), ~0ull, 2, even), 4);
  CHECK_EQ(find(bits(3, 3), ~0ull, 2, even), 4);
  CHECK_EQ(find(bits(3, 2), ~0ull, 2, even), -1);
}

/* The SuperSlabs' search by brute force. */
static int reference_first(uint64_t free, uint64_t warm, unsigned n, uint64_t starts, unsigned *cold) {
  int best = -1;
  for (unsigned i = 0; i + n <= 64; i++) {
    if (!(starts >> i & 1) || (free & bits(i, n)) != bits(i, n)) continue;
    unsigned c = (unsigned)__builtin_popcountll(bits(i, n) & ~warm);
    if (best < 0 || c < *cold || (c == *cold && n > 1)) best = (int)i, *cold = c;
  }
  return best;
}

UNIT_TEST(slabs_fewest_cold_then_lowest_or_highest) {
  unsigned cold;
  CHECK_EQ(hk_find_run(bits(3, 10), bits(5, 2), 1, ~0ull, &cold), 5);   /* the lowest warm unit */
  CHECK_EQ(cold, 0);
  CHECK_EQ(hk_find_run(bits(3, 10), 0, 1, ~0ull, &cold), 3);            /* the lowest cold one */
  CHECK_EQ(hk_find_run(bits(3, 10), 0, 4, ~0ull, &cold), 9);            /* longer runs: the highest */
  CHECK_EQ(cold, 4);
  CHECK_EQ(hk_find_run(bits(3, 3), ~0ull, 4, ~0ull, &cold), -1);
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (int t = 0; t < 100000; t++) {
    uint64_t r[3] = {xorshift(&x), xorshift(&x), xorshift(&x)};
    uint64_t free = t % 2 ? r[0] | r[1] : r[0], starts = t % 5 == 0 ? 0x5555555555555555ull : ~0ull;
    unsigned n = 1 + (unsigned)(r[2] >> 58) % (t % 4 == 0 ? 64 : 8), c1 = 0, c2 = 0;
    int a = hk_find_run(free, r[2], n, starts, &c1), b = reference_first(free, r[2], n, starts, &c2);
    CHECK_MSG(a == b, "free %016llx warm %016llx n %u: %d, brute force %d", (unsigned long long)free,
              (unsigned long long)r[2], n, a, b);
    if (a >= 0) CHECK_EQ(c1, c2);
  }
}

/* Random bitmaps of every density, every run length and limit: the same
 * start, cold count and slack as the brute-force choice. */
UNIT_TEST(agrees_with_brute_force) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int t = 0; t < 200000; t++) {
    uint64_t r[4] = {xorshift(&x), xorshift(&x), xorshift(&x), xorshift(&x)};
    uint64_t free = t % 3 == 0 ? r[0] | r[1] : t % 3 == 1 ? r[0] : r[0] & r[1];
    uint64_t warm = t % 2 ? r[2] : r[2] | r[3];
    uint64_t starts = t % 5 == 0 ? 0x5555555555555555ull : t % 7 == 0 ? r[3] : ~0ull;
    unsigned n = 1 + (unsigned)(r[3] >> 58) % (t % 4 == 0 ? 64 : 8), limit = t % 3 ? n : (unsigned)(r[1] >> 60) % 3;
    unsigned c1 = 0, s1 = 0, c2 = 0, s2 = 0;
    int a = hk_find_run_best(free, warm, n, starts, limit, &c1, &s1), b = reference(free, warm, n, starts, limit, &c2, &s2);
    CHECK_MSG(a == b, "free %016llx warm %016llx starts %016llx n %u limit %u: %d, brute force %d",
              (unsigned long long)free, (unsigned long long)warm, (unsigned long long)starts, n, limit, a, b);
    if (a >= 0) {
      CHECK_EQ(c1, c2);
      CHECK_EQ(s1, s2);
    }
  }
}
