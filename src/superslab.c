/* SuperSlabs: 4 MiB regions aligned to their size, cut into 64 KiB units; a
 * slab is a run of units holding blocks of one class.  Empty SuperSlabs go to
 * the warm pool (up to HAKMEM_WARM_POOL_SIZE) before they go back to the OS.
 * Units freed and not reused within HAKMEM_PURGE_DELAY_MS are decommitted
 * (madvise), so memory a program no longer uses leaves its RSS while units
 * that are reused at once cost no system call. */
#include <string.h>
#include "internal.h"

static pthread_mutex_t ss_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_superslab_t *ss_partial;          /* SuperSlabs with free units */
static hk_superslab_t *warm_pool;           /* empty SuperSlabs kept mapped */
static unsigned warm_count;
static uint64_t oldest_dirty = UINT64_MAX;  /* earliest dirty_since not yet purged */

static uint64_t units_mask(unsigned unit, unsigned units) {
  return (units == 64 ? ~0ull : (1ull << units) - 1) << unit;
}

static void list_push(hk_superslab_t **list, hk_superslab_t *ss) {
  ss->prev = NULL;
  ss->next = *list;
  if (*list) (*list)->prev = ss;
  *list = ss;
}

static void list_remove(hk_superslab_t **list, hk_superslab_t *ss) {
  if (ss->prev) ss->prev->next = ss->next;
  else *list = ss->next;
  if (ss->next) ss->next->prev = ss->prev;
  ss->next = ss->prev = NULL;
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

static void purge_due(uint64_t now, bool all);

/* A SuperSlab for new slabs: from the warm pool, else newly mapped (after
 * giving back what has waited its purge delay: new memory is a moment the
 * process grows).  Called with ss_lock held. */
static hk_superslab_t *superslab_get(void) {
  hk_superslab_t *ss = warm_pool;
  if (ss) {
    warm_pool = ss->next;
    warm_count--;
    return ss;
  }
  purge_due(hk_os_now_ms(), false);
  ss = hk_os_map_aligned(HK_SS_SIZE, HK_SS_SIZE);
  if (!ss) return NULL;
  if (!hk_class_map_reserve(ss, HK_SS_SIZE)) {
    hk_os_unmap(ss, HK_SS_SIZE);
    return NULL;
  }
  ss->used = 1;  /* unit 0: this header; fresh mappings are zero otherwise */
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

/* Decommits the free units of every SuperSlab whose units have waited the
 * purge delay (or of all, if `all`).  Called with ss_lock held. */
static void purge_due(uint64_t now, bool all) {
  if (!all && (oldest_dirty == UINT64_MAX || now - oldest_dirty < hk_opt.purge_delay_ms)) return;
  uint64_t oldest = UINT64_MAX;
  hk_superslab_t *lists[2] = {ss_partial, warm_pool};
  for (int l = 0; l < 2; l++) {
    for (hk_superslab_t *ss = lists[l]; ss; ss = ss->next) {
      if (!ss->dirty) continue;
      if (all || now - ss->dirty_since >= hk_opt.purge_delay_ms) purge_superslab(ss);
      else if (ss->dirty_since < oldest) oldest = ss->dirty_since;
    }
  }
  oldest_dirty = oldest;
}

hk_slab_t *hk_slab_new(unsigned cls) {
  const hk_class_info_t *ci = &hk_classes[cls];
  pthread_mutex_lock(&ss_lock);
  hk_superslab_t *ss;
  int unit = -1;
  for (ss = ss_partial; ss; ss = ss->next) {
    unit = find_run(ss->used, ci->units);
    if (unit >= 0) break;
  }
  if (!ss) {
    ss = superslab_get();
    if (!ss) {
      pthread_mutex_unlock(&ss_lock);
      return NULL;
    }
    list_push(&ss_partial, ss);
    unit = find_run(ss->used, ci->units);
  }
  uint64_t bits = units_mask((unsigned)unit, ci->units);
  ss->used |= bits;
  ss->dirty &= ~bits;  /* reused before it was purged: no system call */
  if (ss->used == ~0ull) list_remove(&ss_partial, ss);
  pthread_mutex_unlock(&ss_lock);

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

void hk_slab_release(hk_slab_t *slab) {
  hk_superslab_t *ss = hk_superslab_of(slab);
  unsigned unit = (unsigned)(slab - ss->slabs);
  unsigned units = slab->units;
  hk_class_map_set(slab->start, units, 0);
  slab->cls = 0;
  uint64_t now = hk_os_now_ms();
  pthread_mutex_lock(&ss_lock);
  bool was_full = ss->used == ~0ull;
  uint64_t bits = units_mask(unit, units);
  ss->used &= ~bits;
  if (!ss->dirty) {
    ss->dirty_since = now;
    if (now < oldest_dirty) oldest_dirty = now;
  }
  ss->dirty |= bits;
  if (was_full) list_push(&ss_partial, ss);
  if (ss->used == 1) {
    list_remove(&ss_partial, ss);
    if (warm_count < hk_opt.warm_pool_size) {
      ss->next = warm_pool;
      warm_pool = ss;
      warm_count++;
    } else {
      hk_os_unmap(ss, HK_SS_SIZE);
    }
  }
  purge_due(now, false);
  pthread_mutex_unlock(&ss_lock);
}

void hk_superslab_purge(bool all) {
  uint64_t now = hk_os_now_ms();
  pthread_mutex_lock(&ss_lock);
  purge_due(now, all);
  pthread_mutex_unlock(&ss_lock);
}

void hk_superslab_fork_lock(void) { pthread_mutex_lock(&ss_lock); }

void hk_superslab_fork_unlock(bool child) {
  if (child) pthread_mutex_init(&ss_lock, NULL);
  else pthread_mutex_unlock(&ss_lock);
}
