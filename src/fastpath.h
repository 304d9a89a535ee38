/* The allocation and free fast paths, inlined into every entry point.
 * Included by C and C++ files alike, so it uses no C11 atomics.
 *
 * A thread's cache is one TLS struct: per size class a singly linked list of
 * free blocks and a "room" counter (capacity minus length).  malloc pops,
 * free pushes; everything else (refill, overflow, first use of a thread, a
 * thread that has exited) is reached through one well-predicted branch.
 * A pointer's class comes from the class map: one byte per 64 KiB unit of
 * the address space, 0 for memory hakmem does not own as small blocks, kept
 * in a two-level radix tree (root indexed by bits 36..46 of the address, leaves
 * of 2^20 units) whose root entries all point at a leaf, if only the shared
 * zero leaf, so a lookup is two loads and no test. */
#ifndef HAK_FASTPATH_H
#define HAK_FASTPATH_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_HIDDEN __attribute__((visibility("hidden")))
#define HK_EXPORT __attribute__((visibility("default")))
#define hk_likely(x) __builtin_expect(!!(x), 1)
#define hk_unlikely(x) __builtin_expect(!!(x), 0)

#define HK_UNIT_SHIFT 16                       /* 64 KiB: granule of the class map */
#define HK_UNIT_SIZE ((size_t)1 << HK_UNIT_SHIFT)
#define HK_NCLASS 112                          /* size classes 1..112; 0 = none */
#define HK_TABLE_MAX 8192                      /* sizes looked up in hk_class_table */
#define HK_CLASS_MAX ((size_t)1 << 20)         /* largest size class: 1 MiB */
#define HK_ADDR_BITS 47                        /* user address space on x86-64 / arm64 */
#define HK_MAP_LEAF_SHIFT 36                   /* a leaf covers 64 GiB */
#define HK_MAP_ROOT_ENTRIES ((size_t)1 << (HK_ADDR_BITS - HK_MAP_LEAF_SHIFT))
#define HK_MAP_LEAF_ENTRIES ((size_t)1 << (HK_MAP_LEAF_SHIFT - HK_UNIT_SHIFT))
#define HK_MAP_HUGE 255                        /* class map mark of a huge block */

enum { HK_TC_UNINIT = 0, HK_TC_ACTIVE = 1, HK_TC_DEAD = 2 };

typedef struct hk_tcache {
  void *head[HK_NCLASS + 1];    /* free blocks per class; head[0] stays NULL */
  int16_t room[HK_NCLASS + 1];  /* capacity - length; free overflows below 0 */
  uint8_t state;                /* HK_TC_*: zero-initialised TLS is UNINIT */
  uint8_t arena;                /* SuperSlab arena of the thread's new slabs */
  size_t large_bound;           /* at least the bytes of large blocks cached (slow paths only) */
} hk_tcache_t;

extern __thread hk_tcache_t hk_tc __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
extern uint8_t hk_class_table[HK_TABLE_MAX / 16 + 1] HK_HIDDEN;
extern uint8_t *hk_map_root[HK_MAP_ROOT_ENTRIES] HK_HIDDEN;

/* The class map entry of p; p must be below 2^HK_ADDR_BITS. */
static inline __attribute__((always_inline)) uintptr_t hk_map_get(const void *p) {
  uintptr_t a = (uintptr_t)p;
  return hk_map_root[a >> HK_MAP_LEAF_SHIFT][(a >> HK_UNIT_SHIFT) & (HK_MAP_LEAF_ENTRIES - 1)];
}

HK_HIDDEN void *hk_malloc_slow(size_t size);
HK_HIDDEN void hk_free_overflow(void *p);  /* p: the block just pushed */
HK_HIDDEN void hk_free_slow(void *p);

/* A block of class cls from the thread's cache, or NULL if it has none. */
static inline __attribute__((always_inline)) void *hk_tcache_pop(unsigned cls) {
  hk_tcache_t *tc = &hk_tc;
  void *p = tc->head[cls];
  if (hk_likely(p != NULL)) {
    tc->head[cls] = *(void **)p;
    tc->room[cls]++;
  }
  return p;
}

static inline __attribute__((always_inline)) void *hk_malloc_fast(size_t size) {
  if (hk_likely(size <= HK_TABLE_MAX)) {
    /* class 0 until the process is set up: its list stays empty */
    void *p = hk_tcache_pop(hk_class_table[(size + 15) >> 4]);
    if (hk_likely(p != NULL)) return p;
  }
  return hk_malloc_slow(size);
}

static inline __attribute__((always_inline)) void hk_free_fast(void *p) {
  if (hk_likely((uintptr_t)p >> HK_MAP_LEAF_SHIFT < HK_MAP_ROOT_ENTRIES)) {
    uintptr_t cls = hk_map_get(p);
    /* one compare rejects 0 (not a small block, NULL included) and HK_MAP_HUGE */
    if (hk_likely(cls - 1 < HK_NCLASS)) {
      hk_tcache_t *tc = &hk_tc;
      void *head = tc->head[cls];
      if (hk_likely(head != p)) {  /* p on top of its free list: a double free */
        *(void **)p = head;
        tc->head[cls] = p;
        if (hk_unlikely(--tc->room[cls] < 0)) hk_free_overflow(p);
        return;
      }
    }
  }
  hk_free_slow(p);
}

#ifdef __cplusplus
}
#endif
#endif
