/* SPDX-License-Identifier: MIT */
/* Shared types, helpers and the inline fast paths of the allocator. */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "hakmem.h"

/* ---- the allocation and free fast paths, inlined into every entry point ----
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

#define HK_SS_SHIFT 22                          /* SuperSlab: 4 MiB, aligned to its size */
#define HK_SS_SIZE ((size_t)1 << HK_SS_SHIFT)
#define HK_SS_UNITS (HK_SS_SIZE / HK_UNIT_SIZE) /* 64 units; unit 0 holds the header */
#define HK_SLAB_MAX_UNITS 16                    /* a slab spans 1..16 units (up to 1 MiB) */
#define HK_TRANSFER_SLOTS 8                     /* batches parked per class in the central cache */
#define HK_LARGE_MIN ((size_t)32 * 1024)        /* classes above: one block per slab */
#define HK_LARGE_CACHE ((size_t)2 << 20)        /* bytes of large blocks a thread may cache, */
#define HK_LARGE_CACHE_MIN ((size_t)256 << 10)  /* down to this when many threads share */
#define HK_LARGE_CACHE_ALL ((size_t)64 << 20)   /* the process-wide budget */
#define HK_ARENAS 8                             /* independently locked sets of SuperSlabs */
#define HK_PAGE_SIZE ((size_t)4096)
#define HK_CACHELINE 64

#define hk_min(a, b) ((a) < (b) ? (a) : (b))
#define hk_max(a, b) ((a) > (b) ? (a) : (b))

static inline size_t hk_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

/* Doubly linked lists of slabs or SuperSlabs: any struct with `next` and
 * `prev`; `head` points at the list's first node (arguments are evaluated
 * more than once). */
#define hk_list_push(head, node)                \
  do {                                          \
    (node)->prev = NULL;                        \
    (node)->next = *(head);                     \
    if (*(head)) (*(head))->prev = (node);      \
    *(head) = (node);                           \
  } while (0)
#define hk_list_remove(head, node)                          \
  do {                                                      \
    if ((node)->prev) (node)->prev->next = (node)->next;    \
    else *(head) = (node)->next;                            \
    if ((node)->next) (node)->next->prev = (node)->prev;    \
    (node)->next = (node)->prev = NULL;                     \
  } while (0)
static inline bool hk_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* ---- size classes (size_class.c) ------------------------------------------
 * 16..256 B in steps of 16, then 8 classes per doubling up to 1 MiB: at most
 * 12.5 % of a block is lost to rounding (about 6 % on average). */
typedef struct hk_class_info {
  uint32_t size;           /* block size */
  uint16_t capacity;       /* blocks in one slab */
  uint8_t units;           /* 64 KiB units one slab spans */
  int16_t cap;             /* thread cache capacity (blocks) */
  uint16_t batch;          /* blocks moved from the central cache per refill */
} hk_class_info_t;

extern hk_class_info_t hk_classes[HK_NCLASS + 1] HK_HIDDEN;
HK_HIDDEN void hk_size_classes_init(void);

/* Class of a size 1..HK_CLASS_MAX, by arithmetic (the table serves the fast path). */
static inline unsigned hk_size_to_class(size_t n) {
  if (n <= 256) return n <= 16 ? 1 : (unsigned)((n + 15) >> 4);
  unsigned b = 63u - (unsigned)__builtin_clzl(n - 1);  /* n-1 in [2^b, 2^(b+1)) */
  return 17u + (b - 8u) * 8u + (unsigned)((n - 1) >> (b - 3)) - 8u;
}

/* Large classes (above HK_LARGE_MIN): one block per slab, no central cache,
 * a thread cache bounded by bytes rather than by count. */
#define HK_FIRST_LARGE_CLASS hk_size_to_class(HK_LARGE_MIN + 1)
static inline bool hk_class_is_large(unsigned cls) { return cls >= HK_FIRST_LARGE_CLASS; }

/* ---- slabs and SuperSlabs (superslab.c) ------------------------------------ */
typedef struct hk_slab {
  void *free;               /* blocks returned to the slab */
  uint8_t *start;           /* first block; the slab's first unit */
  uint32_t block_size;
  uint16_t capacity;        /* blocks in the slab */
  uint16_t carved;          /* blocks handed out at least once: start + carved*size is fresh */
  uint16_t nfree;           /* blocks on the free list */
  uint8_t cls;              /* 0: the unit is not the head of a slab */
  uint8_t units;
  struct hk_slab *next, *prev;  /* the class's list of slabs with blocks to give */
} hk_slab_t;

typedef struct hk_superslab {
  uint64_t used;                      /* bitmap of units in use; bit 0 is this header */
  uint64_t dirty;                     /* free units whose pages may still be resident */
  uint64_t dirty_since;               /* when `dirty` last became non-zero (ms) */
  uint8_t arena;                      /* the arena this SuperSlab belongs to */
  struct hk_superslab *next, *prev;   /* list of SuperSlabs with free units */
  uint8_t head_unit[HK_SS_UNITS];     /* first unit of the slab each unit belongs to */
  hk_slab_t slabs[HK_SS_UNITS];       /* descriptor of the slab headed by each unit */
} hk_superslab_t;

static inline hk_superslab_t *hk_superslab_of(const void *p) {
  return (hk_superslab_t *)((uintptr_t)p & ~(HK_SS_SIZE - 1));
}
static inline hk_slab_t *hk_slab_of(const void *p) {
  hk_superslab_t *ss = hk_superslab_of(p);
  unsigned unit = (unsigned)((uintptr_t)p >> HK_UNIT_SHIFT) & (HK_SS_UNITS - 1);
  return &ss->slabs[ss->head_unit[unit]];
}

HK_HIDDEN unsigned hk_arena_assign(void);       /* the arena of a new thread */
HK_HIDDEN hk_slab_t *hk_slab_new(unsigned cls);  /* from the calling thread's arena */
HK_HIDDEN void hk_slab_release(hk_slab_t *slab);
HK_HIDDEN void *hk_large_take(unsigned cls);                 /* large classes: one-block slabs */
HK_HIDDEN void hk_large_release(unsigned cls, void *chain);
HK_HIDDEN void hk_superslab_purge(bool now);  /* decommit free units (all of them if now) */
HK_HIDDEN void hk_superslab_fork_lock(void);
HK_HIDDEN void hk_superslab_fork_unlock(bool child);

/* ---- class map (class_map.c) ------------------------------------------------ */
HK_HIDDEN void hk_class_map_init(void);
HK_HIDDEN bool hk_class_map_reserve(const void *start, size_t size);  /* before any set there */
HK_HIDDEN void hk_class_map_set(const void *start, size_t units, uint8_t value);
HK_HIDDEN uintptr_t hk_class_map_lookup(const void *p);  /* any pointer; 0 if not hakmem's */
HK_HIDDEN void hk_class_map_fork_lock(void);
HK_HIDDEN void hk_class_map_fork_unlock(bool child);

/* ---- central cache (central.c): per class, behind one lock ------------------ */
HK_HIDDEN unsigned hk_central_take(unsigned cls, unsigned want, void **chain);
HK_HIDDEN void hk_central_put(unsigned cls, void *chain, unsigned count);
HK_HIDDEN void hk_central_fork_lock(void);
HK_HIDDEN void hk_central_fork_unlock(bool child);

/* ---- thread caches (tcache.c) ---------------------------------------------- */
HK_HIDDEN void *hk_malloc_class(unsigned cls);
HK_HIDDEN void hk_thread_init(hk_tcache_t *tc);
HK_HIDDEN void hk_tcache_flush(hk_tcache_t *tc);
HK_HIDDEN void hk_thread_exit(void *arg);

/* ---- huge blocks (huge.c): one mapping each -------------------------------- */
HK_HIDDEN void *hk_huge_alloc(size_t size, size_t alignment);
HK_HIDDEN void hk_huge_free(void *p);
HK_HIDDEN void *hk_huge_realloc(void *p, size_t size);
HK_HIDDEN size_t hk_huge_usable_size(const void *p);  /* 0 if p is not a huge block */

/* ---- OS layer (os.c) -------------------------------------------------------- */
HK_HIDDEN void *hk_os_map_aligned(size_t size, size_t alignment);
HK_HIDDEN void hk_os_unmap(void *p, size_t size);
HK_HIDDEN void *hk_os_remap(void *p, size_t old_size, size_t new_size, void *target);
HK_HIDDEN size_t hk_os_page_size(void);
HK_HIDDEN void *hk_os_reserve(size_t size);  /* address space, committed as touched */
HK_HIDDEN void hk_os_decommit(void *p, size_t size);  /* pages read as zero afterwards */
HK_HIDDEN uint64_t hk_os_now_ms(void);

/* ---- options (options.c): read once at start-up ---------------------------- */
typedef struct hk_options {
  unsigned warm_pool_size;  /* HAKMEM_WARM_POOL_SIZE: empty SuperSlabs kept mapped */
  unsigned purge_delay_ms;  /* HAKMEM_PURGE_DELAY_MS: free units are decommitted after this */
  bool os_stats;            /* HAKMEM_SS_OS_STATS: print OS-call counters at exit */
  bool verbose;             /* HAKMEM_VERBOSE: print the options in force at start-up */
} hk_options_t;
extern hk_options_t hk_opt HK_HIDDEN;
HK_HIDDEN void hk_options_init(void);

/* ---- process set-up (init.c) ------------------------------------------------ */
extern atomic_bool hk_ready HK_HIDDEN;
extern pthread_key_t hk_thread_key HK_HIDDEN;
HK_HIDDEN void hk_process_init_slow(void);
static inline void hk_process_init(void) {
  if (hk_unlikely(!atomic_load_explicit(&hk_ready, memory_order_acquire))) hk_process_init_slow();
}

/* ---- allocation entry points shared by the C and C++ API (alloc.c) --------- */
HK_HIDDEN void *hk_aligned(size_t alignment, size_t size);
HK_HIDDEN void *hk_calloc(size_t count, size_t size);
HK_HIDDEN void *hk_realloc(void *p, size_t size);
HK_HIDDEN size_t hk_usable_size(const void *p);

/* ---- errors and messages (stats.c) ------------------------------------------ */
HK_HIDDEN __attribute__((noreturn)) void hk_fatal(const char *what, const void *p);
HK_HIDDEN void hk_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HK_HIDDEN void hk_os_stats_print(void);

#endif
