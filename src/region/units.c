/* SPDX-License-Identifier: MIT */
/* Units: the bookkeeping SuperSlabs and the regions of huge blocks share,
 * on bitmaps of one word (a SuperSlab's 64 units) or of 32 (a region's
 * 2 048).  A unit given back stays resident ("dirty") until the purge
 * schedule (service/purge.c) has seen it free for a whole epoch: each tick
 * decommits the units freed before the previous tick (`dirty_old`), with
 * the free units between them, and ages the rest, so a unit is given back
 * between one and two purge delays after it was freed (sooner where it
 * lies between older ones), and a unit reused sooner costs neither a
 * system call nor a page fault.  Called with the region's arena's lock held. */
#include "region/region.h"

size_t hk_units_decommit(const hk_units_t *m, unsigned k, uint64_t bits) {
  const uint64_t free = ~m->used[k], resident = m->warm[k] | bits;
  hk_assert(!(bits & ~free), "units in use decommitted");
  uint64_t gone = 0, cleared = 0;
  for (uint64_t rest = bits; rest;) {
    /* From a unit of `bits` to the last one in its stretch of free units:
     * one call, the free units between going too (a tick's units freed in
     * two epochs interleave: docs/DESIGN.md, The memory life-cycle) */
    unsigned b = (unsigned)__builtin_ctzll(rest);
    uint64_t used_after = ~(free >> b);
    uint64_t in = rest & hk_bits(b, used_after ? (unsigned)__builtin_ctzll(used_after) : 64 - b);
    unsigned n = 64 - (unsigned)__builtin_clzll(in) - b;
    if (hk_os_decommit(m->base + hk_units_bytes((size_t)k * 64 + b), hk_units_bytes(n))) cleared |= hk_bits(b, n);
    gone |= hk_bits(b, n);
    rest &= ~hk_bits(b, n);
  }
  if (hk_opt.decommit != HK_DECOMMIT_FREE) m->stale[k] &= ~cleared;
  m->warm[k] &= ~gone;
  m->dirty[k] &= ~gone;
  m->dirty_old[k] &= ~gone;
  for (unsigned h = 2 * k; m->split && h < 2 * k + 2; h++)
    if ((gone & hk_page_mask(h)) && (gone & hk_page_mask(h)) != hk_page_mask(h)) *m->split |= 1ull << h;
  return hk_units_bytes((size_t)__builtin_popcountll(gone & resident));
}

size_t hk_units_age(const hk_units_t *m, int mode, bool *pending) {
  size_t bytes = 0;
  for (unsigned k = 0; k < m->words; k++) {
    uint64_t bits = mode == HK_PURGE_DUE ? m->dirty_old[k] : m->warm[k];
    size_t n = bits ? hk_units_decommit(m, k, bits) : 0;
    if (n) hk_resident_add(m->resident, -(ptrdiff_t)n);
    bytes += n;
    m->dirty_old[k] = mode == HK_PURGE_DUE ? m->dirty[k] : 0;
    m->dirty[k] = 0;
    *pending |= m->dirty_old[k] != 0;
  }
  return bytes;
}

size_t hk_units_give_back(const hk_units_t *m, bool old, size_t want, size_t bytes) {
  uint64_t *age = old ? m->dirty_old : m->dirty;
  for (unsigned k = 0; k < m->words && bytes < want; k++) {
    size_t n = age[k] ? hk_units_decommit(m, k, age[k]) : 0;
    if (n) hk_resident_add(m->resident, -(ptrdiff_t)n);
    bytes += n;
  }
  return bytes;
}

/* ---- runs: where n units go ---------------------------------------------- */
/* Where a run of n units goes in a region: at a multiple of `step`, in a
 * stretch of free units (clear in `used`), with the fewest units outside
 * `warm` (free units still resident: no page fault); then in the shortest
 * stretch, so that short runs fill holes and leave long stretches to long
 * runs; then the nearest to one of the stretch's ends, so as not to cut it in
 * two.  Placements with more than `limit` cold units are not wanted.  With
 * step 1 the candidates are a stretch's ends and the edges of its warm runs:
 * the count of warm units in a window of n has its maxima there, so the
 * fewest cold units is found exactly; with a larger step every allowed start
 * is tried.  Units from `end` on are free and cold (the part of a region
 * never touched: their bits must be clear), and only their count matters.
 * Returns the first unit, or -1; *cold and *slack get the figures of a
 * place found. */
typedef struct hk_fit {
  int at;
  unsigned cold, slack, edge;
} hk_fit_t;

static void fit_try(hk_fit_t *f, const uint64_t *warm, unsigned p, unsigned n, unsigned lo, unsigned hi) {
  unsigned s = hi - lo - n, e = hk_min(p - lo, hi - n - p);
  bool closer = s < f->slack || (s == f->slack && (e < f->edge || (e == f->edge && (int)p < f->at)));
  if (f->at >= 0 && f->cold == 0 && !closer) return;  /* no count of cold units beats it */
  unsigned k = n - hk_bits_count(warm, p, n);
  if (f->at < 0 ? k < f->cold : k < f->cold || (k == f->cold && closer)) *f = (hk_fit_t){(int)p, k, s, e};
}

/* Stretch i is [at, at+len); its index goes to both its ends. */
static void stretch_set(hk_stretches_t *s, unsigned i, unsigned at, unsigned len) {
  s->span[i] = (uint32_t)len << 16 | at;
  s->place[at] = s->place[at + len - 1] = (uint16_t)i;
}

static void stretch_drop(hk_stretches_t *s, unsigned i) {
  unsigned last = --s->count;
  if (i != last) stretch_set(s, i, hk_stretch_at(s, last), hk_stretch_len(s, last));
}

/* The index of the stretch starting at unit u, or of the one ending just
 * before it; s->count if there is none.  A stale place names a stretch
 * that does not start or end there. */
static unsigned stretch_starting(const hk_stretches_t *s, unsigned u) {
  unsigned i = u < HK_REGION_UNITS ? s->place[u] : s->count;
  return i < s->count && hk_stretch_at(s, i) == u ? i : s->count;
}
static unsigned stretch_ending(const hk_stretches_t *s, unsigned u) {
  unsigned i = u > 0 ? s->place[u - 1] : s->count;
  return i < s->count && hk_stretch_at(s, i) + hk_stretch_len(s, i) == u ? i : s->count;
}

void hk_stretches_take(hk_stretches_t *s, unsigned start, unsigned u, unsigned n) {
  unsigned i = stretch_starting(s, start);
  hk_assert(i < s->count && start <= u && u + n <= start + hk_stretch_len(s, i), "a huge block's units in one free stretch");
  unsigned end = start + hk_stretch_len(s, i);
  if (u > start) {
    stretch_set(s, i, start, u - start);
    if (u + n < end) stretch_set(s, s->count++, u + n, end - u - n);
  } else if (u + n < end) {
    stretch_set(s, i, u + n, end - u - n);
  } else {
    stretch_drop(s, i);
  }
}

void hk_stretches_give(hk_stretches_t *s, unsigned u, unsigned n) {
  unsigned before = stretch_ending(s, u), after = stretch_starting(s, u + n);
  if (before < s->count) {
    stretch_set(s, before, hk_stretch_at(s, before),
                hk_stretch_len(s, before) + n + (after < s->count ? hk_stretch_len(s, after) : 0));
    if (after < s->count) stretch_drop(s, after);  /* may move `before` into its place, updated */
  } else if (after < s->count) {
    stretch_set(s, after, u, hk_stretch_len(s, after) + n);
  } else {
    stretch_set(s, s->count++, u, n);
  }
}

unsigned hk_stretches_shortest(const hk_stretches_t *s, unsigned n, unsigned *at) {
  /* The length above the first unit in one key: the least key is the
   * shortest stretch, the lowest of equals.  Without a branch per stretch
   * on its length against n, which went mispredicted: one thread replacing
   * blocks of 1-4 MiB ran 1.36 times as fast, with a third fewer
   * mispredicted branches and 3 % more instructions (cachegrind). */
  uint32_t best = UINT32_MAX;
  for (unsigned i = 0; i < s->count; i++) {
    uint32_t key = s->span[i] | -(uint32_t)(s->span[i] >> 16 < n);  /* too short: none */
    best = key < best ? key : best;
  }
  if (best == UINT32_MAX) return 0;
  *at = best & 0xffff;
  return best >> 16;
}

int hk_region_fit(const uint64_t *used, const uint64_t *warm, unsigned end, unsigned n, unsigned step,
                  unsigned limit, unsigned *cold, unsigned *slack) {
  hk_fit_t f = {-1, limit + 1, HK_REGION_UNITS, HK_REGION_UNITS};
  for (unsigned lo = hk_bits_next(used, 0, false, end), hi; lo < HK_REGION_UNITS;
       lo = hi < end ? hk_bits_next(used, hi, false, end) : HK_REGION_UNITS) {
    hi = hk_bits_next(used, lo, true, end);
    if (hi == end) hi = hk_bits_next(used, end, true, HK_REGION_UNITS);  /* free past the top, to a short region's end */
    if (hi - lo < n || (f.cold == 0 && hi - lo - n > f.slack)) continue;
    unsigned last = hi - n, warm_end = hk_min(hi, end);
    if (step > 1) {
      for (unsigned p = (lo + step - 1) / step * step; p <= last; p += step) fit_try(&f, warm, p, n, lo, hi);
      continue;
    }
    fit_try(&f, warm, lo, n, lo, hi);
    unsigned w = hk_bits_next(warm, lo, true, warm_end);
    if (w == warm_end || (w == lo && hk_bits_next(warm, lo, false, warm_end) == hi)) continue;  /* all cold or all warm: lo */
    fit_try(&f, warm, last, n, lo, hi);
    for (unsigned we; w < warm_end; w = hk_bits_next(warm, we, true, warm_end)) {
      we = hk_bits_next(warm, w, false, warm_end);
      fit_try(&f, warm, hk_min(w, last), n, lo, hi);
      fit_try(&f, warm, we >= lo + n ? hk_min(we - n, last) : lo, n, lo, hi);
    }
  }
  *cold = f.cold;
  *slack = f.slack;
  return f.at;
}
