/* SPDX-License-Identifier: MIT */
/* The address map (class_map.c): a byte per 64 KiB unit of the address
 * space, which free reads to know a pointer's class; and the format of a
 * block on a free list (its link and its mark), which every layer above
 * reads and writes. */
#ifndef HK_MAP_H
#define HK_MAP_H

#include "os/os.h"

#define HK_MAP_HUGE 255                        /* class map: the first unit of a huge block */
#define HK_MAP_SUPERSLAB 254                   /* class map: the header unit of a SuperSlab */
#define HK_MAP_REGION 253                      /* class map: the header unit of a huge region */

/* What free's fast path reads, in one place so that one base address
 * serves it all. */
typedef struct hk_fast {
  uint8_t *map;               /* the class map (class_map.c): a byte per unit...; the
                                 256 words before map[0] are hk_class_magic's table */
  size_t map_units;           /* ... of the units below its ceiling */
  uint64_t free_key;          /* in word 1 of every free block (init.c) */
  uint64_t link_key;          /* hardened build: free-list links are encoded with it */
} hk_fast_t;
extern hk_fast_t hk_fast HK_HIDDEN;

/* The class map entry of p's unit u, which must be below hk_fast.map_units. */
static inline __attribute__((always_inline)) uintptr_t hk_map_get(const void *p) {
  return hk_fast.map[(uintptr_t)p >> HK_UNIT_SHIFT];
}
static inline __attribute__((always_inline)) bool hk_map_covers(const void *p) {
  return (uintptr_t)p >> HK_UNIT_SHIFT < hk_fast.map_units;
}

/* Whether p, in a unit whose class map entry is cls, is where a block of a
 * small or large class starts: its offset in the unit, less the offset of
 * the slab's first block, is a multiple of the block size (and cls is a
 * class at all).  For a numerator below 2^16 and a size below 2^32,
 * n * ceil(2^32 / size), taken mod 2^32, is below ceil(2^32 / size) exactly
 * when size divides n (Lemire, Kaser and Kurz, "Faster remainder by direct
 * computation", 2019); an offset below the first block gives a numerator
 * just below 2^32, which no block size divides that way.  A slab's blocks
 * end at the end of its unit and the room a block size leaves over is before
 * the first: were it after the last, the offset where it starts would be a
 * multiple of the size too, and a free of that pointer would pass. */
/* By class map entry: ceil(2^32 / block size), and the slab's first block
 * offset times that, mod 2^32; 0 for entries that are not a class, which no
 * pointer passes.  Kept in the 3 KiB just before the class map, so that free
 * reaches them from the map's base; the second in 64-bit words, so that the
 * two tables' indexes differ in scale and gcc 12 does not spend an
 * instruction on an address they share. */
static inline __attribute__((always_inline)) uint32_t hk_class_magic(uintptr_t cls) {
  return ((const uint32_t *)hk_fast.map)[(intptr_t)cls - 256];
}
static inline __attribute__((always_inline)) uint32_t hk_class_magic_first(uintptr_t cls) {
  return (uint32_t)((const uint64_t *)hk_fast.map)[(intptr_t)cls - 384];
}

static inline __attribute__((always_inline)) bool hk_on_boundary(const void *p, uintptr_t cls) {
  uint32_t m = hk_class_magic(cls);
  return (uint32_t)((uint32_t)(uint16_t)(uintptr_t)p * m - hk_class_magic_first(cls)) < m;
}

/* ---- the map (class_map.c) ---------------------------------------------------- */
/* Reserves the map (and the space after it, os.c) below the ceiling the
 * address space allows; `magic` and `first` are the 256 words each of
 * hk_class_magic and hk_class_magic_first (hk_class_magic_fill). */
HK_HIDDEN void hk_class_map_init(const uint32_t *magic, const uint64_t *first);
HK_HIDDEN bool hk_class_map_reserve(const void *start, size_t size);  /* a mapping made: whether the map covers it */
HK_HIDDEN void hk_class_map_release(const void *start, size_t size);  /* ... and unmapped, its entries 0 */
HK_HIDDEN void hk_class_map_set(const void *start, size_t units, uint8_t value);
HK_HIDDEN uintptr_t hk_class_map_lookup(const void *p);  /* any pointer; 0 if not hakmem's */
HK_HIDDEN int hk_class_map_mlockall(int flags);
HK_HIDDEN void hk_class_map_fork_lock(void);
HK_HIDDEN void hk_class_map_fork_unlock(bool child);

/* ---- free blocks ------------------------------------------------------------- */

/* The end of every list and chain of free blocks that thread caches hold or
 * trade with the central cache: a readable block whose key word never
 * matches the free key (odd once set, 0 before), so that malloc's one check
 * of a list's first block also finds an empty list.  Slabs' own lists of
 * blocks at home end at NULL. */
extern const uint64_t hk_list_end[2] HK_HIDDEN;
#define HK_END ((void *)hk_list_end)

/* Free-list links: the first word of a free block.  The hardened build keeps
 * them encoded with a per-process key and the link's own address, and checks
 * each one it reads: a link an overflow has written points nowhere valid.
 * A list ends at HK_END, or at NULL for a slab's own list. */
static inline __attribute__((always_inline)) void hk_set_next(void *b, void *next) {
  if (HAK_HARDENED) next = (void *)((uintptr_t)next ^ hk_fast.link_key ^ (uintptr_t)b);
  *(void **)b = next;
}

static inline __attribute__((always_inline)) void *hk_next(const void *b) {
  void *n = *(void *const *)b;
  if (!HAK_HARDENED) return n;
  n = (void *)((uintptr_t)n ^ hk_fast.link_key ^ (uintptr_t)b);
  if (n != HK_END && n != NULL && hk_unlikely(!hk_map_covers(n) || hk_map_get(n) != hk_map_get(b) ||
                                     !hk_on_boundary(n, hk_map_get(n))))
    hk_corrupted(b);
  return n;
}

/* The hardened build's canary in the last word of a block. */
static inline uint64_t hk_canary(const void *p) { return hk_fast.link_key ^ ((uintptr_t)p * 0x9e3779b97f4a7c15ull); }
static inline uint64_t *hk_canary_at(void *p, uintptr_t cls) {
  return (uint64_t *)((uint8_t *)p + hk_classes[cls].size - HK_CANARY);
}

/* Word 1 of a block says where it is: the free key on a thread's list or in
 * a batch, its complement on its slab's list, the key with bit 1 flipped
 * among a large class's spares (central.c), anything else (0 from malloc)
 * in the program's hands.  The key is random, read from memory: a fixed one
 * as an immediate operand saves malloc and free an instruction each (0.6 %
 * on random_mixed of 16-128 B, 1.1 % on random_touch) but is public, and
 * data crafted to hold it hides a double free; the complement of a 32-bit
 * immediate is a small integer that realloc's check of a live block would
 * take for a block at home. */
static inline bool hk_is_free(const void *p) { return ((const uint64_t *)p)[1] == hk_fast.free_key; }
static inline void hk_mark_free(void *p) { ((uint64_t *)p)[1] = hk_fast.free_key; }
static inline bool hk_is_home(const void *p) { return ((const uint64_t *)p)[1] == ~hk_fast.free_key; }
static inline void hk_mark_home(void *p) { ((uint64_t *)p)[1] = ~hk_fast.free_key; }
static inline bool hk_is_spare(const void *p) { return ((const uint64_t *)p)[1] == (hk_fast.free_key ^ 2); }
static inline void hk_mark_spare(void *p) { ((uint64_t *)p)[1] = hk_fast.free_key ^ 2; }
HK_HIDDEN __attribute__((noreturn, cold)) void hk_misuse_freed(const void *p, unsigned cls);
/* The slow paths' check of a block on a list or chain of class cls: one not
 * marked free was freed twice (a copy is in the program's hands), or
 * written after its free. */
static inline void hk_expect_free(const void *p, unsigned cls) {
  if (hk_unlikely(!hk_is_free(p))) hk_misuse_freed(p, cls);
}

/* A block goes to the program: no longer marked free; in the hardened build,
 * with its canary. */
static inline __attribute__((always_inline)) void hk_block_out(void *p, unsigned cls) {
  ((uint64_t *)p)[1] = 0;
  if (HAK_HARDENED) *hk_canary_at(p, cls) = hk_canary(p);
}

#endif
