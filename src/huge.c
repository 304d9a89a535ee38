/* SPDX-License-Identifier: MIT */
/* Huge blocks (above the largest size class): a mapping each, 64 KiB aligned,
 * with a header in the 64 bytes before the block.  The class map marks the
 * unit of the block, and of its header when that lies in the unit before, so
 * the header is read only where the map says it is hakmem's memory. */
#include "internal.h"

#define HK_HUGE_HEADER 64
#define HK_HUGE_MAGIC 0x6875676568616b6dull

typedef struct hk_huge {
  uint64_t magic;       /* HK_HUGE_MAGIC ^ block address */
  uint8_t *base;        /* the mapping */
  size_t map_size;
} hk_huge_t;

static void mark(uint8_t *p, uint8_t value) {
  hk_class_map_set(p, 1, value);
  if (((uintptr_t)p >> HK_UNIT_SHIFT) != ((uintptr_t)(p - HK_HUGE_HEADER) >> HK_UNIT_SHIFT))
    hk_class_map_set(p - HK_HUGE_HEADER, 1, value);
}

/* The header of huge block p, or NULL if p is not one. */
static hk_huge_t *huge_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (a < HK_HUGE_HEADER || hk_class_map_lookup(p) != HK_MAP_HUGE ||
      hk_class_map_lookup((const uint8_t *)p - HK_HUGE_HEADER) != HK_MAP_HUGE)
    return NULL;
  hk_huge_t *h = (hk_huge_t *)(a - HK_HUGE_HEADER);
  return h->magic == (HK_HUGE_MAGIC ^ a) ? h : NULL;
}

void *hk_huge_alloc(size_t size, size_t alignment) {
  hk_process_init();
  hk_superslab_purge(false);  /* a huge block is new memory: first give back what waited */
  size_t offset = hk_max(alignment, (size_t)HK_HUGE_HEADER);
  if (size > (size_t)PTRDIFF_MAX - offset - HK_UNIT_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  size_t map_size = hk_align_up(offset + size, hk_os_page_size());
  uint8_t *base = hk_os_map_aligned(map_size, hk_max(alignment, HK_UNIT_SIZE));
  if (!base) {
    errno = ENOMEM;
    return NULL;
  }
  if (!hk_class_map_reserve(base, map_size)) {
    hk_os_unmap(base, map_size);
    errno = ENOMEM;
    return NULL;
  }
  uint8_t *p = base + offset;
  hk_huge_t *h = (hk_huge_t *)(p - HK_HUGE_HEADER);
  h->magic = HK_HUGE_MAGIC ^ (uintptr_t)p;
  h->base = base;
  h->map_size = map_size;
  mark(p, HK_MAP_HUGE);
  return p;
}

void hk_huge_free(void *p) {
  hk_huge_t *h = huge_of(p);
  if (!h) hk_fatal("free(): invalid pointer", p);
  h->magic = 0;
  mark(p, 0);
  hk_os_unmap(h->base, h->map_size);
}

size_t hk_huge_usable_size(const void *p) {
  hk_huge_t *h = huge_of(p);
  return h ? (size_t)(h->base + h->map_size - (const uint8_t *)p) : 0;
}

/* Grows or shrinks in place when the address space allows, else moves the
 * pages (no copy) to a new 64 KiB-aligned mapping. */
void *hk_huge_realloc(void *p, size_t size) {
  hk_huge_t *h = huge_of(p);
  if (!h) hk_fatal("realloc(): invalid pointer", p);
  size_t offset = (size_t)((uint8_t *)p - h->base);
  if (size > (size_t)PTRDIFF_MAX - offset - HK_UNIT_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  size_t map_size = hk_align_up(offset + size, hk_os_page_size());
  if (map_size == h->map_size) return p;
  if (hk_os_remap(h->base, h->map_size, map_size, NULL)) {
    h->map_size = map_size;
    return p;
  }
  uint8_t *target = hk_os_map_aligned(map_size, HK_UNIT_SIZE);
  if (target && !hk_class_map_reserve(target, map_size)) {
    hk_os_unmap(target, map_size);
    target = NULL;
  }
  if (!target) {
    errno = ENOMEM;
    return NULL;
  }
  mark(p, 0);
  if (!hk_os_remap(h->base, h->map_size, map_size, target)) {
    mark(p, HK_MAP_HUGE);
    hk_os_unmap(target, map_size);
    errno = ENOMEM;
    return NULL;
  }
  uint8_t *q = target + offset;
  h = (hk_huge_t *)(q - HK_HUGE_HEADER);
  h->magic = HK_HUGE_MAGIC ^ (uintptr_t)q;
  h->base = target;
  h->map_size = map_size;
  mark(q, HK_MAP_HUGE);
  return q;
}
