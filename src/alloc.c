/* SPDX-License-Identifier: MIT */
/* The allocation API behind the exported names: calloc, realloc, the aligned
 * allocations and malloc_usable_size. */
#include <string.h>
#include "internal.h"

void *hk_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (total > HK_SMALL_MAX) return hk_huge_alloc(total, 16, true);
  if (total + HK_CANARY <= HK_LARGE_MIN) {
    void *p = hk_malloc_fast(total);
    if (p) memset(p, 0, total);
    return p;
  }
  /* A large block new from the OS, or given back to it, reads as zero:
   * clearing it would fault in every page at once. */
  hk_tc.zero_block = NULL;
  void *p = hk_malloc_fast(total);
  if (p && p != hk_tc.zero_block) memset(p, 0, total);
  return p;
}

/* Blocks of alignment up to 64 KiB come from the smallest class that is a
 * multiple of the alignment: slabs start on 64 KiB boundaries, so every block
 * of such a class is aligned.  Larger alignments get a mapping of their own. */
void *hk_aligned(size_t alignment, size_t size) {
  if (alignment <= 16) return hk_malloc_fast(size);
  if (alignment <= HK_UNIT_SIZE && size <= HK_SMALL_MAX) {
    hk_process_init();
    unsigned cls = hk_size_to_class(hk_max(size + HK_CANARY, alignment));
    while (cls <= HK_NCLASS && hk_classes[cls].size % alignment != 0) cls++;
    if (cls <= HK_NCLASS) return hk_malloc_class(cls);
  }
  return hk_huge_alloc(size, alignment, false);
}

size_t hk_usable_size(const void *p) {
  if (!p) return 0;
  unsigned cls = (unsigned)hk_class_map_lookup(p);
  if (cls - 1u < HK_NCLASS) return hk_classes[cls].size - HK_CANARY;
  if (cls == HK_MAP_HUGE) return hk_huge_usable_size(p);
  return 0;
}

static void *realloc_move(void *p, size_t old_size, size_t size) {
  void *q = hk_malloc_fast(size);
  if (!q) return NULL;
  memcpy(q, p, hk_min(old_size, size));
  hk_free_fast(p);
  return q;
}

/* A block keeps its place while the new size fits its class and does not
 * waste more than half of it; huge blocks are remapped, not copied. */
void *hk_realloc(void *p, size_t size) {
  if (!p) return hk_malloc_fast(size);
  if (size == 0) {
    hk_free_fast(p);
    return NULL;
  }
  uintptr_t cls = hk_class_map_lookup(p);
  if (cls - 1 < HK_NCLASS) {
    if (!hk_on_boundary(p, cls) || hk_is_free(p) || hk_is_home(p) || hk_is_spare(p) ||
        (HAK_HARDENED && *hk_canary_at(p, cls) != hk_canary(p)))
      hk_misuse("realloc", p, cls);
    size_t old_size = hk_classes[cls].size - HK_CANARY;
    if (size <= old_size && (size >= old_size / 2 || old_size <= 256)) return p;
    return realloc_move(p, old_size, size);
  }
  if (cls == HK_MAP_HUGE) {
    if (size > HK_SMALL_MAX) return hk_huge_realloc(p, size);
    size_t old_size = hk_huge_usable_size(p);
    if (old_size == 0) hk_misuse("realloc", p, cls);
    return realloc_move(p, old_size, size);
  }
  hk_misuse("realloc", p, cls);
}
