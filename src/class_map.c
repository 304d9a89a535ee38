/* SPDX-License-Identifier: MIT */
/* The class map: one byte per 64 KiB unit of the address space (the class of
 * the blocks of a slab's first unit, HK_MAP_HUGE, a header mark, or 0), read
 * by every free.  It is flat: one array indexed by the address shifted right
 * by 16, reserved once (MAP_NORESERVE: a page of it is touched only where
 * hakmem has memory, one page per 256 MiB), so a lookup is one load after one
 * bound check.  It covers the addresses below a ceiling:
 * - the whole user address space (2 GiB of address space for the 47 bits of
 *   x86-64, 4 GiB for 48-bit arm64), where the kernel and sanitizers put
 *   their mappings;
 * - under an address-space limit (RLIMIT_AS) or strict overcommit
 *   (vm.overcommit_memory=2), where reserving gigabytes is not free, a
 *   window at the bottom of the address space: 8 times the limit, or 1 TiB;
 *   hakmem then places its own mappings below the ceiling (os.c).
 * A program that lowers RLIMIT_AS after start-up must leave room for the map.
 * Before set-up it covers one unit, NULL's, with the static zero byte, so
 * that even a free(NULL) before anything else finds it.
 * The map is read-only but for the pages written (mprotect as they are
 * first written: one per 256 MiB of address space hakmem uses), so that
 * mlockall, which locks and fills every page a process may write, fills a
 * few pages of it, not 2 GiB. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/resource.h>
#include "internal.h"

/* Before set-up: no class (all its magic words 0), one unit. */
static struct {
  uint64_t magic_first[256];
  uint32_t magic[256];
  uint8_t unit0;
} before_setup;
hk_fast_t hk_fast = {.map = &before_setup.unit0, .map_units = 1};

/* The reservation's start and the bytes of it the map takes (the page of
 * magic words and the map), and a bit per 4 KiB of those: made writable.
 * Changes of protection are made under a lock. */
static uint8_t *reserved;
static size_t reserved_map_bytes;
#define HK_MAP_WRITABLE_WORDS ((((size_t)1 << 32) / 4096 + 1) / 64 + 1)
static _Atomic uint64_t map_writable[HK_MAP_WRITABLE_WORDS];
static pthread_mutex_t protect_lock = PTHREAD_MUTEX_INITIALIZER;

static bool page_writable(size_t i) {
  return atomic_load_explicit(&map_writable[i / 64], memory_order_acquire) >> i % 64 & 1;
}

/* Makes the map's pages from `first` to `last` (page size `page`) writable;
 * false if the kernel refuses (out of memory). */
static __attribute__((noinline)) bool pages_make_writable(uintptr_t first, uintptr_t last, size_t page) {
  for (uintptr_t at = first; at <= last; at += page) {
    size_t i = (at - (uintptr_t)reserved) / 4096;
    if (page_writable(i)) continue;
    hk_lock(&protect_lock);
    /* out of kernel memory areas (each page made writable splits the
     * mapping): all of the map writable then, one area again */
    if (!page_writable(i) && !hk_os_protect_as((void *)at, page, PROT_READ | PROT_WRITE)) {
      if (!hk_os_protect_as(reserved, reserved_map_bytes, PROT_READ | PROT_WRITE)) {
        hk_unlock(&protect_lock);
        return false;
      }
      for (size_t w = 0; w < HK_MAP_WRITABLE_WORDS; w++) atomic_store_explicit(&map_writable[w], ~0ull, memory_order_release);
    }
    for (size_t k = i; k < i + page / 4096; k++) atomic_fetch_or_explicit(&map_writable[k / 64], 1ull << k % 64, memory_order_release);
    hk_unlock(&protect_lock);
  }
  return true;
}

/* Makes the pages of map entries [u, u + units) writable; false if the
 * kernel refuses.  Most calls set one entry (a huge block's malloc and
 * free), on a page made writable long ago: that case looks at one bit of
 * its 4 KiB, without the page size or the loop's saved registers. */
static inline __attribute__((always_inline)) bool map_make_writable(uintptr_t u, size_t units) {
  uintptr_t first = (uintptr_t)&hk_fast.map[u], last = first + units - 1;
  if (units == 1 && page_writable((first - (uintptr_t)reserved) / 4096)) return true;
  size_t page = hk_os_page_size();
  return pages_make_writable(first & ~(page - 1), last, page);
}

/* Sets the map's pages that were never written to `prot` (PROT_NONE or
 * PROT_READ), a run at a time; the caller holds protect_lock. */
static void protect_unwritten(int prot) {
  size_t page = hk_os_page_size(), pages = reserved_map_bytes / page;
  for (size_t p = 0; p < pages;) {
    size_t end = p;
    while (end < pages && !page_writable(end * (page / 4096))) end++;
    if (end > p) hk_os_protect_as(reserved + p * page, (end - p) * page, prot);
    p = end + 1;
  }
}

/* fork: the innermost lock (taken under an arena's or the huge blocks'). */
void hk_class_map_fork_lock(void) {
  hk_lock(&protect_lock);
  hk_os_space_lock();
}

void hk_class_map_fork_unlock(bool child) {
  hk_os_space_unlock(child);
  if (child) pthread_mutex_init(&protect_lock, NULL);
  else hk_unlock(&protect_lock);
}

/* mlockall: locks and fills every page the process may read, which would
 * fill the 2 GiB of the map that nothing wrote.  So the map's unwritten
 * pages are made inaccessible while it runs, and the map, hakmem's own, is
 * left unlocked after it: the program's memory, blocks and SuperSlabs and
 * regions, is locked as it asked. */
int hk_class_map_mlockall(int flags) {
  if (!reserved) return hk_os_mlockall(flags);
  hk_lock(&protect_lock);
  hk_os_space_lock();
  protect_unwritten(PROT_NONE);
  int result = hk_os_mlockall(flags), error = errno;
  hk_os_munlock(reserved, reserved_map_bytes);
  /* the space's slots not taken yet: locked, each would be filled whole
   * when taken, though memory mapped after the call is not to be locked */
  if (result == 0 && !(flags & MCL_FUTURE)) hk_os_space_unlock_untaken();
  protect_unwritten(PROT_READ);
  hk_os_space_unlock(false);
  hk_unlock(&protect_lock);
  errno = error;
  return result;
}

/* The ceiling the map should cover, before trying to reserve it; *roomy
 * when address space costs nothing (no limit, no strict overcommit). */
static uintptr_t wanted_ceiling(bool *roomy) {
  int here;
  uintptr_t top = (uintptr_t)1 << 36;
  while (top <= (uintptr_t)&here && top < (uintptr_t)1 << 48) top <<= 1;  /* the stack is near the top */
  struct rlimit as;
  if (hk_keep_errno(getrlimit(RLIMIT_AS, &as)) == 0 && as.rlim_cur != RLIM_INFINITY) {
    uintptr_t window = (uintptr_t)1 << 36;
    while (window < top && window / 8 < as.rlim_cur) window <<= 1;
    return window;
  }
  char mode = 0;  /* read raw: stdio would allocate, and the allocator is not set up */
  int fd = hk_keep_errno(open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC));
  if (fd >= 0) {
    if (hk_keep_errno(read(fd, &mode, 1)) != 1) mode = 0;
    hk_keep_errno(close(fd));
  }
  *roomy = mode != '2';
  return mode == '2' ? hk_min(top, (uintptr_t)1 << 40) : top;
}

/* The map comes with the space for SuperSlabs and regions after it (os.c)
 * when address space is roomy, in the same reservation. */
void hk_class_map_init(void) {
  bool roomy = false;
  uintptr_t ceiling = wanted_ceiling(&roomy);
  size_t space = HK_SPACE_SIZE + HK_REGION_SIZE;  /* room to align it */
  for (; ceiling >= (uintptr_t)1 << 32; ceiling >>= 1) {
    size_t bytes = HK_PAGE_SIZE + (ceiling >> HK_UNIT_SHIFT);
    uint8_t *map = roomy ? hk_os_reserve(bytes + space) : NULL;
    bool with_space = map != NULL;
    if (!map && !(map = hk_os_reserve(bytes))) continue;
    /* readable (unlocked first: after an mlockall(MCL_FUTURE) before this,
     * readable would mean filled); writable: the page of magic words and the
     * map's first page, the entries of the lowest addresses, NULL's among
     * them, which every free(NULL) reads, so that mlockall never hides it */
    size_t first = HK_PAGE_SIZE + hk_os_page_size();
    hk_os_munlock(map, bytes);
    if (!hk_os_protect_as(map, bytes, PROT_READ) || !hk_os_protect_as(map, first, PROT_READ | PROT_WRITE)) {
      hk_os_unmap(map, with_space ? bytes + space : bytes);
      continue;
    }
    for (size_t i = 0; i < hk_align_up(first, hk_os_page_size()) / 4096; i++) atomic_fetch_or(&map_writable[i / 64], 1ull << i % 64);
    reserved_map_bytes = bytes;
    reserved = map;
    /* a byte per 64 KiB unit, written where hakmem has memory: a huge page
     * for each place written (THP "always") would cost 2 MiB apiece */
    hk_os_advise_small(map, bytes);
    /* in the page before the map: hk_class_magic's words, hk_class_magic_first's before them */
    uint32_t *magic = (uint32_t *)(map + HK_PAGE_SIZE) - 256;
    hk_class_magic_fill(magic, (uint64_t *)magic - 256);
    hk_fast.map = map + HK_PAGE_SIZE;
    __atomic_store_n(&hk_fast.map_units, ceiling >> HK_UNIT_SHIFT, __ATOMIC_RELEASE);
    hk_os_set_ceiling(ceiling);
    if (with_space) hk_os_space_init(map + bytes, space);
    return;
  }
}

/* Whether the map can record [start, start + size): below the ceiling, and
 * its entries' pages writable (made so now, where they can fail: the
 * allocation then fails with ENOMEM, and no later hk_class_map_set in the
 * range can). */
bool hk_class_map_reserve(const void *start, size_t size) {
  uintptr_t end = (uintptr_t)start + size;
  return size && end > (uintptr_t)start && (end - 1) >> HK_UNIT_SHIFT < hk_fast.map_units &&
         map_make_writable((uintptr_t)start >> HK_UNIT_SHIFT, ((end - 1) >> HK_UNIT_SHIFT) - ((uintptr_t)start >> HK_UNIT_SHIFT) + 1);
}

void hk_class_map_set(const void *start, size_t units, uint8_t value) {
  uintptr_t u = (uintptr_t)start >> HK_UNIT_SHIFT;
  if (units && !map_make_writable(u, units)) hk_fatal("class map: cannot make it writable (not reserved)", start);
  for (size_t i = 0; i < units; i++) __atomic_store_n(&hk_fast.map[u + i], value, __ATOMIC_RELAXED);
}

uintptr_t hk_class_map_lookup(const void *p) {
  uintptr_t u = (uintptr_t)p >> HK_UNIT_SHIFT;
  return u < hk_fast.map_units ? hk_fast.map[u] : 0;
}
