/* SPDX-License-Identifier: MIT */
/* libfloor.so: the floor under the benchmarks of small blocks.  An allocator
 * that does as little as one can: a LIFO list of free blocks per 16-byte
 * class in each thread, blocks cut from a chunk of the thread's with a
 * 16-byte header that holds the class, no check of anything, no memory ever
 * given back, a block freed by another thread kept by that thread.  What a
 * benchmark runs at under it is what its own loop costs with next to no
 * allocator, so it tells how much any allocator could still gain there:
 *
 *   make bench BENCHES=random_mixed-16-128 ALLOCATORS=hakmem,floor=build/bench/libfloor.so
 *
 * Not a usable allocator: blocks above 4 KiB are mapped and unmapped one by
 * one, blocks of an alignment above 16 are never reused, and a program that
 * frees a pointer it was not given corrupts its lists. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))
#define HEADER 16
#define LISTED 256                          /* classes of 16 B up to 4 KiB are listed */
#define CHUNK ((size_t)64 << 20)
#define MAPPED ((size_t)-1)                 /* header of a block mapped on its own */
#define UNLISTED ((size_t)0)                /* header of an aligned block: never reused; its size after */

static __thread void *lists[LISTED + 1] __attribute__((tls_model("initial-exec")));
static __thread char *cur __attribute__((tls_model("initial-exec")));
static __thread char *end __attribute__((tls_model("initial-exec")));

static size_t *header(void *p) { return (size_t *)((char *)p - HEADER); }

/* `bytes` from the thread's chunk, after a header, at `align` (a power of
 * two, at least 16). */
static __attribute__((noinline)) void *cut(size_t bytes, size_t align, size_t tag) {
  char *p = (char *)(((uintptr_t)cur + HEADER + align - 1) & ~(uintptr_t)(align - 1));
  if (!cur || p + bytes > end) {
    size_t size = bytes + align + HEADER > CHUNK ? bytes + align + HEADER : CHUNK;
    cur = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (cur == MAP_FAILED) {
      cur = end = NULL;
      errno = ENOMEM;
      return NULL;
    }
    end = cur + size;
    p = (char *)(((uintptr_t)cur + HEADER + align - 1) & ~(uintptr_t)(align - 1));
  }
  cur = p + bytes;
  *header(p) = tag;
  return p;
}

static void *mapped(size_t n) {
  if (n > SIZE_MAX / 2) {
    errno = ENOMEM;
    return NULL;
  }
  char *m = mmap(NULL, n + HEADER, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  ((size_t *)m)[0] = MAPPED;  /* the header */
  ((size_t *)m)[1] = n + HEADER;
  return m + HEADER;
}

EXPORT void *malloc(size_t n) {
  if (n > LISTED * 16) return mapped(n);
  size_t c = n ? (n + 15) >> 4 : 1;
  void *p = lists[c];
  if (p) {
    lists[c] = *(void **)p;
    return p;
  }
  return cut(c << 4, 16, c);
}

EXPORT void free(void *p) {
  if (!p) return;
  size_t c = *header(p);
  if (c == MAPPED) {
    munmap((char *)p - HEADER, ((size_t *)p)[-1]);
  } else if (c != UNLISTED) {
    *(void **)p = lists[c];
    lists[c] = p;
  }
}

EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  size_t c = *header(p);
  if (c == MAPPED) return ((size_t *)p)[-1] - HEADER;
  return c == UNLISTED ? ((size_t *)p)[-1] : c << 4;
}

EXPORT void *calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = malloc(n);
  return p ? memset(p, 0, n) : NULL;
}

EXPORT void *realloc(void *p, size_t n) {
  void *q = malloc(n);
  if (q && p) {
    size_t old = malloc_usable_size(p);
    memcpy(q, p, old < n ? old : n);
    free(p);
  }
  return q;
}

EXPORT void *memalign(size_t align, size_t n) {
  if (align <= 16) return malloc(n);
  if (align & (align - 1)) {
    errno = EINVAL;
    return NULL;
  }
  if (n > SIZE_MAX / 2 || align > SIZE_MAX / 4) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = cut(n ? n : 1, align, UNLISTED);
  if (p) ((size_t *)p)[-1] = n;
  return p;
}

EXPORT void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (align % sizeof(void *) || (align & (align - 1))) return EINVAL;
  void *p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void *valloc(size_t n) { return memalign(4096, n); }

EXPORT void *pvalloc(size_t n) {
  if (n > SIZE_MAX / 2) {
    errno = ENOMEM;
    return NULL;
  }
  return memalign(4096, (n + 4095) & ~(size_t)4095);
}
