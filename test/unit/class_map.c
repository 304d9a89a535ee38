/* SPDX-License-Identifier: MIT */
/* test-builds: standard */
/* The class map's accounting of the ranges it covers (src/map/class_map.c):
 * a range reserved can have its entries set; ranges side by side count as
 * the one they make; the last range of a page of the map released, the page
 * is given back (it reads zero, and is not resident), and the next reserve
 * there makes it writable again; a range past the map's ceiling is refused.
 * Page size and address-space width are the machine's: the same test runs
 * with 4 KiB pages and 47-bit addresses on x86-64 and with whatever the
 * arm64 build runs on. */
#include "unit.h"

#include <sys/mman.h>

/* A range of address space hakmem has no mapping in: the map's entries
 * there are its own to count (nothing is mapped, nothing else counts them),
 * at the start of a page of the map, in the upper half of the map. */
static uint8_t *quiet_range(void) {
  size_t page = hk_os_page_size();
  uintptr_t u = hk_fast.map_units / 2;
  uintptr_t entry = ((uintptr_t)&hk_fast.map[u] + page - 1) & ~(page - 1);  /* a page of the map */
  return (uint8_t *)((entry - (uintptr_t)hk_fast.map) << HK_UNIT_SHIFT);
}

static bool map_page_resident(const uint8_t *start) {
  size_t page = hk_os_page_size();
  unsigned char v = 0;
  uintptr_t at = (uintptr_t)&hk_fast.map[(uintptr_t)start >> HK_UNIT_SHIFT] & ~(page - 1);
  CHECK(mincore((void *)at, page, &v) == 0);
  return v & 1;
}

UNIT_TEST(reserve_set_release) {
  free(malloc(1));  /* the map set up */
  uint8_t *a = quiet_range();
  CHECK(hk_class_map_reserve(a, HK_SS_SIZE));
  hk_class_map_set(a, 1, HK_MAP_SUPERSLAB);
  hk_class_map_set(a + HK_UNIT_SIZE, 3, 7);
  CHECK_EQ(hk_class_map_lookup(a), HK_MAP_SUPERSLAB);
  CHECK_EQ(hk_class_map_lookup(a + 3 * HK_UNIT_SIZE + 100), 7);
  CHECK(map_page_resident(a));
  hk_class_map_set(a, 4, 0);
  hk_class_map_release(a, HK_SS_SIZE);
  CHECK(!map_page_resident(a));
  CHECK_EQ(hk_class_map_lookup(a), 0);
}

/* A block grown in place: its mapping and the range after it, reserved
 * apart, released as one; sizes not multiples of a unit. */
UNIT_TEST(ranges_side_by_side) {
  free(malloc(1));
  uint8_t *a = quiet_range();
  size_t first = 3 * HK_UNIT_SIZE + 4096, more = 5 * HK_UNIT_SIZE + 8192;
  CHECK(hk_class_map_reserve(a, first));
  CHECK(hk_class_map_reserve(a + first, more));
  hk_class_map_set(a + 4 * HK_UNIT_SIZE, 1, 9);  /* a unit that starts in the second range */
  CHECK(map_page_resident(a));
  hk_class_map_set(a + 4 * HK_UNIT_SIZE, 1, 0);
  hk_class_map_release(a, first + more);
  CHECK(!map_page_resident(a));
  /* and again: the page comes back writable */
  CHECK(hk_class_map_reserve(a, HK_UNIT_SIZE));
  hk_class_map_set(a, 1, 5);
  CHECK_EQ(hk_class_map_lookup(a), 5);
  hk_class_map_set(a, 1, 0);
  hk_class_map_release(a, HK_UNIT_SIZE);
}

/* Two ranges on one page of the map: the page stays while either is. */
UNIT_TEST(page_shared) {
  free(malloc(1));
  uint8_t *a = quiet_range(), *b = a + 16 * HK_SS_SIZE;
  CHECK(hk_class_map_reserve(a, HK_SS_SIZE));
  CHECK(hk_class_map_reserve(b, HK_SS_SIZE));
  hk_class_map_set(b, 1, 3);
  hk_class_map_release(a, HK_SS_SIZE);
  CHECK(map_page_resident(b));
  CHECK_EQ(hk_class_map_lookup(b), 3);
  hk_class_map_set(b, 1, 0);
  hk_class_map_release(b, HK_SS_SIZE);
  CHECK(!map_page_resident(b));
}

/* Memory above what the map covers (the address space is wider than 47
 * bits on some machines): refused, never written past the map's end. */
UNIT_TEST(past_the_ceiling) {
  free(malloc(1));
  uint8_t *top = (uint8_t *)(hk_fast.map_units << HK_UNIT_SHIFT);
  CHECK(!hk_class_map_reserve(top, HK_UNIT_SIZE));
  CHECK(!hk_class_map_reserve(top - HK_UNIT_SIZE, 2 * HK_UNIT_SIZE));
  CHECK(!hk_class_map_reserve((uint8_t *)UINTPTR_MAX - HK_UNIT_SIZE, HK_UNIT_SIZE));
  CHECK_EQ(hk_class_map_lookup(top), 0);
  CHECK_EQ(hk_class_map_lookup((void *)UINTPTR_MAX), 0);
}
