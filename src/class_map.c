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
 * that even a free(NULL) before anything else finds it. */
#include <fcntl.h>
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

/* Whether [start, start + size) lies below the ceiling; memory hakmem
 * cannot record is refused (the allocation fails with ENOMEM). */
bool hk_class_map_reserve(const void *start, size_t size) {
  uintptr_t end = (uintptr_t)start + size;
  return size && end > (uintptr_t)start && (end - 1) >> HK_UNIT_SHIFT < hk_fast.map_units;
}

void hk_class_map_set(const void *start, size_t units, uint8_t value) {
  uintptr_t u = (uintptr_t)start >> HK_UNIT_SHIFT;
  for (size_t i = 0; i < units; i++) __atomic_store_n(&hk_fast.map[u + i], value, __ATOMIC_RELAXED);
}

uintptr_t hk_class_map_lookup(const void *p) {
  uintptr_t u = (uintptr_t)p >> HK_UNIT_SHIFT;
  return u < hk_fast.map_units ? hk_fast.map[u] : 0;
}
