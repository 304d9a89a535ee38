/* SPDX-License-Identifier: MIT */
/* hakmem only.  Blocks too big for a shared region, or aligned beyond half
 * of one, get a mapping of their own:
 * - realloc that cannot grow one where it is (another mapping right after
 *   it) moves its pages, content and all, and the block keeps the alignment
 *   posix_memalign gave it (1 GiB here, three times: a block aligned only
 *   to the 128 MiB every region has would pass by chance one time in 8);
 * - a move the kernel refuses gives its target back, but one refused late,
 *   having unmapped the target already, leaves alone what another thread
 *   mapped there meanwhile, even where the target cannot be read back; a
 *   shrink refused in place is not tried as a move;
 * - calloc clears what a freed one held, and what a region's freed units
 *   held, when it hands that memory out again. */
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

/* mremap, as the kernel's when armed: growth in place refused, and a move
 * refused, early (too many mappings) or late (no memory for page tables).
 * A late refusal has unmapped the target first, and there another thread's
 * mapping of a page then lands. */
static volatile int refuse;  /* volatile: the compiler knows realloc reads no global */
enum { EARLY = 1, LATE };
static unsigned char *volatile target_seen, *volatile other;

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
  void *target = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    target = va_arg(ap, void *);
    va_end(ap);
  }
  if (!refuse) return (void *)syscall(SYS_mremap, old, old_size, new_size, flags, target);
  if (target) target_seen = target;
  if (target && refuse == LATE) {
    munmap(target, new_size);
    other = mmap(target, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (other != MAP_FAILED) memset(other, 0x3c, 4096);
  }
  errno = ENOMEM;
  return MAP_FAILED;
}

static void move_refused(int how) {
  const size_t size = 200 * MIB, bigger = 300 * MIB;
  unsigned char *p = malloc(size);
  CHECK(p != NULL);
  fill_pattern(p, size, 7);
  target_seen = other = NULL;
  refuse = how;
  unsigned char *q = realloc(p, bigger);  /* copied to a new block, or NULL */
  refuse = 0;
  CHECK_MSG(target_seen != NULL, "no move onto a target was tried");
  if (how == EARLY) {
    CHECK_MSG(msync(target_seen, 4096, MS_ASYNC) != 0 && errno == ENOMEM, "the target of a refused move is kept");
  } else {
    CHECK(other != MAP_FAILED);
    CHECK_MSG(msync(other, 4096, MS_ASYNC) == 0, "the mapping made where the target was is gone: %s", strerror(errno));
    CHECK_MSG(find_not_byte(other, 0x3c, 4096) == SIZE_MAX, "the mapping made where the target was changed");
    munmap(other, 4096);
  }
  CHECK_EQ(check_pattern(q ? q : p, size, 7), SIZE_MAX);
  free(q ? q : p);
}

static void move_refused_early(void) { move_refused(EARLY); }
static void move_refused_late(void) { move_refused(LATE); }

/* Where the target's first word cannot be read back (process_vm_readv
 * refused, and no file descriptor for a pipe), what was mapped in its place
 * is left alone all the same.  Last: the filters stay. */
static void move_refused_late_unread(void) {
  if (!refuse_syscall(SYS_process_vm_readv, EPERM) || !refuse_syscall(SYS_pipe2, EMFILE)) {
    printf("  skip: no seccomp filter here (%s)\n", strerror(errno));
    return;
  }
  move_refused(LATE);
}

/* A shrink the kernel refuses in place is not tried as a move, which the
 * kernel would start by cutting the block's tail. */
static void shrink_refused(void) {
  const size_t size = 300 * MIB, smaller = 200 * MIB;
  unsigned char *p = malloc(size);
  CHECK(p != NULL);
  fill_pattern(p, size, 9);
  target_seen = NULL;
  refuse = EARLY;
  unsigned char *q = realloc(p, smaller);
  refuse = 0;
  CHECK(q != NULL);
  CHECK_MSG(target_seen == NULL, "a shrink refused in place was tried as a move");
  CHECK_EQ(check_pattern(q, smaller, 9), SIZE_MAX);
  free(q);
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
  RUN(move_refused_early);
  RUN(move_refused_late);
  RUN(shrink_refused);
  RUN(calloc_of_reused_memory);
  RUN(move_refused_late_unread);
  return 0;
}
