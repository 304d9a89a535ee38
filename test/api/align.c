/* SPDX-License-Identifier: MIT */
/* test-builds: hardened */
/* Alignment: every malloc/calloc/realloc result is 16-byte aligned, for all
 * sizes up to 70000 (every size to 4 KiB, then sampled) and for huge sizes;
 * posix_memalign, aligned_alloc and memalign honour every power of two from
 * 8 bytes to 4 MiB with several sizes, and a few up to 64 MiB.  The aligned blocks are live together
 * and pattern-checked (no overlap), and work with malloc_usable_size, realloc
 * and free; so do blocks of size 0, with every alignment up to 64 MiB. */
#include "testutil.h"

#include <malloc.h>

enum { MAX_SMALL = 70000 };

static void malloc_results_are_16_aligned(void) {
  static void *p[MAX_SMALL + 1];
  size_t n, count = 0, i;
  for (n = 0; n <= MAX_SMALL; n += n < 4096 ? 1 : 7) {
    p[count] = malloc(n);
    CHECK_MSG(p[count] != NULL, "malloc(%zu)", n);
    CHECK_ALIGNED(p[count], 16);
    if (n) fill_pattern(p[count], n, n);
    count++;
  }
  for (n = 0, i = 0; i < count; n += n < 4096 ? 1 : 7, i++) {
    CHECK_PATTERN(p[i], n, n);
    free(p[i]);
  }
  /* calloc and realloc too. */
  for (n = 1; n <= MAX_SMALL; n += 97) {
    void *c = calloc(1, n), *r;
    CHECK(c != NULL);
    CHECK_ALIGNED(c, 16);
    r = realloc(c, n * 2 + 5);
    CHECK(r != NULL);
    CHECK_ALIGNED(r, 16);
    r = realloc(r, n / 3 + 1);
    CHECK(r != NULL);
    CHECK_ALIGNED(r, 16);
    free(r);
  }
}

static void huge_results_are_aligned(void) {
  static const size_t sizes[] = {(size_t)1 << 20,         ((size_t)2 << 20) + 1,
                                 ((size_t)4 << 20) - 1,   (size_t)4 << 20,
                                 ((size_t)16 << 20) + 3,  (size_t)64 << 20,
                                 ((size_t)256 << 20) + 17};
  void *p[sizeof sizes / sizeof sizes[0]];
  size_t i;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    p[i] = malloc(sizes[i]);
    CHECK(p[i] != NULL);
    CHECK_ALIGNED(p[i], 16);
    CHECK(malloc_usable_size(p[i]) >= sizes[i]);
    /* Touch both ends only: the blocks are large. */
    ((char *)p[i])[0] = 1;
    ((char *)p[i])[sizes[i] - 1] = 2;
  }
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    CHECK(((char *)p[i])[0] == 1 && ((char *)p[i])[sizes[i] - 1] == 2);
    free(p[i]);
  }
}

enum { ALLOC_POSIX, ALLOC_ALIGNED, ALLOC_MEMALIGN, ALLOC_KINDS };
static const char *const kind_name[] = {"posix_memalign", "aligned_alloc", "memalign"};

static void *alloc_aligned(int kind, size_t align, size_t size) {
  void *p = NULL;
  int rc;
  switch (kind) {
    case ALLOC_POSIX:
      rc = posix_memalign(&p, align, size);
      CHECK_MSG(rc == 0, "posix_memalign(%zu, %zu) returned %d", align, size, rc);
      break;
    case ALLOC_ALIGNED:
      p = aligned_alloc(align, size);
      break;
    default:
      p = memalign(align, size);
      break;
  }
  CHECK_MSG(p != NULL, "%s(%zu, %zu) returned NULL", kind_name[kind], align, size);
  CHECK_MSG(((uintptr_t)p & (align - 1)) == 0, "%s(%zu, %zu) = %p is misaligned",
            kind_name[kind], align, size, p);
  return p;
}

typedef struct live {
  unsigned char *p;
  size_t size;
} live_t;

static void aligned_allocations(void) {
  enum { MAX_LIVE = 2048 };
  static live_t live[MAX_LIVE];
  size_t align, count = 0, i;
  int kind;
  for (align = 8; align <= ((size_t)4 << 20); align *= 2) {
    size_t start = count;
    const size_t sizes[] = {1, 8, 24, align - 1, align, align + 1, 3 * align + 5, 100, 5000, 70000};
    for (kind = 0; kind < ALLOC_KINDS; kind++)
      for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = alloc_aligned(kind, align, n);
        CHECK_MSG(malloc_usable_size(p) >= n, "%s(%zu, %zu): usable size %zu", kind_name[kind],
                  align, n, malloc_usable_size(p));
        fill_pattern(p, n, (uint64_t)(uintptr_t)p);
        CHECK(count < MAX_LIVE);
        live[count].p = p;
        live[count].size = n;
        count++;
      }
    /* Keep the big ones from piling up: check and release them now. */
    if (align >= ((size_t)256 << 10)) {
      size_t kept = start;
      for (i = start; i < count; i++) {
        if (live[i].size >= 65536) {
          CHECK_PATTERN(live[i].p, live[i].size, (uint64_t)(uintptr_t)live[i].p);
          free(live[i].p);
        } else {
          live[kept++] = live[i];
        }
      }
      count = kept;
    }
  }
  /* All blocks were live together: none overwrote another. Release them by
   * turns with free, with realloc (to grow and to shrink), and after writing
   * their whole usable size. */
  for (i = 0; i < count; i++) {
    live_t *b = &live[i];
    unsigned char *q;
    size_t us;
    CHECK_PATTERN(b->p, b->size, (uint64_t)(uintptr_t)b->p);
    switch (i % 4) {
      case 0:
        free(b->p);
        break;
      case 1:
        q = realloc(b->p, b->size * 2 + 100);
        CHECK(q != NULL);
        CHECK_ALIGNED(q, 16);
        CHECK_PATTERN(q, b->size, (uint64_t)(uintptr_t)b->p);
        free(q);
        break;
      case 2:
        q = realloc(b->p, b->size / 2 + 1);
        CHECK(q != NULL);
        CHECK_ALIGNED(q, 16);
        CHECK_PATTERN(q, b->size / 2 + 1 < b->size ? b->size / 2 + 1 : b->size,
                      (uint64_t)(uintptr_t)b->p);
        free(q);
        break;
      default:
        us = malloc_usable_size(b->p);
        memset(b->p, 0x77, us);
        CHECK(find_not_byte(b->p, 0x77, us) == SIZE_MAX);
        free(b->p);
        break;
    }
  }
}

/* Alignments beyond 4 MiB, larger than any internal region size. */
static void very_large_alignments(void) {
  size_t align;
  int kind, i;
  for (align = (size_t)8 << 20; align <= ((size_t)64 << 20); align *= 2)
    for (kind = 0; kind < ALLOC_KINDS; kind++) {
      const size_t sizes[] = {1, 4096, align + 1};
      for (i = 0; i < 3; i++) {
        size_t n = sizes[i];
        size_t head = n < 8192 ? n : 8192;
        unsigned char *p = alloc_aligned(kind, align, n), *q;
        CHECK(malloc_usable_size(p) >= n);
        fill_pattern(p, head, align + n);
        p[n - 1] = 0x34;
        q = realloc(p, n + 100000);
        CHECK(q != NULL);
        CHECK(q[n - 1] == 0x34);
        if (n > head) CHECK_PATTERN(q, head, align + n);
        free(q);
      }
    }
}

/* A big block with a large alignment, freed, then the same size without
 * one (and with calloc): the memory the first came from may serve the
 * others, which must be blocks like any other. */
static void big_aligned_then_plain(void) {
  size_t big = (size_t)200 << 20;
  for (size_t align = (size_t)4 << 20; align <= ((size_t)64 << 20); align *= 4) {
    unsigned char *a = aligned_alloc(align, big);
    CHECK(a != NULL);
    CHECK_ALIGNED(a, align);
    a[0] = a[big - 1] = 0x5a;
    free(a);
    unsigned char *b = malloc(big);
    CHECK(b != NULL);
    CHECK(malloc_usable_size(b) >= big);
    b[0] = b[big - 1] = 0x33;
    unsigned char *c = realloc(b, big + 4096);
    CHECK(c != NULL && c[0] == 0x33 && c[big - 1] == 0x33);
    free(c);
    unsigned char *z = calloc(1, big);
    CHECK(z != NULL && z[0] == 0 && z[big - 1] == 0);
    CHECK(malloc_usable_size(z) >= big);
    free(z);
  }
}

/* Size 0 with every alignment: blocks like any other, distinct, that realloc
 * grows and free releases (malloc_usable_size may say 0). */
static void zero_size_aligned_blocks(void) {
  size_t align;
  int kind;
  for (align = 8; align <= ((size_t)64 << 20); align *= 2)
    for (kind = 0; kind < ALLOC_KINDS; kind++) {
      unsigned char *p = alloc_aligned(kind, align, 0), *q = alloc_aligned(kind, align, 0), *r;
      CHECK_MSG(p != q, "%s(%zu, 0) returned %p twice", kind_name[kind], align, (void *)p);
      r = realloc(p, 100);
      CHECK_MSG(r != NULL, "realloc(%s(%zu, 0), 100) failed", kind_name[kind], align);
      CHECK_ALIGNED(r, 16);
      fill_pattern(r, 100, align);
      CHECK(malloc_usable_size(r) >= 100);
      CHECK_PATTERN(r, 100, align);
      free(r);
      free(q);
    }
}

/* Aligned blocks interleaved with plain ones, so that the aligned ones come
 * from already used memory as well. */
static void aligned_mixed_with_malloc(void) {
  enum { N = 4000 };
  static live_t live[N];
  rng_t rng = {2024};
  int i;
  for (i = 0; i < N; i++) {
    size_t n = rng_size(&rng, 1, 8192);
    size_t align = (size_t)1 << rng_range(&rng, 3, 12);
    int kind = (int)rng_below(&rng, ALLOC_KINDS + 1);
    unsigned char *p = kind == ALLOC_KINDS ? malloc(n) : alloc_aligned(kind, align, n);
    CHECK(p != NULL);
    fill_pattern(p, n, (uint64_t)i);
    live[i].p = p;
    live[i].size = n;
    if (rng_below(&rng, 3) == 0) {
      int j = (int)rng_below(&rng, (uint64_t)i + 1);
      if (live[j].p) {
        CHECK_PATTERN(live[j].p, live[j].size, (uint64_t)j);
        free(live[j].p);
        live[j].p = NULL;
      }
    }
  }
  for (i = 0; i < N; i++)
    if (live[i].p) {
      CHECK_PATTERN(live[i].p, live[i].size, (uint64_t)i);
      free(live[i].p);
    }
}

int main(void) {
  test_init();
  RUN(malloc_results_are_16_aligned);
  RUN(huge_results_are_aligned);
  RUN(aligned_allocations);
  RUN(very_large_alignments);
  RUN(big_aligned_then_plain);
  RUN(aligned_mixed_with_malloc);
  RUN(zero_size_aligned_blocks);
  return 0;
}
