/* SPDX-License-Identifier: MIT */
/* Size classes (src/size_class.c): every size from 1 to HK_CLASS_MAX maps to
 * the smallest class that holds it, and the fast path's table agrees with
 * the arithmetic for every size it serves; class sizes increase strictly in
 * steps that bound the rounding loss as base/base.h says; each class's slab
 * geometry and thread-cache sizing follow the rules size_class.c states. */
#include "unit.h"

static const hk_class_info_t *info(unsigned c) { return &hk_classes[c]; }

/* 16..256 B in steps of 16, then 8 classes per doubling up to 1 MiB, and
 * the odd classes 16 B above 512 B .. 4 KiB. */
UNIT_TEST(class_sizes_increase_to_the_largest) {
  unsigned c;
  hk_size_classes_init();
  CHECK_EQ(info(1)->size, 16);
  CHECK_EQ(info(HK_NCLASS)->size, HK_CLASS_MAX);
  for (c = 1; c <= HK_NCLASS; c++) {
    uint32_t size = info(c)->size, prev = c > 1 ? info(c - 1)->size : 0;
    CHECK_MSG((size & 15) == 0, "class %u: size %u is not a multiple of 16", c, size);
    CHECK_MSG(size > prev, "class %u: size %u after %u", c, size, prev);
    if (size <= 256)
      CHECK_MSG(size - prev == 16, "class %u: step %u below 256 B", c, size - prev);
    else
      CHECK_MSG((size - prev) * 8 <= prev, "class %u: step %u from %u is more than 1/8", c,
                size - prev, prev);
  }
}

/* A power of two and a header of up to 16 B, from 512 B to 4 KiB, loses at
 * most 16 B to rounding; 8 KiB and a header goes to the next of the 8. */
UNIT_TEST(a_power_of_two_and_a_header_has_a_class) {
  hk_size_classes_init();
  for (size_t k = 9; k <= 12; k++) {
    size_t pow = (size_t)1 << k;
    CHECK_EQ(info(hk_size_to_class(pow))->size, pow);
    CHECK_EQ(info(hk_size_to_class(pow + 8))->size, pow + 16);
    CHECK_EQ(info(hk_size_to_class(pow + 16))->size, pow + 16);
    CHECK_EQ(info(hk_size_to_class(pow + 17))->size, pow + pow / 8);
  }
  CHECK_EQ(info(hk_size_to_class(8192 + 8))->size, 8192 + 1024);
}

/* The smallest class that holds n, for every n; at most 15 bytes lost below
 * 256 B, less than 1/8 of the block above. */
UNIT_TEST(every_size_maps_to_the_smallest_class_that_holds_it) {
  size_t n;
  hk_size_classes_init();
  for (n = 1; n <= HK_CLASS_MAX; n++) {
    unsigned c = hk_size_to_class(n);
    size_t size;
    CHECK_MSG(c >= 1 && c <= HK_NCLASS, "size %zu: class %u", n, c);
    size = info(c)->size;
    CHECK_MSG(size >= n, "size %zu: class %u holds only %zu", n, c, size);
    CHECK_MSG(c == 1 || info(c - 1)->size < n, "size %zu: class %u, but class %u (%u) holds it", n,
              c, c - 1, info(c - 1)->size);
    if (n <= 256)
      CHECK_MSG(size - n < 16, "size %zu: %zu bytes lost", n, size - n);
    else
      CHECK_MSG((size - n) * 8 < size, "size %zu: %zu of %zu bytes lost", n, size - n, size);
  }
}

/* The malloc fast path looks sizes up to HK_TABLE_MAX in hk_class_table,
 * indexed by the size; size 0 is served as size 1. */
UNIT_TEST(fast_path_table_agrees_with_the_arithmetic) {
  size_t n;
  hk_size_classes_init();
  CHECK_EQ(sizeof hk_class_table, HK_TABLE_MAX + 1);
  for (n = 0; n <= HK_TABLE_MAX; n++) {
    unsigned want = hk_size_to_class(n ? n : 1), have = hk_class_table[n];
    CHECK_MSG(have == want, "size %zu: table says class %u, hk_size_to_class %u", n, have, want);
  }
}

/* A slab holds as many blocks as fit in its units.  Small classes take one
 * unit (so that a block boundary is an offset in the unit), their blocks
 * ending at its end; large classes hold one block in the units it needs.
 * The boundary check's constants say exactly which offsets in a unit start
 * a block: none after the last block, none before the first. */
UNIT_TEST(slab_geometry) {
  unsigned c;
  hk_size_classes_init();
  static struct {
    uint64_t first[256];
    uint32_t magic[256];
  } t;  /* as before the class map */
  uint32_t *magic = t.magic;
  const uint64_t *magic_first = t.first;
  hk_class_magic_fill(magic, t.first);
  for (c = 1; c <= HK_NCLASS; c++) {
    size_t size = info(c)->size, units = info(c)->units, cap = info(c)->capacity;
    size_t bytes = units * HK_UNIT_SIZE;
    CHECK_MSG(cap >= 1 && cap * size <= bytes && (cap + 1) * size > bytes,
              "class %u (%zu B): %zu blocks in %zu units", c, size, cap, units);
    CHECK_EQ(hk_class_is_large(c), size > HK_LARGE_MIN);
    if (hk_class_is_large(c))
      CHECK_MSG(cap == 1 && units == (size + HK_UNIT_SIZE - 1) / HK_UNIT_SIZE,
                "large class %u (%zu B): %zu blocks in %zu units", c, size, cap, units);
    else
      CHECK_MSG(units == 1, "class %u (%zu B): %zu units", c, size, units);
    size_t first = info(c)->first;
    CHECK_MSG(units > 1 ? first == 0 : first + cap * size == bytes, "class %u (%zu B): first block at %zu", c,
              size, first);
    for (uint32_t off = 0; off < HK_UNIT_SIZE; off++) {
      int starts = off >= first && (off - first) % size == 0;
      int passes = (uint32_t)(off * magic[c] - (uint32_t)magic_first[c]) < magic[c];
      CHECK_MSG(starts == passes, "class %u (%zu B), offset %u: boundary %d, check %d", c, size, off, starts, passes);
    }
  }
  for (c = HK_NCLASS + 1; c < 256; c++) CHECK(magic[c] == 0 && magic_first[c] == 0);
  CHECK(magic[0] == 0 && magic_first[0] == 0);
}

/* Per thread and class: 16..512 blocks (at most 64 KiB) up to 512 B, as
 * many as fit in 128 KiB up to 8 KiB and in 256 KiB up to HK_LARGE_MIN, no
 * count for large classes.  A refill moves at most half a cache and about
 * 8 KiB, 32 KiB above 8 KiB (2 blocks at least). */
UNIT_TEST(thread_cache_capacities_and_batches) {
  unsigned c;
  hk_size_classes_init();
  for (c = 1; c <= HK_NCLASS; c++) {
    size_t size = info(c)->size, batch = info(c)->batch, room = size > 8192 ? 256 * 1024 : 128 * 1024;
    long cap = info(c)->cap;
    if (size <= 512)
      CHECK_MSG(cap >= 16 && cap <= 512 && (size_t)cap * size <= 64 * 1024,
                "class %u (%zu B): cache of %ld blocks", c, size, cap);
    else if (size <= HK_LARGE_MIN)
      CHECK_MSG(cap >= 4 && (size_t)cap * size <= room && (size_t)(cap + 1) * size > room,
                "class %u (%zu B): cache of %ld blocks", c, size, cap);
    else
      CHECK_MSG(cap == 0, "large class %u (%zu B): cache of %ld blocks", c, size, cap);
    CHECK_MSG(batch >= 1 && batch <= (cap > 1 ? (size_t)cap / 2 : 1),
              "class %u (%zu B): batch of %zu for a cache of %ld", c, size, batch, cap);
    CHECK_MSG(batch * size <= (size > 8192 ? 32768 : 8192) || batch <= 2, "class %u (%zu B): batch of %zu blocks",
              c, size, batch);
  }
}

/* Where a purger thread runs (the balanced and lean profiles) the lists of
 * 513 B-1 KiB blocks stay at about 64 KiB, as those below, and those of
 * 8-32 KiB at about 128 KiB. */
UNIT_TEST(thread_caches_of_small_classes_with_a_purger) {
  unsigned c;
  hk_opt.background_purge = 1;
  hk_size_classes_init();
  for (c = 1; c <= HK_NCLASS && info(c)->size <= 1024; c++)
    CHECK_MSG(info(c)->cap >= 16 && (size_t)info(c)->cap * info(c)->size <= 64 * 1024,
              "with a purger: class %u (%u B): cache of %d blocks", c, (unsigned)info(c)->size, (int)info(c)->cap);
  CHECK(c > 1);
  /* and those of 8-32 KiB at about 128 KiB, not the speed profile's 256 */
  for (c = 1; c <= HK_NCLASS; c++)
    if (info(c)->size > 8192 && info(c)->size <= HK_LARGE_MIN)
      CHECK_MSG((size_t)info(c)->cap * info(c)->size <= 128 * 1024,
                "with a purger: class %u (%u B): cache of %d blocks", c, (unsigned)info(c)->size, (int)info(c)->cap);
  hk_opt.background_purge = 0;
  hk_size_classes_init();
}
