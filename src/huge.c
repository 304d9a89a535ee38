/* SPDX-License-Identifier: MIT */
/* Huge blocks (above the largest size class, 1 MiB).
 *
 * A huge block is a run of 2 MiB granules in a 128 MiB region aligned to its
 * size; granule 0 holds the region's header (only its first page is ever
 * touched), so a block's header is found from the block itself, which starts
 * on a granule: (p - 2 MiB) rounded down to 128 MiB.  Regions that large let
 * blocks of tens of MiB share one and take each other's granules when they
 * are freed, rather than each needing fresh memory.  Blocks freed stay
 * resident until the purge schedule gives their granules back (as units of
 * SuperSlabs do), so a program that keeps freeing and allocating big blocks
 * reuses the same memory without a system call or a page fault.  Granules
 * are 2 MiB so that blocks sit on transparent huge pages (HAKMEM_HUGE_THP):
 * one page fault maps 2 MiB.
 *
 * A block too big for a region (or too strongly aligned) gets a "jumbo"
 * region of its own, with the same header, the block at granule 1 (or at the
 * granule its alignment needs).  Freed jumbo regions are kept, dirty, in a
 * small cache for blocks of about their size, and unmapped on the purge
 * schedule; realloc grows and shrinks them with mremap, without a copy.
 *
 * The class map marks the first 64 KiB unit of each live block, and nothing
 * else, so a pointer into the middle of a block is never taken for one. */
#include <string.h>
#include "internal.h"

#define HK_GRANULE_SHIFT 21
#define HK_GRANULE ((size_t)1 << HK_GRANULE_SHIFT)
#define HK_REGION_GRANULES 64
#define HK_REGION_MAGIC 0x6875676572656769ull
#define HK_JUMBO_CACHE 4  /* freed jumbo regions kept for reuse */

typedef struct hk_region {
  uint64_t magic;             /* HK_REGION_MAGIC ^ the region's address */
  size_t size;                /* bytes mapped */
  uint64_t used;              /* granules in use; bit 0, the header, always */
  uint64_t dirty, dirty_old;  /* free granules still resident, by purge epoch */
  uint64_t stale;             /* granules that may hold old data (calloc clears them) */
  uint8_t run[HK_REGION_GRANULES];  /* granules of the block starting at each granule */
  size_t offset;              /* jumbo: where the block starts; 0 for shared regions */
  struct hk_region *next, *prev;
} hk_region_t;

static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_region_t *regions;       /* shared regions */
static hk_region_t *jumbo_cache;   /* freed jumbo regions, newest first */
static unsigned jumbo_cached;
static size_t live_blocks, live_bytes;  /* blocks in use and the bytes of their granules */
static size_t resident;  /* bytes of free granules and cached jumbo regions still resident (huge_lock) */

size_t hk_huge_resident(void) { return __atomic_load_n(&resident, __ATOMIC_RELAXED); }

static size_t granules(size_t size) { return (size + HK_GRANULE - 1) >> HK_GRANULE_SHIFT; }
static uint64_t resident_free(const hk_region_t *r) { return r->dirty | r->dirty_old; }

/* The region of a block: its header lies in the region-aligned granule
 * before or below the block. */
static hk_region_t *region_of(const void *p) {
  return (hk_region_t *)(((uintptr_t)p - HK_GRANULE) & ~(HK_REGION_SIZE - 1));
}

/* The region of live huge block p, or NULL if p is not one (the class map
 * has vouched for p's unit, so the region's header is mapped). */
static hk_region_t *lookup(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (a < HK_GRANULE || (a & (HK_GRANULE - 1)) || hk_class_map_lookup(p) != HK_MAP_HUGE) return NULL;
  hk_region_t *r = region_of(p);
  if (r->magic != (HK_REGION_MAGIC ^ (uintptr_t)r)) return NULL;
  size_t off = (size_t)(a - (uintptr_t)r);
  if (r->offset) return off == r->offset && r->used ? r : NULL;
  unsigned g = (unsigned)(off >> HK_GRANULE_SHIFT);
  return g < HK_REGION_GRANULES && r->run[g] && (r->used >> g & 1) ? r : NULL;
}

/* The region whose header p's region-sized span or the one below starts with, or NULL. */
static hk_region_t *region_around(const void *p) {
  hk_region_t *r = (hk_region_t *)((uintptr_t)p & ~(HK_REGION_SIZE - 1));
  if (hk_class_map_lookup(r) != HK_MAP_REGION) r = region_of(p);
  return (uintptr_t)p >= HK_GRANULE && hk_class_map_lookup(r) == HK_MAP_REGION &&
                 r->magic == (HK_REGION_MAGIC ^ (uintptr_t)r) && (const uint8_t *)p < (uint8_t *)r + r->size
             ? r : NULL;
}

/* Read without the lock: for a message before abort.  The start of a freed
 * block keeps its run length until a block is put over it. */
size_t hk_huge_block_of(const void *p, bool *live) {
  hk_region_t *r = region_around(p);
  if (!r) return 0;
  size_t off = (size_t)((const uint8_t *)p - (uint8_t *)r);
  if (r->offset) {
    *live = r->used && off > r->offset;
    return off >= r->offset && (*live || off == r->offset) ? r->size - r->offset : 0;
  }
  for (int g = (int)(off >> HK_GRANULE_SHIFT); g > 0; g--) {
    if (!r->run[g] || (size_t)(g + r->run[g]) << HK_GRANULE_SHIFT <= off) continue;
    *live = r->used >> g & 1;
    return *live || off == (size_t)g << HK_GRANULE_SHIFT ? (size_t)r->run[g] << HK_GRANULE_SHIFT : 0;
  }
  return 0;
}

static size_t block_bytes(const hk_region_t *r, const void *p) {
  if (r->offset) return r->size - r->offset;
  return (size_t)r->run[((uintptr_t)p - (uintptr_t)r) >> HK_GRANULE_SHIFT] << HK_GRANULE_SHIFT;
}

static void mark(const void *p, uint8_t value) { hk_class_map_set(p, 1, value); }

/* The hardened build ends every huge block with a page mapped inaccessible,
 * so that an overrun faults at once: the block's usable size is a page less. */
#define HK_GUARD (HAK_HARDENED ? HK_PAGE_SIZE : 0)

static void guard(hk_region_t *r, void *p, bool on) {
  if (HAK_HARDENED) hk_os_protect((uint8_t *)p + block_bytes(r, p) - HK_GUARD, HK_GUARD, !on);
}

/* Maps a region of `size` bytes whose block, `offset` bytes in, is aligned to
 * `alignment` (the region itself to HK_REGION_SIZE). */
static hk_region_t *region_map(size_t size, size_t offset, size_t alignment) {
  size_t align = hk_max(alignment, HK_REGION_SIZE);
  hk_region_t *r = offset == 0 ? hk_os_space_take(size) : NULL;  /* shared: never resized */
  if (!r) r = hk_os_map_aligned(size, align, align > HK_REGION_SIZE ? offset : 0);
  if (!r) return NULL;
  if (!hk_class_map_reserve(r, size)) {
    hk_os_unmap(r, size);
    return NULL;
  }
  if (hk_opt.huge_thp) hk_os_advise_huge((uint8_t *)r + HK_GRANULE, size - HK_GRANULE);
  r->magic = HK_REGION_MAGIC ^ (uintptr_t)r;
  r->size = size;
  r->used = 1;
  r->offset = offset;
  hk_class_map_set(r, 1, HK_MAP_REGION);
  return r;
}

/* Gives back the granules in `bits` of a shared region; returns the bytes. */
static size_t decommit_granules(hk_region_t *r, uint64_t bits) {
  size_t bytes = 0;
  while (bits) {
    unsigned g = (unsigned)__builtin_ctzll(bits);
    unsigned n = (unsigned)__builtin_ctzll(~(bits >> g));
    hk_os_decommit((uint8_t *)r + ((size_t)g << HK_GRANULE_SHIFT), (size_t)n << HK_GRANULE_SHIFT);
    bits &= ~hk_bits(g, n);
    bytes += (size_t)n << HK_GRANULE_SHIFT;
  }
  if (hk_opt.decommit == HK_DECOMMIT_DONTNEED) r->stale &= ~bits;
  return bytes;
}

/* Takes granules [g, g+n) of a shared region: resident ones no longer wait
 * for the purge. */
static void take_granules(hk_region_t *r, unsigned g, unsigned n) {
  uint64_t bits = hk_bits(g, n), reused = bits & resident_free(r);
  r->used |= bits;
  r->dirty &= ~bits;
  r->dirty_old &= ~bits;
  if (reused) hk_resident_add(&resident, -(ptrdiff_t)((size_t)__builtin_popcountll(reused) << HK_GRANULE_SHIFT));
  if (reused != bits) hk_purge_fresh((size_t)__builtin_popcountll(bits & ~reused) << HK_GRANULE_SHIFT);
}

static void release_granules(hk_region_t *r, unsigned g, unsigned n) {
  uint64_t bits = hk_bits(g, n);
  r->used &= ~bits;
  if (hk_opt.purge_delay_ms == 0) {
    decommit_granules(r, bits);
  } else {
    r->dirty |= bits;
    hk_resident_add(&resident, (ptrdiff_t)((size_t)n << HK_GRANULE_SHIFT));
  }
}

/* Granules whose starts are multiples of `step` (a power of two). */
static uint64_t aligned_starts(unsigned step) {
  uint64_t m = 0;
  for (unsigned g = 0; g < HK_REGION_GRANULES; g += step) m |= 1ull << g;
  return m;
}

/* Whether an empty shared region could hold n granules so aligned. */
static bool fits_region(size_t n, size_t alignment) {
  unsigned cold;
  return n < HK_REGION_GRANULES && alignment <= HK_REGION_SIZE / 2 &&
         hk_find_run(hk_bits(1, HK_REGION_GRANULES - 1), 0, (unsigned)n,
                     aligned_starts((unsigned)hk_max(alignment >> HK_GRANULE_SHIFT, 1)), &cold) >= 0;
}

/* A block of n granules from a shared region, the best place as hk_find_run_best
 * sees it.  Called with huge_lock held; NULL if no region can be mapped. */
static void *shared_alloc(unsigned n, size_t alignment, bool zero, size_t size) {
  uint64_t starts = aligned_starts((unsigned)hk_max(alignment >> HK_GRANULE_SHIFT, 1));
  uint64_t all = hk_bits(0, HK_REGION_GRANULES);
  hk_region_t *r = NULL;
  int g = -1;
  unsigned best = n + 1, best_slack = 64, cold, slack;
  for (hk_region_t *s = regions; s && (best || best_slack); s = s->next) {
    int at = hk_find_run_best(all & ~s->used, resident_free(s), n, starts, hk_min(best, n), &cold, &slack);
    if (at >= 0 && (cold < best || (cold == best && slack < best_slack))) r = s, g = at, best = cold, best_slack = slack;
  }
  if (!r) {
    r = region_map(HK_REGION_SIZE, 0, 0);
    if (!r) return NULL;
    hk_list_push(&regions, r);
    g = hk_find_run_best(all & ~r->used, 0, n, starts, n, &cold, &slack);
  }
  take_granules(r, (unsigned)g, n);
  r->run[g] = (uint8_t)n;
  memset(&r->run[g + 1], 0, n - 1);  /* no freed block's start lies inside a live one */
  uint8_t *p = (uint8_t *)r + ((size_t)g << HK_GRANULE_SHIFT);
  for (uint64_t stale = zero ? r->stale & hk_bits((unsigned)g, n) : 0; stale; stale &= stale - 1) {
    size_t off = ((size_t)__builtin_ctzll(stale) - (size_t)g) << HK_GRANULE_SHIFT;
    if (off < size) memset(p + off, 0, hk_min(HK_GRANULE, size - off));
  }
  r->stale |= hk_bits((unsigned)g, n);
  return p;
}

/* A jumbo region for `size` bytes: one from the cache whose block is at
 * granule 1 and at most a quarter too big, else a new one.  Called with
 * huge_lock held. */
static void *jumbo_alloc(size_t size, size_t alignment, bool zero) {
  size_t offset = hk_max(hk_min(alignment, HK_REGION_SIZE), HK_GRANULE);
  size_t total = offset + hk_align_up(hk_max(size, 1), hk_os_page_size());  /* a block within its mapping */
  if (offset == HK_GRANULE) {
    for (hk_region_t *r = jumbo_cache; r; r = r->next) {
      size_t cap = r->size - r->offset;
      if (cap < size || cap - size > size / 4) continue;
      hk_list_remove(&jumbo_cache, r);
      jumbo_cached--;
      if (r->dirty | r->dirty_old) hk_resident_add(&resident, -(ptrdiff_t)cap);
      r->dirty = r->dirty_old = 0;
      r->used = 1;
      if (zero && r->stale) memset((uint8_t *)r + offset, 0, size);
      r->stale = 1;
      return (uint8_t *)r + offset;
    }
  }
  hk_region_t *r = region_map(total, offset, alignment);
  if (!r) return NULL;
  r->stale = 1;
  return (uint8_t *)r + offset;
}

static void region_unmap(hk_region_t *r) {
  r->magic = 0;
  hk_class_map_set(r, 1, 0);
  hk_os_unmap(r, r->size);
}

static void jumbo_unmap(hk_region_t *r) {
  if (r->dirty | r->dirty_old) hk_resident_add(&resident, -(ptrdiff_t)(r->size - r->offset));
  region_unmap(r);
}

/* The jumbo regions of the cache, oldest first, while `bytes` < `want`. */
static size_t unmap_cached(size_t want, size_t bytes) {
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

void *hk_huge_alloc(size_t size, size_t alignment, bool zero) {
  hk_process_init();
  size_t limit = (size_t)PTRDIFF_MAX - HK_REGION_SIZE;
  if (alignment > limit / 2 || size > limit - alignment) {
    errno = ENOMEM;
    return NULL;
  }
  size += HK_GUARD;
  size_t n = hk_max(granules(size), 1);
  void *p;
  /* Out of address space or memory: what is free and still mapped goes
   * back (malloc_trim), and one more try. */
  for (int tries = 0; tries < 2; tries++) {
    pthread_mutex_lock(&huge_lock);
    p = fits_region(n, alignment) ? shared_alloc((unsigned)n, alignment, zero, size)
                                  : jumbo_alloc(size, alignment, zero);
    if (p) break;
    pthread_mutex_unlock(&huge_lock);
    if (tries || !hk_purge_all()) {
      errno = ENOMEM;
      return NULL;
    }
  }
  {
    mark(p, HK_MAP_HUGE);
    guard(region_of(p), p, true);
    live_blocks++;
    live_bytes += block_bytes(region_of(p), p);
    hk_stats_out((ptrdiff_t)block_bytes(region_of(p), p));
  }
  pthread_mutex_unlock(&huge_lock);
  hk_purge_poll();
  return p;
}

/* Frees the block of region r at p; called with huge_lock held. */
static void free_locked(hk_region_t *r, void *p) {
  mark(p, 0);
  if (!r->offset) {
    unsigned g = (unsigned)(((uintptr_t)p - (uintptr_t)r) >> HK_GRANULE_SHIFT);
    release_granules(r, g, r->run[g]);  /* run[g] stays: a second free is known as one */
    if (r->used == 1) hk_purge_note();  /* an empty region: unmapped when its pages are gone */
    return;
  }
  r->used = 0;
  if (hk_opt.purge_delay_ms == 0) {
    jumbo_unmap(r);
    return;
  }
  r->dirty = 1;
  hk_resident_add(&resident, (ptrdiff_t)(r->size - r->offset));
  hk_list_push(&jumbo_cache, r);
  if (++jumbo_cached > HK_JUMBO_CACHE) unmap_cached(1, 0);
}

void hk_huge_free(void *p) {
  pthread_mutex_lock(&huge_lock);
  hk_region_t *r = lookup(p);
  if (!r) {
    pthread_mutex_unlock(&huge_lock);
    hk_misuse("free", p, HK_MAP_HUGE);
  }
  guard(r, p, false);
  live_blocks--;
  live_bytes -= block_bytes(r, p);
  hk_stats_out(-(ptrdiff_t)block_bytes(r, p));
  free_locked(r, p);
  pthread_mutex_unlock(&huge_lock);
  hk_purge_poll();
}

size_t hk_huge_usable_size(const void *p) {
  pthread_mutex_lock(&huge_lock);
  hk_region_t *r = lookup(p);
  size_t n = r ? block_bytes(r, p) - HK_GUARD : 0;
  pthread_mutex_unlock(&huge_lock);
  return n;
}

/* Resizes a shared block in place when the granules after it are free (or
 * it shrinks); true if it did. */
static bool shared_resize(hk_region_t *r, void *p, size_t size) {
  unsigned g = (unsigned)(((uintptr_t)p - (uintptr_t)r) >> HK_GRANULE_SHIFT), old = r->run[g];
  size_t n = granules(size);
  if (g + n > HK_REGION_GRANULES) return false;
  if (n <= old) {
    if (n < old) release_granules(r, g + (unsigned)n, old - (unsigned)n);
  } else {
    uint64_t more = hk_bits(g + old, (unsigned)n - old);
    if (r->used & more) return false;
    take_granules(r, g + old, (unsigned)n - old);
    memset(&r->run[g + old], 0, n - old);
    r->stale |= more;
  }
  r->run[g] = (uint8_t)n;
  return true;
}

/* Resizes a jumbo region with mremap: in place when the address space after
 * it is free, else moved (pages and all, no copy) to a new region-aligned
 * place.  The header granule and the rest are moved apart: asking for huge
 * pages on the rest made them two mappings as far as the kernel knows. */
static void *jumbo_resize(hk_region_t *r, size_t size) {
  size_t total = r->offset + hk_align_up(size, hk_os_page_size());
  uint8_t *body = (uint8_t *)r + HK_GRANULE;
  if (hk_os_remap(body, r->size - HK_GRANULE, total - HK_GRANULE, NULL)) {
    r->size = total;
    return (uint8_t *)r + r->offset;
  }
  size_t align = hk_max(HK_REGION_SIZE, r->offset);
  uint8_t *target = hk_os_map_aligned(total, align, align > HK_REGION_SIZE ? r->offset : 0);
  if (target && !hk_class_map_reserve(target, total)) {
    hk_os_unmap(target, total);
    target = NULL;
  }
  if (!target) return NULL;
  size_t old_size = r->size;
  uint8_t *old = (uint8_t *)r + r->offset;
  mark(old, 0);
  if (!hk_os_remap(body, old_size - HK_GRANULE, total - HK_GRANULE, target + HK_GRANULE)) {
    mark(old, HK_MAP_HUGE);
    hk_os_unmap(target, total);
    return NULL;
  }
  if (!hk_os_remap(r, HK_GRANULE, HK_GRANULE, target)) {  /* the block goes back where it was */
    hk_os_remap(target + HK_GRANULE, total - HK_GRANULE, old_size - HK_GRANULE, body);
    mark(old, HK_MAP_HUGE);
    hk_os_unmap(target, HK_GRANULE);
    return NULL;
  }
  hk_class_map_set(r, 1, 0);
  r = (hk_region_t *)target;
  r->magic = HK_REGION_MAGIC ^ (uintptr_t)r;
  r->size = total;
  hk_class_map_set(r, 1, HK_MAP_REGION);
  mark(target + r->offset, HK_MAP_HUGE);
  return target + r->offset;
}

void *hk_huge_realloc(void *p, size_t size) {
  pthread_mutex_lock(&huge_lock);
  hk_region_t *r = lookup(p);
  if (!r) {
    pthread_mutex_unlock(&huge_lock);
    hk_misuse("realloc", p, HK_MAP_HUGE);
  }
  if (size > (size_t)PTRDIFF_MAX - HK_REGION_SIZE) {
    pthread_mutex_unlock(&huge_lock);
    errno = ENOMEM;
    return NULL;
  }
  size_t old_bytes = block_bytes(r, p), old_size = old_bytes - HK_GUARD;
  guard(r, p, false);
  void *q = r->offset ? jumbo_resize(r, size + HK_GUARD) : shared_resize(r, p, size + HK_GUARD) ? p : NULL;
  hk_region_t *now = q ? region_of(q) : r;
  guard(now, q ? q : p, true);
  if (q) {  /* resized where it was, or its pages moved: the same block */
    size_t bytes = block_bytes(now, q);
    live_bytes += bytes - old_bytes;
    hk_stats_out((ptrdiff_t)bytes - (ptrdiff_t)old_bytes);
  }
  pthread_mutex_unlock(&huge_lock);
  if (q) return q;
  if (r->offset) {
    errno = ENOMEM;
    return NULL;
  }
  q = hk_huge_alloc(size, 16, false);  /* moves out of its region: a copy */
  if (!q) return NULL;
  memcpy(q, p, hk_min(old_size, size));
  hk_huge_free(p);
  return q;
}

/* Gives back the huge blocks' free memory as superslab.c's purges do for
 * units (see there): granules of shared regions, then whole regions: empty
 * shared ones beyond the first, and cached jumbo ones.  Returns the bytes. */
size_t hk_huge_purge(int mode, size_t want) {
  size_t bytes = 0;
  unsigned empty = 0;  /* the first empty region stays */
  bool pending = false;
  pthread_mutex_lock(&huge_lock);
  if (mode == HK_PURGE_DIRTY) {
    for (int old = 1; old >= 0; old--) {
      for (hk_region_t *r = regions; r && bytes < want; r = r->next) {
        uint64_t *bits = old ? &r->dirty_old : &r->dirty;
        size_t n = decommit_granules(r, *bits);
        *bits = 0;
        if (n) hk_resident_add(&resident, -(ptrdiff_t)n);
        bytes += n;
      }
    }
    bytes = unmap_cached(want, bytes);
    pthread_mutex_unlock(&huge_lock);
    return bytes;
  }
  for (hk_region_t *r = regions, *next; r; r = next) {
    next = r->next;
    size_t n = decommit_granules(r, mode == HK_PURGE_DUE ? r->dirty_old : resident_free(r));
    if (n) hk_resident_add(&resident, -(ptrdiff_t)n);
    bytes += n;
    r->dirty_old = mode == HK_PURGE_DUE ? r->dirty : 0;
    r->dirty = 0;
    pending |= r->dirty_old != 0;
    if (r->used != 1 || empty++ == 0 || r->dirty_old) continue;
    hk_list_remove(&regions, r);
    region_unmap(r);
  }
  if (mode == HK_PURGE_ALL) bytes = unmap_cached(SIZE_MAX, bytes);
  for (hk_region_t *r = jumbo_cache, *next; r; r = next) {  /* a tick: the cache ages */
    next = r->next;
    if (r->dirty_old) {
      hk_list_remove(&jumbo_cache, r);
      jumbo_cached--;
      bytes += r->size - r->offset;
      jumbo_unmap(r);
    } else {
      r->dirty_old = r->dirty;
      r->dirty = 0;
      pending = true;
    }
  }
  pthread_mutex_unlock(&huge_lock);
  if (pending) hk_purge_note();
  return bytes;
}

void hk_huge_counts(size_t *blocks, size_t *bytes) {
  pthread_mutex_lock(&huge_lock);
  *blocks = live_blocks;
  *bytes = live_bytes - live_blocks * HK_GUARD;
  pthread_mutex_unlock(&huge_lock);
}

size_t hk_huge_used_bytes(void) {
  pthread_mutex_lock(&huge_lock);
  size_t bytes = live_bytes;
  pthread_mutex_unlock(&huge_lock);
  return bytes;
}

void hk_huge_fork_lock(void) { pthread_mutex_lock(&huge_lock); }

void hk_huge_fork_unlock(bool child) {
  if (child) pthread_mutex_init(&huge_lock, NULL);
  else pthread_mutex_unlock(&huge_lock);
}
