/* SPDX-License-Identifier: MIT */
/* hk_os_map_aligned and hk_os_unmap (src/os/os.c): a mapping of a size the
 * page does not divide is counted as the kernel maps it, whole pages, when
 * made and when given back, so that the mapped bytes of the statistics come
 * back to where they were; and it is aligned as asked. */
#include "unit.h"

static unsigned long long mapped(void) {
  hak_os_stats_t s;
  hak_os_stats(&s);
  return s.mapped_bytes;
}

UNIT_TEST(odd_sizes_counted_whole) {
  free(malloc(1));  /* start-up done */
  const size_t sizes[] = {1, 4080, 4097, 8160, 3 * 4096 + 24};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    for (size_t alignment = 4096; alignment <= ((size_t)1 << 21); alignment <<= 9) {
      unsigned long long before = mapped();
      uint8_t *p = hk_os_map_aligned(sizes[i], alignment, 0);
      CHECK(p != NULL);
      CHECK_MSG(((uintptr_t)p & (alignment - 1)) == 0, "%p not aligned to %zu", (void *)p, alignment);
      memset(p, 1, sizes[i]);
      CHECK_EQ(mapped() - before, (sizes[i] + 4095) / 4096 * 4096);
      hk_os_unmap(p, sizes[i]);
      CHECK_MSG(mapped() == before, "size %zu: %llu bytes mapped before, %llu after", sizes[i], before, mapped());
    }
  }
}

#if defined(__x86_64__)
#include <sys/resource.h>

/* Below the ceiling, where the over-sized mapping that aligns is refused
 * (an address-space limit here): the first place tried ends at the top of
 * the address space, which the kernel refuses with ENOMEM as it refuses a
 * mapping over the limit; the places below are tried all the same. */
UNIT_TEST(aligned_below_the_top) {
  free(malloc(1));
  int here;
  uintptr_t top = (uintptr_t)1 << 36;
  while (top <= (uintptr_t)&here) top <<= 1;  /* the stack is near the top: 2^47 */
  hk_os_set_ceiling(top);
  const size_t size = 64 << 20, alignment = 64 << 20;
  uint8_t *first = hk_os_map_aligned(size, alignment, 0);  /* the next is tried just below it first */
  CHECK(first != NULL);
  hk_os_unmap(first, size);
  void *blocker = mmap(first - size, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK_MSG(blocker == first - size || (blocker == MAP_FAILED && errno == EEXIST), "%s", strerror(errno));
  struct rlimit old, tight;
  CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
  tight = old;
  tight.rlim_cur = (rlim_t)proc_status_kib("VmSize") * 1024 + size + alignment / 2;  /* room for it, not for more */
  CHECK_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  uint8_t *p = hk_os_map_aligned(size, alignment, 0);
  CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
  CHECK_MSG(p != NULL, "no place found below %#lx", (unsigned long)top);
  CHECK(((uintptr_t)p & (alignment - 1)) == 0 && (uintptr_t)p + size <= top);
  memset(p, 1, size);
  hk_os_unmap(p, size);
  if (blocker != MAP_FAILED) munmap(blocker, 4096);
}
#endif
