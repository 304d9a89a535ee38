/* SPDX-License-Identifier: MIT */
/* SuperSlabs: 4 MiB regions aligned to their size, cut into 64 KiB units; a
 * slab is a run of units holding blocks of one class.  Empty SuperSlabs go to
 * the warm pool (up to HAKMEM_WARM_POOL_SIZE) before they go back to the OS.
 * Units freed and not reused within HAKMEM_PURGE_DELAY_MS are decommitted
 * (madvise), so memory a program no longer uses leaves its RSS while units
 * that are reused at once cost no system call.
 *
 * SuperSlabs are held by HK_ARENAS arenas, each behind its own lock; threads
 * are spread over the arenas, and a slab goes back to the arena of its
 * SuperSlab, so threads creating and giving back slabs (a large block is one)
 * seldom meet on a lock. */
#include "internal.h"

typedef struct hk_arena {
  pthread_mutex_t lock;
  hk_superslab_t *partial;   /* SuperSlabs with free units */
  hk_superslab_t *warm;      /* empty SuperSlabs kept mapped */
  unsigned warm_count;
  uint64_t oldest_dirty;     /* earliest dirty_since not yet purged; written under
                                the lock, read without it as a hint (atomically) */
} __attribute__((aligned(HK_CACHELINE))) hk_arena_t;

static hk_arena_t arenas[HK_ARENAS] = {
    [0 ... HK_ARENAS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER, .oldest_dirty = UINT64_MAX}};
static atomic_uint next_arena;

unsigned hk_arena_assign(void) {
  return atomic_fetch_add_explicit(&next_arena, 1, memory_order_relaxed) % HK_ARENAS;
}

static uint64_t units_mask(unsigned unit, unsigned units) {
  return (units == 64 ? ~0ull : (1ull << units) - 1) << unit;
}

/* A run of `units` free units in the bitmap, or -1: single units (small
 * slabs) are taken from the bottom, longer runs (large blocks) from the top,
 * so that long-lived small slabs do not cut up the space large blocks need. */
static int find_run(uint64_t used, unsigned units) {
  uint64_t free = ~used;
  if (units == 1) return free ? __builtin_ctzll(free) : -1;
  /* bit u of `starts` is set when units u .. u+units-1 are all free */
  uint64_t starts = free;
  for (unsigned i = 1; i < units && starts; i++) starts &= free >> i;
  return starts ? 63 - __builtin_clzll(starts) : -1;
}

static void purge_due(hk_arena_t *a, uint64_t now, bool all);

/* A SuperSlab for new slabs: from the warm pool, else newly mapped (after
 * giving back what has waited its purge delay: new memory is a moment the
 * process grows).  Called with the arena's lock held. */
static hk_superslab_t *superslab_get(hk_arena_t *a) {
  hk_superslab_t *ss = a->warm;
  if (ss) {
    a->warm = ss->next;
    a->warm_count--;
    return ss;
  }
  purge_due(a, hk_os_now_ms(), false);
  ss = hk_os_map_aligned(HK_SS_SIZE, HK_SS_SIZE);
  if (!ss) return NULL;
  if (!hk_class_map_reserve(ss, HK_SS_SIZE)) {
    hk_os_unmap(ss, HK_SS_SIZE);
    return NULL;
  }
  ss->used = 1;  /* unit 0: this header; fresh mappings are zero otherwise */
  ss->arena = (uint8_t)(a - arenas);
  return ss;
}

static void purge_superslab(hk_superslab_t *ss) {
  uint64_t dirty = ss->dirty;
  while (dirty) {
    unsigned unit = (unsigned)__builtin_ctzll(dirty);
    uint64_t rest = ~(dirty >> unit);
    unsigned units = rest ? (unsigned)__builtin_ctzll(rest) : 64 - unit;
    hk_os_decommit((uint8_t *)ss + (size_t)unit * HK_UNIT_SIZE, (size_t)units * HK_UNIT_SIZE);
    dirty &= ~units_mask(unit, units);
  }
  ss->dirty = 0;
}

static bool purge_is_due(hk_arena_t *a, uint64_t now) {
  uint64_t oldest = __atomic_load_n(&a->oldest_dirty, __ATOMIC_RELAXED);
  return oldest != UINT64_MAX && now - oldest >= hk_opt.purge_delay_ms;
}

/* Decommits the free units of the arena's SuperSlabs whose units have waited
 * the purge delay (or of all, if `all`).  Called with the arena's lock held. */
static void purge_due(hk_arena_t *a, uint64_t now, bool all) {
  if (!all && !purge_is_due(a, now)) return;
  uint64_t oldest = UINT64_MAX;
  hk_superslab_t *lists[2] = {a->partial, a->warm};
  for (int l = 0; l < 2; l++) {
    for (hk_superslab_t *ss = lists[l]; ss; ss = ss->next) {
      if (!ss->dirty) continue;
      if (all || now - ss->dirty_since >= hk_opt.purge_delay_ms) purge_superslab(ss);
      else if (ss->dirty_since < oldest) oldest = ss->dirty_since;
    }
  }
  __atomic_store_n(&a->oldest_dirty, oldest, __ATOMIC_RELAXED);
}

hk_slab_t *hk_slab_new(unsigned cls) {
  const hk_class_info_t *ci = &hk_classes[cls];
  hk_arena_t *a = &arenas[hk_tc.arena];
  pthread_mutex_lock(&a->lock);
  hk_superslab_t *ss;
  int unit = -1;
  for (ss = a->partial; ss; ss = ss->next) {
    unit = find_run(ss->used, ci->units);
    if (unit >= 0) break;
  }
  if (!ss) {
    ss = superslab_get(a);
    if (!ss) {
      pthread_mutex_unlock(&a->lock);
      return NULL;
    }
    hk_list_push(&a->partial, ss);
    unit = find_run(ss->used, ci->units);
  }
  uint64_t bits = units_mask((unsigned)unit, ci->units);
  ss->used |= bits;
  ss->dirty &= ~bits;  /* reused before it was purged: no system call */
  if (ss->used == ~0ull) hk_list_remove(&a->partial, ss);
  pthread_mutex_unlock(&a->lock);

  for (unsigned i = 0; i < ci->units; i++) ss->head_unit[unit + i] = (uint8_t)unit;
  hk_slab_t *slab = &ss->slabs[unit];
  slab->free = NULL;
  slab->start = (uint8_t *)ss + (size_t)unit * HK_UNIT_SIZE;
  slab->block_size = ci->size;
  slab->capacity = ci->capacity;
  slab->carved = 0;
  slab->nfree = 0;
  slab->cls = (uint8_t)cls;
  slab->units = ci->units;
  slab->next = slab->prev = NULL;
  hk_class_map_set(slab->start, ci->units, (uint8_t)cls);
  return slab;
}

/* Gives a slab's units back to its SuperSlab; called with its arena's lock held. */
static void slab_release_locked(hk_arena_t *a, hk_slab_t *slab, uint64_t now) {
  hk_superslab_t *ss = hk_superslab_of(slab);
  unsigned unit = (unsigned)(slab - ss->slabs);
  unsigned units = slab->units;
  hk_class_map_set(slab->start, units, 0);
  slab->cls = 0;
  bool was_full = ss->used == ~0ull;
  uint64_t bits = units_mask(unit, units);
  ss->used &= ~bits;
  if (!ss->dirty) {
    ss->dirty_since = now;
    if (now < a->oldest_dirty) __atomic_store_n(&a->oldest_dirty, now, __ATOMIC_RELAXED);
  }
  ss->dirty |= bits;
  if (was_full) hk_list_push(&a->partial, ss);
  if (ss->used == 1) {
    hk_list_remove(&a->partial, ss);
    if (a->warm_count < hk_opt.warm_pool_size) {
      ss->next = a->warm;
      a->warm = ss;
      a->warm_count++;
    } else {
      hk_os_unmap(ss, HK_SS_SIZE);
    }
  }
}

static hk_arena_t *arena_of(const hk_slab_t *slab) { return &arenas[hk_superslab_of(slab)->arena]; }

void hk_slab_release(hk_slab_t *slab) {
  uint64_t now = hk_os_now_ms();
  hk_arena_t *a = arena_of(slab);
  pthread_mutex_lock(&a->lock);
  slab_release_locked(a, slab, now);
  purge_due(a, now, false);
  pthread_mutex_unlock(&a->lock);
}

/* A large block: the only block of a new slab. */
void *hk_large_take(unsigned cls) {
  hk_slab_t *s = hk_slab_new(cls);
  if (!s) return NULL;
  s->carved = 1;
  *(void **)s->start = NULL;
  return s->start;
}

/* Releases the one-block slabs of a chain of large blocks of class cls,
 * taking each arena's lock once for a run of blocks from that arena. */
void hk_large_release(unsigned cls, void *chain) {
  uint64_t now = hk_os_now_ms();
  hk_arena_t *locked = NULL;
  while (chain) {
    void *b = chain;
    chain = *(void **)b;
    hk_slab_t *s = hk_slab_of(b);
    if (hk_unlikely(s->cls != cls || b != s->start)) hk_fatal("free(): invalid pointer", b);
    hk_arena_t *a = arena_of(s);
    if (a != locked) {
      if (locked) {
        purge_due(locked, now, false);
        pthread_mutex_unlock(&locked->lock);
      }
      pthread_mutex_lock(&a->lock);
      locked = a;
    }
    slab_release_locked(a, s, now);
  }
  if (locked) {
    purge_due(locked, now, false);
    pthread_mutex_unlock(&locked->lock);
  }
}

void hk_superslab_purge(bool all) {
  uint64_t now = hk_os_now_ms();
  for (unsigned i = 0; i < HK_ARENAS; i++) {
    if (!all && !purge_is_due(&arenas[i], now)) continue;  /* no lock for nothing */
    pthread_mutex_lock(&arenas[i].lock);
    purge_due(&arenas[i], now, all);
    pthread_mutex_unlock(&arenas[i].lock);
  }
}

void hk_superslab_fork_lock(void) {
  for (unsigned i = 0; i < HK_ARENAS; i++) pthread_mutex_lock(&arenas[i].lock);
}

void hk_superslab_fork_unlock(bool child) {
  for (unsigned i = 0; i < HK_ARENAS; i++) {
    if (child) pthread_mutex_init(&arenas[i].lock, NULL);
    else pthread_mutex_unlock(&arenas[i].lock);
  }
}
