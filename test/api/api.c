/* SPDX-License-Identifier: MIT */
/* test-builds: static ubsan hardened */
/* Semantics of the standard allocation API, edge cases included, as glibc
 * defines them: malloc(0), free(NULL), calloc zeroing and overflow, requests
 * too large to satisfy, realloc with NULL / 0 / an impossible size,
 * reallocarray overflow, the argument checks of posix_memalign and
 * aligned_alloc, memalign/valloc/pvalloc, free_sized and free_aligned_sized,
 * and running out of address space (RLIMIT_AS): NULL and ENOMEM, no crash.
 * Runs against glibc as well as against hakmem (preloaded or linked). */
#include "testutil.h"

#include <gnu/libc-version.h>
#include <malloc.h>
#include <sys/resource.h>

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void malloc_zero_is_unique(void) {
  enum { N = 1000 };
  static void *p[N];
  int i;
  for (i = 0; i < N; i++) {
    p[i] = malloc(opaque(0));
    CHECK(p[i] != NULL);
    CHECK_ALIGNED(p[i], 16);
  }
  qsort(p, N, sizeof p[0], cmp_ptr);
  for (i = 1; i < N; i++) CHECK_MSG(p[i] != p[i - 1], "malloc(0) returned %p twice", p[i]);
  for (i = 0; i < N; i++) free(p[i]);
}

static void free_null_is_noop(void) {
  void *p;
  errno = 1234;
  free(NULL);
  CHECK_EQ(errno, 1234);
  p = malloc(10);
  CHECK(p != NULL);
  free(p);
}

/* Fills blocks with 0xAA, frees them, and asks calloc for the same sizes: the
 * allocator hands back the dirty blocks and must clear them. */
static void calloc_zeroes_recycled_blocks(void) {
  enum { N = 64 };
  static const size_t sizes[] = {1,     8,     16,    24,     32,     48,     64,     100,
                                 128,   200,   256,   500,    512,    1000,   1024,   2000,
                                 4096,  5000,  8192,  16384,  32768,  65536,  100000, 262144,
                                 500000, 1 << 20, 3 << 20, 16 << 20};
  void *p[N];
  size_t k;
  int i;
  for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k], count = n >= 65536 ? 4 : N, off;
    for (i = 0; i < (int)count; i++) {
      p[i] = malloc(n);
      CHECK(p[i] != NULL);
      memset(p[i], 0xAA, malloc_usable_size(p[i]));
    }
    for (i = (int)count - 1; i >= 0; i--) free(p[i]);
    for (i = 0; i < (int)count; i++) {
      p[i] = calloc(1, n);
      CHECK(p[i] != NULL);
      off = find_not_byte(p[i], 0, n);
      CHECK_MSG(off == SIZE_MAX, "calloc(1, %zu) = %p: byte %zu is not zero", n, p[i], off);
    }
    for (i = 0; i < (int)count; i++) free(p[i]);
    /* The same with count > 1, and for a block freed by realloc. */
    for (i = 0; i < (int)count; i++) {
      p[i] = realloc(NULL, n);
      CHECK(p[i] != NULL);
      memset(p[i], 0xAA, n);
      free(p[i]);
      p[i] = calloc(n, 1);
      CHECK(p[i] != NULL);
      off = find_not_byte(p[i], 0, n);
      CHECK_MSG(off == SIZE_MAX, "calloc(%zu, 1) = %p: byte %zu is not zero", n, p[i], off);
    }
    for (i = 0; i < (int)count; i++) free(p[i]);
  }
}

static void calloc_overflow_fails(void) {
  static const size_t cases[][2] = {
      {SIZE_MAX, SIZE_MAX},
      {SIZE_MAX / 2 + 1, 2},
      {2, SIZE_MAX / 2 + 1},
      {(size_t)1 << 32, (size_t)1 << 32},
      {((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1},
      {SIZE_MAX / 16 + 1, 16},
      {1, (size_t)PTRDIFF_MAX + 1},       /* no overflow, but more than PTRDIFF_MAX */
      {(size_t)PTRDIFF_MAX / 2 + 1, 2},   /* likewise */
  };
  size_t k;
  for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    void *p;
    errno = 0;
    p = calloc(opaque(cases[k][0]), opaque(cases[k][1]));
    CHECK_MSG(p == NULL, "calloc(%zu, %zu) returned %p", cases[k][0], cases[k][1], p);
    CHECK_ERRNO(ENOMEM);
  }
  /* A product that does not overflow still works. */
  {
    unsigned char *p = calloc(opaque((size_t)1 << 16), 16);
    CHECK(p != NULL);
    CHECK(find_not_byte(p, 0, (size_t)1 << 20) == SIZE_MAX);
    free(p);
  }
}

static void malloc_too_large_fails(void) {
  static const size_t sizes[] = {
      SIZE_MAX,
      SIZE_MAX - 1,
      SIZE_MAX - 15,
      SIZE_MAX - 4095,
      SIZE_MAX - ((size_t)4 << 20), /* rounding up to a page or a huge alignment overflows */
      (size_t)PTRDIFF_MAX + 1,
      (size_t)PTRDIFF_MAX,
      (size_t)PTRDIFF_MAX / 2,
      (size_t)1 << 48,              /* beyond the 47-bit user address space */
  };
  size_t k;
  for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    void *p;
    errno = 0;
    p = malloc(opaque(sizes[k]));
    CHECK_MSG(p == NULL, "malloc(%zu) returned %p", sizes[k], p);
    CHECK_ERRNO(ENOMEM);
  }
  /* The allocator still works. */
  {
    void *p = malloc(100);
    CHECK(p != NULL);
    free(p);
  }
}

static void realloc_null_is_malloc(void) {
  size_t n;
  for (n = 0; n <= (size_t)1 << 22; n = n ? n * 4 : 1) {
    unsigned char *p = realloc(NULL, opaque(n));
    CHECK_MSG(p != NULL, "realloc(NULL, %zu) returned NULL", n);
    CHECK_ALIGNED(p, 16);
    CHECK(malloc_usable_size(p) >= n);
    memset(p, 0x5A, n);
    free(p);
  }
}

/* glibc frees the block and returns NULL.  That the block is really freed is
 * seen from the footprint: 256 MiB of such blocks must not stay allocated. */
static void realloc_to_zero_frees(void) {
  size_t before = heap_footprint(), after;
  int i;
  for (i = 0; i < 4096; i++) {
    void *p = malloc(64 * 1024), *q;
    CHECK(p != NULL);
    memset(p, 1, 64 * 1024);
    q = realloc(p, opaque(0));
    CHECK_MSG(q == NULL, "realloc(p, 0) returned %p, expected NULL (glibc frees p)", q);
  }
  after = heap_footprint();
  CHECK_MSG(after < before + 64 * MiB, "%s grew by %zu MiB over 4096 realloc(p, 0) of 64 KiB blocks",
            footprint_name(), (after - before) / MiB);
}

static void realloc_impossible_keeps_block(void) {
  static const size_t old_sizes[] = {100, 5000, 300000, (size_t)8 << 20};
  static const size_t new_sizes[] = {SIZE_MAX, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1,
                                     (size_t)PTRDIFF_MAX, (size_t)1 << 48};
  size_t i, j;
  for (i = 0; i < sizeof old_sizes / sizeof old_sizes[0]; i++) {
    size_t n = old_sizes[i];
    unsigned char *p = malloc(n), *q;
    CHECK(p != NULL);
    fill_pattern(p, n, n);
    for (j = 0; j < sizeof new_sizes / sizeof new_sizes[0]; j++) {
      errno = 0;
      q = realloc(p, opaque(new_sizes[j]));
      CHECK_MSG(q == NULL, "realloc(%zu-byte block, %zu) returned %p", n, new_sizes[j], q);
      CHECK_ERRNO(ENOMEM);
      CHECK_PATTERN(p, n, n);
    }
    /* The old block is still ours: it can grow, and be freed. */
    q = realloc(p, 2 * n);
    CHECK(q != NULL);
    CHECK_PATTERN(q, n, n);
    memset(q + n, 1, n);
    free(q);
  }
}

static void reallocarray_checks_overflow(void) {
  unsigned char *p = reallocarray(NULL, 10, 10), *q;
  CHECK(p != NULL);
  CHECK(malloc_usable_size(p) >= 100);
  fill_pattern(p, 100, 7);
  errno = 0;
  q = reallocarray(p, opaque(SIZE_MAX / 2 + 1), 2);
  CHECK(q == NULL);
  CHECK_ERRNO(ENOMEM);
  errno = 0;
  q = reallocarray(p, opaque((size_t)1 << 33), (size_t)1 << 33);
  CHECK(q == NULL);
  CHECK_ERRNO(ENOMEM);
  CHECK_PATTERN(p, 100, 7);
  q = reallocarray(p, 1000, 3);
  CHECK(q != NULL);
  CHECK(malloc_usable_size(q) >= 3000);
  CHECK_PATTERN(q, 100, 7);
  memset(q, 0, 3000);
  free(q);
  errno = 0;
  q = reallocarray(NULL, opaque(SIZE_MAX), 3);
  CHECK(q == NULL);
  CHECK_ERRNO(ENOMEM);
}

static void posix_memalign_checks_alignment(void) {
  static const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 40, 48, 96, 4097, 65535,
                               (size_t)1 << 63 | 8, SIZE_MAX};
  void *const sentinel = (void *)(uintptr_t)0xdeadbee0;
  void *p;
  size_t k;
  int rc;
  for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    p = sentinel;
    errno = 0;
    rc = posix_memalign(&p, opaque(bad[k]), 64);
    CHECK_MSG(rc == EINVAL, "posix_memalign(alignment %zu) returned %d, expected EINVAL", bad[k], rc);
    CHECK_MSG(p == sentinel, "posix_memalign(alignment %zu) changed *out on failure", bad[k]);
  }
  /* Size 0 works, with every valid alignment. */
  for (k = sizeof(void *); k <= 4096; k *= 2) {
    p = sentinel;
    rc = posix_memalign(&p, k, opaque(0));
    CHECK_EQ(rc, 0);
    CHECK(p != sentinel);
    CHECK_ALIGNED(p, k);
    free(p);
  }
  /* Too large: ENOMEM, *out untouched. */
  p = sentinel;
  rc = posix_memalign(&p, 64, opaque(SIZE_MAX - 32));
  CHECK_EQ(rc, ENOMEM);
  CHECK(p == sentinel);
  p = sentinel;
  rc = posix_memalign(&p, 4096, opaque((size_t)PTRDIFF_MAX + 1));
  CHECK_EQ(rc, ENOMEM);
  CHECK(p == sentinel);
}

static int glibc_at_least(int major, int minor) {
  int ma = 0, mi = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &ma, &mi);
  return ma > major || (ma == major && mi >= minor);
}

static void aligned_alloc_checks_alignment(void) {
  static const size_t bad[] = {0, 3, 12, 24, 48, 100, 4097, SIZE_MAX};
  void *p;
  size_t k;
  if (!hakmem_active() && !glibc_at_least(2, 38)) {
    /* glibc < 2.38 treats aligned_alloc like memalign and rounds a bad
     * alignment up; 2.38 and hakmem fail with EINVAL. */
    NOTE("glibc %s does not reject bad aligned_alloc alignments, checks left out",
         gnu_get_libc_version());
  } else {
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      errno = 0;
      p = aligned_alloc(opaque(bad[k]), 64);
      CHECK_MSG(p == NULL, "aligned_alloc(%zu, 64) returned %p", bad[k], p);
      CHECK_ERRNO(EINVAL);
    }
  }
  /* Valid alignments, including ones below sizeof(void *) and sizes that are
   * not a multiple of the alignment (allowed since C17). */
  for (k = 1; k <= 8192; k *= 2) {
    p = aligned_alloc(k, opaque(k * 3 + 1));
    CHECK(p != NULL);
    CHECK_ALIGNED(p, k);
    CHECK(malloc_usable_size(p) >= k * 3 + 1);
    memset(p, 0x11, k * 3 + 1);
    free(p);
  }
  errno = 0;
  p = aligned_alloc(64, opaque(SIZE_MAX - 63));
  CHECK(p == NULL);
  CHECK_ERRNO(ENOMEM);
}

static void memalign_valloc_pvalloc(void) {
  size_t page = page_size(), k, n;
  void *p;
  for (k = 1; k <= ((size_t)1 << 20); k *= 2)
    for (n = 0; n <= 3 * k; n += k / 2 + 1) {
      p = memalign(k, opaque(n));
      CHECK(p != NULL);
      CHECK_ALIGNED(p, k);
      CHECK(malloc_usable_size(p) >= n);
      memset(p, 0x22, n);
      free(p);
    }
  /* glibc rounds an alignment that is not a power of two up to one. */
  p = memalign(opaque(24), 100);
  CHECK_MSG(p != NULL, "memalign(24, 100) failed: glibc rounds the alignment up to 32");
  CHECK_ALIGNED(p, 32);
  free(p);
  p = memalign(opaque(3000), 100);
  CHECK(p != NULL);
  CHECK_ALIGNED(p, 4096);
  free(p);
  errno = 0;
  p = memalign(64, opaque(SIZE_MAX - 63));
  CHECK(p == NULL);
  CHECK_ERRNO(ENOMEM);

  for (n = 0; n <= 3 * page; n += 999) {
    p = valloc(opaque(n));
    CHECK(p != NULL);
    CHECK_ALIGNED(p, page);
    CHECK(malloc_usable_size(p) >= n);
    memset(p, 0x33, n);
    free(p);
  }
  /* pvalloc rounds the size up to a whole number of pages. */
  for (n = 1; n <= 5 * page; n += 777) {
    size_t want = (n + page - 1) / page * page;
    p = pvalloc(opaque(n));
    CHECK(p != NULL);
    CHECK_ALIGNED(p, page);
    CHECK_MSG(malloc_usable_size(p) >= want, "pvalloc(%zu): usable size %zu < %zu", n,
              malloc_usable_size(p), want);
    memset(p, 0x44, want);
    free(p);
  }
  p = valloc(opaque(3 * MiB + 1));
  CHECK(p != NULL);
  CHECK_ALIGNED(p, page);
  memset(p, 0x55, 3 * MiB + 1);
  free(p);
  p = pvalloc(opaque(3 * MiB + 1));
  CHECK(p != NULL);
  CHECK_ALIGNED(p, page);
  CHECK(malloc_usable_size(p) >= 3 * MiB + page);
  memset(p, 0x55, 3 * MiB + page);
  free(p);
  p = pvalloc(opaque(0));
  CHECK(p != NULL);
  CHECK_ALIGNED(p, page);
  free(p);
  errno = 0;
  p = pvalloc(opaque(SIZE_MAX - 10)); /* rounding up to a page overflows */
  CHECK(p == NULL);
  CHECK_ERRNO(ENOMEM);
  errno = 0;
  p = valloc(opaque(SIZE_MAX - 10));
  CHECK(p == NULL);
  CHECK_ERRNO(ENOMEM);
}

/* C23's free_sized and free_aligned_sized (glibc 2.41 and later). */
static void free_sized_accepts_its_blocks(void) {
  void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  void (*fas)(void *, size_t, size_t) =
      (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
  rng_t rng = {42};
  int i;
  if (!fs || !fas) {
    CHECK_MSG(!hakmem_active(), "hakmem does not export free_sized / free_aligned_sized");
    NOTE("this libc has no free_sized/free_aligned_sized, checks left out");
    return;
  }
  fs(NULL, 0);
  fas(NULL, 64, 0);
  for (i = 0; i < 20000; i++) {
    size_t n = rng_size(&rng, 1, (size_t)4 << 20);
    size_t align = (size_t)1 << rng_range(&rng, 3, 16);
    unsigned char *p;
    switch (i % 4) {
      case 0:
        p = malloc(n);
        CHECK(p != NULL);
        p[0] = p[n - 1] = 1;
        fs(p, n);
        break;
      case 1:
        p = calloc(n, 1);
        CHECK(p != NULL);
        fs(p, n);
        break;
      case 2:
        p = realloc(malloc(n / 2 + 1), n);
        CHECK(p != NULL);
        fs(p, n);
        break;
      default:
        p = aligned_alloc(align, n);
        CHECK(p != NULL);
        CHECK_ALIGNED(p, align);
        p[0] = p[n - 1] = 1;
        fas(p, align, n);
        break;
    }
  }
  /* The freed blocks are reused normally. */
  for (i = 0; i < 1000; i++) {
    void *p = malloc((size_t)i + 1);
    CHECK(p != NULL);
    fill_pattern(p, (size_t)i + 1, (uint64_t)i);
    CHECK_PATTERN(p, (size_t)i + 1, (uint64_t)i);
    free(p);
  }
}

static void usable_size_of_null_is_zero(void) { CHECK_EQ(malloc_usable_size(NULL), 0); }

/* Allocates blocks of n bytes until malloc fails, which it must do with
 * ENOMEM; the blocks are chained through their first word.  Returns the
 * chain, extended. */
static void **exhaust(size_t n, void **chain, size_t *count) {
  for (;;) {
    void **p;
    errno = 0;
    p = malloc(n);
    if (!p) {
      CHECK_MSG(errno == ENOMEM, "malloc(%zu) failed with errno %d, not ENOMEM", n, errno);
      return chain;
    }
    memset(p, 0x5A, n < 4096 ? n : 4096);
    *p = chain;
    chain = p;
    ++*count;
  }
}

static void oom_child(void *arg) {
  /* every kind of block: small, large, huge, a large one that fits where
   * huge ones leave room (calloc below asks for one), and small again */
  static const size_t sizes[] = {64, 4000, 100000, 8 << 20, 1000000, 48};
  struct rlimit lim;
  void **chain = NULL;
  size_t i, count[sizeof sizes / sizeof sizes[0]] = {0};
  (void)arg;
  CHECK(getrlimit(RLIMIT_AS, &lim) == 0);
  lim.rlim_cur = proc_status_kib("VmSize") * 1024 + 128 * MiB;
  CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) chain = exhaust(sizes[i], chain, &count[i]);
  printf("  blocks before ENOMEM: %zu x 64 B, %zu x 4000 B, %zu x 100000 B, %zu x 8 MiB, %zu x 1000000 B, %zu x 48 B\n",
         count[0], count[1], count[2], count[3], count[4], count[5]);
  CHECK_MSG(count[0] > 1000, "only %zu blocks of 64 bytes before running out", count[0]);
  errno = 0;
  CHECK(calloc(1000, 1000) == NULL);
  CHECK_ERRNO(ENOMEM);
  while (chain) {
    void **next = *chain;
    free(chain);
    chain = next;
  }
  /* Everything is free again: allocations work. */
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = malloc(sizes[i]);
    CHECK_MSG(p != NULL, "malloc(%zu) fails after everything was freed", sizes[i]);
    memset(p, 1, sizes[i]);
    free(p);
  }
}

/* When the address space runs out (RLIMIT_AS), malloc returns NULL with
 * ENOMEM for every size, and recovers once memory is freed. */
static void out_of_memory_returns_null(void) {
  child_result_t res;
  REQUIRE_AS_LIMIT();
  run_in_child(oom_child, NULL, 60, &res);
  if (res.err[0]) fprintf(stderr, "child's stderr:\n%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "child %s",
            describe_status(res.status));
}

int main(void) {
  test_init();
  RUN(malloc_zero_is_unique);
  RUN(free_null_is_noop);
  RUN(calloc_zeroes_recycled_blocks);
  RUN(calloc_overflow_fails);
  RUN(malloc_too_large_fails);
  RUN(realloc_null_is_malloc);
  RUN(realloc_to_zero_frees);
  RUN(realloc_impossible_keeps_block);
  RUN(reallocarray_checks_overflow);
  RUN(posix_memalign_checks_alignment);
  RUN(aligned_alloc_checks_alignment);
  RUN(memalign_valloc_pvalloc);
  RUN(free_sized_accepts_its_blocks);
  RUN(usable_size_of_null_is_zero);
  RUN(out_of_memory_returns_null);
  return 0;
}
