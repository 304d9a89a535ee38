/* SPDX-License-Identifier: MIT */
/* The class map: one byte per 64 KiB unit of the address space (the class of
 * the unit's blocks, HK_MAP_HUGE, or 0), read by every free.  A two-level
 * radix tree: the root (4096 entries, 32 KiB) is indexed by address bits
 * 36..47, a leaf (1 MiB of address space reserved, touched only where hakmem
 * has memory) by bits 16..35.  Root entries without a leaf of their own point
 * at one shared zero leaf, so lookups need no test; it is static, so that
 * even a free(NULL) before set-up finds it. */
#include "internal.h"

static uint8_t zero_leaf[HK_MAP_LEAF_ENTRIES];
hk_fast_t hk_fast = {.map_root = {[0] = zero_leaf}};
static pthread_mutex_t leaf_lock = PTHREAD_MUTEX_INITIALIZER;

void hk_class_map_init(void) {
  for (size_t i = 0; i < HK_MAP_ROOT_ENTRIES; i++)
    if (!hk_fast.map_root[i]) hk_fast.map_root[i] = zero_leaf;
}

/* Makes sure the leaf covering p exists; false if it cannot be mapped, or
 * if p lies beyond the 48 bits the map covers (a kernel with 5-level paging
 * maps there only when asked to with a hint that high, which hakmem never
 * gives: such memory is then refused, and the allocation fails with ENOMEM). */
static bool leaf_reserve(const void *p) {
  if ((uintptr_t)p >> HK_MAP_LEAF_SHIFT >= HK_MAP_ROOT_ENTRIES) return false;
  uint8_t **slot = &hk_fast.map_root[(uintptr_t)p >> HK_MAP_LEAF_SHIFT];
  if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != zero_leaf) return true;
  pthread_mutex_lock(&leaf_lock);
  bool ok = true;
  if (*slot == zero_leaf) {
    uint8_t *leaf = hk_os_reserve(HK_MAP_LEAF_ENTRIES);
    if (leaf) __atomic_store_n(slot, leaf, __ATOMIC_RELEASE);
    else ok = false;
  }
  pthread_mutex_unlock(&leaf_lock);
  return ok;
}

bool hk_class_map_reserve(const void *start, size_t size) {
  return size && (uintptr_t)start + size > (uintptr_t)start && leaf_reserve(start) &&
         leaf_reserve((const uint8_t *)start + size - 1);
}

void hk_class_map_set(const void *start, size_t units, uint8_t value) {
  uintptr_t a = (uintptr_t)start;
  for (size_t i = 0; i < units; i++, a += HK_UNIT_SIZE) {
    uint8_t *leaf = hk_fast.map_root[a >> HK_MAP_LEAF_SHIFT];
    __atomic_store_n(&leaf[(a >> HK_UNIT_SHIFT) & (HK_MAP_LEAF_ENTRIES - 1)], value, __ATOMIC_RELAXED);
  }
}

void hk_class_map_fork_lock(void) { pthread_mutex_lock(&leaf_lock); }

void hk_class_map_fork_unlock(bool child) {
  if (child) pthread_mutex_init(&leaf_lock, NULL);
  else pthread_mutex_unlock(&leaf_lock);
}

uintptr_t hk_class_map_lookup(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (a >> HK_MAP_LEAF_SHIFT >= HK_MAP_ROOT_ENTRIES) return 0;
  const uint8_t *leaf = hk_fast.map_root[a >> HK_MAP_LEAF_SHIFT];  /* NULL only before set-up */
  return leaf ? leaf[(a >> HK_UNIT_SHIFT) & (HK_MAP_LEAF_ENTRIES - 1)] : 0;
}
