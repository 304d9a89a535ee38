/* SPDX-License-Identifier: MIT */
/* The class map: a byte per 64 KiB unit of the address space (a slab's first
 * unit: its blocks' class; HK_MAP_HUGE, a header mark, or 0), read by every
 * free: one flat array reserved once, a lookup one load after one bound
 * check.  It covers the whole user address space, or under an address-space
 * limit or strict overcommit a window at its bottom (os.c maps below it);
 * before set-up, NULL's unit only, for a first free(NULL).  Read-only but for
 * pages covering hakmem's mappings (for mlockall), each counting the units it
 * covers, given back when the last goes (docs/DESIGN.md, The class map). */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/resource.h>
#include "map/map.h"

/* Before set-up: no class (all its magic words 0), one unit. */
static struct {
  uint64_t magic_first[256];
  uint32_t magic[256];
  uint8_t unit0;
} before_setup;
hk_fast_t hk_fast = {.map = &before_setup.unit0, .map_units = 1};

/* The reservation's start and the bytes of it the map takes (the page of
 * magic words, the map, and users[], the units each of its pages covers),
 * and a bit per 4 KiB of those: writable.  protect_lock covers changes. */
static uint8_t *reserved;
static size_t reserved_map_bytes;
static uint32_t *users;    /* by page of the reservation: up to 65 536 units on pages of 64 KiB */
static bool all_writable;  /* the kernel refused a split: the whole map is writable */
#define HK_MAP_WRITABLE_WORDS ((((size_t)1 << 32) / 4096 + ((size_t)1 << 32) / 4096 * sizeof *users / 4096 + 2) / 64 + 1)
static _Atomic uint64_t map_writable[HK_MAP_WRITABLE_WORDS];
static pthread_mutex_t protect_lock = PTHREAD_MUTEX_INITIALIZER;

/* Bit i of map_writable: the i-th 4 KiB of the reservation is writable. */
static bool page_writable(size_t i) {
  return atomic_load_explicit(&map_writable[i / 64], memory_order_acquire) >> i % 64 & 1;
}
static void set_writable(size_t first, size_t n, bool on) {
  for (size_t k = first; k < first + n; k++)
    if (on) atomic_fetch_or_explicit(&map_writable[k / 64], 1ull << k % 64, memory_order_release);
    else atomic_fetch_and_explicit(&map_writable[k / 64], ~(1ull << k % 64), memory_order_release);
}

/* Makes page i (system page size) of the reservation writable, protect_lock
 * held; false if the kernel refuses.  Out of kernel memory areas (each page
 * made writable splits the mapping): all of it writable, one area again. */
static bool page_make_writable(size_t i, size_t page) {
  size_t per = page / 4096;
  if (page_writable(i * per)) return true;
  if (!hk_os_protect_as(reserved + i * page, page, PROT_READ | PROT_WRITE)) {
    if (!hk_os_protect_as(reserved, reserved_map_bytes, PROT_READ | PROT_WRITE)) return false;
    all_writable = true;
    set_writable(0, reserved_map_bytes / 4096, true);
  }
  set_writable(i * per, per, true);
  return true;
}

/* The page of the reservation that holds p. */
static size_t page_of(const void *p, size_t page) { return (size_t)((const uint8_t *)p - reserved) / page; }

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

/* mlockall locks and fills every page the process may read: the map's
 * unwritten pages are made inaccessible while it runs, and the map, hakmem's
 * own, is left unlocked after it; the program's memory is locked as asked. */
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
void hk_class_map_init(const uint32_t *magic_words, const uint64_t *first_words) {
  bool roomy = false;
  uintptr_t ceiling = wanted_ceiling(&roomy);
  size_t space = HK_SPACE_SIZE + HK_REGION_SIZE, page = hk_os_page_size();  /* room to align it */
  for (; ceiling >= (uintptr_t)1 << 32; ceiling >>= 1) {
    size_t counted = hk_align_up(HK_PAGE_SIZE + (ceiling >> HK_UNIT_SHIFT), page);
    size_t bytes = counted + hk_align_up(counted / page * sizeof *users, page);
    uint8_t *map = roomy ? hk_os_reserve(bytes + space) : NULL;
    bool with_space = map != NULL;
    if (!map && !(map = hk_os_reserve(bytes))) continue;
    /* readable (unlocked first: after an mlockall(MCL_FUTURE), readable
     * means filled); writable: the magic words' page and the map's first,
     * which holds NULL's entry that every free(NULL) reads */
    size_t first = HK_PAGE_SIZE + page;
    hk_os_munlock(map, bytes);
    if (!hk_os_protect_as(map, bytes, PROT_READ) || !hk_os_protect_as(map, first, PROT_READ | PROT_WRITE)) {
      hk_os_unreserve(map, with_space ? bytes + space : bytes);
      continue;
    }
    set_writable(0, hk_align_up(first, page) / 4096, true);
    reserved_map_bytes = bytes;
    reserved = map;
    users = (uint32_t *)(map + counted);
    /* under THP "always", each place written would cost a 2 MiB page */
    hk_os_advise_small(map, bytes);
    /* in the page before the map: hk_class_magic's words, hk_class_magic_first's before them */
    uint32_t *magic = (uint32_t *)(map + HK_PAGE_SIZE) - 256;
    memcpy(magic, magic_words, 256 * sizeof *magic);
    memcpy((uint64_t *)magic - 256, first_words, 256 * sizeof *first_words);
    hk_fast.map = map + HK_PAGE_SIZE;
    __atomic_store_n(&hk_fast.map_units, ceiling >> HK_UNIT_SHIFT, __ATOMIC_RELEASE);
    hk_os_set_ceiling(ceiling);
    if (with_space) hk_os_space_init(map + bytes, space);
    return;
  }
}

/* The units a mapping [start, start + size) counts for: those starting in it,
 * so two side by side (a block grown in place) count as the one they make. */
static void units_of(const void *start, size_t size, uintptr_t *u, uintptr_t *end) {
  *u = ((uintptr_t)start + HK_UNIT_SIZE - 1) >> HK_UNIT_SHIFT;
  *end = ((uintptr_t)start + size + HK_UNIT_SIZE - 1) >> HK_UNIT_SHIFT;
}

/* Adds `sign` times units [u, end) to their map pages' counts, protect_lock
 * held.  A page whose count leaves 0 is made writable (its count's page too);
 * returns the first unit not counted (short of `end` if refused).  A page
 * back at 0 holds only zeros: given back, read-only again unless the whole
 * map is writable; not the first ones, writable since init. */
static uintptr_t count_users(uintptr_t u, uintptr_t end, int sign) {
  size_t page = hk_os_page_size(), kept = (HK_PAGE_SIZE + page + page - 1) / page;
  for (uintptr_t next; u < end; u = next) {
    size_t i = page_of(&hk_fast.map[u], page);
    next = hk_min(end, (uintptr_t)((i + 1) * page - HK_PAGE_SIZE));  /* the first unit of page i + 1 */
    uint32_t n = (uint32_t)(next - u);
    if (sign > 0) {
      if (!users[i] && !(page_make_writable(page_of(&users[i], page), page) && page_make_writable(i, page))) return u;
      users[i] += n;
      continue;
    }
    hk_assert(users[i] >= n, "class map: a page's count of units below 0");
    users[i] -= n;
    if (users[i] || i < kept) continue;
    hk_os_discard(reserved + i * page, page);
    if (!all_writable && hk_os_protect_as(reserved + i * page, page, PROT_READ)) set_writable(i * (page / 4096), page / 4096, false);
  }
  return u;
}

/* Whether the map can record [start, start + size), a mapping hakmem has
 * made: below the ceiling, and its entries' pages made writable now, where
 * failing fails the allocation (ENOMEM), not a later hk_class_map_set.
 * Counted till hk_class_map_release of the range (or of its parts). */
bool hk_class_map_reserve(const void *start, size_t size) {
  uintptr_t u, end, last = (uintptr_t)start + size;
  units_of(start, size, &u, &end);
  if (!size || last < (uintptr_t)start || (last - 1) >> HK_UNIT_SHIFT >= hk_fast.map_units) return false;
  hk_lock(&protect_lock);
  uintptr_t reached = count_users(u, end, 1);
  if (reached != end) count_users(u, reached, -1);  /* what was counted */
  hk_unlock(&protect_lock);
  return reached == end;
}

/* [start, start + size), reserved, is unmapped, its entries 0. */
void hk_class_map_release(const void *start, size_t size) {
  uintptr_t u, end;
  units_of(start, size, &u, &end);
  hk_lock(&protect_lock);
  count_users(u, end, -1);
  hk_unlock(&protect_lock);
}

/* Only in a mapping reserved (hk_class_map_reserve): its pages are writable.
 * Relaxed stores, read by free's plain load: a block of the slab reaches
 * another thread only through a lock or the program's own hand-off, which
 * orders these stores before that thread's free. */
void hk_class_map_set(const void *start, size_t units, uint8_t value) {
  uintptr_t u = (uintptr_t)start >> HK_UNIT_SHIFT;
  if (hk_unlikely(units && (!page_writable(((uintptr_t)&hk_fast.map[u] - (uintptr_t)reserved) / 4096) ||
                            !page_writable(((uintptr_t)&hk_fast.map[u + units - 1] - (uintptr_t)reserved) / 4096))))
    hk_fatal("class map: an entry set outside the mappings reserved", start);
  for (size_t i = 0; i < units; i++) __atomic_store_n(&hk_fast.map[u + i], value, __ATOMIC_RELAXED);
}

uintptr_t hk_class_map_lookup(const void *p) {
  uintptr_t u = (uintptr_t)p >> HK_UNIT_SHIFT;
  return u < hk_fast.map_units ? hk_fast.map[u] : 0;
}
