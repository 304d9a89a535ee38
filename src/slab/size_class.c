/* SPDX-License-Identifier: MIT */
/* Size classes: their block sizes, slab geometry and thread-cache sizing. */
#include "slab/slab.h"

uint8_t hk_class_table[HK_TABLE_MAX + 1];
hk_class_info_t hk_classes[HK_NCLASS + 1];

/* The classes' sizes in order, as hk_size_to_class (base.h) numbers them. */
static void class_sizes(uint32_t *size) {
  unsigned c = 1;
  for (uint32_t s = 16; c <= HK_NCLASS; s += s < 256 ? 16 : (uint32_t)1 << (28 - __builtin_clz(s))) {
    size[c++] = s;
    if (!(s & (s - 1)) && s >= 1u << HK_ODD_FIRST && s <= 1u << HK_ODD_LAST) size[c++] = s + 16;
  }
}

/* Small classes: one 64 KiB unit per slab, so free() checks a boundary by the
 * unit offset alone (hk_on_boundary); the room left over (up to a third of
 * the unit above 16 KiB) precedes the first block, never touched: address
 * space, not memory.  Large: a block per slab, units back for any size. */
static unsigned slab_units(uint32_t size) {
  return size > HK_LARGE_MIN ? (unsigned)((size + HK_UNIT_SIZE - 1) / HK_UNIT_SIZE) : 1;
}

/* Blocks prewarmed for a class: the seeds' classes C0..C7 are the sizes up
 * to 16 B, 17-32 B, 33-64 B, ..., 1025-2048 B. */
static unsigned prewarm_count(uint32_t size) {
  if (hk_opt.mem_lean || size > 2048) return 0;
  unsigned k = size <= 16 ? 0 : 64 - (unsigned)__builtin_clzl(size - 1) - 4;
  size_t n = hk_opt.prewarm[k] != HK_OPT_UNSET ? hk_opt.prewarm[k] : hk_opt.prewarm_all;
  return (unsigned)n;
}

void hk_size_classes_init(void) {
  uint32_t sizes[HK_NCLASS + 1] = {0};
  class_sizes(sizes);
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    hk_class_info_t *ci = &hk_classes[c];
    uint32_t size = sizes[c];
    hk_assert(hk_size_to_class(size) == c && hk_size_to_class(sizes[c - 1] + 1) == c,
              "a class and hk_size_to_class disagree");
    ci->size = size;
    ci->units = (uint8_t)slab_units(size);
    ci->capacity = (uint16_t)(ci->units * HK_UNIT_SIZE / size);
    ci->first = (uint16_t)(ci->units == 1 ? HK_UNIT_SIZE - ci->capacity * size : 0);
    /* Per class and thread: 16..512 blocks of up to 512 B (about 64 KiB),
     * about 128 KiB of 513 B..32 KiB blocks (64 B apart: with 64 KiB larson
     * ran their lists dry far more often), 256 KiB above 8 KiB in the speed
     * profile (4 blocks of 32 KiB ran dry every fourth malloc); where a purger
     * thread gives memory back (balanced, lean), 64 KiB up to 1 KiB, so an
     * idle program keeps fewer slabs resident (docs/DESIGN.md, Capacities).
     * Large blocks have none: their thread's budget bounds them (tcache.c:
     * large_budget).  New threads' lists start at a quarter of `cap`
     * (tcache.c: hk_tcache_init). */
    size_t cap = (64 * 1024) / size;
    if (size <= 512 || (size <= 1024 && hk_opt.background_purge)) cap = hk_min(hk_max(cap, 16), 512);
    else if (size <= HK_LARGE_MIN) cap = (size > 8192 && !hk_opt.background_purge ? 256 : 128) * 1024 / size;
    else cap = 0;
    ci->cap = (int16_t)cap;
    /* A refill brings half a cache, at most about 8 KiB of blocks, 32 KiB
     * above 8 KiB (and of those at most a page of never-used ones: see
     * slab_take). */
    size_t batch = hk_max(cap / 2, 1);
    ci->batch = (uint16_t)hk_min(batch, hk_max((size_t)(size > 8192 ? 32768 : 8192) / size, 2));
    ci->prewarm = (uint16_t)prewarm_count(size);
  }
  for (unsigned c = 1, n = 0; n <= HK_TABLE_MAX; n++) {  /* size 0 is served as size 1 */
    if (n > hk_classes[c].size) c++;
    hk_class_table[n] = (uint8_t)c;
  }
}

void hk_class_magic_fill(uint32_t *magic, uint64_t *first) {
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    magic[c] = (uint32_t)((((uint64_t)1 << 32) + hk_classes[c].size - 1) / hk_classes[c].size);
    first[c] = (uint32_t)(magic[c] * hk_classes[c].first);
  }
}
