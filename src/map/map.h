/* SPDX-License-Identifier: MIT */
/* The class map (class_map.c), which free reads to know a pointer's class,
 * and the format of a free block (its link and its mark). */
#ifndef HK_MAP_H
#define HK_MAP_H

#include "os/os.h"

#define HK_MAP_HUGE 255                        /* class map: the first unit of a huge block */
#define HK_MAP_SUPERSLAB 254                   /* class map: the header unit of a SuperSlab */
#define HK_MAP_REGION 253                      /* class map: the header unit of a huge region */
#define HK_MAP_SAMPLED 128                     /* class map: added to a large class's entry while the
                                                  heap profile has its block sampled (api/alloc.c) */
_Static_assert(HK_NCLASS < HK_MAP_SAMPLED, "a sampled class's entry is not a class");

/* What free's fast path reads, together so that one base address serves. */
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
/* Changes the entry of p's unit, which holds a class: its page is mapped
 * (hk_class_map_set checks a new one's). */
static inline void hk_map_reset(const void *p, uint8_t value) {
  __atomic_store_n(&hk_fast.map[(uintptr_t)p >> HK_UNIT_SHIFT], value, __ATOMIC_RELAXED);
}
/* Whether p lies in the units below `units` (at most hk_fast.map_units:
 * C++'s derived deletes take a bound of their own, api/override_cxx.c). */
static inline __attribute__((always_inline)) bool hk_map_below(const void *p, size_t units) {
  return (uintptr_t)p >> HK_UNIT_SHIFT < units;
}
static inline __attribute__((always_inline)) bool hk_map_covers(const void *p) {
  return hk_map_below(p, hk_fast.map_units);
}

/* Whether p, in a unit whose class map entry is cls, is where a block of a
 * small or large class starts: its offset in the unit less the slab's first
 * block's is a multiple of the block size (and cls is a class at all).  For a
 * numerator below 2^16 and a size below 2^32, n * ceil(2^32 / size), taken
 * mod 2^32, is below ceil(2^32 / size) exactly when size divides n (Lemire,
 * Kaser and Kurz, "Faster remainder by direct computation", 2019); an offset
 * below the first block gives a numerator just below 2^32, which no block
 * size divides that way.  The room a block size leaves over is before the
 * first block: after the last, its start would pass as a block. */
/* By class map entry: ceil(2^32 / block size), and the slab's first block
 * offset times that, mod 2^32; 0 for entries that are not a class, which no
 * pointer passes.  Kept just before the class map, reached from its base;
 * the second in 64-bit words, so that gcc 12 spends no instruction on an
 * address the two tables' indexes would share. */
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

/* The end of every free list or chain thread caches hold or trade: a readable
 * block whose word 1 never is the free key (odd once set, 0 before), so
 * malloc's one check finds an empty list too.  Slabs' lists end at NULL. */
extern const uint64_t hk_list_end[2] HK_HIDDEN;
#define HK_END ((void *)hk_list_end)

/* Free-list links: the first word of a free block.  The hardened build keeps
 * them encoded with a per-process key and the link's own address, and checks
 * each one it reads: a link an overflow has written points nowhere valid. */
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

/* Word 1 of a block tells where it is: the free key on a thread's list or
 * batch, its complement on its slab's, the key ^ 2 among a large class's
 * spares, else (0 from malloc) the program's.  A random key: crafted data
 * holding a fixed one could hide a double free (docs/DESIGN.md, The mark). */
static inline bool hk_is_free(const void *p) { return ((const uint64_t *)p)[1] == hk_fast.free_key; }
static inline bool hk_is_home(const void *p) { return ((const uint64_t *)p)[1] == ~hk_fast.free_key; }
static inline void hk_mark_free(void *p) { ((uint64_t *)p)[1] = hk_fast.free_key; }
static inline void hk_mark_home(void *p) { ((uint64_t *)p)[1] = ~hk_fast.free_key; }
/* The marks as values, for a loop whose stores into blocks would otherwise
 * have the key loaded again at every block (they may alias it).  The word's
 * helpers always inlined, as into slab_take_in_order, which reads live
 * blocks unseen by ThreadSanitizer. */
typedef struct hk_marks {
  uint64_t free, home;
} hk_marks_t;
static inline hk_marks_t hk_marks(void) { return (hk_marks_t){hk_fast.free_key, ~hk_fast.free_key}; }
static inline __attribute__((always_inline)) uint64_t hk_mark_of(const void *p) { return ((const uint64_t *)p)[1]; }
static inline __attribute__((always_inline)) void hk_set_mark(void *p, uint64_t mark) { ((uint64_t *)p)[1] = mark; }
static inline bool hk_is_spare(const void *p) { return ((const uint64_t *)p)[1] == (hk_fast.free_key ^ 2); }
static inline void hk_mark_spare(void *p) { ((uint64_t *)p)[1] = hk_fast.free_key ^ 2; }
HK_HIDDEN __attribute__((noreturn, cold)) void hk_misuse_freed(const void *p, unsigned cls);
/* The slow paths' check of a block on a list or chain of class cls: one not
 * marked free was freed twice, or written after its free. */
static inline void hk_expect_free(const void *p, unsigned cls) {
  if (hk_unlikely(!hk_is_free(p))) hk_misuse_freed(p, cls);
}

/* A block goes to the program: unmarked; the hardened build adds its canary. */
static inline __attribute__((always_inline)) void hk_block_out(void *p, unsigned cls) {
  ((uint64_t *)p)[1] = 0;
  if (HAK_HARDENED) *hk_canary_at(p, cls) = hk_canary(p);
}

#endif
