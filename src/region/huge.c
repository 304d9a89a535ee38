/* SPDX-License-Identifier: MIT */
/* Huge blocks (above the largest size class, 1 MiB).
 *
 * A huge block is a run of 64 KiB units in a 128 MiB region aligned to its
 * size, whose first 2 MiB hold the header (only its first pages are ever
 * touched): a block's header is at (p - 64 KiB) rounded down to 128 MiB.
 * Regions that large let blocks of tens of MiB take each other's units when
 * freed, rather than fresh memory; units that small waste little at a
 * block's end (a 2 MiB granule wasted 0.56 MiB a block for blocks of 1-2
 * MiB).  Freed units stay resident until the purge schedule gives them back
 * (units.c), so a program that keeps replacing big blocks makes no system
 * call and takes no page fault.  Past the header, a region is on transparent
 * huge pages (HAKMEM_HUGE_THP).  The large classes above 256 KiB are runs
 * here too (hk_huge_take_class), cached by threads as other large blocks.
 *
 * A block too big for a region (or too strongly aligned) gets a "jumbo"
 * region of its own with the same header, the block 2 MiB in (or at the
 * offset its alignment needs; one unit in where a tight address-space limit
 * leaves no room for more, as for a huge block no region can be had for).
 * Freed jumbo regions wait, dirty, in a small cache for blocks of about
 * their size, and are unmapped on the purge schedule; realloc resizes them
 * with mremap, without a copy.
 *
 * A large class's block where an address-space limit leaves no room for a
 * whole region, as it has no other place to go, gets a short one: aligned
 * the same, as small as holds it, its units past its end used for good.
 *
 * The class map marks the first unit of each live block, and nothing else:
 * a pointer into the middle of a block is never taken for one. */
#define _GNU_SOURCE
#include <string.h>
#include "region/region.h"

#define HK_GRANULE ((size_t)2 << 20)  /* a region's header; a huge page */
#define HK_REGION_MAGIC 0x6875676572656769ull
#define HK_JUMBO_CACHE 4  /* freed jumbo regions kept for reuse */

typedef struct hk_region {
  uint64_t magic;                   /* HK_REGION_MAGIC ^ the region's address */
  size_t size;                      /* bytes mapped */
  size_t offset;                    /* jumbo: where the block starts; 0 for shared regions */
  size_t alignment;                 /* jumbo: what its block was made for (a move keeps it) */
  /* Unit bitmaps; a jumbo region uses word 0 as a flag for its one block. */
  uint64_t used[HK_REGION_WORDS];   /* units in use; the header's, always */
  uint64_t dirty[HK_REGION_WORDS], dirty_old[HK_REGION_WORDS];  /* free units still resident, by purge epoch */
  uint64_t warm[HK_REGION_WORDS];   /* both: free units still resident, as the searches read them */
  uint64_t stale[HK_REGION_WORDS];  /* units that may hold old data (calloc clears them) */
  uint64_t split;                   /* bit h: huge page h (units 32h..32h+31) cut into small pages
                                       by a decommit of part of it: a fault there maps 4 KiB */
  uint64_t touched;                 /* bit h: huge page h had a block while the region was on small pages */
  unsigned top;                     /* units from here on never used nor resident: not searched */
  unsigned arena;                   /* its arena (jumbo regions: arena 0) */
  bool small_pages;                 /* a shared region on small pages, until it holds HK_REGION_SMALL_UNITS */
  bool stretches_kept;              /* `free` follows `used` (blocks of the large classes leave it behind) */
  struct hk_region *next, *prev;
  uint16_t run[HK_REGION_UNITS];    /* units of the block starting at each unit */
  hk_stretches_t free;              /* shared regions: the stretches of units clear in `used` */
} hk_region_t;

/* The most bytes a region has spanned: how far below a pointer the header of
 * the region holding it may lie (region_around; relaxed, for messages). */
static atomic_size_t largest_region = HK_REGION_SIZE;

/* A thread takes blocks from its arena's regions, and a block goes back to
 * its region's arena: under one lock for all, two threads replacing blocks
 * of 1-2 MiB ran at a quarter of one thread's speed (`big_blocks 1000000 16
 * 1 1048576 2097152 2 first`).  Arena 0 also keeps the jumbo regions. */
static hk_region_t *jumbo_cache;  /* freed jumbo regions, newest first (arena 0's lock) */
static unsigned jumbo_cached;

/* The blocks of the jumbo regions unmapped last (arena 0's lock held), so
 * that a second free of one is told apart from a pointer hakmem never
 * handed out (hk_huge_block_of): relaxed, read only for a message. */
#define HK_GONE 64
static struct {
  _Atomic uintptr_t at;
  _Atomic size_t size;
} gone[HK_GONE];
static unsigned gone_next;

static hk_arena_t *arena_of(const hk_region_t *r) { return &hk_arenas[r->arena]; }

/* The arena of the region whose header is at r, read without its lock (the
 * fields read are written once, when it is mapped, before the block reached
 * this thread through a lock or the program's hand-off: relaxed); NULL if r
 * holds no region's header. */
static hk_arena_t *arena_unlocked(const hk_region_t *r) {
  if (__atomic_load_n(&r->magic, __ATOMIC_RELAXED) != (HK_REGION_MAGIC ^ (uintptr_t)r)) return NULL;
  unsigned i = __atomic_load_n(&r->arena, __ATOMIC_RELAXED);
  return i < HK_ARENAS ? &hk_arenas[i] : NULL;
}

static size_t units(size_t size) { return (size + HK_UNIT_SIZE - 1) >> HK_UNIT_SHIFT; }

/* ---- regions ------------------------------------------------------------------ */

/* A shared region holds no block: past the header, nothing is used up to its
 * end (a short region's units past its end are used for good). */
static bool region_empty(const hk_region_t *r) {
  if (r->used[0] != hk_bits(0, HK_REGION_HEADER_UNITS)) return false;
  unsigned end = (unsigned)(r->size >> HK_UNIT_SHIFT);
  return hk_bits_next(r->used, 64, true, end) == end;
}


/* The standard build's check that `warm` is what it stands for. */
static bool warm_kept(const hk_region_t *r) {
  for (unsigned k = 0; k < HK_REGION_WORDS; k++)
    if (r->warm[k] != (r->dirty[k] | r->dirty_old[k]) || (r->dirty[k] & r->dirty_old[k]) || (r->warm[k] & r->used[k]))
      return false;
  return true;
}

/* The standard build's check that `free` holds the stretches of `used`:
 * each one whole (in use or the region's edge on both sides), none
 * overlapping, all of them together the units not in use. */
static bool stretches_follow(const hk_region_t *r) {
  uint64_t free[HK_REGION_WORDS] = {0};
  for (unsigned i = 0; i < r->free.count; i++) {
    unsigned at = hk_stretch_at(&r->free, i), len = hk_stretch_len(&r->free, i), end = at + len;
    if (!len || end > HK_REGION_UNITS || hk_bits_count(free, at, len) || r->free.place[at] != i ||
        r->free.place[end - 1] != i ||
        (at > 0 && !(r->used[(at - 1) / 64] >> (at - 1) % 64 & 1)) ||
        (end < HK_REGION_UNITS && !(r->used[end / 64] >> end % 64 & 1)))
      return false;
    hk_bits_set(free, at, len);
  }
  for (unsigned k = 0; k < HK_REGION_WORDS; k++)
    if (free[k] != ~r->used[k]) return false;
  return true;
}

/* The list of free stretches anew from the bitmap, after blocks of the
 * large classes came and went without it: keeping it for them, at their
 * rate, cost larson with blocks of 256 KiB-1 MiB 10 %. */
static void stretches_rebuild(hk_region_t *r) {
  r->free.count = 0;
  for (unsigned lo = hk_bits_next(r->used, 0, false, HK_REGION_UNITS), hi; lo < HK_REGION_UNITS;
       lo = hk_bits_next(r->used, hi, false, HK_REGION_UNITS)) {
    hi = hk_bits_next(r->used, lo, true, HK_REGION_UNITS);
    hk_stretches_give(&r->free, lo, hi - lo);
  }
  r->stretches_kept = true;
}

/* The region of a block: its header lies at the region-aligned address
 * below the block's unit (a block starts a unit or more past its header). */
static hk_region_t *region_of(const void *p) {
  return (hk_region_t *)(((uintptr_t)p - HK_UNIT_SIZE) & ~(HK_REGION_SIZE - 1));
}

/* The region of live huge block p, or NULL if p is not one (the class map
 * has vouched for p's unit, so the region's header is mapped). */
static hk_region_t *lookup(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (a < HK_UNIT_SIZE || (a & (HK_UNIT_SIZE - 1)) || hk_class_map_lookup(p) != HK_MAP_HUGE) return NULL;
  hk_region_t *r = region_of(p);
  if (r->magic != (HK_REGION_MAGIC ^ (uintptr_t)r)) return NULL;
  size_t off = (size_t)(a - (uintptr_t)r);
  if (r->offset) return off == r->offset && r->used[0] ? r : NULL;
  unsigned u = (unsigned)(off >> HK_UNIT_SHIFT);
  return u < HK_REGION_UNITS && r->run[u] && (r->used[u / 64] >> (u % 64) & 1) ? r : NULL;
}

/* The region whose span holds p, or NULL: the nearest header at or below
 * p's region-sized span, no further down than the largest region mapped
 * spans (a jumbo region's block may be gigabytes long). */
static hk_region_t *region_around(const void *p) {
  uintptr_t a = (uintptr_t)p, reach = atomic_load_explicit(&largest_region, memory_order_relaxed);
  if (a < HK_UNIT_SIZE) return NULL;
  for (uintptr_t at = a & ~(HK_REGION_SIZE - 1); a - at < reach; at -= HK_REGION_SIZE) {
    hk_region_t *r = (hk_region_t *)at;
    if (hk_class_map_lookup(r) == HK_MAP_REGION && r->magic == (HK_REGION_MAGIC ^ at))
      return a < at + r->size ? r : NULL;
    if (at < HK_REGION_SIZE) break;
  }
  return NULL;
}

/* Read without the lock: for a message before abort.  The start of a freed
 * block keeps its run length until a block is put over it. */
size_t hk_huge_block_of(const void *p, bool *live) {
  hk_region_t *r = region_around(p);
  *live = false;
  for (unsigned i = 0; !r && i < HK_GONE; i++)
    if (atomic_load_explicit(&gone[i].at, memory_order_relaxed) == (uintptr_t)p)
      return atomic_load_explicit(&gone[i].size, memory_order_relaxed);
  if (!r) return 0;
  size_t off = (size_t)((const uint8_t *)p - (uint8_t *)r);
  if (r->offset) {
    *live = r->used[0] && off > r->offset;
    return off >= r->offset && (*live || off == r->offset) ? r->size - r->offset : 0;
  }
  for (int u = (int)(off >> HK_UNIT_SHIFT); u >= (int)HK_REGION_HEADER_UNITS; u--) {
    if (!r->run[u] || hk_units_bytes((size_t)u + r->run[u]) <= off) continue;
    *live = r->used[u / 64] >> (u % 64) & 1;
    return *live || off == hk_units_bytes((size_t)u) ? hk_units_bytes(r->run[u]) : 0;
  }
  return 0;
}

static size_t block_bytes(const hk_region_t *r, const void *p) {
  if (r->offset) return r->size - r->offset;
  return hk_units_bytes(r->run[((uintptr_t)p - (uintptr_t)r) >> HK_UNIT_SHIFT]);
}

static void mark(const void *p, uint8_t value) { hk_class_map_set(p, 1, value); }

static void guard(hk_region_t *r, void *p, bool on) {
  if (HAK_HARDENED) hk_os_protect((uint8_t *)p + block_bytes(r, p) - HK_GUARD, HK_GUARD, !on);
}

/* The part of a region of `size` bytes that its header's granule takes: a
 * jumbo region's block, `offset` bytes in, may start before the 2 MiB a
 * shared region's header takes (a mapping of its own under a tight
 * address-space limit). */
static size_t jumbo_head(size_t offset, size_t size) {
  _Static_assert(offsetof(hk_region_t, run) <= HK_UNIT_SIZE, "a jumbo region's header fits in a unit");
  return hk_min(offset ? hk_min(offset, HK_GRANULE) : HK_GRANULE, size);
}

/* Maps a region of `size` bytes whose block, `offset` bytes in, is aligned to
 * `alignment` (the region itself to HK_REGION_SIZE). */
static hk_region_t *region_map(size_t size, size_t offset, size_t alignment, unsigned arena) {
  size_t align = hk_max(alignment, HK_REGION_SIZE);
  /* a whole shared region (never resized) from the reserved space; a short
   * one is a SuperSlab slot's size there, only that slot's alignment */
  hk_region_t *r = offset || size != HK_REGION_SIZE ? NULL : hk_region_map(size, 0, 0);
  if (!r) r = hk_region_map(size, align, align > HK_REGION_SIZE ? offset : 0);
  if (!r) return NULL;
  /* The header's granule, of which a few pages are written, on small pages
   * even where the kernel's default is huge (THP "always"); the rest as the
   * option says, a shared region's once it holds a MiB of blocks (grow_huge). */
  size_t head = jumbo_head(offset, size);
  bool small = !offset || !hk_opt.huge_thp;
  hk_os_advise_small(r, small ? size : head);
  if (!small) hk_os_advise_huge((uint8_t *)r + head, size - head);
  r->small_pages = small && hk_opt.huge_thp;  /* a shared region's start: grow_huge ends it */
  r->magic = HK_REGION_MAGIC ^ (uintptr_t)r;
  r->size = size;
  hk_atomic_max(&largest_region, size);
  r->offset = offset;
  r->alignment = alignment;
  if (offset) {
    r->used[0] = 1;
  } else {
    unsigned end = (unsigned)(size >> HK_UNIT_SHIFT);
    hk_bits_set(r->used, 0, HK_REGION_HEADER_UNITS);
    hk_bits_set(r->used, end, HK_REGION_UNITS - end);
    r->free.count = 0;
    hk_stretches_give(&r->free, HK_REGION_HEADER_UNITS, end - HK_REGION_HEADER_UNITS);
    r->stretches_kept = true;
  }
  r->top = HK_REGION_HEADER_UNITS;
  r->arena = arena;
  hk_class_map_set(r, 1, HK_MAP_REGION);
  return r;
}

/* A shared region's units, as units.c keeps them. */
static hk_units_t units_of(hk_region_t *r) {
  return (hk_units_t){(uint8_t *)r, r->used, r->dirty, r->dirty_old, r->warm, r->stale, &r->split,
                      HK_REGION_WORDS, &arena_of(r)->resident};
}

/* The first unit of the stretch of free units holding unit u: the one
 * after the last unit in use below it (the header's are). */
static unsigned stretch_start(const hk_region_t *r, unsigned u) {
  unsigned k = u / 64;
  uint64_t x = r->used[k] & ((1ull << u % 64) - 1);
  while (!x) x = r->used[--k];
  return k * 64 + 64 - (unsigned)__builtin_clzll(x);
}

/* Huge page h of a shared region made resident whole: its free units not
 * yet resident are now, counted as free resident memory. */
static void page_resident(hk_region_t *r, unsigned h) {
  unsigned k = h / 2;
  uint64_t faulted = hk_page_mask(h) & ~r->used[k] & ~r->warm[k];
  r->dirty[k] |= faulted;
  r->warm[k] |= faulted;
  if (faulted) hk_resident_add(&arena_of(r)->resident, (ptrdiff_t)hk_units_bytes((size_t)hk_popcount(faulted)));
}

/* A shared region starts on small pages: a huge page is resident whole, and
 * a program with a few blocks of some hundred KiB used 2 MiB for each page
 * they touched (gcc's cc1: up to 2.2 MiB more).  Once it holds this many
 * units at once, its pages touched are made huge, and so are those it
 * touches next (blocks of megabytes, most often written whole, fault 2 MiB
 * at a time: big_blocks 5 times as fast). */
#define HK_REGION_SMALL_UNITS 16

static void grow_huge(hk_region_t *r, uint64_t had) {
  unsigned used = 0;
  for (unsigned k = 0; k < HK_REGION_WORDS; k++) used += (unsigned)hk_popcount(r->used[k]);
  if (used < HK_REGION_SMALL_UNITS + HK_REGION_HEADER_UNITS) return;
  r->small_pages = false;
  hk_os_advise_huge((uint8_t *)r + HK_GRANULE, r->size - HK_GRANULE);
  for (unsigned h = 1; h < (r->top + 31) / 32; h++) {  /* the header's page stays small */
    /* a page touched whose units are no longer resident (its small pages'
     * table stays), or that the kernel would not collapse (a hardened
     * block's guard in it), faults 4 KiB at a time; one never touched, a
     * huge page at once (take_units counts it).  Only a page an earlier
     * block had can hold pages to collapse: the kernel refuses one with
     * none (EINVAL), after draining every CPU's page lists all the same
     * (big_blocks: 45 calls a run, each refused). */
    bool resident = (r->used[h / 2] | r->warm[h / 2]) & hk_page_mask(h) && had >> h & 1;
    if (resident && hk_os_collapse_huge((uint8_t *)r + h * HK_GRANULE, HK_GRANULE)) {
      page_resident(r, h);
      r->split &= ~(1ull << h);
    } else if (r->touched >> h & 1) {
      r->split |= 1ull << h;
    }
  }
}

/* Takes units [u, u+n) of a shared region.  A block that is the first to
 * touch a transparent huge page makes it resident whole: its other free
 * units then count as free resident memory (reused first, purged on
 * schedule) rather than lie resident unseen; not on a page a decommit has
 * cut (filled 4 KiB at a time), nor a hardened block's last page, cut by its
 * guard.  Only the pages at the block's two ends can have other units. */
static void take_units(hk_region_t *r, unsigned u, unsigned n) {
  unsigned ends[2] = {u / 32, (u + n - 1) / 32};
  bool fresh[2];
  for (int i = 0; i < 2; i++) {
    unsigned k = ends[i] / 2;
    fresh[i] = !r->small_pages && hk_opt.huge_thp && !(r->split >> ends[i] & 1) && !((r->used[k] | r->warm[k]) & hk_page_mask(ends[i])) &&
               !(HAK_HARDENED && ends[i] == ends[1]);
  }
  r->top = hk_max(r->top, hk_min((u + n + 31) / 32 * 32, HK_REGION_UNITS));  /* past the last huge page touched */
  if (r->stretches_kept) hk_stretches_take(&r->free, stretch_start(r, u), u, n);
  hk_units_t m = units_of(r);
  hk_units_take(&m, u, n);
  for (int i = 0; i < 2 && (i == 0 || ends[1] != ends[0]); i++)
    if (fresh[i]) page_resident(r, ends[i]);
  if (r->small_pages) {
    uint64_t had = r->touched;  /* the pages the blocks before this one had */
    r->touched |= hk_bits(ends[0], ends[1] - ends[0] + 1);
    grow_huge(r, had);
  }
}

/* Gives back units [u, u+n) of a shared region (units.c). */
static void release_units(hk_region_t *r, unsigned u, unsigned n) {
  if (r->stretches_kept) hk_stretches_give(&r->free, u, n);
  hk_units_t m = units_of(r);
  hk_units_release(&m, u, n);
}

/* The first unit past the header where a block aligned to `step` units may start. */
static unsigned first_start(unsigned step) { return (HK_REGION_HEADER_UNITS + step - 1) / step * step; }

/* Whether an empty shared region could hold n units aligned to `alignment`. */
static bool fits_region(size_t n, size_t alignment) {
  if (alignment > HK_REGION_SIZE / 2) return false;
  unsigned step = (unsigned)hk_max(alignment >> HK_UNIT_SHIFT, 1);
  return first_start(step) + n <= HK_REGION_UNITS;
}

/* What calloc must clear of a new block (NULL from malloc): of the `size`
 * bytes asked (0: only whether it is `clean`), none (`clean`), the units
 * that may hold old data (`stale`, bit i: the block's unit i), or all
 * (`whole`).  fill_zero clears them once the arena's lock is let go, so that
 * a calloc of hundreds of MiB does not hold up the arena's other threads. */
typedef struct hk_fill {
  size_t size;
  bool clean, whole;
  uint64_t stale[HK_REGION_WORDS];
} hk_fill_t;

static void fill_zero(uint8_t *p, const hk_fill_t *f) {
  if (f->clean) return;
  if (f->whole) {
    memset(p, 0, f->size);
    return;
  }
  for (unsigned k = 0; k < HK_REGION_WORDS; k++)
    for (uint64_t b = f->stale[k]; b; b &= b - 1) {
      size_t off = hk_units_bytes((size_t)k * 64 + (unsigned)__builtin_ctzll(b));
      if (off < f->size) memset(p + off, 0, hk_min(HK_UNIT_SIZE, f->size - off));
    }
}

/* Puts a block of n units at unit u of region r; *f as above. */
static void *place(hk_region_t *r, unsigned u, unsigned n, hk_fill_t *f) {
  if (f) {
    unsigned first = hk_bits_next(r->stale, u, true, u + n);
    f->clean = first == u + n;
    f->whole = false;
    if (f->size && !f->clean) {
      memset(f->stale, 0, sizeof f->stale);
      for (unsigned i = first; i < u + n; i = hk_bits_next(r->stale, i + 1, true, u + n))
        f->stale[(i - u) / 64] |= 1ull << (i - u) % 64;
    }
  }
  take_units(r, u, n);
  r->run[u] = (uint16_t)n;
  memset(&r->run[u + 1], 0, (n - 1) * sizeof r->run[0]);  /* no freed block's start lies inside a live one */
  return (uint8_t *)r + hk_units_bytes(u);
}

/* The best place for n units at a multiple of `step` in arena h's regions,
 * as hk_region_fit sees it, with at most `limit` cold units: its region, *u
 * and *cold; NULL if there is none. */
static hk_region_t *best_fit(const hk_arena_t *h, unsigned n, unsigned step, unsigned limit, int *u,
                             unsigned *cold) {
  hk_region_t *r = NULL;
  unsigned best = limit + 1, best_slack = HK_REGION_UNITS, c, slack;
  for (hk_region_t *s = h->regions; s && (best || best_slack); s = s->next) {
    hk_assert(warm_kept(s), "a huge region's resident free units");
    if (!s->stretches_kept) stretches_rebuild(s);
    hk_assert(stretches_follow(s), "a huge region's free stretches");
    /* The start of the shortest stretch, all resident, beats every other
     * place, and mostly is one (blocks come back resident): the walk over
     * the bitmaps, whose edges are mispredicted branches, only when it is
     * not (big_blocks-threads: 1.38 times the speed). */
    unsigned start = 0, len = hk_stretches_shortest(&s->free, n, &start);
    if (!len) continue;
    int at;
    if (step == 1 && hk_bits_next(s->warm, start, false, start + n) == start + n) at = (int)start, c = 0, slack = len - n;
    else at = hk_region_fit(s->used, s->warm, s->top, n, step, hk_min(best, limit), &c, &slack);
    if (at >= 0 && (c < best || (c == best && slack < best_slack))) r = s, *u = at, best = c, best_slack = slack;
  }
  *cold = best;
  return r;
}

/* A block of n units from a shared region, with arena *h's lock held: the
 * best place in its regions, unless that needs fresh pages and another
 * arena, whose lock is free, has a place all resident (docs/DESIGN.md,
 * Regions per arena); else a new region of *h; out of address space or
 * memory for that, a place, fresh pages and all, in another arena's regions,
 * each locked in turn.  *h is then the block's arena, locked; NULL, with no
 * lock held, if there is none. */
static void *shared_alloc(hk_arena_t **h, unsigned n, size_t alignment, hk_fill_t *f) {
  unsigned step = (unsigned)hk_max(alignment >> HK_UNIT_SHIFT, 1), cold;
  int u = -1;
  hk_region_t *r = best_fit(*h, n, step, n, &u, &cold);
  for (unsigned i = 0; i < HK_ARENAS && (!r || cold); i++) {
    hk_arena_t *o = &hk_arenas[i];
    if (o == *h || hk_trylock(&o->lock)) continue;
    int v;
    hk_region_t *s = best_fit(o, n, step, 0, &v, &cold);
    if (s) {
      hk_unlock(&(*h)->lock);
      *h = o;
      return place(s, (unsigned)v, n, f);
    }
    hk_unlock(&o->lock);
  }
  if (!r && (r = region_map(HK_REGION_SIZE, 0, 0, (unsigned)(*h - hk_arenas)))) {
    hk_list_push(&(*h)->regions, r);
    u = (int)first_start(step);
  }
  hk_arena_t *own = *h;
  if (!r) hk_unlock(&own->lock);
  for (unsigned i = 0; !r && i < HK_ARENAS; i++) {
    if (&hk_arenas[i] == own) continue;
    hk_lock(&(*h = &hk_arenas[i])->lock);
    if (!(r = best_fit(*h, n, step, n, &u, &cold))) hk_unlock(&(*h)->lock);
  }
  return r ? place(r, (unsigned)u, n, f) : NULL;
}

/* n units in a new short region of arena `arena` (shared_alloc found no
 * room for a whole one): *h is then that arena, locked; NULL, with no lock
 * held, if even that cannot be mapped. */
static void *short_alloc(hk_arena_t **h, unsigned arena, unsigned n, hk_fill_t *f) {
  hk_lock(&(*h = &hk_arenas[arena])->lock);
  hk_region_t *r = region_map(hk_align_up(hk_units_bytes(HK_REGION_HEADER_UNITS + n), HK_GRANULE), 0, 0, arena);
  if (!r) {
    hk_unlock(&(*h)->lock);
    return NULL;
  }
  hk_list_push(&(*h)->regions, r);
  return place(r, HK_REGION_HEADER_UNITS, n, f);
}

/* Blocks of the large classes above HK_REGION_CLASS_MIN: runs of units in
 * the regions, placed as huge blocks are, where long runs fit much better
 * than among the small slabs of 4 MiB SuperSlabs; but marked in the class map
 * with their class, so that thread caches keep them as they keep other large
 * blocks: only a cache's misses and overflows come here. */
void *hk_huge_take_class(unsigned cls, unsigned arena, size_t size, bool *zero) {
  unsigned n = (unsigned)units(hk_classes[cls].size);
  void *p = NULL;
  hk_fill_t f;
  f.size = 0;
  hk_arena_t *h = &hk_arenas[arena];
  hk_lock(&h->lock);
  for (hk_region_t *r = h->regions; r && !p; r = r->next) {
    int u = hk_run_first_warm(r->used, r->warm, r->top, n);
    if (u >= 0) r->stretches_kept = false, p = place(r, (unsigned)u, n, &f);
  }
  if (!p && !(p = shared_alloc(&h, n, 1, &f)) && !(p = short_alloc(&h, arena, n, &f))) return NULL;
  *zero = f.clean;
  mark(p, (uint8_t)cls);
  __atomic_store_n(&h->class_bytes, h->class_bytes + hk_units_bytes(n), __ATOMIC_RELAXED);
  bool small = region_of(p)->small_pages;
  hk_unlock(&h->lock);
  if (small && f.clean) hk_os_populate(p, size);  /* see hk_large_take */
  return p;
}

void hk_huge_release_class(unsigned cls, void *chain) {
  unsigned n = (unsigned)units(hk_classes[cls].size);
  hk_arena_t *h = NULL;  /* locked: the arena of the blocks so far */
  while (chain != HK_END) {
    void *b = chain;
    chain = hk_next(b);
    hk_region_t *r = region_of(b);
    hk_arena_t *hb = arena_unlocked(r);
    if (hb != h || !h) {  /* the first block too: NULL is no region's */
      if (h) hk_unlock(&h->lock);
      if (!(h = hb)) hk_fatal("free(): invalid pointer", b);
      hk_lock(&h->lock);
    }
    unsigned u = (unsigned)(((uintptr_t)b - (uintptr_t)r) >> HK_UNIT_SHIFT);
    if (hk_unlikely(r->run[u] != n || !(r->used[u / 64] >> (u % 64) & 1))) {
      hk_unlock(&h->lock);
      hk_fatal("free(): invalid pointer", b);
    }
    mark(b, 0);
    ((uint64_t *)b)[1] = 0;  /* its free mark, which a huge block placed here would carry (a hardened free aborts on it) */
    r->stretches_kept = false;
    release_units(r, u, n);  /* run[u] stays, as for huge blocks */
    __atomic_store_n(&h->class_bytes, h->class_bytes - hk_units_bytes(n), __ATOMIC_RELAXED);
    if (region_empty(r)) hk_purge_note();
  }
  if (h) hk_unlock(&h->lock);
}

/* A jumbo region for `size` bytes: a cached one whose block is at most a
 * quarter too big whose block has the alignment, else a new one, its block
 * 2 MiB in (or at its alignment; one unit in where the address space is too
 * tight); *f (if asked) as place fills it.  Arena 0's lock held. */
static void *jumbo_alloc(size_t size, size_t alignment, hk_fill_t *f) {
  size_t offset = hk_max(hk_min(alignment, HK_REGION_SIZE), HK_GRANULE);
  size_t total = offset + hk_align_up(hk_max(size, 1), hk_os_page_size());  /* a block within its mapping */
  if (offset == HK_GRANULE) {
    for (hk_region_t *r = jumbo_cache; r; r = r->next) {
      size_t cap = r->size - r->offset;
      /* a block a unit in (a tight address space's) may miss a larger alignment */
      if (cap < size || cap - size > size / 4 || ((uintptr_t)r + r->offset) & (hk_max(alignment, 1) - 1)) continue;
      hk_list_remove(&jumbo_cache, r);
      jumbo_cached--;
      if (r->dirty[0] | r->dirty_old[0]) hk_resident_add(&arena_of(r)->resident, -(ptrdiff_t)cap);
      r->dirty[0] = r->dirty_old[0] = 0;
      r->used[0] = 1;
      r->alignment = alignment;
      if (f) f->clean = !r->stale[0], f->whole = true;
      r->stale[0] = 1;
      return (uint8_t *)r + r->offset;
    }
  }
  hk_region_t *r = region_map(total, offset, alignment, 0);
  if (!r && alignment < HK_GRANULE) {
    offset = hk_max(alignment, HK_UNIT_SIZE);
    r = region_map(total = offset + hk_align_up(hk_max(size, 1), hk_os_page_size()), offset, alignment, 0);
  }
  if (!r) return NULL;
  if (f) f->clean = true;
  r->stale[0] = 1;
  return (uint8_t *)r + offset;
}

static void region_unmap(hk_region_t *r) {
  r->magic = 0;
  hk_region_unmap(r, r->size);
}

static void jumbo_unmap(hk_region_t *r) {
  if (r->dirty[0] | r->dirty_old[0]) hk_resident_add(&arena_of(r)->resident, -(ptrdiff_t)(r->size - r->offset));
  atomic_store_explicit(&gone[gone_next].at, (uintptr_t)r + r->offset, memory_order_relaxed);
  atomic_store_explicit(&gone[gone_next].size, r->size - r->offset, memory_order_relaxed);
  gone_next = (gone_next + 1) % HK_GONE;
  region_unmap(r);
}

/* The jumbo regions of the cache, oldest first, while `bytes` < `want`. */
size_t hk_jumbo_give_back(size_t want, size_t bytes) {
  while (jumbo_cache && bytes < want) {
    hk_region_t *oldest = jumbo_cache;
    while (oldest->next) oldest = oldest->next;
    hk_list_remove(&jumbo_cache, oldest);
    jumbo_cached--;
    bytes += oldest->size - oldest->offset;
    jumbo_unmap(oldest);
  }
  return bytes;
}

/* Arena h's live counts change by `blocks` and `bytes` (its lock held); the
 * peaks follow.  Written for readers without the lock. */
static void count_live(hk_arena_t *h, ptrdiff_t blocks, ptrdiff_t bytes) {
  size_t b = h->live_blocks + (size_t)blocks, n = h->live_bytes + (size_t)bytes;
  __atomic_store_n(&h->live_blocks, b, __ATOMIC_RELAXED);
  __atomic_store_n(&h->live_bytes, n, __ATOMIC_RELAXED);
  if (b > h->peak_blocks) __atomic_store_n(&h->peak_blocks, b, __ATOMIC_RELAXED);
  if (n - b * HK_GUARD > h->peak_bytes) __atomic_store_n(&h->peak_bytes, n - b * HK_GUARD, __ATOMIC_RELAXED);
}

void *hk_huge_alloc(size_t size, size_t alignment, bool zero, unsigned arena, size_t *bytes_out) {
  if (!hk_huge_possible(size, alignment)) return NULL;
  hk_fill_t fill, *f = zero ? &fill : NULL;
  fill.size = size;  /* not the hardened build's guard page */
  size = hk_max(size, 1) + HK_GUARD;  /* a byte at least besides the guard (a 64 KiB page fills a unit) */
  size_t n = hk_max(units(size), 1);
  void *p = NULL;
  hk_arena_t *h;  /* locked, once p is found: the block's arena */
  /* Out of address space or memory: a place in another arena's regions, then
   * a mapping of the block's own (a region's 128 MiB may be more than an
   * address-space limit leaves). */
  if (fits_region(n, alignment)) {
    hk_lock(&(h = &hk_arenas[arena])->lock);
    p = shared_alloc(&h, (unsigned)n, alignment, f);
  }
  if (!p) {
    hk_lock(&(h = &hk_arenas[0])->lock);
    if (!(p = jumbo_alloc(size, alignment, f))) hk_unlock(&h->lock);
  }
  if (!p) return NULL;
  mark(p, HK_MAP_HUGE);
  guard(region_of(p), p, true);
  size_t bytes = block_bytes(region_of(p), p);
  count_live(h, 1, (ptrdiff_t)bytes);
  hk_unlock(&h->lock);
  if (f) fill_zero(p, f);
  *bytes_out = bytes;
  return p;
}

/* Frees the block of region r at p; called with its arena's lock held. */
static void free_locked(hk_region_t *r, void *p) {
  mark(p, 0);
  if (!r->offset) {
    unsigned u = (unsigned)(((uintptr_t)p - (uintptr_t)r) >> HK_UNIT_SHIFT);
    release_units(r, u, r->run[u]);  /* run[u] stays: a second free is known as one */
    if (region_empty(r)) hk_purge_note();  /* unmapped when its pages are gone */
    return;
  }
  r->used[0] = 0;
  if (hk_opt.purge_delay_ms == 0) {
    jumbo_unmap(r);
    return;
  }
  r->dirty[0] = 1;
  hk_resident_add(&arena_of(r)->resident, (ptrdiff_t)(r->size - r->offset));
  hk_list_push(&jumbo_cache, r);
  if (++jumbo_cached > HK_JUMBO_CACHE) hk_jumbo_give_back(1, 0);
}

/* Locks the arena of live huge block p's region and returns it, or NULL,
 * with no lock held, if p is not one.  Before the lock, only what does not
 * change while the region is mapped is read (the class map vouches for p;
 * then the header's magic and arena), and all of it again under the lock. */
static hk_arena_t *lock_arena_of(const void *p, hk_region_t **r) {
  uintptr_t a = (uintptr_t)p;
  if (a < HK_UNIT_SIZE || (a & (HK_UNIT_SIZE - 1)) || hk_class_map_lookup(p) != HK_MAP_HUGE) return NULL;
  hk_arena_t *h = arena_unlocked(region_of(p));
  if (!h) return NULL;
  hk_lock(&h->lock);
  if ((*r = lookup(p)) && arena_of(*r) == h) return h;
  hk_unlock(&h->lock);
  return NULL;
}

size_t hk_huge_free(void *p) {
  hk_region_t *r;
  hk_arena_t *h = lock_arena_of(p, &r);
  if (!h) return 0;
  guard(r, p, false);
  size_t bytes = block_bytes(r, p);
  count_live(h, -1, -(ptrdiff_t)bytes);
  free_locked(r, p);
  hk_unlock(&h->lock);
  return bytes;
}

size_t hk_huge_usable_size(const void *p) {
  hk_region_t *r;
  hk_arena_t *h = lock_arena_of(p, &r);
  if (!h) return 0;
  size_t n = block_bytes(r, p) - HK_GUARD;
  hk_unlock(&h->lock);
  return n;
}

/* Resizes a shared block in place when the units after it are free (or it
 * shrinks); true if it did. */
static bool shared_resize(hk_region_t *r, void *p, size_t size) {
  unsigned u = (unsigned)(((uintptr_t)p - (uintptr_t)r) >> HK_UNIT_SHIFT), old = r->run[u];
  size_t n = hk_max(units(size), 1);
  if (u + n > HK_REGION_UNITS) return false;
  if (n <= old) {
    if (n < old) release_units(r, u + (unsigned)n, old - (unsigned)n);
  } else {
    if (hk_bits_count(r->used, u + old, (unsigned)n - old)) return false;
    take_units(r, u + old, (unsigned)n - old);
    memset(&r->run[u + old], 0, (n - old) * sizeof r->run[0]);
  }
  r->run[u] = (uint16_t)n;
  return true;
}

/* Resizes a jumbo region with mremap: in place when the address space after
 * it is free, else moved (pages and all, no copy) to a new place aligned as
 * the block was.  The header's granule (jumbo_head) stays out of the move:
 * asking for huge pages on the rest made them two mappings as far as the
 * kernel knows. */
static void *jumbo_resize(hk_region_t *r, size_t size) {
  size_t total = r->offset + hk_align_up(size, hk_os_page_size()), head = jumbo_head(r->offset, r->size);
  uint8_t *body = (uint8_t *)r + head;
  /* the class map counts the units of the range grown into first, and
   * those of a range shrunk out of once it is gone */
  bool grows = total > r->size, counted = grows && hk_class_map_reserve((uint8_t *)r + r->size, total - r->size);
  if ((!grows || counted) && hk_os_remap(body, r->size - head, total - head, NULL)) {
    if (!grows && total < r->size) hk_class_map_release((uint8_t *)r + total, r->size - total);
    r->size = total;
    return (uint8_t *)r + r->offset;
  }
  if (counted) hk_class_map_release((uint8_t *)r + r->size, total - r->size);
  /* A shrink is not moved: the kernel cuts the old tail before it moves,
   * and a move refused late would leave the block cut short. */
  if (!grows) return NULL;
  size_t align = hk_max(HK_REGION_SIZE, r->alignment);
  uint8_t *target = hk_region_map(total, align, align > HK_REGION_SIZE ? r->offset : 0);
  if (!target) return NULL;
  size_t old_size = r->size;
  uint8_t *old = (uint8_t *)r + r->offset;
  mark(old, 0);
  if (!hk_os_remap(body, old_size - head, total - head, target + head)) {  /* which gave the body's target back */
    mark(old, HK_MAP_HUGE);
    hk_class_map_release(target, total);
    hk_os_unmap(target, head);
    return NULL;
  }
  /* The header is copied, not moved: had a second mremap failed, the body
   * would have had to go back to where it was, a hole by then, which
   * another thread's mapping may have taken. */
  hk_os_advise_small(target, head);
  memcpy(target, r, offsetof(hk_region_t, run));  /* a jumbo region's: what follows serves shared ones */
  hk_class_map_set(r, 1, 0);
  hk_class_map_release(r, old_size);  /* the body's range went with mremap */
  hk_os_unmap(r, head);
  r = (hk_region_t *)target;
  r->magic = HK_REGION_MAGIC ^ (uintptr_t)r;
  r->size = total;
  hk_atomic_max(&largest_region, total);
  hk_class_map_set(r, 1, HK_MAP_REGION);
  mark(target + r->offset, HK_MAP_HUGE);
  return target + r->offset;
}

void *hk_huge_resize(void *p, size_t size, size_t *old_size, ptrdiff_t *grown) {
  hk_region_t *r;
  hk_arena_t *h = lock_arena_of(p, &r);
  *old_size = 0;
  if (!h) return NULL;
  size_t old_bytes = block_bytes(r, p);
  *old_size = old_bytes - HK_GUARD;
  *grown = 0;
  if (!hk_huge_possible(size, 0)) {
    hk_unlock(&h->lock);
    return NULL;
  }
  guard(r, p, false);
  void *q = r->offset ? jumbo_resize(r, size + HK_GUARD) : shared_resize(r, p, size + HK_GUARD) ? p : NULL;
  hk_region_t *now = q ? region_of(q) : r;
  guard(now, q ? q : p, true);
  size_t bytes = q ? block_bytes(now, q) : old_bytes;
  count_live(h, 0, (ptrdiff_t)bytes - (ptrdiff_t)old_bytes);
  hk_unlock(&h->lock);
  *grown = (ptrdiff_t)bytes - (ptrdiff_t)old_bytes;
  return q;
}

size_t hk_huge_give_back(hk_arena_t *a, bool old, size_t want, size_t bytes) {
  for (hk_region_t *r = a->regions; r && bytes < want; r = r->next) {
    hk_units_t m = units_of(r);
    bytes = hk_units_give_back(&m, old, want, bytes);
  }
  return bytes;
}

/* The bytes of the pages not resident of word k's free units of region r,
 * which are counted as resident whole. */
static size_t nonresident_word(const hk_region_t *r, unsigned k) {
  uint8_t pages[64];
  uint64_t warm = r->warm[k];
  unsigned lo = (unsigned)__builtin_ctzll(warm), n = 64 - (unsigned)__builtin_clzll(warm) - lo;
  if (!hk_os_unit_pages((uint8_t *)r + hk_units_bytes((size_t)k * 64 + lo), n, pages)) return 0;
  size_t bytes = 0;
  for (uint64_t rest = warm; rest; rest &= rest - 1)
    bytes += HK_UNIT_SIZE - pages[__builtin_ctzll(rest) - lo] * HK_PAGE_SIZE;
  return bytes;
}

/* Free units of the shared regions count as resident whole, but a program
 * may have written one page of a big block.  Lean mode, over its cap, asks
 * the kernel (one mincore per 64 units) which pages are there, and does not
 * hold the others against its cap for a while: returns their bytes (two
 * threads replacing blocks of 1-4 MiB, one page of each written: 2.1 times
 * the speed).  The units stay counted whole and warm for the searches
 * (docs/DESIGN.md, Sparsely written blocks). */
size_t hk_huge_nonresident(void) {
  size_t bytes = 0;
  for (unsigned i = 0; i < HK_ARENAS; i++) {
    hk_lock(&hk_arenas[i].lock);
    for (hk_region_t *r = hk_arenas[i].regions; r; r = r->next)
      for (unsigned k = 0; k < (r->top + 63) / 64; k++) bytes += r->warm[k] ? nonresident_word(r, k) : 0;
    hk_unlock(&hk_arenas[i].lock);
  }
  return bytes;
}

/* Empty regions are unmapped once nothing of them waits, but a tick leaves
 * each arena one, for its threads to take blocks from without a mapping;
 * a trim leaves none (malloc_trim, and a malloc out of address space: its
 * 128 MiB may be what that needs).  The jumbo cache ages in arena 0. */
size_t hk_huge_purge(hk_arena_t *a, int mode, bool *pending) {
  size_t bytes = 0;
  unsigned empty = 0;
  for (hk_region_t *r = a->regions, *next; r; r = next) {
    next = r->next;
    bool dirty_old = false;
    hk_units_t m = units_of(r);
    size_t n = hk_units_age(&m, mode, &dirty_old);
    bytes += n;
    *pending |= dirty_old;
    if (n) hk_arena_breathe(a);
    if (!region_empty(r) || (mode != HK_PURGE_ALL && empty++ == 0) || dirty_old) continue;
    hk_list_remove(&a->regions, r);
    r->magic = 0;
    hk_arena_unmap(a, r, r->size);  /* `next` stays: only a purge takes regions out */
  }
  if (a != hk_arenas) return bytes;
  if (mode == HK_PURGE_ALL) bytes = hk_jumbo_give_back(SIZE_MAX, bytes);
  for (hk_region_t *r = jumbo_cache, *next; r; r = next) {  /* a tick: the cache ages */
    next = r->next;
    if (r->dirty_old[0]) {
      hk_list_remove(&jumbo_cache, r);
      jumbo_cached--;
      bytes += r->size - r->offset;
      jumbo_unmap(r);
    } else {
      r->dirty_old[0] = r->dirty[0];
      r->dirty[0] = 0;
      *pending = true;
    }
  }
  return bytes;
}

/* Summed over the arenas, each read as it is.  The peaks are each arena's
 * peaks summed: the process's own, with one arena in use (one thread, or
 * threads of one arena); with more, at most that much above it. */
void hk_huge_counts(size_t *blocks, size_t *bytes, bool peak) {
  *blocks = *bytes = 0;
  for (unsigned i = 0; i < HK_ARENAS; i++) {
    const hk_arena_t *h = &hk_arenas[i];
    size_t b = __atomic_load_n(peak ? &h->peak_blocks : &h->live_blocks, __ATOMIC_RELAXED);
    size_t n = __atomic_load_n(peak ? &h->peak_bytes : &h->live_bytes, __ATOMIC_RELAXED);
    *blocks += b;
    *bytes += peak ? n : n - hk_min(n, b * HK_GUARD);
  }
}
