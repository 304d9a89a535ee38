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

/* Once the space reserved at start-up is full, or when there is none,
 * each arena maps SuperSlabs several at a time, as many as are mapped
 * already (at most HK_SS_CHUNK): a growing process makes a few system calls,
 * not one per 4 MiB, and those not yet handed out cost address space only. */
static uint8_t *_Atomic first_spare;  /* the first SuperSlab mapped, without the space: on small pages */

/* Maps the arena's next few SuperSlabs; called with its lock held. */
static bool spares_map(hk_arena_t *a) {
  unsigned mapped = atomic_load_explicit(&superslabs_mapped, memory_order_relaxed);
  for (unsigned n = hk_max(hk_min(mapped, HK_SS_CHUNK), 1u); n; n /= 2) {
    uint8_t *p = hk_region_map(n * HK_SS_SIZE, HK_SS_SIZE, 0);
    if (!p) continue;
    /* A huge page maps 2 MiB per fault but is resident whole: the first
     * SuperSlab starts on small pages, so that a small program stays small
     * (small_ss_densify).  Untouched units of a huge page are resident
     * uncounted and purges leave them: only the speed profile takes them. */
    size_t small = mapped > 0 ? 0 : HK_SS_SIZE;
    if (!hk_opt.ss_thp) hk_os_advise_small(p, n * HK_SS_SIZE);  /* where the kernel's default is huge */
    else if (n * HK_SS_SIZE > small) hk_os_advise_huge(p + small, n * HK_SS_SIZE - small);
    if (small) first_spare = p;
    a->spare = p;
    a->nspare = n;
    return true;
  }
  return false;
}

/* The process's first SuperSlab, on small pages (the space's first slot or
 * the first spare), and which of its halves are now huge pages (bit h).
 * Relaxed: only compared, or given to madvise and mincore, never read
 * through; a stale value costs one advice too many or too few. */
static hk_superslab_t *_Atomic small_ss;
static atomic_uint small_halves_huge, slabs_made;
static atomic_bool small_second_half_used;

/* Turns each half of the first SuperSlab whose pages are mostly resident
 * into one huge page (mincore on every HK_SS_DENSE_EVERY-th new slab, at
 * most HK_SS_DENSE_LOOKS times: more cost mixed_large 5 %).  A program whose
 * blocks fill 2 MiB there gets the TLB reach of later SuperSlabs (10 000
 * live 16-1040 B blocks: 12 % faster); one with a few blocks in each of many
 * classes stays on small pages (400 such blocks: 2 MiB resident, not 4). */
static void small_ss_densify(hk_superslab_t *ss, unsigned unit, unsigned units) {
  /* The second half's first slab, if a large block (most often written
   * whole) or after a first half mostly written: huge pages there before a
   * page is touched, nothing to copy (mixed_large: 8 % faster). */
  if (ss == atomic_load_explicit(&small_ss, memory_order_relaxed) && unit >= HK_SS_UNITS / 2 &&
      !atomic_exchange_explicit(&small_second_half_used, true, memory_order_relaxed) &&
      (units > 1 || hk_os_resident_pages(ss, HK_SS_SIZE / 2) >= HK_SS_DENSE_PAGES))
    hk_os_advise_huge((uint8_t *)ss + HK_SS_SIZE / 2, HK_SS_SIZE / 2);
  if (atomic_load_explicit(&slabs_made, memory_order_relaxed) >= HK_SS_DENSE_EVERY * HK_SS_DENSE_LOOKS ||
      atomic_fetch_add_explicit(&slabs_made, 1, memory_order_relaxed) % HK_SS_DENSE_EVERY)
    return;
  ss = atomic_load_explicit(&small_ss, memory_order_relaxed);
  for (unsigned h = 0; h < 2; h++) {
    uint8_t *half = (uint8_t *)ss + h * (HK_SS_SIZE / 2);
    if (atomic_load_explicit(&small_halves_huge, memory_order_relaxed) >> h & 1 ||
        hk_os_resident_pages(half, HK_SS_SIZE / 2) < HK_SS_DENSE_PAGES ||
        atomic_fetch_or_explicit(&small_halves_huge, 1u << h, memory_order_relaxed) >> h & 1)
      continue;
    hk_os_collapse_huge(half, HK_SS_SIZE / 2);
  }
}

/* A SuperSlab from the space reserved at start-up (os.c), or else one of
 * the arena's spares; called with its lock held. */
static hk_superslab_t *superslab_map(hk_arena_t *a) {
  hk_superslab_t *ss = hk_region_map(HK_SS_SIZE, 0, 0);
  if (!ss && !a->nspare && !spares_map(a)) return NULL;
  if (!ss) {
    ss = (hk_superslab_t *)a->spare;
    a->spare += HK_SS_SIZE;
    a->nspare--;
  }
  atomic_fetch_add_explicit(&superslabs_mapped, 1, memory_order_relaxed);
  if (hk_opt.ss_thp && ((void *)ss == hk_os_space_first() ||
                        (uint8_t *)ss == atomic_load_explicit(&first_spare, memory_order_relaxed))) {
    /* its pages are gone: small again, and asked to stay so where the
     * kernel's default is huge pages everywhere (THP "always") */
    hk_os_advise_small(ss, HK_SS_SIZE);
    atomic_store_explicit(&small_halves_huge, 0, memory_order_relaxed);
    atomic_store_explicit(&slabs_made, 0, memory_order_relaxed);
    atomic_store_explicit(&small_second_half_used, false, memory_order_relaxed);
    atomic_store_explicit(&small_ss, ss, memory_order_relaxed);
  }
  ss->used = HK_SS_RESERVED;  /* fresh mappings are zero otherwise */
  if (HAK_HARDENED) hk_os_protect((uint8_t *)ss + HK_SS_SIZE - HK_UNIT_SIZE, HK_UNIT_SIZE, false);
  ss->arena = (uint8_t)(a - hk_arenas);
  hk_class_map_set(ss, 1, HK_MAP_SUPERSLAB);
  return ss;
}

/* Finds a run of units for a slab in the arena's SuperSlabs: the one needing
 * the fewest fresh units (*fresh), partly used SuperSlabs first on a tie;
 * NULL if none has room.  Called with the arena's lock held. */
static hk_superslab_t *find_units(hk_arena_t *a, unsigned units, int *unit, unsigned *fresh) {
  hk_superslab_t *ss = NULL;
  unsigned best = units + 1, cold;
  hk_superslab_t *lists[2] = {a->partial, a->empty};
  for (int l = 0; l < 2 && best; l++) {
    for (hk_superslab_t *s = lists[l]; s && best; s = s->next) {
      int u = hk_find_run(~s->used, s->warm, units, ~0ull, &cold);
      if (u >= 0 && cold < best) ss = s, *unit = u, best = cold;
    }
  }
  *fresh = best;
  return ss;
}

/* Takes a run of units for a slab, in the arena's SuperSlabs or, if
 * `may_map`, in a new one; with `warm`, only a run of free units still
 * resident.  Moves the SuperSlab to the right list; *zero: every unit of the
 * run reads as zero (never written, or given back with MADV_DONTNEED).
 * Called with the arena's lock held. */
static hk_superslab_t *take_units(hk_arena_t *a, unsigned units, int *unit, bool may_map, bool warm, bool *zero) {
  unsigned cold;
  hk_superslab_t *ss = find_units(a, units, unit, &cold);
  if (ss && warm && cold) return NULL;
  if (!ss) {
    if (!may_map || !(ss = superslab_map(a))) return NULL;
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
  return ss;
}

hk_slab_t *hk_slab_new(unsigned cls, unsigned arena, bool warm, bool *zero) {
  const hk_class_info_t *ci = &hk_classes[cls];
  hk_arena_t *a = &hk_arenas[arena];
  int unit;
  hk_lock(&a->lock);
  hk_superslab_t *ss = take_units(a, ci->units, &unit, false, warm, zero);
  hk_unlock(&a->lock);
  /* Before the process grows: free units of the other arenas. */
  for (unsigned i = 1, n = hk_arenas_used(); !ss && i < n; i++) {
    hk_arena_t *other = &hk_arenas[(arena + i) % n];
    hk_lock(&other->lock);
    ss = take_units(other, ci->units, &unit, false, warm, zero);
    hk_unlock(&other->lock);
  }
  if (!ss && !warm) {
    hk_lock(&a->lock);
    ss = take_units(a, ci->units, &unit, true, false, zero);
    hk_unlock(&a->lock);
  }
  if (!ss) return NULL;
  if (hk_unlikely(atomic_load_explicit(&small_halves_huge, memory_order_relaxed) != 3 &&
                  atomic_load_explicit(&small_ss, memory_order_relaxed)))
    small_ss_densify(ss, (unsigned)unit, ci->units);

  for (unsigned i = 0; i < ci->units; i++) ss->head_unit[unit + i] = (uint8_t)unit;
  hk_slab_t *slab = &ss->slabs[unit];
  slab->free = NULL;
  slab->start = (uint8_t *)ss + (size_t)unit * HK_UNIT_SIZE + ci->first;
  slab->block_size = ci->size;
  slab->capacity = ci->capacity;
  slab->carved = 0;
  slab->nfree = 0;
  slab->cls = (uint8_t)cls;
  slab->units = ci->units;
  slab->next = slab->prev = NULL;
  hk_class_map_set(slab->start, 1, (uint8_t)cls);  /* blocks start in the first unit only */
  return slab;
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
 * gone (a trim: all of them, whose address space may be what a malloc
 * under an address-space limit lacks). */
size_t hk_superslab_purge(hk_arena_t *a, int mode, bool *pending) {
  size_t bytes = 0, pool = mode == HK_PURGE_ALL ? 0 : hk_opt.warm_pool_size;
  hk_superslab_t *lists[2] = {a->partial, a->empty};
  for (int l = 0; l < 2; l++) {
    for (hk_superslab_t *ss = lists[l]; ss; ss = ss->next) {
      hk_units_t m = units_of(ss);
      bytes += hk_units_age(&m, mode, pending);
    }
  }
  for (hk_superslab_t *ss = a->empty, *next; ss && a->nempty > pool; ss = next) {
    next = ss->next;
    if (ss->dirty_old) continue;
    hk_list_remove(&a->empty, ss);
    a->nempty--;
    if (ss == atomic_load_explicit(&small_ss, memory_order_relaxed)) {
      atomic_store_explicit(&small_ss, NULL, memory_order_relaxed);
      if ((uint8_t *)ss == atomic_load_explicit(&first_spare, memory_order_relaxed))
        atomic_store_explicit(&first_spare, NULL, memory_order_relaxed);  /* unmapped: the address may be reused */
    }
    hk_region_unmap(ss, HK_SS_SIZE);
    bytes += HK_PAGE_SIZE;  /* the header's page */
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
