/* SPDX-License-Identifier: MIT */
/* The API layer: the inline fast paths of malloc and free, and the entry
 * points behind the exported names (alloc.c, override.c, override_cxx.c,
 * mallinfo.c).  It is the top of the layers (base/base.h lists them).
 *
 * Who calls whom, from the API down to the OS, folder by folder:
 *
 *   malloc(n) = hk_malloc_fast            n <= 8 KiB and the class's list starts with a block
 *                                         marked free: pop (thread/thread.h)
 *     hk_malloc_slow -> route             (api/alloc.c) the one size router: the list's block
 *                                         (hk_tcache_pop, n > 8 KiB), else route_miss:
 *       hk_process_init                   the first call of the process (service/init.c)
 *       hk_huge_alloc                     n > 1 MiB: units of a region of the thread's arena,
 *                                         best fit, else another arena's resident ones, else
 *                                         a mapping of its own (region/huge.c)
 *         hk_region_map (region/arena.c)  the one way to the OS: hk_os_space_take or
 *                                         hk_os_map_aligned (os/os.c), hk_class_map_reserve
 *                                         (map/class_map.c)
 *       hk_tcache_refill                  the list is empty (else hk_misuse_freed: its first
 *                                         block was handed out before, or written to)
 *                                         (thread/tcache.c)
 *         hk_thread_init                  first call of the thread: capacities, prewarm
 *         hk_central_take                 a batch parked on this CPU, or on another (only
 *                                         a spare one for a producer), or blocks from
 *                                         slabs (slab/central.c)
 *           hk_slab_new -> take_units     a run of units in the arena (region/superslab.c);
 *                                         while there are spares, in the SuperSlabs mapped only,
 *                                         else they go back first
 *             superslab_map -> hk_region_map  a slot of the space reserved at start-up,
 *                                         else a few SuperSlabs mapped at once for the arena
 *         hk_central_take_large         large classes: a spare block of the class (32-256 KiB), or
 *                                         a block not touched where its memory reads as zero
 *                                         (its page faults are the program's; where huge pages
 *                                         start small, hk_os_populate writes it in):
 *           hk_large_take                 (region/region.h) a one-block slab (on resident units
 *                                         while there are spares, else they go back first),
 *             hk_huge_take_class          or above 256 KiB a run of units in a huge region
 *                                         (a short one where a whole region does not fit)
 *       (nothing to be had: hk_purge_all, what malloc_trim does, and one more try)
 *       hk_purge_poll                     a tick due? (service/purge.c) -> hk_central_purge,
 *                                         hk_region_purge -> hk_units_age -> hk_os_decommit;
 *                                         lean mode over its cap: hk_huge_nonresident ->
 *                                         hk_os_unit_pages (mincore), then the same purges
 *
 *   free(p) = hk_free_fast                p on a block boundary of a small or large class: mark
 *                                         it free, push
 *     hk_free_overflow                    (api/alloc.c)
 *       hk_tcache_overflow                the list outgrew its capacity (large: every free,
 *                                         kept while the thread's large blocks fit its budget)
 *       list_overflow, large_over_budget  (tcache.c) a small class's list; a large one past it
 *         hk_central_put                  park the older half (all of it when frees outpace
 *                                         mallocs) on this CPU, or return blocks to slabs
 *           hk_slab_release               an empty slab: its units dirty in the SuperSlab
 *           hk_large_release              large blocks: kept as spares up to a bound, else
 *                                         their units back at once (above 256 KiB:
 *                                         hk_huge_release_class, to their huge region)
 *       hk_purge_poll
 *     hk_free_slow                        anything else but NULL: huge, or an error
 *       hk_huge_free                      units dirty in their region
 *       hk_misuse                         an invalid or interior pointer, a freed huge block
 *
 * Fast-path size on x86-64 (gcc 12 -O2), in instructions, hit case:
 * malloc 14, free 20, ret aside; `objdump -d build/libhakmem.so` at <__libc_malloc> and
 * <__libc_free> shows them, and `make bench-callgrind` counts them per
 * random_mixed iteration.
 *
 * A thread's cache is one TLS struct: per size class a linked list of free
 * blocks and a "room" counter (capacity minus length).  A pointer's class
 * comes from the class map, one byte per 64 KiB unit (0: not the first unit
 * of a slab): one bound check and one load.  Misuse caught on the way, for a
 * few instructions (docs/DESIGN.md, Misuse detection): a pointer not on a
 * block boundary of a slab (hk_on_boundary), and a block freed twice: free
 * marks each block with a per-process key in its second word, which malloc
 * checks and clears as it hands it out, so the second copy of a block on a
 * list twice is found unmarked before it is handed out again.  free reads
 * nothing of the block: a load of a block freed long ago is a cache miss
 * that holds up what follows (a check at free cost a third of the speed at
 * 100 000 live blocks). */
#ifndef HK_API_H
#define HK_API_H

#include "service/service.h"

HK_HIDDEN void *hk_malloc_slow(size_t size);
/* cls: the class of the block just pushed, as free found it: the class map
 * read again may say otherwise, where another thread freed the block too and
 * its units went back meanwhile (a double free, caught once this list's
 * class is the one that holds it). */
HK_HIDDEN void hk_free_overflow(uintptr_t cls);
HK_HIDDEN void hk_free_slow(void *p);      /* p: not NULL, and not taken by hk_free_fast */

/* malloc's fast path for sizes below `below` (at most HK_TABLE_MAX -
 * HK_CANARY + 1); `slow` takes the rest (C++'s new[] has a slow path and a
 * bound of its own: api/override_cxx.c). */
static inline __attribute__((always_inline)) void *hk_malloc_below(size_t size, size_t below, void *(*slow)(size_t)) {
  if (hk_likely(size < below)) {
    /* class 0 until the process is set up: its list stays empty */
    void *p = hk_tcache_pop(hk_class_table[size + HK_CANARY]);
    if (hk_likely(p != NULL)) return p;
  }
  return slow(size);
}
#define HK_MALLOC_BELOW (HK_TABLE_MAX - HK_CANARY + 1)
static inline __attribute__((always_inline)) void *hk_malloc_fast(size_t size) {
  return hk_malloc_below(size, HK_MALLOC_BELOW, hk_malloc_slow);
}

/* free's fast path for p in the units below `units` (at most the class
 * map's); `slow` takes what it does not, with `arg` (C++'s derived deletes
 * have a slow path and a bound of their own: api/override_cxx.c). */
static inline __attribute__((always_inline)) void hk_free_with(void *p, size_t units, void (*slow)(void *, size_t),
                                                              size_t arg) {
  if (hk_likely(hk_map_below(p, units))) {
    uintptr_t cls = hk_map_get(p);
    /* rejects entries that are not a class too (0 for NULL and foreign memory, huge) */
    if (hk_likely(hk_on_boundary(p, cls))) {
      /* the hardened build also catches a double free here, at a read of the
       * block: marked free (on a list), home (back in its slab) or spare */
      if (hk_likely(!HAK_HARDENED || (!hk_is_free(p) && !hk_is_home(p) && !hk_is_spare(p) &&
                                      *hk_canary_at(p, cls) == hk_canary(p)))) {
        hk_tcache_t *tc = &hk_tc;
        hk_mark_free(p);
        hk_set_next(p, tc->head[cls]);
        tc->head[cls] = p;
        if (hk_unlikely(hk_room_spent(cls))) hk_free_overflow(cls);
        return;
      }
    }
  }
  /* free(NULL) here, not past the slow path's frame: the C library's thread
   * start calls it once per slot of the new thread's TLS modules' table */
  if (p) slow(p, arg);
}
static inline __attribute__((always_inline)) void hk_free_slow_of(void *p, size_t unused) { hk_free_slow(p); }
static inline __attribute__((always_inline)) void hk_free_fast(void *p) {
  hk_free_with(p, hk_fast.map_units, hk_free_slow_of, 0);
}

/* ---- allocation entry points shared by the C and C++ API (alloc.c) --------- */
HK_HIDDEN void *hk_aligned(size_t alignment, size_t size);
HK_HIDDEN void *hk_calloc(size_t count, size_t size);
HK_HIDDEN void *hk_realloc(void *p, size_t size);
HK_HIDDEN size_t hk_usable_size(const void *p);
HK_HIDDEN __attribute__((noreturn, cold)) void hk_misuse(const char *call, const void *p, uintptr_t cls);

#endif
