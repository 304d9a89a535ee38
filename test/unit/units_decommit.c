/* SPDX-License-Identifier: MIT */
/* Decommit (src/region/units.c).  hk_units_decommit gives back the free
 * units of a word's `bits` with one call per stretch of free units, from
 * its first unit in `bits` to its last, the free units between going too:
 * their pages read as zero after, their warm, dirty and dirty_old bits are
 * clear, and it returns the bytes of those that were resident (warm).
 * Units in use, and free units outside those spans, keep their bytes and
 * their bits. */
#include "unit.h"

#include <sys/mman.h>

enum { UNITS = 64 };

static uint64_t set(const unsigned *u, unsigned n) {
  uint64_t w = 0;
  for (unsigned i = 0; i < n; i++) w |= 1ull << u[i];
  return w;
}

UNIT_TEST(one_call_per_stretch_of_free_units) {
  uint8_t *base = mmap(NULL, hk_units_bytes(UNITS), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(base != MAP_FAILED);
  for (unsigned u = 0; u < UNITS; u++) memset(base + hk_units_bytes(u), 0x5a, 4096);
  /* used: 0, 10, 11, 40; free since before the last tick: 2 3 6 8, 30, 45 46;
   * freed since: 5 7 20; free and cold (given back before): 4, the rest */
  uint64_t used = set((const unsigned[]){0, 10, 11, 40}, 4);
  uint64_t dirty_old = set((const unsigned[]){2, 3, 6, 8, 30, 45, 46}, 7);
  uint64_t dirty = set((const unsigned[]){5, 7, 20}, 3);
  uint64_t warm = dirty | dirty_old, stale = ~0ull;
  size_t resident = 0;
  hk_units_t m = {.base = base, .used = &used, .dirty = &dirty, .dirty_old = &dirty_old, .warm = &warm,
                  .stale = &stale, .words = 1, .resident = &resident};
  hak_os_stats_t before, after;
  hak_os_stats(&before);
  size_t bytes = hk_units_decommit(&m, 0, dirty_old);
  hak_os_stats(&after);
  CHECK_EQ(after.madvise_calls - before.madvise_calls, 3);  /* 2-8, 30, 45-46: not 5 runs */
  uint64_t gone = hk_bits(2, 7) | 1ull << 30 | hk_bits(45, 2);
  CHECK_EQ(bytes, hk_units_bytes(9));  /* 4 was not resident */
  CHECK_EQ(warm, 1ull << 20);
  CHECK_EQ(dirty, 1ull << 20);
  CHECK_EQ(dirty_old, 0);
  CHECK_EQ(used, set((const unsigned[]){0, 10, 11, 40}, 4));
  if (hk_opt.decommit != HK_DECOMMIT_FREE) CHECK_EQ(stale, ~gone);
  for (unsigned u = 0; u < UNITS; u++) {
    uint8_t want = gone >> u & 1 ? 0 : 0x5a;
    CHECK_MSG(base[hk_units_bytes(u)] == want && base[hk_units_bytes(u) + 4095] == want, "unit %u reads %#x, not %#x",
              u, base[hk_units_bytes(u)], want);
  }
  munmap(base, hk_units_bytes(UNITS));
}

UNIT_TEST(a_stretch_to_the_word_end) {
  uint8_t *base = mmap(NULL, hk_units_bytes(UNITS), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(base != MAP_FAILED);
  for (unsigned u = 0; u < UNITS; u++) base[hk_units_bytes(u)] = 1;
  uint64_t used = 1, dirty_old = 1ull << 1 | 1ull << 63, dirty = 0, warm = dirty_old, stale = ~0ull;
  size_t resident = 0;
  hk_units_t m = {.base = base, .used = &used, .dirty = &dirty, .dirty_old = &dirty_old, .warm = &warm,
                  .stale = &stale, .words = 1, .resident = &resident};
  hak_os_stats_t before, after;
  hak_os_stats(&before);
  CHECK_EQ(hk_units_decommit(&m, 0, dirty_old), hk_units_bytes(2));
  hak_os_stats(&after);
  CHECK_EQ(after.madvise_calls - before.madvise_calls, 1);
  CHECK_EQ(base[0], 1);
  for (unsigned u = 1; u < UNITS; u++) CHECK_MSG(base[hk_units_bytes(u)] == 0, "unit %u kept its byte", u);
  CHECK_EQ(warm, 0);
  munmap(base, hk_units_bytes(UNITS));
}
