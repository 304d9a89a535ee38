/* Shared types and helpers of the allocator's C files. */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fastpath.h"
#include "hakmem.h"

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
extern unsigned hk_first_large_class HK_HIDDEN;
HK_HIDDEN void hk_size_classes_init(void);

/* Class of a size 1..HK_CLASS_MAX, by arithmetic (the table serves the fast path). */
static inline unsigned hk_size_to_class(size_t n) {
  if (n <= 256) return n <= 16 ? 1 : (unsigned)((n + 15) >> 4);
  unsigned b = 63u - (unsigned)__builtin_clzl(n - 1);  /* n-1 in [2^b, 2^(b+1)) */
  return 17u + (b - 8u) * 8u + (unsigned)((n - 1) >> (b - 3)) - 8u;
}

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
