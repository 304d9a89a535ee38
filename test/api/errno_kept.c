/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* errno is left alone by calls that succeed, and by free (POSIX.1-2024,
 * glibc 2.33 and later): blocks of every size range allocated, grown,
 * shrunk and freed, including a 200 MiB block grown to 400 MiB while another
 * sits where it would grow in place, and big blocks allocated with foreign
 * mappings just below the last one, where the next mapping is tried first.
 * Each system call the allocator makes and recovers from (a failed mapping
 * at a chosen place, a remap refused in place) must not show. */
#include "testutil.h"

#include <malloc.h>
#include <sys/mman.h>

#define MARK 12345  /* no errno value */

#define CHECK_KEPT(what)                                                       \
  do {                                                                         \
    CHECK_MSG(errno == MARK, "%s changed errno to %d (%s)", what, errno,      \
              strerror(errno));                                               \
  } while (0)

static void *kept_malloc(size_t n) {
  errno = MARK;
  void *p = malloc(n);
  CHECK_MSG(p != NULL, "malloc(%zu)", n);
  CHECK_KEPT("malloc");
  memset(p, 1, n < 4096 ? n : 4096);
  return p;
}

static void kept_free(void *p) {
  errno = MARK;
  free(p);
  CHECK_KEPT("free");
}

static void *kept_realloc(void *p, size_t n) {
  errno = MARK;
  void *q = realloc(p, n);
  CHECK_MSG(q != NULL, "realloc(%zu)", n);
  CHECK_KEPT("realloc");
  return q;
}

static void every_size_range(void) {
  static const size_t sizes[] = {1, 16, 100, 1024, 4000, 30000, 70000, 300000, 1 << 20, 3 << 20, 40 << 20};
  void *p[sizeof sizes / sizeof sizes[0]];
  for (size_t round = 0; round < 50; round++) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) p[i] = kept_malloc(sizes[i] + round);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) p[i] = kept_realloc(p[i], sizes[i] * 2 + round);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) p[i] = kept_realloc(p[i], sizes[i] / 3 + 1);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) kept_free(p[i]);
  }
  errno = MARK;
  void *c = calloc(1000, 1000);
  CHECK(c != NULL);
  CHECK_KEPT("calloc");
  kept_free(c);
  void *a = NULL;
  errno = MARK;
  CHECK_EQ(posix_memalign(&a, 4096, 100000), 0);
  CHECK_KEPT("posix_memalign");
  kept_free(a);
  errno = MARK;
  a = aligned_alloc(1 << 20, 3 << 20);
  CHECK(a != NULL);
  CHECK_KEPT("aligned_alloc");
  kept_free(a);
}

/* The neighbour takes the address space a grow in place would need: the
 * block moves. */
static void big_block_grown_past_a_neighbour(void) {
  char *p = kept_malloc(200 << 20), *neighbour = kept_malloc(200 << 20);
  p = kept_realloc(p, 400 << 20);
  kept_free(neighbour);
  kept_free(p);
}

/* Pages mapped below a big block, in the next 512 MiB: where mappings
 * usually come next (top-down). */
static void big_blocks_with_foreign_mappings_below(void) {
  char *first = kept_malloc(200 << 20);
  void *foreign[16];
  for (int i = 0; i < 16; i++) {
    char *at = (char *)(((uintptr_t)first & ~(uintptr_t)0xfffff) - (size_t)(i + 1) * (32 << 20));
    foreign[i] = mmap(at, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  }
  char *more[4];
  for (int i = 0; i < 4; i++) more[i] = kept_malloc((size_t)(100 + 50 * i) << 20);
  for (int i = 0; i < 4; i++) kept_free(more[i]);
  kept_free(first);
  for (int i = 0; i < 16; i++)
    if (foreign[i] != MAP_FAILED) munmap(foreign[i], 4096);
}

int main(void) {
  test_init();
  every_size_range();
  big_block_grown_past_a_neighbour();
  big_blocks_with_foreign_mappings_below();
  return 0;
}
