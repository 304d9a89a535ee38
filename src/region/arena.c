/* SPDX-License-Identifier: MIT */
/* Arenas: the regions of both kinds, each arena behind one lock; the one
 * way regions are mapped and unmapped; the purge of every arena's free
 * units by epoch (units.c), with what each kind does with regions left
 * empty; and the large classes' way in. */
#define _GNU_SOURCE
#include "region/region.h"

hk_arena_t hk_arenas[HK_ARENAS] = {[0 ... HK_ARENAS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static atomic_uint next_arena;  /* relaxed: it only spreads threads */
/* Read without a lock (mallopt may change them while threads run): an
 * arena is counted as used (release) before a thread is given it (acquire). */
static unsigned narenas = 1;      /* arenas new threads are given: one per CPU the process may run on, up to
                                     HK_ARENAS (mallopt sets it) */
static unsigned arenas_used = 1;  /* arenas that may hold memory: the most narenas has been */

unsigned hk_arenas_used(void) { return __atomic_load_n(&arenas_used, __ATOMIC_ACQUIRE); }

/* More arenas than CPUs would not lessen contention, only spread free
 * memory over more places where other threads cannot reuse it. */
void hk_arenas_init(unsigned cpus) {
  unsigned n = hk_max(hk_min(cpus, HK_ARENAS), 1u);
  for (unsigned used = hk_arenas_used(); used < n &&
       !__atomic_compare_exchange_n(&arenas_used, &used, n, true, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE);) {
  }
  __atomic_store_n(&narenas, n, __ATOMIC_RELEASE);
}

unsigned hk_arena_assign(void) {
  return atomic_fetch_add_explicit(&next_arena, 1, memory_order_relaxed) % __atomic_load_n(&narenas, __ATOMIC_ACQUIRE);
}

void *hk_region_map(size_t size, size_t alignment, size_t offset) {
  void *p = alignment ? hk_os_map_aligned(size, alignment, offset) : hk_os_space_take(size);
  if (p && !hk_class_map_reserve(p, size)) {
    hk_os_unmap(p, size);  /* a slot goes back to the space */
    p = NULL;
  }
  return p;
}

void hk_region_unmap(void *p, size_t size) {
  hk_class_map_set(p, 1, 0);
  hk_class_map_release(p, size);
  hk_os_unmap(p, size);
}

/* A tick (HK_PURGE_DUE) or a trim (HK_PURGE_ALL) takes each arena's lock
 * once; lean mode's HK_PURGE_OLD and HK_PURGE_DIRTY give back about `want`
 * bytes, the units free since before the last tick in every arena first,
 * then (DIRTY) the newer ones, then cached jumbo regions. */
size_t hk_region_purge(int mode, size_t want, size_t *of_huge) {
  size_t slabs = 0, huge = 0;
  bool pending = false, aged = mode == HK_PURGE_DUE || mode == HK_PURGE_ALL;
  /* OFF: free memory stays, counted as resident, but for malloc_trim and the
   * out-of-memory retry, which give it all back (DONTNEED) */
  if (hk_opt.decommit == HK_DECOMMIT_OFF && mode != HK_PURGE_ALL) return 0;
  for (int old = 1; old >= (mode != HK_PURGE_DIRTY); old--) {
    for (unsigned i = 0; i < HK_ARENAS && (aged || slabs + huge < want); i++) {
      hk_arena_t *a = &hk_arenas[i];
      hk_lock(&a->lock);
      if (aged) {
        slabs += hk_superslab_purge(a, mode, &pending);
        huge += hk_huge_purge(a, mode, &pending);
      } else {
        slabs = hk_superslab_give_back(a, old, want - huge, slabs);
        if (slabs + huge < want) huge = hk_huge_give_back(a, old, want - slabs, huge);
      }
      hk_unlock(&a->lock);
    }
  }
  if (mode == HK_PURGE_DIRTY && slabs + huge < want) {
    hk_lock(&hk_arenas[0].lock);
    huge = hk_jumbo_give_back(want - slabs, huge);
    hk_unlock(&hk_arenas[0].lock);
  }
  if (pending) hk_purge_note();
  if (of_huge) *of_huge = huge;
  return slabs + huge;
}

size_t hk_region_resident(void) {
  size_t bytes = 0;
  for (unsigned i = 0; i < HK_ARENAS; i++) bytes += __atomic_load_n(&hk_arenas[i].resident, __ATOMIC_RELAXED);
  return bytes;
}

size_t hk_region_used_bytes(void) {
  size_t bytes = hk_superslab_used_bytes();
  for (unsigned i = 0; i < HK_ARENAS; i++)
    bytes += __atomic_load_n(&hk_arenas[i].live_bytes, __ATOMIC_RELAXED) +
             __atomic_load_n(&hk_arenas[i].class_bytes, __ATOMIC_RELAXED);
  return bytes;
}

void hk_region_fork_lock(void) {
  for (unsigned i = 0; i < HK_ARENAS; i++) hk_lock(&hk_arenas[i].lock);
}

void hk_region_fork_unlock(bool child) {
  for (unsigned i = 0; i < HK_ARENAS; i++) {
    if (child) pthread_mutex_init(&hk_arenas[i].lock, NULL);
    else hk_unlock(&hk_arenas[i].lock);
  }
}
