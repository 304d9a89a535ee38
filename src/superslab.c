/* SuperSlabs: 4 MiB regions aligned to their size, cut into 64 KiB units; a
 * slab is a run of units holding blocks of one class.  Empty SuperSlabs go to
 * the warm pool (up to HAKMEM_WARM_POOL_SIZE) before they go back to the OS.
 * Also the class map, which every free consults. */
#include <string.h>
#include "internal.h"

static uint8_t class_map_unset[1];          /* read by free(NULL) before set-up */
uint8_t *hk_class_map = class_map_unset;

static pthread_mutex_t ss_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_superslab_t *ss_partial;          /* SuperSlabs with free units */
static hk_superslab_t *warm_pool;           /* empty SuperSlabs kept mapped */
static unsigned warm_count;

void hk_class_map_init(void) {
  uint8_t *map = hk_os_reserve(HK_MAP_ENTRIES);
  if (!map) hk_fatal("cannot reserve the class map (address space or overcommit limit)", NULL);
  hk_class_map = map;
}

void hk_class_map_set(const void *start, size_t units, uint8_t value) {
  uint8_t *entry = &hk_class_map[(uintptr_t)start >> HK_UNIT_SHIFT];
  for (size_t i = 0; i < units; i++) __atomic_store_n(&entry[i], value, __ATOMIC_RELAXED);
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
  uint64_t mask = units == 64 ? ~0ull : ((1ull << units) - 1);
  if (units == 1) return used == ~0ull ? -1 : __builtin_ctzll(~used);
  for (int u = HK_SS_UNITS - (int)units; u >= 1; u--) {
    if (((used >> u) & mask) == 0) return u;
  }
  return -1;
}

static hk_superslab_t *superslab_get(void) {
  hk_superslab_t *ss = warm_pool;
  if (ss) {
    warm_pool = ss->next;
    warm_count--;
    return ss;
  }
  ss = hk_os_map_aligned(HK_SS_SIZE, HK_SS_SIZE);
  if (!ss) return NULL;
  ss->used = 1;  /* unit 0: this header; fresh mappings are zero otherwise */
  return ss;
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
  ss->used |= ((ci->units == 64 ? ~0ull : (1ull << ci->units) - 1)) << unit;
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
  pthread_mutex_lock(&ss_lock);
  bool was_full = ss->used == ~0ull;
  ss->used &= ~(((units == 64 ? ~0ull : (1ull << units) - 1)) << unit);
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
  pthread_mutex_unlock(&ss_lock);
}

void hk_superslab_fork_lock(void) { pthread_mutex_lock(&ss_lock); }

void hk_superslab_fork_unlock(bool child) {
  if (child) pthread_mutex_init(&ss_lock, NULL);
  else pthread_mutex_unlock(&ss_lock);
}
