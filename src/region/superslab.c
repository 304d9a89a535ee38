/* SPDX-License-Identifier: MIT */
/* SuperSlabs: 4 MiB regions aligned to their size, cut into 64 KiB units; a
 * slab is a run of units holding blocks of one class.
 *
 * A unit given back stays resident until the purge schedule has seen it
 * free for a whole epoch (units.c).  New slabs take resident units first.
 * Empty SuperSlabs stay mapped; those beyond HAKMEM_WARM_POOL_SIZE per
 * arena are unmapped once their pages are gone (never under
 * HAKMEM_SS_MEM_LEAN_DECOMMIT=OFF, where no page goes).
 *
 * SuperSlabs are held by the arenas (arena.c); a slab goes back to the
 * arena of its SuperSlab. */
#include "region/region.h"

/* Statistics and the size of the next chunk of spares: relaxed. */
static atomic_size_t used_units;  /* units given to slabs, in all arenas */
static atomic_uint superslabs_mapped;  /* ever, in all arenas */

/* A SuperSlab's units, as units.c keeps them. */
static hk_units_t units_of(hk_superslab_t *ss) {
  return (hk_units_t){(uint8_t *)ss, &ss->used, &ss->dirty, &ss->dirty_old, &ss->warm, &ss->stale, NULL,
                      1, &hk_arenas[ss->arena].resident};
}

/* SuperSlabs on small pages (HK_SS_SMALL_PAGED at most), relaxed: a count. */
static atomic_uint small_paged;

/* HK_SS_BIG SuperSlabs mapped or more: the process is big. */
static bool process_big(void) { return atomic_load_explicit(&superslabs_mapped, memory_order_relaxed) >= HK_SS_BIG; }

/* Once the space reserved at start-up is full, or when there is none,
 * each arena maps SuperSlabs several at a time, as many as are mapped
 * already (at most HK_SS_CHUNK): a growing process makes a few system calls,
 * not one per 4 MiB, and those not yet handed out cost address space only. */
static bool spares_map(hk_arena_t *a) {
  unsigned mapped = atomic_load_explicit(&superslabs_mapped, memory_order_relaxed);
  for (unsigned n = hk_max(hk_min(mapped, HK_SS_CHUNK), 1u); n; n /= 2) {
    uint8_t *p = hk_region_map(n * HK_SS_SIZE, HK_SS_SIZE, 0);
    if (!p) continue;
    if (hk_opt.ss_thp) hk_os_advise_huge(p, n * HK_SS_SIZE);  /* superslab_map: the few on small pages */
    else hk_os_advise_small(p, n * HK_SS_SIZE);                /* where the kernel's default is huge */
    a->spare = p;
    a->nspare = n;
    return true;
  }
  return false;
}

/* Turns each half of a SuperSlab on small pages whose pages are mostly
 * resident into one huge page (mincore on every HK_SS_DENSE_EVERY-th new
 * slab there, HK_SS_DENSE_LOOKS times at most: more cost mixed_large 5 %).
 * A program whose blocks fill 2 MiB there gets the TLB reach of the huge
 * SuperSlabs (10 000 live 16-1040 B blocks: 12 % faster); one with a few
 * blocks in each of many classes stays on small pages (400 such blocks:
 * 2 MiB resident, not 4).  Called with the arena's lock held. */
static void densify(hk_superslab_t *ss, unsigned unit, unsigned units) {
  /* The second half's first slab, if a large block (most often written
   * whole) or after a first half mostly written: huge pages there before a
   * page is touched, nothing to copy (mixed_large: 8 % faster). */
  if (unit >= HK_SS_UNITS / 2 && !(ss->halves & HK_HALF_SEEN)) {
    bool huge = units > 1 || hk_os_resident_pages(ss, HK_SS_SIZE / 2) >= HK_SS_DENSE_PAGES;
    if (huge) hk_os_advise_huge((uint8_t *)ss + HK_SS_SIZE / 2, HK_SS_SIZE / 2);
    /* bit 1: the second half huge; relaxed, as hk_slab_populate reads it without the lock */
    __atomic_store_n(&ss->halves, ss->halves | HK_HALF_SEEN | (unsigned)huge << 1, __ATOMIC_RELAXED);
  }
  /* A process grown big: huge pages, for slabs of every kind (the TLB's
   * misses cost mixed_large 5 %, a few MiB are little to it). */
  bool big = process_big();
  if (!big && (ss->looks >= HK_SS_DENSE_LOOKS || ++ss->slabs_made < HK_SS_DENSE_EVERY)) return;
  ss->looks++;
  ss->slabs_made = 0;
  for (unsigned h = 0; h < 2; h++) {
    uint8_t *half = (uint8_t *)ss + h * (HK_SS_SIZE / 2);
    if (ss->halves >> h & 1 || (!big && hk_os_resident_pages(half, HK_SS_SIZE / 2) < HK_SS_DENSE_PAGES)) continue;
    __atomic_store_n(&ss->halves, ss->halves | 1u << h, __ATOMIC_RELAXED);
    hk_os_collapse_huge(half, HK_SS_SIZE / 2);
  }
  if (big) {
    __atomic_store_n(&ss->small_pages, false, __ATOMIC_RELAXED);
    ss->kind = HK_SS_ANY;
    atomic_fetch_sub_explicit(&small_paged, 1, memory_order_relaxed);
  }
}

/* A SuperSlab for a slab of `kind`, from the space reserved at start-up
 * (os.c), or else one of the arena's spares; called with its lock held.  A
 * huge page maps 2 MiB per fault but is resident whole, untouched bytes and
 * all, and purges leave them.  So while the process is small, its first
 * SuperSlab (which takes slabs of every kind) and one of sparse slabs after
 * it are on small pages: a program with a few blocks in each of many
 * classes leaves most of each slab untouched (gcc's cc1 on the sources of
 * bench: up to 3.7 MiB less).  Dense slabs and large blocks go on huge
 * pages. */
static hk_superslab_t *superslab_map(hk_arena_t *a, unsigned kind) {
  hk_superslab_t *ss = hk_region_map(HK_SS_SIZE, 0, 0);
  if (!ss && !a->nspare && !spares_map(a)) return NULL;
  if (!ss) {
    ss = (hk_superslab_t *)a->spare;
    a->spare += HK_SS_SIZE;
    a->nspare--;
  }
  atomic_fetch_add_explicit(&superslabs_mapped, 1, memory_order_relaxed);
  /* its advice before its first byte is written, the header's */
  unsigned paged = hk_opt.ss_thp ? atomic_fetch_add_explicit(&small_paged, 1, memory_order_relaxed) : 0;
  bool small = hk_opt.ss_thp && kind != HK_SS_ANY && (!paged || (paged < HK_SS_SMALL_PAGED && kind == HK_SS_SPARSE));
  if (small) {
    hk_os_advise_small(ss, HK_SS_SIZE);  /* also where the kernel's default is huge pages everywhere */
  } else if (hk_opt.ss_thp) {
    atomic_fetch_sub_explicit(&small_paged, 1, memory_order_relaxed);
    if ((void *)ss == hk_os_space_first()) hk_os_advise_huge(ss, HK_SS_SIZE);  /* which os.c leaves */
  }
  ss->small_pages = small;
  ss->kind = !paged ? HK_SS_ANY : small ? HK_SS_SPARSE : HK_SS_DENSE;  /* sparse ones: on small pages */
  ss->used = HK_SS_RESERVED;  /* fresh mappings are zero otherwise */
  if (HAK_HARDENED) hk_os_protect((uint8_t *)ss + HK_SS_SIZE - HK_UNIT_SIZE, HK_UNIT_SIZE, false);
  ss->arena = (uint8_t)(a - hk_arenas);
  hk_class_map_set(ss, 1, HK_MAP_SUPERSLAB);
  return ss;
}

/* A SuperSlab's free units still resident: those of its huge pages that
 * hold its header, a unit in use or one written are, written or not. */
static uint64_t resident_free(const hk_superslab_t *ss) {
  uint64_t warm = ss->warm, touched = ((ss->used | ss->stale) & ~HK_SS_RESERVED) | 1;
  for (unsigned h = 0; h < 2 && hk_opt.ss_thp && !ss->small_pages; h++)
    if (touched & hk_page_mask(h)) warm |= hk_page_mask(h) & ~ss->used;
  return warm;
}

/* Finds a run of units for a slab in the arena's SuperSlabs: the one needing
 * the fewest fresh units (*fresh), partly used SuperSlabs first on a tie;
 * NULL if none has room.  One of the slab's kind first; a large block goes
 * to a sparse SuperSlab rather than a new one (a few faults more, not a
 * huge page), a sparse slab to a dense one only when no SuperSlab more may
 * be on small pages, a dense slab of small blocks never to a sparse one (its
 * TLB misses: random_touch 20000000 100000 1 16 128 ends, 0.86 times as
 * fast).  Called with the arena's lock held. */
static hk_superslab_t *find_units(hk_arena_t *a, unsigned units, unsigned kind, int *unit, unsigned *fresh) {
  hk_superslab_t *ss = NULL;
  unsigned best = 2 * HK_SS_UNITS, cold;  /* a SuperSlab of another kind: HK_SS_UNITS fresh units more */
  bool mix = kind == HK_SS_LARGE ||
             (kind == HK_SS_SPARSE && atomic_load_explicit(&small_paged, memory_order_relaxed) >= HK_SS_SMALL_PAGED);
  unsigned takes = kind == HK_SS_LARGE ? HK_SS_DENSE : kind;
  hk_superslab_t *lists[2] = {a->partial, a->empty};
  for (int l = 0; l < 2 && best; l++) {
    for (hk_superslab_t *s = lists[l]; s && best; s = s->next) {
      bool other = takes != HK_SS_ANY && s->kind != takes && s->kind != HK_SS_ANY;
      if (other && !mix) continue;
      int u = hk_find_run(~s->used, resident_free(s), units, ~0ull, &cold);
      if (u >= 0 && cold + other * HK_SS_UNITS < best) ss = s, *unit = u, best = cold + other * HK_SS_UNITS;
    }
  }
  *fresh = best % HK_SS_UNITS;
  return ss;
}

/* Takes a run of units for a slab of `kind`, in the arena's SuperSlabs or, if
 * `may_map`, in a new one; with `warm`, only a run of free units still
 * resident.  Moves the SuperSlab to the right list; *zero: every unit of the
 * run reads as zero (never written, or given back with MADV_DONTNEED).
 * Called with the arena's lock held. */
static hk_superslab_t *take_units(hk_arena_t *a, unsigned units, unsigned kind, int *unit, bool may_map, bool warm,
                                  bool *zero) {
  unsigned cold;
  hk_superslab_t *ss = find_units(a, units, kind, unit, &cold);
  if (ss && warm && cold) return NULL;
  if (!ss) {
    if (!may_map || !(ss = superslab_map(a, kind))) return NULL;
    *unit = hk_find_run(~ss->used, 0, units, ~0ull, &cold);
    hk_list_push(&a->partial, ss);
  } else if (ss->used == HK_SS_RESERVED) {
    hk_list_remove(&a->empty, ss);
    a->nempty--;
    hk_list_push(&a->partial, ss);
  }
  *zero = !(ss->stale & hk_bits((unsigned)*unit, units));
  ss->bare = false;
  atomic_fetch_add_explicit(&used_units, units, memory_order_relaxed);
  hk_units_t m = units_of(ss);
  hk_units_take(&m, (unsigned)*unit, units);
  if (ss->used == ~0ull) hk_list_remove(&a->partial, ss);
  if (ss->small_pages) densify(ss, (unsigned)*unit, units);
  return ss;
}

hk_slab_t *hk_slab_new(unsigned cls, unsigned arena, unsigned kind, unsigned reach, bool *zero) {
  const hk_class_info_t *ci = &hk_classes[cls];
  hk_arena_t *a = &hk_arenas[arena];
  int unit;
  bool warm = reach == HK_NEW_WARM;
  if (process_big()) kind = HK_SS_ANY;  /* kinds apart no more: huge pages for all (densify) */
  hk_lock(&a->lock);
  hk_superslab_t *ss = take_units(a, ci->units, kind, &unit, false, warm, zero);
  hk_unlock(&a->lock);
  /* Before the process grows: free units of the other arenas. */
  for (unsigned i = 1, n = hk_arenas_used(); !ss && i < n; i++) {
    hk_arena_t *other = &hk_arenas[(arena + i) % n];
    hk_lock(&other->lock);
    ss = take_units(other, ci->units, kind, &unit, false, warm, zero);
    hk_unlock(&other->lock);
  }
  if (!ss && reach == HK_NEW_ANY) {
    hk_lock(&a->lock);
    ss = take_units(a, ci->units, kind, &unit, true, false, zero);
    hk_unlock(&a->lock);
  }
  if (!ss) return NULL;

  for (unsigned i = 0; i < ci->units; i++) ss->head_unit[unit + i] = (uint8_t)unit;
  hk_slab_t *slab = &ss->slabs[unit];
  slab->free = NULL;
  slab->start = (uint8_t *)ss + (size_t)unit * HK_UNIT_SIZE + ci->first;
  slab->block_size = ci->size;
  slab->capacity = ci->capacity;
  slab->carved = 0;
  slab->nfree = 0;
  slab->pushed = 0;
  slab->cls = (uint8_t)cls;
  slab->units = ci->units;
  slab->fresh = *zero && (ss->small_pages || !hk_opt.ss_thp);
  slab->next = slab->prev = NULL;
  hk_class_map_set(slab->start, 1, (uint8_t)cls);  /* blocks start in the first unit only */
  return slab;
}

void hk_slab_populate(hk_slab_t *s, uint8_t *from, size_t size) {
  hk_superslab_t *ss = hk_superslab_of(s);
  /* read without the arena's lock (relaxed): a half made huge meanwhile
   * costs a call that finds its pages there */
  unsigned half = (unsigned)(((uintptr_t)from - (uintptr_t)ss) / (HK_SS_SIZE / 2));
  if (hk_opt.ss_thp && (!__atomic_load_n(&ss->small_pages, __ATOMIC_RELAXED) ||
                        (__atomic_load_n(&ss->halves, __ATOMIC_RELAXED) >> half & 1))) {
    s->fresh = false;
    return;
  }
  uintptr_t lo = (uintptr_t)from, hi = lo + size;  /* hk_os_populate takes whole pages */
  if (s->carved) lo = hk_align_up(lo, hk_os_page_size());  /* the page of the blocks carved before is in */
  if (lo < hi) hk_os_populate((void *)lo, hi - lo);
}

/* Gives a slab's units back to its SuperSlab, dirty (or decommitted at once
 * when there is no purge delay).  Called with its arena's lock held. */
static void slab_release_locked(hk_arena_t *a, hk_slab_t *slab) {
  hk_superslab_t *ss = hk_superslab_of(slab);
  unsigned unit = (unsigned)(slab - ss->slabs);
  hk_class_map_set(slab->start, 1, 0);
  slab->cls = 0;
  bool was_full = ss->used == ~0ull;
  atomic_fetch_sub_explicit(&used_units, slab->units, memory_order_relaxed);
  hk_units_t m = units_of(ss);
  hk_units_release(&m, unit, slab->units);
  if (was_full) hk_list_push(&a->partial, ss);
  if (ss->used == HK_SS_RESERVED) {
    hk_list_remove(&a->partial, ss);
    hk_list_push(&a->empty, ss);
    /* one beyond the warm pool goes at the next tick (the only mark of work
     * to do where units are decommitted at once) */
    if (++a->nempty > hk_opt.warm_pool_size) hk_purge_note();
  }
}

static hk_arena_t *arena_of(const hk_slab_t *slab) { return &hk_arenas[hk_superslab_of(slab)->arena]; }

void hk_slab_release(hk_slab_t *slab) {
  hk_arena_t *a = arena_of(slab);
  hk_lock(&a->lock);
  slab_release_locked(a, slab);
  hk_unlock(&a->lock);
}

/* Releases the one-block slabs of a chain of large blocks of class cls,
 * taking each arena's lock once for a run of blocks from that arena. */
void hk_slab_release_chain(unsigned cls, void *chain) {
  hk_arena_t *locked = NULL;
  while (chain != HK_END) {
    void *b = chain;
    chain = hk_next(b);
    hk_slab_t *s = hk_slab_of(b);
    if (hk_unlikely(s->cls != cls || b != s->start)) hk_fatal("free(): invalid pointer", b);
    hk_arena_t *a = arena_of(s);
    if (a != locked) {
      if (locked) hk_unlock(&locked->lock);
      hk_lock(&a->lock);
      locked = a;
    }
    slab_release_locked(a, s);
  }
  if (locked) hk_unlock(&locked->lock);
}

size_t hk_superslab_used_bytes(void) {
  return atomic_load_explicit(&used_units, memory_order_relaxed) * HK_UNIT_SIZE;
}

size_t hk_superslab_block_of(const void *p, bool *live) {
  hk_superslab_t *ss = hk_superslab_of(p);
  if (hk_class_map_lookup(ss) != HK_MAP_SUPERSLAB) return 0;
  unsigned unit = (unsigned)((uintptr_t)p >> HK_UNIT_SHIFT) & (HK_SS_UNITS - 1);
  const hk_slab_t *s = &ss->slabs[ss->head_unit[unit]];
  size_t off = (size_t)((const uint8_t *)p - s->start);
  if (!unit || !s->block_size || off >= (size_t)s->units * HK_UNIT_SIZE) return 0;
  *live = s->cls != 0;  /* a slab given back keeps its descriptor until the units are reused */
  return *live || off % s->block_size == 0 ? s->block_size : 0;
}

/* Then unmaps the empty SuperSlabs beyond the warm pool whose pages are
 * gone (a trim: all of them, and the arena's spares, whose address space
 * may be what a malloc under an address-space limit lacks). */
size_t hk_superslab_purge(hk_arena_t *a, int mode, bool *pending) {
  size_t bytes = 0, pool = mode == HK_PURGE_ALL ? 0 : hk_opt.warm_pool_size;
  for (int l = 0; l < 2; l++) {
    for (hk_superslab_t *ss = l ? a->empty : a->partial; ss; ss = ss->next) {
      hk_units_t m = units_of(ss);
      size_t n = hk_units_age(&m, mode, pending);
      bytes += n;
      if (n) hk_arena_breathe(a);
    }
  }
  for (hk_superslab_t *ss = a->empty, *next; ss && a->nempty > pool; ss = next) {
    next = ss->next;
    if (ss->dirty_old) continue;
    hk_list_remove(&a->empty, ss);
    a->nempty--;
    if (ss->small_pages) atomic_fetch_sub_explicit(&small_paged, 1, memory_order_relaxed);
    hk_arena_unmap(a, ss, HK_SS_SIZE);
    next = a->empty;  /* the list may have changed meanwhile */
    bytes += hk_os_page_size();  /* the header's page */
  }
  for (hk_superslab_t *ss = a->empty; ss && hk_opt.ss_thp; ss = ss->next) {
    if (ss->bare || ss->warm) continue;
    /* kept empty, its counted pages gone: the rest of its huge pages too,
     * the header's unit but for the header */
    size_t header = hk_align_up(sizeof *ss, hk_os_page_size());  /* madvise takes whole pages */
    hk_units_t m = units_of(ss);
    hk_units_decommit(&m, 0, ~HK_SS_RESERVED);
    hk_os_decommit((uint8_t *)ss + header, HK_UNIT_SIZE - header);
    ss->bare = true;
  }
  if (mode == HK_PURGE_ALL && a->nspare) {  /* never handed out: only address space */
    hk_region_unmap(a->spare, a->nspare * HK_SS_SIZE);
    a->spare = NULL;
    a->nspare = 0;
  }
  *pending |= a->nempty > pool;
  return bytes;
}

size_t hk_superslab_give_back(hk_arena_t *a, bool old, size_t want, size_t bytes) {
  hk_superslab_t *lists[2] = {a->partial, a->empty};
  for (int l = 0; l < 2; l++) {
    for (hk_superslab_t *ss = lists[l]; ss && bytes < want; ss = ss->next) {
      hk_units_t m = units_of(ss);
      bytes = hk_units_give_back(&m, old, want, bytes);
    }
  }
  return bytes;
}
