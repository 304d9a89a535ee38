/* SPDX-License-Identifier: MIT */
/* test-builds: ubsan asan */
/* hakmem only: the prefixed API (hak_*), every function of hakmem.h, called
 * directly.  Content checks through all the realloc paths (in place, small to
 * small, small to huge, huge to huge growing and shrinking, huge to small),
 * the aligned functions, errors (ENOMEM, EINVAL), the version, the OS
 * statistics and hak_stats_print.  Built against the normal library and
 * against an AddressSanitizer build (with HAK_NO_OVERRIDE, so that ASan keeps
 * its own malloc and checks hakmem's code). */
#include "testutil.h"

#include <pthread.h>

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void version(void) {
  const char *s = hak_version_string();
  char want[64];
  CHECK_EQ(hak_version(), HAKMEM_VERSION);
  snprintf(want, sizeof want, "hakmem %d.%d.%d", HAKMEM_VERSION_MAJOR, HAKMEM_VERSION_MINOR,
           HAKMEM_VERSION_PATCH);
  CHECK_MSG(s != NULL && strncmp(s, want, strlen(want)) == 0, "hak_version_string() = \"%s\"",
            s ? s : "(null)");
}

static void malloc_calloc_free(void) {
  rng_t rng = {5};
  void *p[2000];
  size_t size[2000];
  int i;
  for (i = 0; i < 2000; i++) {
    size[i] = rng_size(&rng, 1, i % 100 == 0 ? 4 * MiB : 8192);
    if (i % 2) {
      p[i] = hak_calloc(1, size[i]);
      CHECK(p[i] != NULL);
      CHECK(find_not_byte(p[i], 0, size[i]) == SIZE_MAX);
    } else {
      p[i] = hak_malloc(size[i]);
      CHECK(p[i] != NULL);
    }
    CHECK_ALIGNED(p[i], 16);
    CHECK(hak_malloc_usable_size(p[i]) >= size[i]);
    fill_pattern(p[i], size[i], (uint64_t)i);
  }
  for (i = 0; i < 2000; i++) {
    CHECK_PATTERN(p[i], size[i], (uint64_t)i);
    if (i % 3 == 0)
      hak_free_sized(p[i], size[i]);
    else
      hak_free(p[i]);
  }
  hak_free(NULL);
  hak_free_sized(NULL, 0);
  p[0] = hak_malloc(0);
  p[1] = hak_malloc(0);
  CHECK(p[0] && p[1] && p[0] != p[1]);
  hak_free(p[0]);
  hak_free(p[1]);
  CHECK_EQ(hak_malloc_usable_size(NULL), 0);
}

static void calloc_after_dirty_free(void) {
  size_t n;
  for (n = 8; n <= ((size_t)2 << 20); n *= 2) {
    void *p = hak_malloc(n), *q;
    CHECK(p != NULL);
    memset(p, 0xAA, n);
    hak_free(p);
    q = hak_calloc(n / 8, 8);
    CHECK(q != NULL);
    CHECK_MSG(find_not_byte(q, 0, n) == SIZE_MAX, "hak_calloc(%zu, 8) not zeroed", n / 8);
    hak_free(q);
  }
}

static void errors(void) {
  void *p = (void *)0x1234, *q;
  errno = 0;
  CHECK(hak_malloc(opaque(SIZE_MAX)) == NULL);
  CHECK_ERRNO(ENOMEM);
  errno = 0;
  CHECK(hak_malloc(opaque((size_t)PTRDIFF_MAX + 1)) == NULL);
  CHECK_ERRNO(ENOMEM);
  errno = 0;
  CHECK(hak_calloc(opaque(SIZE_MAX / 2 + 1), 2) == NULL);
  CHECK_ERRNO(ENOMEM);
  errno = 0;
  CHECK(hak_reallocarray(NULL, opaque(SIZE_MAX / 4 + 1), 4) == NULL);
  CHECK_ERRNO(ENOMEM);
  CHECK_EQ(hak_posix_memalign(&p, 24, 8), EINVAL);
  CHECK_EQ(hak_posix_memalign(&p, 4, 8), EINVAL);
  CHECK_EQ(hak_posix_memalign(&p, 0, 8), EINVAL);
  CHECK(p == (void *)0x1234);
  CHECK_EQ(hak_posix_memalign(&p, 64, opaque(SIZE_MAX - 10)), ENOMEM);
  CHECK(p == (void *)0x1234);
  errno = 0;
  CHECK(hak_aligned_alloc(opaque(48), 96) == NULL);
  CHECK_ERRNO(EINVAL);
  errno = 0;
  CHECK(hak_pvalloc(opaque(SIZE_MAX - 10)) == NULL);
  CHECK_ERRNO(ENOMEM);
  /* A failed realloc leaves the block alone. */
  q = hak_malloc(300);
  CHECK(q != NULL);
  fill_pattern(q, 300, 3);
  errno = 0;
  CHECK(hak_realloc(q, opaque(SIZE_MAX - 100)) == NULL);
  CHECK_ERRNO(ENOMEM);
  CHECK(hak_reallocarray(q, opaque(SIZE_MAX / 2), 3) == NULL);
  CHECK_PATTERN(q, 300, 3);
  hak_free(q);
}

/* Each realloc path, with content checks. */
static void realloc_paths(void) {
  static const size_t steps[] = {
      10,      20,       /* small, in place or next class */
      24,      1000,     /* small to small, other class */
      100000,            /* small to medium */
      4 << 20,           /* medium to huge */
      64 << 20,          /* huge grows */
      9 << 20,           /* huge shrinks */
      (9 << 20) + 5000,  /* huge grows a little */
      3000,              /* huge to small */
      0x5000,  2,  (16 << 20) + 1, 1};
  size_t i, cur = 5;
  unsigned char *p = hak_realloc(NULL, cur), *q;
  CHECK(p != NULL);
  fill_pattern(p, cur, 0);
  for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    size_t n = steps[i], keep = n < cur ? n : cur;
    q = hak_realloc(p, n);
    CHECK_MSG(q != NULL, "hak_realloc(%zu -> %zu)", cur, n);
    CHECK(hak_malloc_usable_size(q) >= n);
    CHECK_MSG(check_pattern(q, keep, i) == SIZE_MAX, "hak_realloc(%zu -> %zu) lost content", cur, n);
    fill_pattern(q, n, i + 1);
    p = q;
    cur = n;
  }
  /* Growing within the usable size stays in place. */
  q = hak_realloc(p, hak_malloc_usable_size(p));
  CHECK(q == p);
  hak_free(q);
  /* realloc to 0 frees and returns NULL (like glibc). */
  p = hak_malloc(100);
  CHECK(p != NULL);
  CHECK(hak_realloc(p, 0) == NULL);
  /* reallocarray keeps the content. */
  p = hak_reallocarray(NULL, 10, 10);
  CHECK(p != NULL);
  fill_pattern(p, 100, 9);
  q = hak_reallocarray(p, 1000, 10);
  CHECK(q != NULL);
  CHECK_PATTERN(q, 100, 9);
  hak_free(q);
}

static void aligned_functions(void) {
  size_t a, page = page_size();
  for (a = 8; a <= ((size_t)4 << 20); a *= 2) {
    void *p = NULL, *q, *r;
    size_t n = a * 2 + 3;
    CHECK_EQ(hak_posix_memalign(&p, a, n), 0);
    CHECK_ALIGNED(p, a);
    q = hak_aligned_alloc(a, n);
    CHECK(q != NULL);
    CHECK_ALIGNED(q, a);
    r = hak_memalign(a, n);
    CHECK(r != NULL);
    CHECK_ALIGNED(r, a);
    fill_pattern(p, n, 1);
    fill_pattern(q, n, 2);
    fill_pattern(r, n, 3);
    CHECK(hak_malloc_usable_size(p) >= n && hak_malloc_usable_size(q) >= n &&
          hak_malloc_usable_size(r) >= n);
    CHECK_PATTERN(p, n, 1);
    CHECK_PATTERN(q, n, 2);
    CHECK_PATTERN(r, n, 3);
    p = hak_realloc(p, n * 3);
    CHECK(p != NULL);
    CHECK_PATTERN(p, n, 1);
    hak_free(p);
    hak_free_aligned_sized(q, a, n);
    hak_free(r);
  }
  {
    void *v = hak_valloc(100), *pv = hak_pvalloc(100);
    CHECK(v && pv);
    CHECK_ALIGNED(v, page);
    CHECK_ALIGNED(pv, page);
    CHECK(hak_malloc_usable_size(pv) >= page);
    memset(pv, 1, page);
    hak_free(v);
    hak_free(pv);
  }
}

static void os_stats(void) {
  hak_os_stats_t a, b, c;
  void *p;
  hak_os_stats(&a);
  p = hak_malloc(32 * MiB);
  CHECK(p != NULL);
  memset(p, 1, 4096);
  hak_os_stats(&b);
  CHECK(b.mmap_calls >= 1);
  CHECK_MSG(b.mapped_bytes >= 32 * MiB, "mapped_bytes %llu with a 32 MiB block live",
            b.mapped_bytes);
  CHECK(b.peak_mapped_bytes >= b.mapped_bytes);
  CHECK(b.mmap_calls >= a.mmap_calls && b.munmap_calls >= a.munmap_calls);
  hak_free(p);
  hak_os_stats(&c);
  CHECK(c.peak_mapped_bytes >= b.peak_mapped_bytes);
  CHECK(c.mmap_calls >= b.mmap_calls && c.munmap_calls >= b.munmap_calls &&
        c.madvise_calls >= b.madvise_calls && c.mremap_calls >= b.mremap_calls);
}

static void print_stats(void *arg) {
  void *p = hak_malloc(100);
  (void)arg;
  hak_stats_print(NULL, NULL);
  hak_free(p);
}

static void stats_print(void) {
  child_result_t res;
  run_in_child(print_stats, NULL, 20, &res);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "child %s",
            describe_status(res.status));
  CHECK_MSG(strlen(res.err) > 0, "hak_stats_print wrote nothing to stderr");
}

static void *flushing_thread(void *arg) {
  void **out = (void **)arg;
  void *p[500];
  int i;
  for (i = 0; i < 500; i++) {
    p[i] = hak_malloc((size_t)i + TAGGED_MIN);
    CHECK(p[i] != NULL);
    tagged_fill(p[i], (size_t)i + TAGGED_MIN, 8);
  }
  for (i = 0; i < 400; i++) hak_free(p[i]);
  hak_thread_flush();
  /* It can go on allocating after the flush. */
  for (i = 0; i < 400; i++) {
    p[i] = hak_malloc((size_t)i + TAGGED_MIN);
    CHECK(p[i] != NULL);
    tagged_fill(p[i], (size_t)i + TAGGED_MIN, 8);
  }
  for (i = 0; i < 400; i++) hak_free(p[i]);
  hak_thread_flush();
  hak_thread_flush();
  for (i = 400; i < 500; i++) out[i - 400] = p[i];
  return NULL;
}

static void thread_flush(void) {
  void *from_thread[100];
  pthread_t t;
  int k, i;
  for (k = 0; k < 20; k++) {
    CHECK(pthread_create(&t, NULL, flushing_thread, from_thread) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    for (i = 0; i < 100; i++) {
      CHECK_TAGGED(from_thread[i]);
      hak_free(from_thread[i]);
    }
  }
  /* The main thread flushes too, and goes on. */
  hak_thread_flush();
  from_thread[0] = hak_malloc(64);
  CHECK(from_thread[0] != NULL);
  hak_free(from_thread[0]);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  RUN(version);
  RUN(malloc_calloc_free);
  RUN(calloc_after_dirty_free);
  RUN(errors);
  RUN(realloc_paths);
  RUN(aligned_functions);
  RUN(os_stats);
  RUN(stats_print);
  RUN(thread_flush);
  return 0;
}
