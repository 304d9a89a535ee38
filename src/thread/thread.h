/* SPDX-License-Identifier: MIT */
/* Thread caches (tcache.c): a free list and a room counter per class in
 * each thread's TLS; malloc pops, free pushes. */
#ifndef HK_THREAD_H
#define HK_THREAD_H

#include "slab/slab.h"

enum { HK_TC_UNINIT = 0, HK_TC_ACTIVE = 1, HK_TC_DEAD = 2 };

/* A class's traffic through a thread cache (HAKMEM_TINY_FRONT_METRICS),
 * counted on the slow paths but for `hits` (observe build, fast path).
 * Class 0's entry of a thread's counters, which no class uses, says which
 * classes have counted (tcache.c's pool). */
typedef union hk_front {
  struct {
    uint64_t hits;         /* mallocs the list served (observe build) */
    uint64_t misses;       /* mallocs that found it empty: refills */
    uint64_t overflows;    /* frees that found it full: flushes */
    uint64_t moved;        /* blocks taken from and given to the central cache */
    uint64_t parked_hits;  /* refills a parked batch served whole */
    uint64_t from_others;  /* blocks got in batches another thread parked */
  };
  struct {
    uint64_t link;         /* the next free block of the pool */
    uint64_t counted[2];   /* bit c % 64 of word c / 64: class c has counted */
  };
} hk_front_t;
_Static_assert(HK_NCLASS < 128, "two words of counted classes");

/* Rooms and capacities are padded to a multiple of 8, so that a thread's
 * start sets them eight classes to an SSE2 add and its exit compares them
 * four to a 64-bit word (tcache.c). */
#define HK_LISTS ((HK_NCLASS + 8) & ~7)
typedef struct hk_tcache {
  void *head[HK_NCLASS + 1];    /* free blocks per class, ending at HK_END; head[0] stays HK_END */
  int16_t room[HK_LISTS];       /* capacity - length; free overflows below 0 */
  uint8_t state;                /* HK_TC_*: a new thread's is UNINIT (0) */
  uint8_t arena;                /* SuperSlab arena of the thread's new slabs and huge blocks */
  size_t large_bound;           /* at least the bytes of large blocks cached (slow paths only) */
  uint32_t large_misses;        /* large blocks the list did not have: the budget grows with them */
  uint32_t budget_threads;      /* the threads large_budget was worked out for (slow paths only) */
  size_t large_budget;          /* large_budget() as last worked out: the misses since can only
                                   have raised it, new threads lowered it (slow paths only) */
  /* slow paths only: */
  int16_t cap[HK_LISTS];             /* capacity of each list: halves when frees outpace mallocs,
                                        doubles back (up to hk_classes[].cap) when it runs dry */
  uint8_t overflows[HK_NCLASS + 1];  /* since the list last ran dry: 0 or HK_OVERFLOW_* */
  uint8_t early_frees;               /* frees before the first malloc (see hk_free_overflow) */
  ptrdiff_t out_pending;             /* bytes taken less bytes given, not yet in the statistics */
  void *zero_block;                  /* the large block just handed out reading as zero (calloc) */
  hk_front_t *front;                 /* the thread's counters, by class: a block of tcache.c's
                                        pool, not TLS, which every thread start copies; NULL
                                        before its set-up and after its exit */
} hk_tcache_t;
#define HK_TCACHE_MIN_CAP 128     /* what a list shrinks to at most (tcache.c): this many blocks */
#define HK_TCACHE_MIN_BYTES 16384 /* ... or fewer, of these bytes, */
#define HK_TCACHE_MIN_CAP_LEAN 8  /* ... but never below this, which lean mode keeps to */
enum { HK_OVERFLOW_PARKED = 1,   /* the last overflow's batch was parked */
       HK_OVERFLOW_UNPARKED,     /* it went back to its slabs */
       HK_OVERFLOW_UNPARKED2 };  /* so did the one before */
#define HK_FREES_BEFORE_CACHE 32 /* frees a thread makes before its first malloc without a cache */
#define HK_STATS_STEP ((ptrdiff_t)1 << 20)   /* see note_out (tcache.c) */
#define HK_STATS_SLACK ((ptrdiff_t)8 << 20)
#define HK_LARGE_CACHE ((size_t)4 << 20)        /* bytes of large blocks a thread may cache, */
#define HK_LARGE_CACHE_MIN ((size_t)256 << 10)  /* from this at its start or when many threads share */
#define HK_LARGE_GROWTH 1024                    /* misses that double a thread's budget */
#define HK_LARGE_GROWTH_MAX ((uint32_t)1 << 16) /* misses that earn a thread its whole share of the budget */

extern __thread hk_tcache_t hk_tc __attribute__((tls_model("initial-exec"))) HK_HIDDEN;

/* A block of class cls, or NULL if its list is empty or starts with one not
 * marked free (freed twice or written after its free: hk_tcache_refill tells
 * which).  Checked here, in a line malloc reads anyway: free reads no block. */
static inline __attribute__((always_inline)) void *hk_tcache_pop(unsigned cls) {
  hk_tcache_t *tc = &hk_tc;
  void *p = tc->head[cls];
  if (hk_likely(hk_is_free(p))) {
    void *n = hk_next(p);
    tc->head[cls] = n;
    /* A block freed long ago has left the cache, and each pop would wait for
     * its link in turn (16 prodcons pairs on 2 cores: 1.2-1.4x faster). */
    __builtin_prefetch(n, 1, 3);
    hk_block_out(p, cls);
    tc->room[cls]++;
    if (HAK_OBSERVE && tc->front) tc->front[cls].hits++;
    return p;
  }
  return NULL;
}

/* Puts back p, which a pop or a refill of class cls just gave out, as if
 * it had not: the list may hold one over its capacity until its next pop,
 * but a block handed back is no sign of frees outpacing mallocs, and no
 * overflow follows (the heap profile's samples, api/alloc.c).  False if
 * the thread has no cache (exited, or none to be had): p is not taken. */
static inline bool hk_tcache_unpop(void *p, unsigned cls) {
  hk_tcache_t *tc = &hk_tc;
  if (tc->state != HK_TC_ACTIVE) return false;
  hk_mark_free(p);
  hk_set_next(p, tc->head[cls]);
  tc->head[cls] = p;
  tc->room[cls]--;
  return true;
}

/* Takes one from class cls's room; true if below 0.  gcc 12 spends three
 * instructions when the result feeds a branch; on x86-64 the two it needs are
 * written out (the cache's TLS offset folded into head[]'s load). */
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

/* ---- thread caches (tcache.c) ---------------------------------------------- */
/* A block of class cls for `size` bytes when hk_tcache_pop found none (the
 * list refilled, or a large block taken straight), NULL if out of memory;
 * sets up the cache. */
HK_HIDDEN void *hk_tcache_refill(unsigned cls, size_t size);
HK_HIDDEN void hk_thread_init(hk_tcache_t *tc);
HK_HIDDEN unsigned hk_thread_arena(void);        /* the calling thread's arena; its cache made if it had none */
HK_HIDDEN void hk_note_out(ptrdiff_t bytes);     /* the calling thread's bytes out grew/shrank (huge blocks) */
HK_HIDDEN void hk_tcache_flush(hk_tcache_t *tc);
HK_HIDDEN bool hk_thread_exit(hk_front_t *counters);  /* the calling thread's cache goes back, its
                                                         counters copied to counters if given; false if it had none */
/* The thread layer's set-up, once the size classes are: the key a thread
 * whose cache is made sets, for its exit (NULL: none could be made), new
 * lists' capacities and the large classes' sizes in pages. */
HK_HIDDEN void hk_tcache_init(const pthread_key_t *key);
/* Class cls's list (a block just pushed) outgrew its capacity, or the thread
 * has no cache yet; true if blocks went to the central cache (to await a purge). */
HK_HIDDEN bool hk_tcache_overflow(unsigned cls);
HK_HIDDEN void hk_tcache_survey(size_t *cached, hk_front_t *front, unsigned *threads);
HK_HIDDEN void hk_tcache_fork_lock(void);
HK_HIDDEN void hk_tcache_fork_unlock(bool child, bool locked);  /* locked: by its prepare handler */

#endif
