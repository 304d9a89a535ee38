/* SPDX-License-Identifier: MIT */
/* hakmem only.  Blocks too big for a shared region, or aligned beyond half
 * of one, get a mapping of their own:
 * - realloc that cannot grow one where it is (another mapping right after
 *   it) moves its pages, content and all, and the block keeps the alignment
 *   posix_memalign gave it (1 GiB here, three times: a block aligned only
 *   to the 128 MiB every region has would pass by chance one time in 8);
 * - calloc clears what a freed one held, and what a region's freed units
 *   held, when it hands that memory out again. */
#include <sys/mman.h>
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* A page mapped right after [p, p + size) rounded up to a page (the end of
 * the block's mapping), where nothing is. */
static void *block_the_way(void *p, size_t size) {
  uintptr_t end = ((uintptr_t)p + size + 4095) & ~(uintptr_t)4095;
  void *q = mmap((void *)end, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK_MSG(q == (void *)end, "mmap after the block: %s", q == MAP_FAILED ? strerror(errno) : "elsewhere");
  return q;
}

static void moved_block_keeps_alignment(void) {
  const size_t align = (size_t)1 << 30, size = 200 * MIB, bigger = 300 * MIB;
  for (int round = 0; round < 3; round++) {
    void *p;
    CHECK_EQ(posix_memalign(&p, align, size), 0);
    CHECK(((uintptr_t)p & (align - 1)) == 0);
    fill_pattern(p, size, (uint64_t)round);
    void *wall = block_the_way(p, size);
    void *q = realloc(p, bigger);
    CHECK(q != NULL);
    printf("  round %d: %p -> %p\n", round, p, q);
    CHECK_MSG(q != p, "grown in place over another mapping");
    CHECK_MSG(((uintptr_t)q & (align - 1)) == 0, "moved to %p, not aligned to 1 GiB", q);
    CHECK_EQ(check_pattern(q, size, (uint64_t)round), SIZE_MAX);
    memset((char *)q + size, 1, bigger - size);
    free(q);
    munmap(wall, 4096);
  }
}

/* calloc(size) of the memory a freed block of `first` bytes held: zero up
 * to size. */
static void calloc_clears(size_t first, size_t size) {
  unsigned char *p = malloc(first);
  CHECK(p != NULL);
  memset(p, 0xa5, first);
  free(p);
  unsigned char *q = calloc(1, size);
  CHECK_MSG(q == p, "calloc(1, %zu) took other memory than the block of %zu freed", size, first);
  CHECK_MSG(find_not_byte(q, 0, size) == SIZE_MAX, "calloc(1, %zu) after a block of %zu: byte %zu not 0", size,
            first, find_not_byte(q, 0, size));
  memset(q, 0x5a, size);
  free(q);
}

static void calloc_of_reused_memory(void) {
  calloc_clears(300 * MIB, 260 * MIB);  /* a cached mapping of its own */
  calloc_clears(6 * MIB + 12345, 5 * MIB + 777);  /* a region's units */
  calloc_clears(40 * MIB, 40 * MIB - 4095);
}

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  RUN(moved_block_keeps_alignment);
  RUN(calloc_of_reused_memory);
  return 0;
}
