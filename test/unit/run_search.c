/* SPDX-License-Identifier: MIT */
/* Run search (src/region/units.c).  hk_region_fit places huge blocks in regions of
 * HK_REGION_UNITS units: the fewest cold units first, then the shortest
 * stretch of free units, then the nearest to a stretch's end, looking at
 * nothing past the units ever touched (free up to a short region's end).  hk_find_run
 * (src/base/base.h) places slabs in SuperSlabs: the fewest cold units, the
 * lowest start for one unit and the highest for more.  Both only at allowed
 * starts, -1 when nothing fits.  hk_run_first_warm places the large classes
 * in regions: the lowest run of free resident units. */
#include "unit.h"

static uint64_t bits(unsigned at, unsigned n) { return hk_bits(at, n); }

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* ---- regions: hk_region_fit ------------------------------------------------- */

typedef uint64_t region_bits_t[HK_REGION_WORDS];

static void set_units(uint64_t *w, unsigned at, unsigned n) {
  for (unsigned i = at; i < at + n; i++) w[i / 64] |= 1ull << (i % 64);
}
static void clear_units(uint64_t *w, unsigned at, unsigned n) {
  for (unsigned i = at; i < at + n; i++) w[i / 64] &= ~(1ull << (i % 64));
}
static bool unit(const uint64_t *w, unsigned i) { return w[i / 64] >> (i % 64) & 1; }

/* The fewest cold units and then the least slack, by brute force over every
 * allowed start; -1 if nothing fits within `limit`. */
static int reference(const uint64_t *used, const uint64_t *warm, unsigned n, unsigned step, unsigned limit,
                     unsigned *cold, unsigned *slack) {
  int best = -1;
  for (unsigned p = 0; p + n <= HK_REGION_UNITS; p += step) {
    unsigned c = 0, lo = p, hi = p + n;
    bool fits = true;
    for (unsigned i = p; i < p + n && fits; i++) fits = !unit(used, i), c += !unit(warm, i);
    if (!fits || c > limit) continue;
    while (lo > 0 && !unit(used, lo - 1)) lo--;
    while (hi < HK_REGION_UNITS && !unit(used, hi)) hi++;
    if (best < 0 || c < *cold || (c == *cold && hi - lo - n < *slack)) best = (int)p, *cold = c, *slack = hi - lo - n;
  }
  return best;
}

static int fit(const uint64_t *used, const uint64_t *warm, unsigned n) {
  unsigned cold, slack;
  return hk_region_fit(used, warm, HK_REGION_UNITS, n, 1, n, &cold, &slack);
}

UNIT_TEST(region_nothing_fits) {
  region_bits_t used = {0}, warm = {0};
  set_units(used, 0, HK_REGION_UNITS);
  CHECK_EQ(fit(used, warm, 1), -1);
  clear_units(used, HK_REGION_HEADER_UNITS, HK_REGION_UNITS - HK_REGION_HEADER_UNITS);
  CHECK_EQ(fit(used, warm, HK_REGION_UNITS - HK_REGION_HEADER_UNITS), HK_REGION_HEADER_UNITS);  /* all of it */
  CHECK_EQ(fit(used, warm, HK_REGION_UNITS - HK_REGION_HEADER_UNITS + 1), -1);
}

/* The units from `end` on are one stretch with the free units just below
 * it, or alone when the unit below `end` is in use, at a word's edge or not. */
UNIT_TEST(region_stretch_past_end) {
  for (unsigned end = 639; end <= 641; end++) {
    region_bits_t used = {0}, warm = {0};
    unsigned cold, slack;
    set_units(used, 0, end);
    CHECK_EQ(hk_region_fit(used, warm, end, 5, 1, 5, &cold, &slack), (int)end);
    CHECK_EQ(slack, HK_REGION_UNITS - end - 5);
    clear_units(used, end - 3, 3);
    set_units(warm, end - 3, 3);
    CHECK_EQ(hk_region_fit(used, warm, end, 5, 1, 5, &cold, &slack), (int)end - 3);  /* 3 resident, 2 fresh */
    CHECK_EQ(cold, 2);
    CHECK_EQ(hk_region_fit(used, warm, end, 3, 1, 3, &cold, &slack), (int)end - 3);
    CHECK_EQ(cold, 0);
    CHECK_EQ(slack, HK_REGION_UNITS - end);  /* in the stretch that runs to the region's end */
  }
}

/* A short region (mapped where an address-space limit left less than a
 * whole one): its units past its end are used, and the stretch from `end`
 * on stops there. */
UNIT_TEST(region_short_stops_at_its_end) {
  const unsigned units = HK_REGION_UNITS / 8, end = 100;
  region_bits_t used = {0}, warm = {0};
  unsigned cold, slack;
  set_units(used, 0, end);
  set_units(used, units, HK_REGION_UNITS - units);
  CHECK_EQ(hk_region_fit(used, warm, end, units - end, 1, units, &cold, &slack), (int)end);  /* all it has */
  CHECK_EQ(slack, 0);
  CHECK_EQ(hk_region_fit(used, warm, end, units - end + 1, 1, units, &cold, &slack), -1);
  CHECK_EQ(hk_region_fit(used, warm, end, 4, 1, 4, &cold, &slack), (int)end);
  CHECK_EQ(slack, units - end - 4);
  set_units(used, end, units - end);  /* the top at its end, and nothing free */
  CHECK_EQ(hk_region_fit(used, warm, units, 1, 1, 1, &cold, &slack), -1);
}

UNIT_TEST(region_resident_units_first) {
  region_bits_t used = {0}, warm = {0};
  unsigned cold, slack;
  set_units(used, 0, 100);
  set_units(used, 101, 899);    /* a cold one-unit hole at 100 */
  set_units(used, 1010, 1038);  /* a stretch [1000, 1010) */
  set_units(warm, 1000, 10);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 1, 1, 1, &cold, &slack), 1000);  /* warm beats the tighter hole */
  CHECK_EQ(cold, 0);
  CHECK_EQ(slack, 9);
  set_units(used, 100, 1);
  clear_units(used, 1500, 300);  /* a long stretch with a warm run inside */
  clear_units(warm, 1000, 10);
  set_units(warm, 1600, 3);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 3, 1, 3, &cold, &slack), 1600);  /* the warm run, wherever it is */
  CHECK_EQ(cold, 0);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 3, 1, 0, &cold, &slack), 1600);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 5, 1, 5, &cold, &slack), 1598);  /* over it, nearer the stretch's start */
  CHECK_EQ(cold, 2);
  clear_units(warm, 1600, 3);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 5, 1, 5, &cold, &slack), 1000);  /* all cold: the shorter stretch */
  CHECK_EQ(cold, 5);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 3, 1, 2, &cold, &slack), -1);    /* every place cold: over the limit */
}

UNIT_TEST(region_short_runs_fill_holes) {
  region_bits_t used, warm;
  memset(used, 0xff, sizeof used);
  clear_units(used, 194, 1);
  clear_units(used, 328, 6);
  clear_units(used, 606, 3);
  clear_units(used, 1280, 128);
  for (unsigned k = 0; k < HK_REGION_WORDS; k++) warm[k] = ~used[k];
  CHECK_EQ(fit(used, warm, 1), 194);   /* the one-unit hole */
  CHECK_EQ(fit(used, warm, 2), 606);   /* the three-unit stretch, not the six */
  CHECK_EQ(fit(used, warm, 6), 328);   /* an exact fit */
  CHECK_EQ(fit(used, warm, 7), 1280);  /* only the long one: at its start */
}

UNIT_TEST(region_aligned_starts) {
  region_bits_t used = {0}, warm = {0};
  unsigned cold, slack;
  set_units(used, 0, 40);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 4, 32, 4, &cold, &slack), 64);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 4, 1, 4, &cold, &slack), 40);
  set_units(used, 64, HK_REGION_UNITS - 64 - 20);
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 20, 32, 20, &cold, &slack), -1);  /* 40 .. 63 and the last 20: none 32-aligned */
  CHECK_EQ(hk_region_fit(used, warm, HK_REGION_UNITS, 20, 4, 20, &cold, &slack), 2028);  /* the exact fit */
}

/* Random regions of every density and run length, resident memory in runs:
 * the same fewest cold units and least slack as the brute-force choice, at
 * an allowed start where the run fits. */
UNIT_TEST(region_agrees_with_brute_force) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int t = 0; t < 3000; t++) {
    region_bits_t used, warm;
    for (unsigned k = 0; k < HK_REGION_WORDS; k++) {
      uint64_t r[3] = {xorshift(&x), xorshift(&x), xorshift(&x)};
      /* mostly long stretches: most words all free or all in use */
      uint64_t free = t % 3 == 0 ? r[0] | r[1] : (r[0] & 7) < 3 ? ~0ull : (r[0] & 7) < 6 ? 0 : r[1] | r[2];
      uint64_t resident = t % 2 ? r[2] : (r[1] & 3) ? ~0ull >> (r[2] & 63) : 0;
      used[k] = ~free | (k == 0 ? bits(0, HK_REGION_HEADER_UNITS) : 0);
      warm[k] = resident & ~used[k];
    }
    /* in one test of five, the units from `end` on never touched: free and cold, and not searched */
    unsigned end = t % 5 ? HK_REGION_UNITS
                         : HK_REGION_HEADER_UNITS + (unsigned)(xorshift(&x) % (HK_REGION_UNITS - HK_REGION_HEADER_UNITS + 1));
    clear_units(used, end, HK_REGION_UNITS - end);
    clear_units(warm, end, HK_REGION_UNITS - end);
    uint64_t r = xorshift(&x);
    unsigned n = 1 + (unsigned)(r % (t % 4 == 0 ? 300 : 12)), step = t % 9 == 0 ? 1u << (r >> 60) % 6 : 1;
    unsigned limit = t % 3 ? n : (unsigned)(r >> 40) % 4, c1 = 0, s1 = 0, c2 = 0, s2 = 0;
    int a = hk_region_fit(used, warm, end, n, step, limit, &c1, &s1), b = reference(used, warm, n, step, limit, &c2, &s2);
    CHECK_MSG((a < 0) == (b < 0), "test %d n %u step %u limit %u: %d, brute force %d", t, n, step, limit, a, b);
    if (a < 0) continue;
    CHECK_MSG(c1 == c2 && s1 == s2, "test %d n %u step %u: cold %u slack %u, brute force %u %u", t, n, step, c1, s1,
              c2, s2);
    CHECK_EQ(a % (int)step, 0);
    unsigned c = 0;
    for (unsigned i = (unsigned)a; i < (unsigned)a + n; i++) CHECK(!unit(used, i)), c += !unit(warm, i);
    CHECK_EQ(c, c1);
    /* huge.c's best_fit takes the start of the lowest shortest stretch
     * without this search when its first n units are resident: so would
     * the search */
    unsigned lo = 0, len = 0;
    for (unsigned i = 0, j; i < HK_REGION_UNITS; i = j + 1) {
      for (j = i; j < HK_REGION_UNITS && !unit(used, j); j++) {}
      if (j - i >= n && (!len || j - i < len)) lo = i, len = j - i;
    }
    bool warm_start = len > 0;
    for (unsigned i = lo; i < lo + n && warm_start; i++) warm_start = unit(warm, i);
    if (step == 1 && warm_start) CHECK_MSG(a == (int)lo && c1 == 0 && s1 == len - n, "test %d: %d, not %u", t, a, lo);
  }
}

/* ---- regions: the list of free stretches ------------------------------------ */

/* Blocks taken and given back at random, the list kept beside a bitmap of
 * the same units: the list holds each stretch of free units whole, once,
 * and its shortest is the brute force's. */
UNIT_TEST(region_stretches_follow_the_bitmap) {
  static hk_stretches_t s;
  region_bits_t used = {0};
  set_units(used, 0, HK_REGION_HEADER_UNITS);
  s.count = 0;
  hk_stretches_give(&s, HK_REGION_HEADER_UNITS, HK_REGION_UNITS - HK_REGION_HEADER_UNITS);
  unsigned starts[HK_REGION_UNITS], lens[HK_REGION_UNITS], nblocks = 0;
  uint64_t x = 0x853c49e6748fea9bull;
  for (int t = 0; t < 20000; t++) {
    uint64_t r = xorshift(&x);
    unsigned n = 1 + (unsigned)(r % (t % 3 ? 4 : 64)), at = 0;
    if (nblocks && (r >> 32) % 100 < (nblocks > 200 ? 60u : 40u)) {  /* give back a block, else take one */
      unsigned b = (unsigned)(r >> 40) % nblocks;
      hk_stretches_give(&s, starts[b], lens[b]);
      clear_units(used, starts[b], lens[b]);
      starts[b] = starts[--nblocks], lens[b] = lens[nblocks];
    } else if (hk_stretches_shortest(&s, n, &at)) {
      unsigned u = at + (unsigned)(r >> 20) % 3;  /* at the start, or a unit or two in when it fits */
      for (unsigned i = at; i < u + n; i++)
        if (i >= HK_REGION_UNITS || unit(used, i)) u = at;
      hk_stretches_take(&s, at, u, n);
      set_units(used, u, n);
      starts[nblocks] = u, lens[nblocks++] = n;
    }
    unsigned covered = 0;
    for (unsigned i = 0; i < s.count; i++) {
      unsigned a = hk_stretch_at(&s, i), e = a + hk_stretch_len(&s, i);
      CHECK_MSG(e > a && e <= HK_REGION_UNITS && unit(used, a - 1) && (e == HK_REGION_UNITS || unit(used, e)),
                "step %d: stretch [%u, %u) not a whole stretch of free units", t, a, e);
      for (unsigned k = a; k < e; k++) CHECK(!unit(used, k));
      CHECK(s.place[a] == i && s.place[e - 1] == i);  /* found from either end */
      covered += e - a;
    }
    unsigned free_units = 0, best = 0, best_at = 0;
    for (unsigned i = 0; i < HK_REGION_UNITS; i++) free_units += !unit(used, i);
    CHECK_EQ(covered, free_units);  /* whole, disjoint stretches covering every free unit: each one once */
    for (unsigned lo = 0, hi; lo < HK_REGION_UNITS; lo = hi + 1) {
      while (lo < HK_REGION_UNITS && unit(used, lo)) lo++;
      for (hi = lo; hi < HK_REGION_UNITS && !unit(used, hi); hi++) {}
      if (hi > lo && hi - lo >= n && (!best || hi - lo < best)) best = hi - lo, best_at = lo;
    }
    CHECK_EQ(hk_stretches_shortest(&s, n, &at), best);
    if (best) CHECK_EQ(at, best_at);
  }
}

/* The cases the random walk may miss: a stretch taken whole from the
 * middle of the list (the last moves into its place), and one given back
 * between two, the one before it the last of the list. */
UNIT_TEST(region_stretches_swap_and_merge) {
  static hk_stretches_t s;
  unsigned at = 0;
  s.count = 0;
  hk_stretches_give(&s, 100, 10);  /* [100, 110) */
  hk_stretches_give(&s, 200, 5);   /* [200, 205) */
  hk_stretches_give(&s, 300, 7);   /* [300, 307) */
  hk_stretches_take(&s, 100, 100, 10);  /* entry 0 whole: [300, 307) moves to 0 */
  CHECK_EQ(s.count, 2);
  CHECK_EQ(hk_stretches_shortest(&s, 6, &at), 7);
  CHECK_EQ(at, 300);
  hk_stretches_give(&s, 205, 95);  /* joins [200, 205), the last entry, and [300, 307) */
  CHECK_EQ(s.count, 1);
  CHECK_EQ(hk_stretches_shortest(&s, 1, &at), 107);
  CHECK_EQ(at, 200);
  hk_stretches_take(&s, 200, 250, 8);  /* from the middle: [200, 250) and [258, 307) */
  CHECK_EQ(hk_stretches_shortest(&s, 1, &at), 49);
  CHECK_EQ(at, 258);
  CHECK_EQ(hk_stretches_shortest(&s, 50, &at), 50);
  CHECK_EQ(at, 200);
  CHECK_EQ(hk_stretches_shortest(&s, 51, &at), 0);
}

/* ---- SuperSlabs: hk_find_run ------------------------------------------------ */

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

/* ---- large classes in regions: hk_run_first_warm ------------------------- */

static int reference_first_warm(const uint64_t *used, const uint64_t *warm, unsigned end, unsigned n) {
  for (unsigned i = 0; i + n <= hk_align_up(end, 64); i++)
    if (!hk_bits_count(used, i, n) && hk_bits_count(warm, i, n) == n) return (int)i;
  return -1;
}

UNIT_TEST(large_classes_lowest_warm_run) {
  region_bits_t used = {0}, warm = {0};
  hk_bits_set(used, 0, 32);
  hk_bits_set(warm, 60, 10);                                  /* across a word's end */
  CHECK_EQ(hk_run_first_warm(used, warm, 128, 10), 60);
  CHECK_EQ(hk_run_first_warm(used, warm, 128, 11), -1);
  CHECK_EQ(hk_run_first_warm(used, warm, 64, 4), 60);
  CHECK_EQ(hk_run_first_warm(used, warm, 64, 5), -1);         /* past `end`, rounded to words: not looked at */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int t = 0; t < 20000; t++) {
    for (unsigned k = 0; k < HK_REGION_WORDS; k++) {
      used[k] = xorshift(&x) & xorshift(&x) & xorshift(&x);  /* mostly free */
      warm[k] = ~used[k] & (t % 2 ? ~0ull : xorshift(&x) | xorshift(&x));
    }
    unsigned n = 1 + (unsigned)(xorshift(&x) >> 59) % 16, end = 64 * (1 + (unsigned)(xorshift(&x) % HK_REGION_WORDS));
    int a = hk_run_first_warm(used, warm, end, n), b = reference_first_warm(used, warm, end, n);
    CHECK_MSG(a == b, "n %u end %u: %d, brute force %d", n, end, a, b);
  }
}
