/* SPDX-License-Identifier: MIT */
/* The base layer: build variants, locks, the address-space layout's
 * constants, bit and list helpers, the size classes' table, options, counters
 * (counters.c) and messages.  Each layer has a folder and one header,
 * including only its own and lower layers' (scripts/layers checks it):
 *   base <- os <- map <- region <- slab <- thread <- service <- api
 * Lower layers take inputs as arguments; news goes up only through counters. */
#ifndef HK_BASE_H
#define HK_BASE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hakmem.h"

/* Build variants: the one place where compile-time switches live.
 *   HAK_VARIANT 1  fast      the default; nothing but the allocator on the fast paths
 *   HAK_VARIANT 2  standard  fast + consistency checks in the slow paths
 *   HAK_VARIANT 3  observe   standard + counters on the fast paths (the hits
 *                            of HAKMEM_TINY_FRONT_METRICS)
 *   HAK_VARIANT 4  hardened  standard + free lists encoded with a per-process
 *                            key and checked on use, a canary after every block
 *                            checked on free, guard pages after SuperSlabs and
 *                            huge blocks, fresh blocks handed out in a random
 *                            order (libhakmem-hardened.so)
 * HAK_NO_OVERRIDE builds a library that defines only the hak_* names (for
 * running the allocator under ASan/TSan next to the sanitizer's own malloc). */
#ifndef HAK_VARIANT
#define HAK_VARIANT 1
#endif

#if HAK_VARIANT == 1
#define HAK_VARIANT_NAME "fast"
#define HAK_CHECKS 0
#define HAK_OBSERVE 0
#define HAK_HARDENED 0
#elif HAK_VARIANT == 2
#define HAK_VARIANT_NAME "standard"
#define HAK_CHECKS 1
#define HAK_OBSERVE 0
#define HAK_HARDENED 0
#elif HAK_VARIANT == 3
#define HAK_VARIANT_NAME "observe"
#define HAK_CHECKS 1
#define HAK_OBSERVE 1
#define HAK_HARDENED 0
#elif HAK_VARIANT == 4
#define HAK_VARIANT_NAME "hardened"
#define HAK_CHECKS 1
#define HAK_OBSERVE 0
#define HAK_HARDENED 1
#else
#error "HAK_VARIANT must be 1, 2, 3 or 4"
#endif

/* Bytes at the end of every block of a size class that hold its canary. */
#define HK_CANARY (HAK_HARDENED ? 8 : 0)

#define HK_HIDDEN __attribute__((visibility("hidden")))
#define HK_EXPORT __attribute__((visibility("default")))
#define hk_likely(x) __builtin_expect(!!(x), 1)
#define hk_unlikely(x) __builtin_expect(!!(x), 0)
/* A system call whose failure the allocator handles itself: errno as it was,
 * so that a malloc that succeeds, and every free, leave errno alone. */
#define hk_keep_errno(call) \
  __extension__({                          \
    int hk_errno_ = errno;                 \
    __typeof__(call) hk_result_ = (call);  \
    errno = hk_errno_;                     \
    hk_result_;                            \
  })

/* The allocator's locks, all taken by fork's prepare handler (init.c) and let
 * go by its parent and child handlers; other libraries' handlers registered
 * earlier run in between, on the thread holding them, and take none
 * (docs/DESIGN.md, fork).  Each thread counts the locks it holds: a fork from
 * a signal handler that interrupted the allocator must not wait for them. */
extern __thread bool hk_forking __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
extern __thread unsigned hk_locks_held __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
extern __thread unsigned hk_fork_depth __attribute__((tls_model("initial-exec"))) HK_HIDDEN;  /* in fork's handlers */
/* Makes x a value the compiler cannot see through, kept in a register:
 * one computed from parts it would otherwise build again at each use. */
#define hk_opaque(x) __asm__("" : "+r"(x))
static inline void hk_pause(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}
/* The count covers the lock from before it is taken to after it is let go:
 * a signal handler sees a count above 0 wherever the lock may be held.
 * Every lock spins a little before it sleeps: most holds are shorter than a
 * futex wait and wake-up (larson with blocks up to 64 KiB, whose large
 * classes take the class and arena locks at a high rate: 1.14 times as
 * fast as waiting at once; docs/DESIGN.md, The contention model). */
#define HK_LOCK_SPINS 100
static inline void hk_lock(pthread_mutex_t *m) {
  if (hk_forking) return;
  hk_locks_held++;
  for (int i = 0; pthread_mutex_trylock(m) != 0; i++) {
    if (i == HK_LOCK_SPINS) {
      pthread_mutex_lock(m);
      return;
    }
    hk_pause();
  }
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

/* ---- the address space's layout ---------------------------------------------- */
#define HK_UNIT_SHIFT 16                       /* 64 KiB: granule of the class map */
#define HK_UNIT_SIZE ((size_t)1 << HK_UNIT_SHIFT)
#define HK_NCLASS 116                          /* size classes 1..116; 0 = none */
#define HK_TABLE_MAX 8192                      /* sizes looked up in hk_class_table */
#define HK_CLASS_MAX ((size_t)1 << 20)         /* largest size class: 1 MiB */
#define HK_SMALL_MAX (HK_CLASS_MAX - HK_CANARY) /* largest request the classes serve */
#define HK_SS_SHIFT 22                          /* SuperSlab: 4 MiB, aligned to its size */
#define HK_SS_SIZE ((size_t)1 << HK_SS_SHIFT)
#define HK_REGION_SIZE ((size_t)128 << 20)      /* huge blocks share regions this big */
#define HK_LARGE_MIN ((size_t)32 * 1024)        /* classes above: one block per slab */
#define HK_PAGE_SIZE ((size_t)4096)
#define HK_UNIT_PAGES (HK_UNIT_SIZE / HK_PAGE_SIZE)  /* 16 */
#define HK_CACHELINE 64

#define hk_min(a, b) ((a) < (b) ? (a) : (b))
#define hk_max(a, b) ((a) > (b) ? (a) : (b))
/* Raises *at to v if it is below (relaxed); returns the two's larger. */
static inline size_t hk_atomic_max(atomic_size_t *at, size_t v) {
  size_t was = atomic_load_explicit(at, memory_order_relaxed);
  while (v > was && !atomic_compare_exchange_weak_explicit(at, &was, v, memory_order_relaxed, memory_order_relaxed)) {
  }
  return hk_max(was, v);
}

static inline size_t hk_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
/* An index of `bits` bits from a key (an address): the product's top bits
 * (Fibonacci hashing), for the tables the heap profile keeps by address. */
static inline size_t hk_hash_index(uintptr_t key, unsigned bits) {
  return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* Doubly linked lists of any struct with `next` and `prev`; `head` points at
 * the first node (arguments evaluated more than once). */
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
/* The set bits of x.  The x86-64 baseline has no popcnt: gcc calls libgcc's
 * __popcountdi2 (29 instructions a call in mixed_large), where these are 12
 * inline. */
static inline unsigned hk_popcount(uint64_t x) {
#if defined(__x86_64__) && !defined(__POPCNT__)
  x -= x >> 1 & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + (x >> 2 & 0x3333333333333333ull);
  return (unsigned)(((x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full) * 0x0101010101010101ull >> 56);
#else
  return (unsigned)__builtin_popcountll(x);
#endif
}
static inline uint64_t hk_bits(unsigned at, unsigned n) { return (n >= 64 ? ~0ull : (1ull << n) - 1) << at; }

/* How many of the `len` bits of `mask` are set in x: no count where all
 * are set or clear, as they mostly are. */
static inline unsigned hk_bits_in(uint64_t x, uint64_t mask, unsigned len) {
  x &= mask;
  return x == mask ? len : x ? hk_popcount(x) : 0;
}

/* Units [at, end) of a bitmap a word at a time: for (hk_span_t s = hk_span(u, n);
 * hk_span_next(&s);) visits word s.k, its s.len bits of them in s.mask. */
typedef struct hk_span {
  unsigned at, end, k, len;
  uint64_t mask;
} hk_span_t;
static inline hk_span_t hk_span(unsigned at, unsigned n) { return (hk_span_t){.at = at, .end = at + n}; }
static inline __attribute__((always_inline)) bool hk_span_next(hk_span_t *s) {
  if (s->at >= s->end) return false;
  s->k = s->at / 64;
  s->len = hk_min(64 - s->at % 64, s->end - s->at);
  s->mask = hk_bits(s->at % 64, s->len);
  s->at += s->len;
  return true;
}

static inline void hk_bits_set(uint64_t *w, unsigned at, unsigned n) {
  for (hk_span_t s = hk_span(at, n); hk_span_next(&s);) w[s.k] |= s.mask;
}
static inline unsigned hk_bits_count(const uint64_t *w, unsigned at, unsigned n) {
  unsigned count = 0;
  for (hk_span_t s = hk_span(at, n); hk_span_next(&s);) count += hk_bits_in(w[s.k], s.mask, s.len);
  return count;
}

/* The first unit from `from` on, below `end`, whose bit is `value`; else `end`. */
static inline __attribute__((always_inline)) unsigned hk_bits_next(const uint64_t *w, unsigned from, bool value,
                                                                    unsigned end) {
  if (from >= end) return end;
  uint64_t flip = value ? 0 : ~0ull;
  unsigned k = from / 64, words = (end + 63) / 64;
  uint64_t x = (w[k] ^ flip) >> (from % 64);
  if (x) return hk_min(from + (unsigned)__builtin_ctzll(x), end);
  while (++k < words)
    if (w[k] != flip) return hk_min(k * 64 + (unsigned)__builtin_ctzll(w[k] ^ flip), end);
  return end;
}

static inline bool hk_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* ---- the size classes' table (computed by the slab layer: size_class.c) ---- */
typedef struct hk_class_info {
  uint32_t size;           /* block size */
  uint16_t capacity;       /* blocks in one slab */
  uint8_t units;           /* 64 KiB units one slab spans */
  uint16_t first;          /* offset of a slab's first block in its first unit (see hk_on_boundary) */
  int16_t cap;             /* thread cache capacity (blocks) */
  uint16_t batch;          /* blocks moved from the central cache per refill */
  uint16_t prewarm;        /* blocks put in a new thread's list (HAKMEM_TINY_PREWARM_*) */
} hk_class_info_t;

extern hk_class_info_t hk_classes[HK_NCLASS + 1] HK_HIDDEN;

/* 16..256 B in steps of 16, then 8 classes per doubling up to 1 MiB: at most
 * 12.5 % of a block is lost to rounding (about 6 % on average).  And one
 * class 16 B above each power of two from 512 B to 4 KiB (528, 1040, 2064,
 * 4112): a power of two and a header (SQLite's 8-byte size prefix on a
 * 1 KiB page) would lose 11 % to the next class; above 4 KiB, slabs of
 * 64 KiB hold no more blocks of such a class than of the next one. */
#define HK_ODD_FIRST 9                         /* 2^9 + 16 */
#define HK_ODD_LAST 12                         /* 2^12 + 16 */
/* Class of a size 1..HK_CLASS_MAX, by arithmetic (the table serves the fast path). */
static inline unsigned hk_size_to_class(size_t n) {
  if (n <= 256) return n <= 16 ? 1 : (unsigned)((n + 15) >> 4);
  unsigned b = 63u - (unsigned)__builtin_clzl(n - 1);  /* n-1 in [2^b, 2^(b+1)) */
  unsigned c = 17u + (b - 8u) * 8u + (unsigned)((n - 1) >> (b - 3)) - 8u;  /* the 8 per doubling */
  if (b < HK_ODD_FIRST) return c;
  if (b > HK_ODD_LAST) return c + HK_ODD_LAST - HK_ODD_FIRST + 1;
  /* the odd classes of the powers below 2^b, and 2^b's own: n itself, or below n */
  return n <= ((size_t)1 << b) + 16 ? 17u + (b - 8u) * 8u + b - HK_ODD_FIRST : c + b - HK_ODD_FIRST + 1;
}

/* Large classes (above HK_LARGE_MIN): one block per slab, no central cache,
 * a thread cache bounded by bytes rather than by count. */
#define HK_FIRST_LARGE_CLASS hk_size_to_class(HK_LARGE_MIN + 1)
static inline bool hk_class_is_large(unsigned cls) { return cls >= HK_FIRST_LARGE_CLASS; }
/* Large classes above this have their blocks in the huge regions (huge.c). */
#define HK_REGION_CLASS_MIN ((size_t)256 * 1024)
static inline bool hk_class_in_regions(unsigned cls) { return hk_classes[cls].size > HK_REGION_CLASS_MIN; }

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
  size_t prof;                /* HK_OPT_PATH: the heap profile written at exit (service/prof.c) */
  size_t prof_sample;         /* mean bytes between two samples */
  size_t prof_interval_mb;    /* a numbered profile each time the live heap grows by this */
  size_t prof_leaks;          /* the leak report at exit */
} hk_options_t;

enum { HK_OPT_BOOL, HK_OPT_UINT, HK_OPT_SIZE, HK_OPT_ENUM, HK_OPT_PATH };  /* a path: its string's address, 0 unset */
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
HK_HIDDEN void hk_options_init(bool huge_pages);  /* huge_pages: the kernel gives transparent huge pages */
HK_HIDDEN void hk_options_print(void);
HK_HIDDEN bool hk_option_from_env(const size_t *field);  /* its variable was set */
HK_HIDDEN void hk_option_format(const hk_option_t *o, size_t value, char *buf, size_t len);

/* ---- counters (counters.c): news for the layers above ---------------------- */
enum {
  HK_PURGE_DUE,    /* a tick: what has been free since before the last one */
  HK_PURGE_OLD,    /* lean mode over its target: `want` bytes free since before the last tick */
  HK_PURGE_DIRTY,  /* then `want` bytes of any free, the oldest first */
  HK_PURGE_ALL,    /* malloc_trim: everything, parked batches and empty mappings too */
};
extern atomic_bool hk_purge_pending HK_HIDDEN;  /* some free memory waits for a tick */
/* Free memory to give back later: the purge schedule (service) will see it. */
static inline void hk_purge_note(void) {
  if (!atomic_load_explicit(&hk_purge_pending, memory_order_relaxed)) atomic_store(&hk_purge_pending, true);
}
/* A layer's count of free resident bytes changed: each layer keeps its own,
 * under its own lock on a line of its own, read by hk_purge_resident. */
extern __thread size_t hk_resident_mine __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
static inline void hk_resident_add(size_t *count, ptrdiff_t bytes) {
  __atomic_store_n(count, *count + (size_t)bytes, __ATOMIC_RELAXED);
  hk_resident_mine += (size_t)bytes;  /* this thread's changes: lean mode's view of the counts (purge.c) */
  if (bytes > 0) hk_purge_note();
}
/* Lean mode's learning (purge.c): the bytes its last trim gave back, the
 * fresh bytes taken since, and when (ms) they came to half (0: not yet). */
extern atomic_size_t hk_lean_trimmed, hk_lean_retaken HK_HIDDEN;
extern _Atomic uint64_t hk_lean_retaken_ms HK_HIDDEN;
HK_HIDDEN void hk_fresh_taken(size_t bytes);  /* fresh memory taken from the OS */
/* Bytes handed out of the central caches and huge regions, and their peak. */
extern atomic_llong hk_out_bytes HK_HIDDEN;
extern atomic_size_t hk_out_peak HK_HIDDEN;
HK_HIDDEN void hk_out_add(ptrdiff_t bytes);
HK_HIDDEN size_t hk_out_note_peak(size_t now);  /* the peak raised to `now` if below; returns it */
HK_HIDDEN uint64_t hk_now_ms(void);  /* CLOCK_MONOTONIC_COARSE */

/* ---- messages (message.c): formatted on the stack, written with write(2) --- */
HK_HIDDEN void hk_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HK_HIDDEN __attribute__((noreturn)) void hk_fatal(const char *what, const void *p);
/* A slow-path invariant, checked but in fast, which compiles out even cond. */
#define hk_assert(cond, what)                                                    \
  do {                                                                           \
    if (HAK_CHECKS && hk_unlikely(!(cond))) hk_fatal("internal check failed: " what, NULL); \
  } while (0)
HK_HIDDEN __attribute__((noreturn, cold)) void hk_corrupted(const void *b);
HK_HIDDEN __attribute__((noreturn, cold)) void hk_misuse_freed(const void *p, unsigned cls);

#endif
