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
