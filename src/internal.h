/* SPDX-License-Identifier: MIT */
/* Shared types, helpers and the inline fast paths of the allocator.
 *
 * Who calls whom, from the API down to the OS (layers: tcache -> central ->
 * superslab / huge -> os; purge.c schedules giving memory back across them):
 *
 *   malloc(n) = hk_malloc_fast            n <= 8 KiB and the class's list starts with a block
 *                                         marked free: pop
 *     hk_malloc_slow                      (tcache.c)
 *       hk_huge_alloc                     n > 1 MiB: units of a region of the thread's arena's
 *                                         set, best fit, else another set's resident ones (huge.c)
 *         region_map -> hk_os_space_take or hk_os_map_aligned, hk_os_advise_huge  (os.c)
 *       hk_malloc_class -> tcache_refill  the list is empty (else hk_misuse_freed: its first
 *                                         block was handed out before, or written to)
 *         hk_thread_init                  first call of the thread: capacities, prewarm
 *         hk_central_take                 a batch parked on this CPU, or on another (only
 *                                         a spare one for a producer), or blocks from
 *                                         slabs (central.c)
 *           hk_slab_new -> take_units     a run of units in the arena (superslab.c)
 *             superslab_map -> hk_os_space_take  a slot of the space reserved at start-up,
 *               or spares_map -> hk_os_map_aligned  else a few SuperSlabs mapped at once
 *         hk_central_take_large         large classes: a spare block of the class (32-256 KiB), or
 *                                         a block not touched where its memory reads as zero
 *                                         (its page faults are the program's):
 *           hk_large_take                 a one-block slab (on resident units while there
 *                                         are spares, else they go back first),
 *           hk_huge_take_class            or above 256 KiB a run of units in a huge region
 *         hk_purge_poll                   a tick due? (purge.c) -> hk_central_purge,
 *                                         hk_superslab_purge, hk_huge_purge -> hk_os_decommit;
 *                                         lean mode over its cap: hk_huge_nonresident ->
 *                                         hk_os_unit_pages (mincore), then the same purges
 *
 *   free(p) = hk_free_fast                p on a block boundary of a small or large class: mark
 *                                         it free, push
 *     hk_free_overflow                    the list outgrew its capacity (large: every free)
 *       hk_central_put                    park the older half (all of it when frees outpace
 *                                         mallocs) on this CPU, or return blocks to slabs
 *         hk_slab_release                 an empty slab: its units dirty in the SuperSlab
 *         hk_large_release                large blocks: kept as spares up to a bound, else
 *                                         their units back at once
 *         hk_huge_release_class           (above 256 KiB: to their huge region)
 *       hk_purge_poll
 *     hk_free_slow                        anything else: NULL, huge, or an error
 *       hk_huge_free                      units dirty in their region
 *       hk_misuse                         an invalid or interior pointer, a freed huge block
 *
 * Fast-path size on x86-64 (gcc 12 -O2), in instructions, hit case:
 * malloc 14, free 20, ret aside; `objdump -d build/libhakmem.so` at <__libc_malloc> and
 * <__libc_free> shows them, and `make bench-callgrind` counts them per
 * random_mixed iteration.
 *
 * A thread's cache is one TLS struct: per size class a singly linked list of
 * free blocks and a "room" counter (capacity minus length).  malloc pops,
 * free pushes; everything else is reached through one well-predicted branch.
 * A pointer's class comes from the class map: one byte per 64 KiB unit of
 * the address space, 0 for memory hakmem does not own as the first unit of a
 * slab, one flat array below a ceiling, so a lookup is one bound check and
 * one load, and no load waits for another before the class is known.
 *
 * Misuse the fast path catches at no more cost than a few instructions:
 * - a pointer hakmem did not hand out: its unit is not the first of one of
 *   hakmem's slabs (class 0), or it is not on a block boundary of its slab
 *   (every slab of a small class is one unit, so the offset in the unit
 *   tells, with one multiplication: hk_on_boundary);
 * - a block freed twice: free marks every block free with a per-process
 *   random key in its second word, which malloc checks and clears as it
 *   hands the block out.  A block freed twice sits on a list twice; the
 *   first copy handed out loses the mark, so malloc, reaching the second,
 *   finds it unmarked (as it finds one the program wrote into after its
 *   free) and aborts before the block is handed out twice.  free reads
 *   nothing of the block: a block freed long ago is a cache miss, and a load
 *   holds up everything after it where a store does not (at 100 000 live
 *   blocks, a check at free cost a third of the speed).  Blocks home in
 *   their slabs carry the key's complement: one freed again is caught when
 *   its slab hands it out or, seemingly empty, is given back (central.c). */
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

#define HK_HIDDEN __attribute__((visibility("hidden")))
#define HK_EXPORT __attribute__((visibility("default")))
#define hk_likely(x) __builtin_expect(!!(x), 1)
#define hk_unlikely(x) __builtin_expect(!!(x), 0)
/* A system call whose failure the allocator handles itself: errno as it was,
 * so that a malloc that succeeds, and every free, leave errno alone (a
 * failing malloc sets ENOMEM where it gives up). */
#define hk_keep_errno(call) \
  __extension__({                          \
    int hk_errno_ = errno;                 \
    __typeof__(call) hk_result_ = (call);  \
    errno = hk_errno_;                     \
    hk_result_;                            \
  })

/* The allocator's locks.  fork's prepare handler (init.c) takes them all and
 * its parent and child handlers let them go; handlers another library
 * registered before the allocator's run in between (the C library runs
 * prepare handlers last registered first, the others first registered
 * first), on the thread that holds them all: what they allocate takes no
 * lock, since no other thread can be inside.  Each thread counts the locks
 * it holds: a fork from a signal handler that interrupted the allocator
 * must not wait for them. */
extern __thread bool hk_forking __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
extern __thread unsigned hk_locks_held __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
extern __thread unsigned hk_fork_depth __attribute__((tls_model("initial-exec"))) HK_HIDDEN;  /* in fork's handlers */
/* The count covers the lock from before it is taken to after it is let go:
 * a signal handler sees a count above 0 wherever the lock may be held. */
static inline void hk_lock(pthread_mutex_t *m) {
  if (hk_forking) return;
  hk_locks_held++;
  pthread_mutex_lock(m);
}
static inline void hk_unlock(pthread_mutex_t *m) {
  if (hk_forking) return;
  pthread_mutex_unlock(m);
  hk_locks_held--;
}
static inline int hk_trylock(pthread_mutex_t *m) {
  if (hk_forking) return 0;
  hk_locks_held++;
  int busy = pthread_mutex_trylock(m);
  hk_locks_held -= busy != 0;
  return busy;
}

#define HK_UNIT_SHIFT 16                       /* 64 KiB: granule of the class map */
#define HK_UNIT_SIZE ((size_t)1 << HK_UNIT_SHIFT)
#define HK_NCLASS 112                          /* size classes 1..112; 0 = none */
#define HK_TABLE_MAX 8192                      /* sizes looked up in hk_class_table */
#define HK_CLASS_MAX ((size_t)1 << 20)         /* largest size class: 1 MiB */
#define HK_SMALL_MAX (HK_CLASS_MAX - HK_CANARY) /* largest request the classes serve */
#define HK_MAP_HUGE 255                        /* class map: the first unit of a huge block */
#define HK_MAP_SUPERSLAB 254                   /* class map: the header unit of a SuperSlab */
#define HK_MAP_REGION 253                      /* class map: the header unit of a huge region */

enum { HK_TC_UNINIT = 0, HK_TC_ACTIVE = 1, HK_TC_DEAD = 2 };

/* A class's traffic through a thread cache (HAKMEM_TINY_FRONT_METRICS),
 * counted on the slow paths but for `hits`, which only the observe build
 * counts, on malloc's fast path. */
typedef struct hk_front {
  uint64_t hits;         /* mallocs the list served (observe build) */
  uint64_t misses;       /* mallocs that found it empty: refills */
  uint64_t overflows;    /* frees that found it full: flushes */
  uint64_t moved;        /* blocks taken from and given to the central cache */
  uint64_t parked_hits;  /* refills a parked batch served whole */
  uint64_t from_others;  /* blocks got in batches another thread parked */
} hk_front_t;

typedef struct hk_tcache {
  void *head[HK_NCLASS + 1];    /* free blocks per class, ending at HK_END; head[0] stays HK_END */
  int16_t room[HK_NCLASS + 1];  /* capacity - length; free overflows below 0 */
  uint8_t state;                /* HK_TC_*: a new thread's is UNINIT (0) */
  uint8_t arena;                /* SuperSlab arena of the thread's new slabs and huge blocks */
  size_t large_bound;           /* at least the bytes of large blocks cached (slow paths only) */
  uint32_t large_misses;        /* large blocks the list did not have: the budget grows with them */
  /* slow paths only: */
  int16_t cap[HK_NCLASS + 1];        /* capacity of each list: halves when frees outpace mallocs,
                                        doubles back (up to hk_classes[].cap) when it runs dry */
  uint8_t overflows[HK_NCLASS + 1];  /* since the list last ran dry: 0 or HK_OVERFLOW_* */
  uint8_t early_frees;               /* frees before the first malloc (see hk_free_overflow) */
  ptrdiff_t out_pending;             /* bytes taken less bytes given, not yet in the statistics */
  void *zero_block;                  /* the large block just handed out reading as zero (calloc) */
  hk_front_t front[HK_NCLASS + 1];
} hk_tcache_t;
#define HK_TCACHE_MIN_CAP 8      /* what a list shrinks to at most */
enum { HK_OVERFLOW_PARKED = 1,   /* the last overflow's batch was parked */
       HK_OVERFLOW_UNPARKED,     /* it went back to its slabs */
       HK_OVERFLOW_UNPARKED2 };  /* so did the one before */
#define HK_FREES_BEFORE_CACHE 32 /* frees a thread makes before its first malloc without a cache */
#define HK_STATS_STEP ((ptrdiff_t)1 << 20)   /* see note_out (tcache.c) */
#define HK_STATS_SLACK ((ptrdiff_t)8 << 20)

typedef struct hk_class_info {
  uint32_t size;           /* block size */
  uint16_t capacity;       /* blocks in one slab */
  uint8_t units;           /* 64 KiB units one slab spans */
  uint16_t first;          /* offset of a slab's first block in its first unit (see hk_on_boundary) */
  int16_t cap;             /* thread cache capacity (blocks) */
  uint16_t batch;          /* blocks moved from the central cache per refill */
} hk_class_info_t;

extern hk_class_info_t hk_classes[HK_NCLASS + 1] HK_HIDDEN;

extern __thread hk_tcache_t hk_tc __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
extern uint8_t hk_class_table[HK_TABLE_MAX + 1] HK_HIDDEN;  /* by size: one load, no arithmetic */
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

HK_HIDDEN void *hk_malloc_slow(size_t size);
HK_HIDDEN void hk_free_overflow(void *p);  /* p: the block just pushed */
HK_HIDDEN void hk_free_slow(void *p);
HK_HIDDEN __attribute__((noreturn, cold)) void hk_corrupted(const void *b);

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

/* A block of class cls from the thread's cache, or NULL if its list is
 * empty or starts with a block not marked free: one handed out already,
 * because it was freed twice, or written after its free (tcache_refill
 * tells misuse from an empty list).  Only what malloc is about to hand out
 * is checked, in a line it reads anyway; free marks blocks without reading
 * them. */
static inline __attribute__((always_inline)) void *hk_tcache_pop(unsigned cls) {
  hk_tcache_t *tc = &hk_tc;
  void *p = tc->head[cls];
  if (hk_likely(hk_is_free(p))) {
    void *n = hk_next(p);
    tc->head[cls] = n;
    /* The next malloc's block: a block freed long ago (by a consumer on
     * another thread, or before a structure's worth of others) has left the
     * cache, and each pop would otherwise wait for its link in turn.  16
     * producer/consumer pairs on 2 cores ran 1.2-1.4x faster with it. */
    __builtin_prefetch(n, 1, 3);
    hk_block_out(p, cls);
    tc->room[cls]++;
    if (HAK_OBSERVE) tc->front[cls].hits++;
    return p;
  }
  return NULL;
}

/* Takes one from the room of class cls in the thread's cache; true if it
 * went below 0.  gcc 12 emits this as three instructions when the result
 * feeds a branch (it moves the room's offset into the index with an `add`);
 * on x86-64 the two it should be are written out: the thread's cache is at
 * its GOT offset from the thread pointer, which gcc folds into the load it
 * makes for head[] anyway. */
static inline __attribute__((always_inline)) bool hk_room_spent(uintptr_t cls) {
  _Static_assert(sizeof hk_tc.room[0] == 2, "subw needs 16-bit rooms");
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  uintptr_t tc = (uintptr_t)&hk_tc - (uintptr_t)__builtin_thread_pointer();
  __asm__ goto("subw $1, %%fs:%c[room](%[tc],%[cls],2)\n\tjs %l[spent]"
               : : [tc] "r"(tc), [cls] "r"(cls), [room] "i"(offsetof(hk_tcache_t, room))
               : "cc", "memory" : spent);
  return false;
spent:
  return true;
#else
  return --hk_tc.room[cls] < 0;
#endif
}

static inline __attribute__((always_inline)) void *hk_malloc_fast(size_t size) {
  if (hk_likely(size <= HK_TABLE_MAX - HK_CANARY)) {
    /* class 0 until the process is set up: its list stays empty */
    void *p = hk_tcache_pop(hk_class_table[size + HK_CANARY]);
    if (hk_likely(p != NULL)) return p;
  }
  return hk_malloc_slow(size);
}

static inline __attribute__((always_inline)) void hk_free_fast(void *p) {
  if (hk_likely(hk_map_covers(p))) {
    uintptr_t cls = hk_map_get(p);
    /* rejects entries that are not a class too (0 for NULL and foreign memory, huge) */
    if (hk_likely(hk_on_boundary(p, cls))) {
      /* the hardened build also catches a double free here, at a read of the
       * block: marked free (on a list), home (back in its slab) or spare */
      if (hk_likely(!HAK_HARDENED || (!hk_is_free(p) && !hk_is_home(p) && !hk_is_spare(p) &&
                                      *hk_canary_at(p, cls) == hk_canary(p)))) {
        hk_tcache_t *tc = &hk_tc;
        hk_mark_free(p);
        hk_set_next(p, tc->head[cls]);
        tc->head[cls] = p;
        if (hk_unlikely(hk_room_spent(cls))) hk_free_overflow(p);
        return;
      }
    }
  }
  hk_free_slow(p);
}

#define HK_SS_SHIFT 22                          /* SuperSlab: 4 MiB, aligned to its size */
#define HK_SS_SIZE ((size_t)1 << HK_SS_SHIFT)
#define HK_SS_UNITS (HK_SS_SIZE / HK_UNIT_SIZE) /* 64 units; unit 0 holds the header */
#define HK_SS_CHUNK 8                           /* most SuperSlabs mapped by one mmap */
#define HK_SS_DENSE_PAGES 256                   /* resident pages that turn half of the first SuperSlab huge, */
#define HK_SS_DENSE_EVERY 8                     /* looked at on every 8th new slab, */
#define HK_SS_DENSE_LOOKS 16                    /* 16 times at most */
#define HK_REGION_SIZE ((size_t)128 << 20)      /* huge blocks share regions this big, */
#define HK_REGION_UNITS (HK_REGION_SIZE / HK_UNIT_SIZE)  /* cut into units */
#define HK_REGION_WORDS (HK_REGION_UNITS / 64)
#define HK_REGION_HEADER_UNITS 32               /* the header's 2 MiB */
/* Units never given to slabs: the header; in the hardened build also the
 * last unit, mapped inaccessible, so that an overrun off the end of one
 * SuperSlab faults before it reaches the next. */
#define HK_SS_RESERVED (HAK_HARDENED ? 1ull | 1ull << 63 : 1ull)
#define HK_TRANSFER_SLOTS 64                    /* batches parked per class and CPU (see central.c), */
#define HK_TRANSFER_SLOTS_LEAN 2                /* ... in lean mode, */
#define HK_TRANSFER_LISTS 16                    /* holding at most this many full thread cache lists */
#define HK_CPU_SETS 64                          /* sets of transfer slots: one per CPU, up to this */
#define HK_LARGE_MIN ((size_t)32 * 1024)        /* classes above: one block per slab */
#define HK_LARGE_CACHE ((size_t)4 << 20)        /* bytes of large blocks a thread may cache, */
#define HK_LARGE_CACHE_MIN ((size_t)256 << 10)  /* from this at its start or when many threads share */
#define HK_LARGE_GROWTH 1024                    /* misses that double a thread's budget */
#define HK_LARGE_GROWTH_MAX ((uint32_t)1 << 16) /* misses that earn a thread its whole share of the budget */
#define HK_ARENAS 8                             /* independently locked sets of SuperSlabs */
#define HK_PAGE_SIZE ((size_t)4096)
#define HK_UNIT_PAGES (HK_UNIT_SIZE / HK_PAGE_SIZE)  /* 16 */
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
/* A SuperSlab's unit bitmap: the run of n bits all set in `free`, starting
 * at a bit set in `starts`, with the fewest bits outside `warm` (free memory
 * still resident: reusing it costs no page fault), or -1.  *cold gets that
 * number.  Ties go to the lowest start for single bits and to the highest
 * for longer runs, so that long-lived small runs do not cut up the space
 * long ones need.  The best fit of huge regions (hk_region_fit), tried for
 * SuperSlabs too, spread a thread's slabs over more SuperSlabs and cost more
 * speed than the memory it saved was worth (README, How it works:
 * SuperSlabs). */
static inline uint64_t hk_bits(unsigned at, unsigned n) { return (n >= 64 ? ~0ull : (1ull << n) - 1) << at; }
static inline int hk_find_run(uint64_t free, uint64_t warm, unsigned n, uint64_t starts, unsigned *cold) {
  starts &= free;  /* bit i of `starts` ends up set when bits i .. i+n-1 are all free */
  for (unsigned i = 1; i < n && starts; i++) starts &= free >> i;
  if (!starts) return -1;
  if (n == 1) {
    uint64_t w = starts & warm;
    *cold = !w;
    return __builtin_ctzll(w ? w : starts);
  }
  int best = -1;
  *cold = n + 1;
  for (; starts && *cold; starts &= ~(1ull << (63 - __builtin_clzll(starts)))) {
    int s = 63 - __builtin_clzll(starts);
    unsigned c = (unsigned)__builtin_popcountll(hk_bits((unsigned)s, n) & ~warm);
    if (c < *cold) *cold = c, best = s;
  }
  return best;
}

static inline bool hk_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* ---- size classes (size_class.c) ------------------------------------------
 * 16..256 B in steps of 16, then 8 classes per doubling up to 1 MiB: at most
 * 12.5 % of a block is lost to rounding (about 6 % on average). */
HK_HIDDEN void hk_size_classes_init(void);
/* The 256 entries of hk_class_magic and of hk_class_magic_first. */
HK_HIDDEN void hk_class_magic_fill(uint32_t *magic, uint64_t *first);

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
/* Large classes above this have their blocks in the huge regions (huge.c). */
#define HK_REGION_CLASS_MIN ((size_t)256 * 1024)
static inline bool hk_class_in_regions(unsigned cls) { return hk_classes[cls].size > HK_REGION_CLASS_MIN; }

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
  uint64_t dirty;                     /* free units still resident, freed this purge epoch */
  uint64_t dirty_old;                 /* ... freed the epoch before: given back at the next tick */
  uint64_t stale;                     /* free units given back that may still hold old data (MADV_FREE, refused) */
  uint8_t arena;                      /* the arena this SuperSlab belongs to */
  bool bare;                          /* empty, its never-used units given back too (huge pages
                                         made them resident unseen) */
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

HK_HIDDEN void hk_arenas_init(unsigned cpus);
HK_HIDDEN unsigned hk_arena_assign(void);       /* the arena of a new thread */
/* from the calling thread's arena (warm: only on free units still resident, in any arena); *zero: its units read as zero */
HK_HIDDEN hk_slab_t *hk_slab_new(unsigned cls, bool warm, bool *zero);
HK_HIDDEN void hk_slab_release(hk_slab_t *slab);
HK_HIDDEN void *hk_large_take(unsigned cls, bool warm, bool *zero);  /* large classes: one-block slabs */
HK_HIDDEN void hk_large_release(unsigned cls, void *chain);
/* The size of the block of the SuperSlab (huge region) holding p, live or
 * freed, and whether it is live; 0 if p is not where a block started. */
HK_HIDDEN size_t hk_superslab_block_of(const void *p, bool *live);
HK_HIDDEN size_t hk_superslab_used_bytes(void);  /* of units given to slabs */
HK_HIDDEN size_t hk_superslab_purge(int mode, size_t want);  /* HK_PURGE_*; the bytes given back */
HK_HIDDEN size_t hk_superslab_resident(void);  /* bytes of free units still resident */
HK_HIDDEN void hk_superslab_fork_lock(void);
HK_HIDDEN void hk_superslab_fork_unlock(bool child);

/* ---- class map (class_map.c) ------------------------------------------------ */
HK_HIDDEN void hk_class_map_init(void);
HK_HIDDEN bool hk_class_map_reserve(const void *start, size_t size);  /* a mapping made: whether the map covers it */
HK_HIDDEN void hk_class_map_release(const void *start, size_t size);  /* ... and unmapped, its entries 0 */
HK_HIDDEN void hk_class_map_set(const void *start, size_t units, uint8_t value);
HK_HIDDEN uintptr_t hk_class_map_lookup(const void *p);  /* any pointer; 0 if not hakmem's */

/* ---- central cache (central.c): per class, behind one lock ------------------ */
/* Takes up to `want` blocks (a parked batch may be more) onto *chain;
 * *parker is the thread cache that parked them, NULL if they come from slabs.
 * `producer`: the caller has never given blocks of the class back (it only
 * allocates them), which keeps it from other CPUs' batches (central.c). */
HK_HIDDEN void hk_central_init(unsigned cpus);  /* sets of transfer slots: one per CPU */
HK_HIDDEN unsigned hk_central_cpu_sets(void);
HK_HIDDEN unsigned hk_central_take(unsigned cls, unsigned want, void **chain, const void **parker, bool producer);
/* A block of a large class, not on a chain and not touched: *zero if its
 * memory reads as zero, else it may hold anything, the free key included. */
HK_HIDDEN void *hk_central_take_large(unsigned cls, bool *zero);
/* Gives back a chain of `count` blocks; `owner` is the giving thread cache. */
HK_HIDDEN bool hk_central_put(unsigned cls, void *chain, unsigned count, const void *owner);
typedef struct hk_class_counts {  /* a class's figures in the central cache */
  size_t out;                     /* blocks handed out of slabs: in use, or in thread caches, or parked */
  size_t parked;                  /* blocks in parked batches */
  size_t slab_free;               /* blocks back on their slabs' free lists */
  size_t slabs, slabs_made;       /* slabs now, and ever made */
} hk_class_counts_t;
HK_HIDDEN void hk_central_counts(unsigned cls, hk_class_counts_t *out);
HK_HIDDEN size_t hk_central_check(void);  /* walks slabs and slots; hk_fatal on a mismatch */
HK_HIDDEN unsigned hk_chain_length(const void *chain, unsigned limit);
HK_HIDDEN void hk_central_purge(int mode);  /* parked batches and empty slabs back to the SuperSlabs */
HK_HIDDEN void hk_central_fork_lock(void);
HK_HIDDEN void hk_central_fork_unlock(bool child);

/* ---- thread caches (tcache.c) ---------------------------------------------- */
HK_HIDDEN void *hk_malloc_class(unsigned cls);
HK_HIDDEN void hk_thread_init(hk_tcache_t *tc);
HK_HIDDEN unsigned hk_thread_arena(void);        /* the calling thread's arena; its cache made if it had none */
HK_HIDDEN void hk_note_out(ptrdiff_t bytes);     /* the calling thread's bytes out grew/shrank (huge blocks) */
HK_HIDDEN void hk_tcache_flush(hk_tcache_t *tc);
HK_HIDDEN void hk_thread_exit(void *arg);
HK_HIDDEN void hk_front_add(hk_front_t *sum, const hk_front_t *f);
HK_HIDDEN void hk_tcache_survey(size_t *cached, hk_front_t *front, unsigned *threads);
HK_HIDDEN void hk_tcache_fork_lock(void);
HK_HIDDEN void hk_tcache_fork_unlock(bool child, bool locked);  /* locked: by its prepare handler */

/* ---- huge blocks (huge.c): one mapping each -------------------------------- */
HK_HIDDEN void *hk_huge_alloc(size_t size, size_t alignment, bool zero);
HK_HIDDEN void *hk_huge_take_class(unsigned cls, bool *zero);  /* a block of a large class above HK_REGION_CLASS_MIN */
HK_HIDDEN void hk_huge_release_class(unsigned cls, void *chain);
/* The stretches of free units of a region, in no order: the shortest that
 * holds a block is where it goes first, found without a walk over the
 * region's bitmap.  At most every other unit past the header starts one.
 * Each stretch's first and last units keep its place in the list, so that
 * taking from one (given its first unit) and giving back next to one find
 * it without a pass over the list. */
#define HK_REGION_STRETCHES (HK_REGION_UNITS / 2)
typedef struct hk_stretches {
  unsigned count;
  uint32_t span[HK_REGION_STRETCHES];  /* length << 16 | first unit: one load, and the key of the search */
  uint16_t place[HK_REGION_UNITS];     /* at each stretch's first and last unit: its index; elsewhere stale */
} hk_stretches_t;
static inline unsigned hk_stretch_at(const hk_stretches_t *s, unsigned i) { return s->span[i] & 0xffff; }
static inline unsigned hk_stretch_len(const hk_stretches_t *s, unsigned i) { return s->span[i] >> 16; }
/* [u, u+n) lies in the stretch that starts at unit `start` */
HK_HIDDEN void hk_stretches_take(hk_stretches_t *s, unsigned start, unsigned u, unsigned n);
HK_HIDDEN void hk_stretches_give(hk_stretches_t *s, unsigned u, unsigned n);  /* [u, u+n) was in use */
/* The shortest stretch of at least n units (the lowest of equals): its
 * length, and its first unit in *at; 0 if none. */
HK_HIDDEN unsigned hk_stretches_shortest(const hk_stretches_t *s, unsigned n, unsigned *at);
/* Where n units go in a region (huge.c): -1 if nowhere with at most `limit` cold units. */
HK_HIDDEN int hk_region_fit(const uint64_t *used, const uint64_t *warm, unsigned end, unsigned n, unsigned step,
                            unsigned limit, unsigned *cold, unsigned *slack);
HK_HIDDEN void hk_huge_free(void *p);
HK_HIDDEN void *hk_huge_realloc(void *p, size_t size);
HK_HIDDEN size_t hk_huge_usable_size(const void *p);  /* 0 if p is not a huge block */
HK_HIDDEN size_t hk_huge_block_of(const void *p, bool *live);
HK_HIDDEN void hk_huge_counts(size_t *blocks, size_t *bytes, bool peak);  /* in use (or their peaks), as the program sees them */
HK_HIDDEN size_t hk_huge_used_bytes(void);                      /* of the units in use */
HK_HIDDEN size_t hk_huge_purge(int mode, size_t want);  /* HK_PURGE_*; the bytes given back */
HK_HIDDEN size_t hk_huge_nonresident(void);  /* of the free bytes counted resident, those not (mincore) */
HK_HIDDEN size_t hk_huge_resident(void);  /* bytes of free units and cached jumbo regions still resident */
HK_HIDDEN void hk_huge_fork_lock(void);
HK_HIDDEN void hk_huge_fork_unlock(bool child);

/* ---- OS layer (os.c) -------------------------------------------------------- */
HK_HIDDEN void *hk_os_map_aligned(size_t size, size_t alignment, size_t offset);
HK_HIDDEN void hk_os_unmap(void *p, size_t size);  /* a slot of the space goes back to it */
#define HK_SPACE_SIZE ((size_t)1 << 30)           /* reserved with the class map when it can be */
HK_HIDDEN void hk_os_space_init(void *start, size_t size);
HK_HIDDEN void *hk_os_space_take(size_t size);  /* HK_SS_SIZE or HK_REGION_SIZE; NULL if none free */
HK_HIDDEN void *hk_os_remap(void *p, size_t old_size, size_t new_size, void *target);
HK_HIDDEN size_t hk_os_page_size(void);
HK_HIDDEN void *hk_os_reserve(size_t size);  /* address space, inaccessible */
HK_HIDDEN bool hk_os_protect_as(void *p, size_t size, int prot);    /* mprotect: PROT_* */
HK_HIDDEN void hk_os_munlock(void *p, size_t size);
HK_HIDDEN void hk_os_space_unlock_untaken(void);           /* after mlockall without MCL_FUTURE */
HK_HIDDEN void hk_os_space_lock(void);                      /* no slot taken meanwhile */
HK_HIDDEN void hk_os_space_unlock(bool child);
HK_HIDDEN int hk_os_mlockall(int flags);                             /* the system call itself */
HK_HIDDEN bool hk_os_read(void *dst, const void *src, size_t n);  /* a fault-safe copy of this process's memory */
HK_HIDDEN int hk_class_map_mlockall(int flags);
HK_HIDDEN void hk_class_map_fork_lock(void);
HK_HIDDEN void hk_class_map_fork_unlock(bool child);
HK_HIDDEN void hk_os_discard(void *p, size_t size);  /* its pages gone: zero when next read */
HK_HIDDEN bool hk_os_decommit(void *p, size_t size);  /* as HAKMEM_SS_MEM_LEAN_DECOMMIT says; false if refused */
HK_HIDDEN bool hk_os_huge_pages_available(void);  /* the kernel gives transparent huge pages to this process */
HK_HIDDEN void hk_os_advise_huge(void *p, size_t size);  /* transparent huge pages wanted */
HK_HIDDEN void hk_os_collapse_huge(void *p, size_t size);  /* and made of the pages there now */
HK_HIDDEN bool hk_os_unit_pages(void *p, unsigned n, uint8_t *pages);  /* pages[i]: 4 KiB pages resident in unit i of n <= 64 from p */
HK_HIDDEN unsigned hk_os_resident_pages(void *p, size_t size);  /* of [p, p+size), in 4 KiB pages, at most 4 MiB of them */
HK_HIDDEN void hk_os_advise_small(void *p, size_t size);  /* no huge pages there, even where THP is "always" */
HK_HIDDEN void *hk_os_space_first(void);  /* the space's first SuperSlab slot, or NULL */
HK_HIDDEN void hk_os_protect(void *p, size_t size, bool access);  /* guard pages: access or not */
HK_HIDDEN uint64_t hk_os_now_ms(void);
HK_HIDDEN unsigned hk_os_cpus(void);  /* CPUs the process may run on */
HK_HIDDEN void hk_os_set_ceiling(uintptr_t ceiling);  /* new mappings go below it */

/* ---- options (options.c): read once at start-up, from one table ----------- */
enum { HK_PROFILE_SPEED, HK_PROFILE_BALANCED, HK_PROFILE_LEAN, HK_NPROFILES };
enum { HK_DECOMMIT_OFF, HK_DECOMMIT_FREE, HK_DECOMMIT_DONTNEED };
typedef struct hk_options {   /* every field a size_t, written through the table */
  size_t purge_delay_ms;      /* free memory older than this goes back to the OS */
  size_t background_purge;    /* a purger thread gives memory back while the program idles */
  size_t warm_pool_size;      /* empty SuperSlabs kept mapped per arena */
  size_t mem_lean;            /* lean mode: free resident memory capped, no prewarm */
  size_t decommit;            /* HK_DECOMMIT_*: how memory is given back */
  size_t lean_target_mb;      /* lean mode's cap on free resident memory */
  size_t large_cache;         /* bytes of large blocks all thread caches may hold */
  size_t huge_thp;            /* huge blocks on transparent huge pages */
  size_t ss_thp;              /* SuperSlabs on transparent huge pages (the first: superslab.c) */
  size_t prewarm_all;         /* blocks prewarmed per class up to 2 KiB ... */
  size_t prewarm[8];          /* ... or per seeds' class C0..C7 (HK_OPT_UNSET: as prewarm_all) */
  size_t os_stats;            /* print OS-call counters at exit */
  size_t stats;               /* print the statistics at exit */
  size_t front_metrics;       /* print the per-class front metrics (CSV) at exit */
  size_t front_dump;          /* ... and each thread's when it exits */
  size_t verbose;             /* print the options in force at start-up */
} hk_options_t;

enum { HK_OPT_BOOL, HK_OPT_UINT, HK_OPT_SIZE, HK_OPT_ENUM };
#define HK_OPT_UNSET SIZE_MAX
#define HK_OPT_PROFILE_FIELD SIZE_MAX  /* the profile row has no field of its own */
typedef struct hk_option {
  const char *name;                 /* the environment variable */
  size_t offset;                    /* of its field in hk_options_t */
  unsigned type;                    /* HK_OPT_* */
  size_t def[HK_NPROFILES];         /* default under each profile */
  size_t max;                       /* largest value (numbers) */
  const char *const *names;         /* values of an HK_OPT_ENUM, NULL-terminated */
  const char *meaning;
} hk_option_t;

extern hk_options_t hk_opt HK_HIDDEN;
extern unsigned hk_profile HK_HIDDEN;
extern const hk_option_t hk_option_table[] HK_HIDDEN;
extern const unsigned hk_option_count HK_HIDDEN;
HK_HIDDEN void hk_options_init(void);
HK_HIDDEN void hk_options_print(void);
HK_HIDDEN void hk_option_format(const hk_option_t *o, size_t value, char *buf, size_t len);
HK_HIDDEN unsigned hk_prewarm_count(unsigned cls);

/* ---- the purge schedule (purge.c): when free memory goes back to the OS ---- */
enum {
  HK_PURGE_DUE,    /* a tick: what has been free since before the last one */
  HK_PURGE_OLD,    /* lean mode over its target: `want` bytes of what has been free since
                      before the last tick */
  HK_PURGE_DIRTY,  /* then `want` bytes of any free, the oldest first */
  HK_PURGE_ALL,    /* malloc_trim: everything, parked batches and empty mappings too */
};
extern atomic_bool hk_purge_pending HK_HIDDEN;  /* some free memory waits for a tick */
HK_HIDDEN void hk_purge_note(void);              /* free memory to give back later */
HK_HIDDEN size_t hk_purge_resident(void);        /* bytes free but still resident, all layers */
/* A layer's count of free resident bytes grew or shrank: each layer (an
 * arena, the huge regions) keeps its own, written under its own lock on a
 * line no other layer's threads write, and read by hk_purge_resident. */
extern __thread size_t hk_resident_mine __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
static inline void hk_resident_add(size_t *count, ptrdiff_t bytes) {
  __atomic_store_n(count, *count + (size_t)bytes, __ATOMIC_RELAXED);
  hk_resident_mine += (size_t)bytes;  /* this thread's changes: lean mode's view of the counts (purge.c) */
  if (bytes > 0) hk_purge_note();
}
HK_HIDDEN void hk_purge_fresh(size_t bytes);   /* fresh memory taken (lean mode's cap learns from it) */
HK_HIDDEN void hk_purge_poll_slow(void);
HK_HIDDEN bool hk_purge_all(void);
HK_HIDDEN void hk_purge_fork_lock(void);
HK_HIDDEN void hk_purge_fork_unlock(bool child);
/* Called by the slow paths, with no lock held: runs a tick if one is due. */
static inline void hk_purge_poll(void) {
  if (hk_unlikely(atomic_load_explicit(&hk_purge_pending, memory_order_relaxed))) hk_purge_poll_slow();
}

/* ---- process set-up (init.c) ------------------------------------------------ */
extern atomic_bool hk_ready HK_HIDDEN;
extern pthread_key_t hk_thread_key HK_HIDDEN;
extern bool hk_thread_key_made HK_HIDDEN;  /* false: threads get no cache (nothing would hand it back) */
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
/* An invariant of the slow paths, checked in the standard builds and
 * compiled out (condition included) in fast. */
#define hk_assert(cond, what)                                                    \
  do {                                                                           \
    if (HAK_CHECKS && hk_unlikely(!(cond))) hk_fatal("internal check failed: " what, NULL); \
  } while (0)
HK_HIDDEN __attribute__((noreturn, cold)) void hk_misuse(const char *call, const void *p, uintptr_t cls);
HK_HIDDEN void hk_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HK_HIDDEN void hk_os_stats_print(void);
HK_HIDDEN void hk_stats_out(ptrdiff_t bytes);  /* bytes handed out of the central caches grew/shrank */
HK_HIDDEN void hk_front_print(const char *who, const hk_front_t *front);
HK_HIDDEN void hk_stats_fork_lock(void);
HK_HIDDEN void hk_stats_fork_unlock(bool child);
HK_HIDDEN void hk_stats_at_exit(void);

#endif
