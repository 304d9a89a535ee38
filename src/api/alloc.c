/* SPDX-License-Identifier: MIT */
/* The allocation API behind the exported names: the one size router (a
 * size class, or a huge block), the one retry out of memory, calloc,
 * realloc, the aligned allocations, malloc_usable_size, free's slow path,
 * and the diagnosis of a pointer a call cannot take. */
#include <stdlib.h>
#include <string.h>
#include "api/api.h"

/* A huge block, counted in the thread's bytes out; *usable: its usable size. */
static void *huge_alloc(size_t size, size_t alignment, bool zero, size_t *usable) {
  size_t bytes;
  void *p = hk_huge_alloc(size, alignment, zero, hk_thread_arena(), &bytes);
  if (p) hk_note_out((ptrdiff_t)bytes), *usable = bytes - HK_GUARD;
  return p;
}

/* The class of `size` bytes aligned to `alignment` (a power of two up to
 * 64 KiB, as every caller checks: slabs start on 64 KiB boundaries, so
 * every block of a class whose size is a multiple of the alignment is
 * aligned); 0 for a huge block. */
static inline __attribute__((always_inline)) unsigned class_of(size_t size, size_t alignment) {
  if (size > HK_SMALL_MAX || alignment > HK_UNIT_SIZE) return 0;
  /* malloc's table where it reaches: the arithmetic's branches on the size
   * mispredicted at every other call of mixed sizes */
  size_t need = hk_max(size + HK_CANARY, alignment);
  unsigned cls = need <= HK_TABLE_MAX ? hk_class_table[need] : hk_size_to_class(need);
  if (alignment <= 16) return cls;  /* every class is a multiple of 16 */
  hk_assert(hk_is_pow2(alignment), "an alignment not a power of two");
  while (cls <= HK_NCLASS && (hk_classes[cls].size & (alignment - 1)) != 0) cls++;
  return cls <= HK_NCLASS ? cls : 0;
}

/* The bytes a refill of class cls just handed out: the block returned and
 * those left on the list, which was empty; a huge block's usable bytes
 * (cls 0), as a class's, so that a sample's objects are its bytes over its
 * usable size. */
static size_t refilled(unsigned cls, size_t huge_usable) {
  if (!cls) return huge_usable;
  return (size_t)(1 + hk_tc.cap[cls] - hk_tc.room[cls]) * hk_classes[cls].size;
}

/* With the heap profile on, p just handed out by a refill whose bytes
 * crossed the thread's countdown (service/prof.c): the block taken for a
 * sample of that many crossings, p or one in its place (`huge_usable`: a
 * huge p's usable size, which asked again would take its arena's lock).
 * The free of a sampled block must reach hk_free_slow, where its record
 * goes.  A huge block's does; a large class's block has its unit to
 * itself, whose class map entry is flagged HK_MAP_SAMPLED until then; a
 * small class's block shares its unit, and a huge block of its usable size
 * is sampled in its place (p goes back to the thread's list, where the
 * refill left it). */
static __attribute__((noinline, cold)) void *sampled(void *p, unsigned cls, size_t alignment, bool zero,
                                                     uint64_t crossings, size_t huge_usable) {
  if (!cls) return hk_prof_sample(p, huge_usable, 0, crossings, false), p;
  size_t usable = hk_classes[cls].size - HK_CANARY;
  if (hk_class_is_large(cls)) {
    if (hk_prof_sample(p, usable, 0, crossings, true)) hk_map_reset(p, (uint8_t)(cls + HK_MAP_SAMPLED));
    return p;
  }
  void *q = alignment <= 16 ? hk_prof_sample(NULL, usable, usable, crossings, false) : NULL;  /* a kept stand-in */
  if (!q) {
    if (!(q = huge_alloc(usable, alignment, zero, &(size_t){0}))) return p;
    if (!hk_prof_sample(q, usable, usable, crossings, false)) {
      hk_note_out(-(ptrdiff_t)hk_huge_free(q));
      return p;
    }
  }
  if (!hk_tcache_unpop(p, cls)) hk_free_fast(p);
  return q;
}

/* A block of class cls (0: a huge block) for `size` bytes aligned to
 * `alignment`, reading as zero if `zero` and huge (calloc clears the
 * others), when the thread's list had none: from further down; out of
 * address space or memory, what malloc_trim gives back goes back (parked
 * blocks sent home may empty slabs even where nothing goes back to the OS),
 * and one more try; then NULL with ENOMEM.  A tick runs after, if one is
 * due: only with the thread's list in place, since starting the purger
 * thread allocates (the new thread's TLS), maybe from this class.  With
 * `prof`, what a refill hands out counts towards the heap profile's next
 * sample. */
static inline __attribute__((always_inline)) void *route_with(unsigned cls, size_t size, size_t alignment, bool zero,
                                                              bool prof) {
  if (!cls && !hk_huge_possible(size, alignment)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t usable = 0;
  void *p = cls ? hk_tcache_refill(cls, size) : huge_alloc(size, alignment, zero, &usable);
  if (hk_unlikely(!p)) {
    int error = errno;
    hk_purge_all();
    p = cls ? hk_tcache_refill(cls, size) : huge_alloc(size, alignment, zero, &usable);
    errno = p ? error : ENOMEM;
  }
  hk_purge_poll(true);
  uint64_t crossings = prof && p ? hk_prof_count(refilled(cls, usable)) : 0;
  return hk_unlikely(crossings) ? sampled(p, cls, alignment, zero, crossings, usable) : p;
}

/* The process's first call, or a refill with the heap profile on.  The
 * class again: before the set-up, this thread's or another's under way,
 * class_of had no class sizes to check an alignment against. */
static __attribute__((noinline, cold)) void *route_unusual(size_t size, size_t alignment, bool zero) {
  if (hk_unlikely(!atomic_load_explicit(&hk_ready, memory_order_acquire))) hk_process_init_slow();
  unsigned cls = class_of(size, alignment);
  return hk_prof_on ? route_with(cls, size, alignment, zero, true) : route_with(cls, size, alignment, zero, false);
}

/* The list had no block: from further down, apart from the router so that
 * a block taken from the list saves no registers (the sizes above the fast
 * path's, most often served so: 10 instructions a call). */
static __attribute__((noinline)) void *route_miss(unsigned cls, size_t size, size_t alignment, bool zero) {
  return route_with(cls, size, alignment, zero, false);
}

/* The one size router.  A block on the thread's list first: sizes above
 * the fast path's, or prewarmed, are counted by the heap profile with the
 * refill that put them there, and every list is empty until the process
 * is set up.  The one flag that sends the first call and the profiled ones
 * aside is the one the set-up alone would need: profiling off, the router
 * is the same instructions as without a profiler (scripts/ab --callgrind). */
static inline __attribute__((always_inline)) void *route(size_t size, size_t alignment, bool zero) {
  unsigned cls = class_of(size, alignment);
  void *p;
  if (cls && (p = hk_tcache_pop(cls))) return p;
  if (hk_unlikely(!atomic_load_explicit(&hk_route_plain, memory_order_acquire)))
    return route_unusual(size, alignment, zero);
  return route_miss(cls, size, alignment, zero);
}

void *hk_malloc_slow(size_t size) { return route(size, 16, false); }

void hk_free_overflow(uintptr_t cls) {
  if (hk_tcache_overflow((unsigned)cls)) hk_purge_poll(false);
}

/* The class of a class map entry, flagged sampled or not; else the entry. */
static uintptr_t class_in(uintptr_t entry) {
  return entry - HK_MAP_SAMPLED - 1 < HK_NCLASS ? entry - HK_MAP_SAMPLED : entry;
}

/* A large class's block sampled by the heap profile: its record goes, and
 * its class map entry is its class's again (false: p is no such block). */
static bool unsample(void *p, uintptr_t entry) {
  uintptr_t cls = class_in(entry);
  if (cls == entry || !hk_on_boundary(p, cls) || hk_prof_forget(p, true) != HK_PROF_FORGOTTEN) return false;
  hk_map_reset(p, (uint8_t)cls);
  return true;
}

void hk_free_slow(void *p) {
  hk_assert(p != NULL, "free(NULL) reached the slow path");
  uintptr_t cls = hk_class_map_lookup(p);
  if (hk_unlikely(hk_prof_on) && unsample(p, cls)) {
    hk_free_fast(p);
    return;
  }
  size_t bytes = 0;
  if (cls == HK_MAP_HUGE) {
    hk_prof_freed_t sampled = hk_prof_on ? hk_prof_forget(p, false) : HK_PROF_UNSAMPLED;
    if (sampled == HK_PROF_KEPT) return;
    bytes = sampled == HK_PROF_FREED_TWICE ? 0 : hk_huge_free(p);
  }
  if (!bytes) hk_misuse("free", p, cls);
  hk_note_out(-(ptrdiff_t)bytes);
  hk_purge_poll(false);
}

void *hk_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (total > HK_SMALL_MAX) return route(total, 16, true);
  if (total + HK_CANARY <= HK_LARGE_MIN) {
    void *p = hk_malloc_fast(total);
    if (p) memset(p, 0, total);
    return p;
  }
  /* A large block new from the OS, or given back to it, reads as zero:
   * clearing it would fault in every page at once. */
  hk_tc.zero_block = NULL;
  void *p = hk_malloc_fast(total);
  if (p && p != hk_tc.zero_block) memset(p, 0, total);
  return p;
}

void *hk_aligned(size_t alignment, size_t size) {
  return alignment <= 16 ? hk_malloc_fast(size) : route(size, alignment, false);
}

size_t hk_usable_size(const void *p) {
  if (!p) return 0;
  unsigned cls = (unsigned)class_in(hk_class_map_lookup(p));
  if (cls - 1u < HK_NCLASS) return hk_classes[cls].size - HK_CANARY;
  if (cls != HK_MAP_HUGE) return 0;
  bool freed = false;
  size_t stand_in = hk_prof_on ? hk_prof_stand_in(p, &freed) : 0;
  return stand_in ? (freed ? 0 : stand_in) : hk_huge_usable_size(p);
}

static void *realloc_move(void *p, size_t old_size, size_t size) {
  void *q = hk_malloc_fast(size);
  if (!q) return NULL;
  memcpy(q, p, hk_min(old_size, size));
  hk_free_fast(p);
  return q;
}

/* realloc_move, errno as it was if it fails: a fallback follows. */
static void *realloc_try(void *p, size_t old_size, size_t size) {
  int error = errno;
  void *q = realloc_move(p, old_size, size);
  if (!q) errno = error;
  return q;
}

/* A block that must move to grow takes a quarter more than it had, at
 * least: a string or an array grown a few bytes at a time is then copied
 * once per quarter of its size, not at every class (eight to a doubling).
 * Refused that (an address-space limit), it takes the size asked. */
static __attribute__((noinline)) void *realloc_grow(void *p, size_t old_size, size_t size) {
  void *q = size < old_size + old_size / 4 ? realloc_try(p, old_size, old_size + old_size / 4) : NULL;
  return q ? q : realloc_move(p, old_size, size);
}

/* A block that shrinks to less than half moves to a smaller class, or stays
 * where it is if there is no memory for one: a shrink never fails, as glibc's. */
static __attribute__((noinline)) void *realloc_shrink(void *p, size_t old_size, size_t size) {
  void *q = realloc_try(p, old_size, size);
  return q ? q : p;
}

static inline void *realloc_small(void *p, size_t old_size, size_t size) {
  if (size > old_size) return realloc_grow(p, old_size, size);
  return size >= old_size / 2 || old_size <= 256 ? p : realloc_shrink(p, old_size, size);
}

/* NULL, a huge block (resized where it is or remapped, and copied only
 * when neither can be done: out of its shared region, or a mapping the
 * program split: mlock, mprotect, madvise on part), a size of 0 (for a
 * class's block, once hk_realloc has checked it), or an invalid pointer;
 * cls is p's class map entry. */
static __attribute__((noinline)) void *realloc_unusual(void *p, size_t size, uintptr_t cls) {
  if (!p) return hk_malloc_fast(size);
  if (cls != HK_MAP_HUGE && cls - 1 >= HK_NCLASS) hk_misuse("realloc", p, cls);
  bool freed = false;
  /* a stand-in: kept as the block it stands for */
  size_t stand_in = cls == HK_MAP_HUGE && hk_prof_on ? hk_prof_stand_in(p, &freed) : 0;
  if (freed) hk_misuse("realloc", p, cls);
  if (size == 0) {
    if (cls == HK_MAP_HUGE && !stand_in && !hk_huge_usable_size(p)) hk_misuse("realloc", p, cls);
    hk_free_fast(p);
    return NULL;
  }
  if (stand_in) return realloc_small(p, stand_in, size);
  size_t old_size;
  ptrdiff_t grown;
  void *q = NULL;
  if (size > HK_SMALL_MAX) {
    hk_prof_lifted_t lifted;
    bool sampled = hk_prof_on && hk_prof_lift(p, &lifted);
    q = hk_huge_resize(p, size, &old_size, &grown);
    if (sampled) hk_prof_land(q ? NULL : p, &lifted);  /* resized: its sample goes, as at a free */
  } else {
    old_size = hk_huge_usable_size(p);
  }
  if (old_size == 0) hk_misuse("realloc", p, cls);
  if (!q) return size < old_size ? realloc_shrink(p, old_size, size) : realloc_move(p, old_size, size);
  hk_note_out(grown);
  hk_purge_poll(false);  /* a shrink's tail given back to its region: a tick due, as after a free */
  /* counted by the heap profile as a malloc of its new size, as a copy
   * would be: a buffer grown in place is profiled at its size, not its first */
  size_t usable = old_size + (size_t)grown;
  uint64_t crossings = hk_prof_on ? hk_prof_count(usable) : 0;
  return hk_unlikely(crossings) ? sampled(q, 0, 0, false, crossings, usable) : q;
}

/* A boundary of a small class's slab that the slab has not carved yet: a
 * block freed before its slab was given back, whose marks went with the
 * slab's pages.  A large class's slab is its one block. */
static bool uncarved(const void *p, uintptr_t cls) {
  if (hk_class_is_large((unsigned)cls)) return false;
  const hk_slab_t *s = hk_slab_of(p);
  /* unlocked: the slab carves on meanwhile, but p's block, if the program
   * holds it, was carved before the program had it */
  return (const uint8_t *)p >= s->start + (size_t)__atomic_load_n(&s->carved, __ATOMIC_RELAXED) * s->block_size;
}

/* A class's block keeps its place while the new size fits its class and
 * does not waste more than half of it: most reallocs of a string or an
 * array that grows, here without a call or a frame (NULL's entry is 0). */
void *hk_realloc(void *p, size_t size) {
  uintptr_t cls = class_in(hk_map_covers(p) ? hk_map_get(p) : 0);
  if (hk_unlikely(cls - 1 >= HK_NCLASS)) return realloc_unusual(p, size, cls);
  if (!hk_on_boundary(p, cls) || hk_is_free(p) || hk_is_home(p) || hk_is_spare(p) || uncarved(p, cls) ||
      (HAK_HARDENED && *hk_canary_at(p, cls) != hk_canary(p)))
    hk_misuse("realloc", p, cls);
  return hk_likely(size) ? realloc_small(p, hk_classes[cls].size - HK_CANARY, size) : realloc_unusual(p, 0, cls);
}

/* A call given a pointer it cannot take: says which kind of misuse in one
 * line and aborts.  cls is p's class map entry.  Slabs and huge regions keep
 * their descriptors after their blocks are freed, so a block given back to
 * its SuperSlab or region is still recognised as freed. */
void hk_misuse(const char *call, const void *p, uintptr_t cls) {
  size_t size = 0;
  bool live = false, kept = false;  /* kept: a stand-in the heap profile kept from its free */
  cls = class_in(cls);
  size_t stand_in = cls == HK_MAP_HUGE && hk_prof_on ? hk_prof_stand_in(p, &kept) : 0;
  if (cls - 1 < HK_NCLASS) {
    /* before a slab's first block: no block at all */
    size = (uint16_t)(uintptr_t)p < hk_classes[cls].first ? 0 : hk_classes[cls].size - HK_CANARY;
    live = !hk_on_boundary(p, cls);
    if (HAK_HARDENED && !live && !uncarved(p, cls) && !hk_is_free(p) && !hk_is_home(p) && !hk_is_spare(p)) {
      hk_message("hakmem: %s of %p: the block was overrun, its canary is overwritten (block size %zu)\n", call, p,
                 size);
      abort();
    }
  } else if (kept) {
    size = stand_in;
  } else if ((size = hk_superslab_block_of(p, &live))) {
    size -= HK_CANARY;
  } else {
    size = hk_huge_block_of(p, &live);
  }
  if (!size) hk_message("hakmem: %s of invalid pointer %p (not a block hakmem handed out)\n", call, p);
  else if (live) hk_message("hakmem: %s of %p, inside a block (block size %zu)\n", call, p, size);
  else if (!strcmp(call, "free")) hk_message("hakmem: double free of %p (block size %zu)\n", p, size);
  else hk_message("hakmem: %s of %p, a block already freed (block size %zu)\n", call, p, size);
  abort();
}

