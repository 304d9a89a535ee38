/* SPDX-License-Identifier: MIT */
/* The region allocator: address space mapped in regions aligned to their
 * size and cut into 64 KiB units, kept by one set of unit bitmaps (units.c)
 * in arenas, each behind one lock, mapped, purged and locked for fork in one
 * place (arena.c).  Two kinds of region: SuperSlabs (superslab.c), 4 MiB, whose runs
 * of units are slabs of small blocks and the large classes up to 256 KiB;
 * and regions of huge blocks (huge.c), 128 MiB, whose runs are huge blocks
 * and the large classes above 256 KiB.  The caller names the arena. */
#ifndef HK_REGION_H
#define HK_REGION_H

#include "map/map.h"

/* ---- units (units.c): the bookkeeping every region shares ------------------ */
/* A region's units as bitmaps of `words` words: in use; free and resident
 * since this purge epoch (dirty) or the one before (dirty_old), and either
 * (warm: reused, they cost no page fault); written since the kernel last
 * gave them zeroed (stale: a block there may not be handed out as reading
 * zero); and, if kept, the huge pages (32 units each) a decommit of part of
 * them has cut (split: the kernel fills them 4 KiB at a time).  `resident`
 * is its arena's count of free resident bytes. */
typedef struct hk_units {
  uint8_t *base;  /* unit 0 */
  uint64_t *used, *dirty, *dirty_old, *warm, *stale, *split;
  unsigned words;
  size_t *resident;
} hk_units_t;
/* Decommits the free units set in word k's `bits`, and the free units
 * between them (one call per stretch of free units); returns the bytes of
 * those that were resident.  Units
 * the kernel refuses to give back (locked pages: mlock), or takes only when
 * it needs the memory (MADV_FREE), count as given back all the same, but
 * stay stale. */
HK_HIDDEN size_t hk_units_decommit(const hk_units_t *m, unsigned k, uint64_t bits);
/* A purge tick (HK_PURGE_DUE: the units free since before the last tick
 * go, the rest age) or a trim (HK_PURGE_ALL: every free unit); returns the
 * bytes, *pending: some wait for the next tick. */
HK_HIDDEN size_t hk_units_age(const hk_units_t *m, int mode, bool *pending);
/* Lean mode over its target: the units of one age (`old`: free since
 * before the last tick) go while `bytes` < `want`; returns the new total. */
HK_HIDDEN size_t hk_units_give_back(const hk_units_t *m, bool old, size_t want, size_t bytes);
static inline size_t hk_units_bytes(size_t n) { return n << HK_UNIT_SHIFT; }
/* The bits of word k that are huge page h's units (32 per page, 2 per word). */
static inline uint64_t hk_page_mask(unsigned h) { return hk_bits(h % 2 * 32, 32); }

/* Takes units [u, u + n), free: returns how many were resident.  They are
 * stale from now on (their blocks will be written). */
static inline unsigned hk_units_take(const hk_units_t *m, unsigned u, unsigned n) {
  unsigned reused = 0;
  for (hk_span_t s = hk_span(u, n); hk_span_next(&s);) {
    hk_assert(!(m->used[s.k] & s.mask), "units taken twice");
    reused += hk_bits_in(m->warm[s.k], s.mask, s.len);  /* dirty or dirty_old, never both */
    m->used[s.k] |= s.mask;
    m->dirty[s.k] &= ~s.mask;
    m->dirty_old[s.k] &= ~s.mask;
    m->warm[s.k] &= ~s.mask;
    m->stale[s.k] |= s.mask;
  }
  if (reused) hk_resident_add(m->resident, -(ptrdiff_t)hk_units_bytes(reused));
  if (reused != n) hk_fresh_taken(hk_units_bytes(n - reused));
  return reused;
}

/* Gives back units [u, u + n): resident and free, waiting for the purge
 * schedule, or decommitted at once without a purge delay. */
static inline void hk_units_release(const hk_units_t *m, unsigned u, unsigned n) {
  bool now = hk_opt.purge_delay_ms == 0 && hk_opt.decommit != HK_DECOMMIT_OFF;
  for (hk_span_t s = hk_span(u, n); hk_span_next(&s);) {
    hk_assert((m->used[s.k] & s.mask) == s.mask, "units released twice");
    m->used[s.k] &= ~s.mask;
    if (now) {
      hk_units_decommit(m, s.k, s.mask);
    } else {
      m->dirty[s.k] |= s.mask;
      m->warm[s.k] |= s.mask;
    }
  }
  if (!now) hk_resident_add(m->resident, (ptrdiff_t)hk_units_bytes(n));
}

#define HK_SS_UNITS (HK_SS_SIZE / HK_UNIT_SIZE) /* 64 units; unit 0 holds the header */
#define HK_SS_CHUNK 8                           /* most SuperSlabs mapped by one mmap */
#define HK_SS_SMALL_PAGED 2                     /* SuperSlabs on small pages: the first, and one of sparse slabs, */
#define HK_SS_BIG 4                             /* while fewer than 4 have been mapped */
#define HK_SS_DENSE_PAGES 256                   /* resident pages that turn half of one huge, */
#define HK_SS_DENSE_EVERY 8                     /* looked at on every 8th new slab there, */
#define HK_SS_DENSE_LOOKS 16                    /* 16 times at most */
#define HK_REGION_UNITS (HK_REGION_SIZE / HK_UNIT_SIZE)  /* cut into units */
#define HK_REGION_WORDS (HK_REGION_UNITS / 64)
#define HK_REGION_HEADER_UNITS 32               /* the header's 2 MiB */
/* Units never given to slabs: the header; in the hardened build also the
 * last unit, mapped inaccessible, so that an overrun off the end of one
 * SuperSlab faults before it reaches the next. */
#define HK_SS_RESERVED (HAK_HARDENED ? 1ull | 1ull << 63 : 1ull)

#define HK_ARENAS 8                             /* independently locked sets of regions */

/* ---- runs (units.c): where n units go ------------------------------------- */
/* Three searches, each for what it serves: a slab's run in a SuperSlab's
 * one word (hk_find_run), a huge block's in a region (best fit, with the list of
 * free stretches as its shortcut), and a large class's in a region (the
 * lowest resident run).  The best fit in their place cost `mixed_large
 * 500000 500 1` 3 % more instructions and twice the page faults (SuperSlabs),
 * or 20 % more instructions (large classes), under callgrind.
 * test/unit/run_search.c checks each against a brute-force search. */
/* In a SuperSlab's one word: the run of n bits set in `free`, starting at a
 * bit set in `starts`, with the fewest outside `warm` (*cold of them), or
 * -1; ties to the lowest start for one bit and the highest for more, so that
 * long-lived small runs do not cut up the space long ones need. */
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
    unsigned c = hk_popcount(hk_bits((unsigned)s, n) & ~warm);
    if (c < *cold) *cold = c, best = s;
  }
  return best;
}
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
/* Where n units go in a region of huge blocks: best fit, the fewest cold
 * units first; -1 if nowhere with at most `limit` cold units.  Units from
 * `end` (the top) on are free up to the first used one: a short region's end. */
HK_HIDDEN int hk_region_fit(const uint64_t *used, const uint64_t *warm, unsigned end, unsigned n, unsigned step,
                            unsigned limit, unsigned *cold, unsigned *slack);
/* The lowest run of n free resident units below unit `end`, or -1: what a
 * block of a large class takes in a region of huge blocks when there is
 * one, found a word at a time (runs within a word by halving, runs across
 * words by carrying their length): thread caches that miss come here at a
 * high rate, and the best fit's walk over every stretch cost more. */
static inline int hk_run_first_warm(const uint64_t *used, const uint64_t *warm, unsigned end, unsigned n) {
  unsigned carry = 0;  /* resident free units at the top of the words so far */
  for (unsigned k = 0; k * 64 < end; k++) {
    uint64_t x = ~used[k] & warm[k];
    unsigned lead = x == ~0ull ? 64 : (unsigned)__builtin_ctzll(~x);
    if (carry + lead >= n) return (int)(k * 64 - carry);
    if (x == ~0ull) {
      carry += 64;
      continue;
    }
    uint64_t starts = x;  /* bit i set: units i .. i+len-1 of the word all resident and free */
    for (unsigned len = 1; len < n && starts; ) {
      unsigned step = hk_min(len, n - len);
      starts &= starts >> step;
      len += step;
    }
    if (starts && n <= 64) return (int)(k * 64 + (unsigned)__builtin_ctzll(starts));
    carry = x ? (unsigned)__builtin_clzll(~x) : 0;
  }
  return -1;
}

/* ---- arenas (arena.c) -------------------------------------------------------- */
/* An arena's regions of both kinds, under its one lock.  Threads are spread
 * over the arenas, and a run goes back to its region's arena, so threads
 * taking and giving back units seldom meet on a lock. */
typedef struct hk_arena {
  pthread_mutex_t lock;
  struct hk_superslab *partial;  /* SuperSlabs with some units in use and some free */
  struct hk_superslab *empty;    /* SuperSlabs with none in use */
  unsigned nempty;
  unsigned nspare;               /* SuperSlabs mapped but not handed out, from `spare` on */
  uint8_t *spare;
  struct hk_region *regions;     /* regions of huge blocks */
  size_t class_bytes;            /* of the units of large-class blocks in regions of huge blocks */
  /* Bytes of free units (arena 0: and cached jumbo regions) still resident,
   * away from the lock: lean mode reads every arena's at each slow path, and
   * on the lock's line that took the line from its owner at every lock and
   * unlock (two threads replacing blocks of 1-4 MiB ran 9 % slower). */
  size_t resident __attribute__((aligned(HK_CACHELINE)));
  size_t live_blocks, live_bytes;  /* huge blocks in use and the bytes of their units */
  size_t peak_blocks, peak_bytes;  /* the most of each there has been (these, class_bytes and resident:
                                      written under the lock, read without it as statistics, relaxed) */
} __attribute__((aligned(HK_CACHELINE))) hk_arena_t;
extern hk_arena_t hk_arenas[HK_ARENAS] HK_HIDDEN;

HK_HIDDEN void hk_arenas_init(unsigned cpus);
HK_HIDDEN unsigned hk_arena_assign(void);  /* the arena of a new thread */
HK_HIDDEN unsigned hk_arenas_used(void);   /* arenas that may hold memory */
/* The one way to the OS for regions: `size` bytes mapped so that `offset`
 * bytes in is aligned to `alignment`, or (alignment 0) a slot of the space
 * reserved at start-up, their class map entries reserved; NULL if there is
 * no room.  hk_region_unmap undoes it. */
HK_HIDDEN void *hk_region_map(size_t size, size_t alignment, size_t offset);
HK_HIDDEN void hk_region_unmap(void *p, size_t size);
/* Free memory of every arena back to the OS: HK_PURGE_* (base.h); returns
 * the bytes, *of_huge (if not NULL) those of regions of huge blocks. */
HK_HIDDEN size_t hk_region_purge(int mode, size_t want, size_t *of_huge);
/* A purge lets go of arena a's lock a moment after a SuperSlab's or a
 * region's system calls, not after all of the arena's, and yields, so that
 * a thread waiting for it gets it: a madvise may take 100-250 us where the
 * kernel stops the other CPUs' use of the pages, and a tick after a 1 GiB
 * heap was freed made 1 000 of them, during which another thread's malloc
 * waited.  Safe because only a purge unmaps SuperSlabs and regions, and
 * purges run one at a time (the tick's lock, service/purge.c): those walked
 * stay mapped; one moved to the other list meanwhile may be aged twice in
 * a tick, or not at all. */
static inline void hk_arena_breathe(hk_arena_t *a) {
  hk_unlock(&a->lock);
  sched_yield();
  hk_lock(&a->lock);
}
/* An empty SuperSlab or region a purge took out of its arena's lists: no
 * thread takes from it, and it is unmapped without the lock. */
static inline void hk_arena_unmap(hk_arena_t *a, void *p, size_t size) {
  hk_unlock(&a->lock);
  hk_region_unmap(p, size);
  hk_lock(&a->lock);
}
HK_HIDDEN size_t hk_region_resident(void);    /* bytes of free units still resident */
HK_HIDDEN size_t hk_region_used_bytes(void);  /* of the units in use */
HK_HIDDEN void hk_region_fork_lock(void);
HK_HIDDEN void hk_region_fork_unlock(bool child);

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
  bool fresh;               /* its units, on small pages, not resident where not carved yet (hk_slab_populate) */
  uint16_t pushed;          /* blocks at the free list's head put there since it was last laid in address order */
  struct hk_slab *next, *prev;  /* the class's list of slabs with blocks to give */
} hk_slab_t;

typedef struct hk_superslab {
  uint64_t used;                      /* bitmap of units in use; bit 0 is this header */
  uint64_t dirty;                     /* free units still resident, freed this purge epoch */
  uint64_t dirty_old;                 /* ... freed the epoch before: given back at the next tick */
  uint64_t warm;                      /* both: free units still resident */
  uint64_t stale;                     /* units written since the kernel last gave them zeroed (units.c) */
  uint8_t arena;                      /* the arena this SuperSlab belongs to */
  bool bare;                          /* empty, its never-used units given back too (huge pages
                                         made them resident unseen) */
  uint8_t kind;                       /* the slabs it takes first: HK_SS_ANY, HK_SS_SPARSE (small pages) or HK_SS_DENSE */
  bool small_pages;                   /* on small pages but for the halves made huge (`halves`) */
  uint8_t halves;                     /* bit h: half h made huge; HK_HALF_SEEN: the second half used */
  uint8_t looks, slabs_made;          /* at its halves' residence; new slabs since the last look */
  struct hk_superslab *next, *prev;   /* list of SuperSlabs with free units */
  uint8_t head_unit[HK_SS_UNITS];     /* first unit of the slab each unit belongs to */
  hk_slab_t slabs[HK_SS_UNITS];       /* descriptor of the slab headed by each unit */
} hk_superslab_t;

/* Sparse: a small class's slab when it has none, whose blocks are carved a
 * few at a time (a class seldom used leaves most of it untouched); dense:
 * the others; large: a large block, dense (most often written whole) but
 * for where it may go (find_units). */
enum { HK_SS_ANY, HK_SS_SPARSE, HK_SS_DENSE, HK_SS_LARGE };
#define HK_HALF_SEEN 4u  /* in `halves`: the second half has had its first slab */

static inline hk_superslab_t *hk_superslab_of(const void *p) {
  return (hk_superslab_t *)((uintptr_t)p & ~(HK_SS_SIZE - 1));
}
static inline hk_slab_t *hk_slab_of(const void *p) {
  hk_superslab_t *ss = hk_superslab_of(p);
  unsigned unit = (unsigned)((uintptr_t)p >> HK_UNIT_SHIFT) & (HK_SS_UNITS - 1);
  return &ss->slabs[ss->head_unit[unit]];
}

/* Where a new slab may go: free units still resident only, any free unit
 * of the SuperSlabs mapped, or a new SuperSlab too. */
enum { HK_NEW_WARM, HK_NEW_MAPPED, HK_NEW_ANY };
/* from the calling thread's arena (or any arena, before a new SuperSlab), of kind HK_SS_SPARSE,
 * HK_SS_DENSE or HK_SS_LARGE, as far as `reach`; *zero: its units read as zero */
HK_HIDDEN hk_slab_t *hk_slab_new(unsigned cls, unsigned arena, unsigned kind, unsigned reach, bool *zero);
HK_HIDDEN void hk_slab_release(hk_slab_t *slab);
/* Writes in at once the pages of [from, from + size) that slab s (fresh)
 * has not carved blocks on yet, before it carves there: on small pages a
 * system call instead of a page fault each (hk_os_populate), the same
 * memory; none once its half of the SuperSlab is on huge pages, which
 * fault 2 MiB at a time. */
HK_HIDDEN void hk_slab_populate(hk_slab_t *s, uint8_t *from, size_t size);
HK_HIDDEN void hk_slab_release_chain(unsigned cls, void *chain);  /* one-block slabs of large blocks */
/* The size of the block of the SuperSlab (huge region) holding p, live or
 * freed, and whether it is live; 0 if p is not where a block started. */
HK_HIDDEN size_t hk_superslab_block_of(const void *p, bool *live);
HK_HIDDEN size_t hk_superslab_used_bytes(void);  /* of units given to slabs */
/* Arena a's share of a purge (its lock held): a tick or a trim
 * (HK_PURGE_DUE, HK_PURGE_ALL: *pending, some wait for the next tick), or
 * the free units of one age (`old`) while `bytes` < `want`.  Return the
 * bytes given back (the new total). */
HK_HIDDEN size_t hk_superslab_purge(hk_arena_t *a, int mode, bool *pending);
HK_HIDDEN size_t hk_superslab_give_back(hk_arena_t *a, bool old, size_t want, size_t bytes);

/* ---- huge blocks (huge.c) ----------------------------------------------------- */
/* The hardened build ends every huge block with a page mapped inaccessible,
 * so that an overrun faults at once: the block's usable size is a page less
 * (the system's page: 16 or 64 KiB on some arm64 kernels, where a 4 KiB
 * mprotect fails). */
#define HK_GUARD (HAK_HARDENED ? hk_os_page_size() : 0)
/* A huge block from the regions of `arena` (or any other's, or a
 * mapping of its own); *bytes: what it takes of them (its usable size and
 * HK_GUARD).  NULL if there is no
 * room (errno ENOMEM for a size beyond any room). */
HK_HIDDEN void *hk_huge_alloc(size_t size, size_t alignment, bool zero, unsigned arena, size_t *bytes);
/* Whether a huge block of `size` bytes aligned to `alignment` could be had
 * at all: its mapping's size fits a ptrdiff_t. */
static inline bool hk_huge_possible(size_t size, size_t alignment) {
  size_t limit = (size_t)PTRDIFF_MAX - HK_REGION_SIZE;
  return alignment <= limit / 2 && size <= limit - alignment;
}
HK_HIDDEN void *hk_huge_take_class(unsigned cls, unsigned arena, size_t size, bool *zero);  /* hk_large_take's, above 256 KiB */
HK_HIDDEN void hk_huge_release_class(unsigned cls, void *chain);
HK_HIDDEN size_t hk_huge_free(void *p);  /* the bytes it took; 0 if p is not a live huge block */
/* Resizes huge block p where it is, or moves its pages (mremap): p, the new
 * place, or NULL if neither can be done (a copy is the caller's); *old_size:
 * its usable size, 0 if p is not a live huge block; *grown: the bytes it
 * took more. */
HK_HIDDEN void *hk_huge_resize(void *p, size_t size, size_t *old_size, ptrdiff_t *grown);
HK_HIDDEN size_t hk_huge_usable_size(const void *p);  /* 0 if p is not a huge block */
HK_HIDDEN size_t hk_huge_block_of(const void *p, bool *live);
HK_HIDDEN void hk_huge_counts(size_t *blocks, size_t *bytes, bool peak);  /* in use (or their peaks), as the program sees them */
HK_HIDDEN size_t hk_huge_nonresident(void);  /* of the free bytes counted resident, those not (mincore) */
/* As hk_superslab_purge and _give_back, for the regions of huge blocks
 * (arena 0: and the cached jumbo regions). */
HK_HIDDEN size_t hk_huge_purge(hk_arena_t *a, int mode, bool *pending);
HK_HIDDEN size_t hk_huge_give_back(hk_arena_t *a, bool old, size_t want, size_t bytes);
HK_HIDDEN size_t hk_jumbo_give_back(size_t want, size_t bytes);  /* arena 0's lock held */

/* ---- the large classes' way in ------------------------------------------- */
/* Blocks of the large classes: a run of units of a new slab (up to 256 KiB,
 * as far as `reach`, else NULL) or of a region of huge blocks (above: long
 * runs fit much better among a region's 2 048 units than among the small
 * slabs of 4 MiB SuperSlabs, resident units go first there anyway, and the
 * spares of slab/central.c live in SuperSlabs: `reach` does not apply);
 * *zero: it reads as zero.  Released in chains.  A block new where huge
 * pages start small (a region's start, a small process's first
 * SuperSlabs) has its first `size` bytes, those the program asked for,
 * written in at once, as most large blocks are written whole: a system
 * call, not a page fault per page.  Without huge pages, bytes the program
 * leaves unwritten stay absent. */
static inline void *hk_large_take(unsigned cls, unsigned arena, unsigned reach, size_t size, bool *zero) {
  if (hk_class_in_regions(cls)) return hk_huge_take_class(cls, arena, size, zero);
  hk_slab_t *s = hk_slab_new(cls, arena, HK_SS_LARGE, reach, zero);
  if (!s) return NULL;
  if (s->fresh && hk_opt.ss_thp) hk_slab_populate(s, s->start, size);
  s->carved = 1;
  return s->start;
}

static inline void hk_large_release(unsigned cls, void *chain) {
  if (hk_class_in_regions(cls)) hk_huge_release_class(cls, chain);
  else hk_slab_release_chain(cls, chain);
}

#endif
