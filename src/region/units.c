/* SPDX-License-Identifier: MIT */
/* Units: the bookkeeping SuperSlabs and the regions of huge blocks share,
 * on bitmaps of one word (a SuperSlab's 64 units) or of 32 (a region's
 * 2 048).  A unit given back stays resident ("dirty") until the purge
 * schedule (service/purge.c) has seen it free for a whole epoch: each tick
 * decommits the units freed before the previous tick (`dirty_old`) and ages
 * the rest, so a unit is given back between one and two purge delays after
 * it was freed, and a unit reused sooner costs neither a system call nor a
 * page fault.  Called with the region's arena's lock held. */
#include "region/region.h"

size_t hk_units_decommit(const hk_units_t *m, unsigned k, uint64_t bits) {
  size_t bytes = 0;
  uint64_t cleared = 0;
  for (uint64_t rest = bits; rest;) {
    unsigned b = (unsigned)__builtin_ctzll(rest);
    uint64_t run = ~(rest >> b);
    unsigned n = run ? (unsigned)__builtin_ctzll(run) : 64 - b;
    if (hk_os_decommit(m->base + hk_units_bytes((size_t)k * 64 + b), hk_units_bytes(n))) cleared |= hk_bits(b, n);
    rest &= ~hk_bits(b, n);
    bytes += hk_units_bytes(n);
  }
  if (hk_opt.decommit == HK_DECOMMIT_DONTNEED) m->stale[k] &= ~cleared;
  m->warm[k] &= ~bits;
  m->dirty[k] &= ~bits;
  m->dirty_old[k] &= ~bits;
  for (unsigned h = 2 * k; m->split && h < 2 * k + 2; h++)
    if ((bits & hk_page_mask(h)) && (bits & hk_page_mask(h)) != hk_page_mask(h)) *m->split |= 1ull << h;
  return bytes;
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
