/* SPDX-License-Identifier: MIT */
/* The exported C API: the hak_* names and, unless built with HAK_NO_OVERRIDE,
 * the standard names that replace the C library's allocator. */
#define _GNU_SOURCE
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include "api/api.h"

#define HK_STR2(x) #x
#define HK_STR(x) HK_STR2(x)

HK_EXPORT int hak_version(void) { return HAKMEM_VERSION; }

HK_EXPORT const char *hak_version_string(void) {
  return "hakmem " HK_STR(HAKMEM_VERSION_MAJOR) "." HK_STR(HAKMEM_VERSION_MINOR) "." HK_STR(
      HAKMEM_VERSION_PATCH) " (" HAK_VARIANT_NAME ")";
}

/* malloc's fast path starts a cache line and free's follows (off a line they
 * ran slower: docs/DESIGN.md, Smaller details of the fast paths). */
HK_EXPORT __attribute__((aligned(HK_CACHELINE))) void *hak_malloc(size_t size) { return hk_malloc_fast(size); }
HK_EXPORT void hak_free(void *p) { hk_free_fast(p); }
HK_EXPORT void *hak_calloc(size_t count, size_t size) { return hk_calloc(count, size); }
HK_EXPORT void *hak_realloc(void *p, size_t size) { return hk_realloc(p, size); }
HK_EXPORT void hak_free_sized(void *p, size_t size) { hk_free_fast(p); }
HK_EXPORT void hak_free_aligned_sized(void *p, size_t alignment, size_t size) { hk_free_fast(p); }
HK_EXPORT size_t hak_malloc_usable_size(const void *p) { return hk_usable_size(p); }

HK_EXPORT void *hak_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return hk_realloc(p, total);
}

HK_EXPORT int hak_posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment % sizeof(void *) != 0 || !hk_is_pow2(alignment)) return EINVAL;
  void *p = hk_aligned(alignment, size);
  if (!p) return ENOMEM;  /* errno ENOMEM as well, as glibc's; a success leaves it alone */
  *out = p;
  return 0;
}

/* C17 7.22.3.1: an alignment the implementation supports: any power of two. */
HK_EXPORT void *hak_aligned_alloc(size_t alignment, size_t size) {
  if (!hk_is_pow2(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return hk_aligned(alignment, size);
}

/* glibc's memalign: an alignment that is not a power of two is rounded up. */
HK_EXPORT void *hak_memalign(size_t alignment, size_t size) {
  if (alignment > ((size_t)1 << (sizeof(size_t) * 8 - 1))) {
    errno = EINVAL;
    return NULL;
  }
  if (!hk_is_pow2(alignment)) alignment = alignment <= 1 ? 1 : (size_t)1 << (64 - __builtin_clzl(alignment - 1));
  return hk_aligned(alignment, size);
}

/* The calling thread's cache handed back; the blocks may leave memory to
 * give back, so a tick is asked for, as after any free's trip home (else an
 * idle process kept it). */
HK_EXPORT void hak_thread_flush(void) {
  hk_tcache_flush(&hk_tc);
  hk_purge_poll(false);
}

/* glibc's malloc_trim: the calling thread's cache is handed back, and
 * everything free (but what other threads' caches hold) goes back to the OS
 * now, not on the purge schedule.  1 if memory was given back, as glibc says;
 * `pad` (room to leave at the top of glibc's heap) has no counterpart. */
HK_EXPORT int hak_malloc_trim(size_t pad) {
  hk_process_init();
  return hk_purge_all();
}

HK_EXPORT void *hak_valloc(size_t size) { return hk_aligned(hk_os_page_size(), size); }

HK_EXPORT void *hak_pvalloc(size_t size) {
  size_t page = hk_os_page_size();
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return NULL;
  }
  return hk_aligned(page, size ? hk_align_up(size, page) : page);
}

#ifndef HAK_NO_OVERRIDE
/* glibc declares its internal names without the allocation attributes. */
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#define HK_ALIAS(name) __attribute__((alias(#name), visibility("default")))

void *malloc(size_t size) HK_ALIAS(hak_malloc);
void free(void *p) HK_ALIAS(hak_free);
void *calloc(size_t count, size_t size) HK_ALIAS(hak_calloc);
void *realloc(void *p, size_t size) HK_ALIAS(hak_realloc);
void *reallocarray(void *p, size_t count, size_t size) HK_ALIAS(hak_reallocarray);
int posix_memalign(void **out, size_t alignment, size_t size) HK_ALIAS(hak_posix_memalign);
void *aligned_alloc(size_t alignment, size_t size) HK_ALIAS(hak_aligned_alloc);
void *memalign(size_t alignment, size_t size) HK_ALIAS(hak_memalign);
void *valloc(size_t size) HK_ALIAS(hak_valloc);
void *pvalloc(size_t size) HK_ALIAS(hak_pvalloc);
void free_sized(void *p, size_t size) HK_ALIAS(hak_free_sized);
void free_aligned_sized(void *p, size_t alignment, size_t size) HK_ALIAS(hak_free_aligned_sized);
HK_EXPORT size_t malloc_usable_size(void *p) { return hk_usable_size(p); }
/* Not an allocation call: locks the program's memory without filling the
 * class map's 2 GiB of address space (class_map.c). */
HK_EXPORT int mlockall(int flags) { return hk_class_map_mlockall(flags); }
/* Not allocation calls either: a new user namespace (unshare, setns) is
 * refused to a process of more than one thread, which the purger thread of
 * the balanced and lean profiles would make it (service/purge.c). */
HK_EXPORT int unshare(int flags) {
  bool alone = flags & (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM);
  bool stopped = alone && hk_purger_stop();
  int result = hk_os_unshare(flags);
  if (stopped) hk_purger_resume();  /* errno untouched */
  return result;
}
HK_EXPORT int setns(int fd, int nstype) {
  bool stopped = hk_purger_stop();  /* nstype 0 may name a user namespace too */
  int result = hk_os_setns(fd, nstype);
  if (stopped) hk_purger_resume();  /* errno untouched */
  return result;
}
int malloc_trim(size_t pad) HK_ALIAS(hak_malloc_trim);

/* glibc's internal names, called directly by some programs and libraries. */
void *__libc_malloc(size_t size) HK_ALIAS(hak_malloc);
void __libc_free(void *p) HK_ALIAS(hak_free);
void *__libc_calloc(size_t count, size_t size) HK_ALIAS(hak_calloc);
void *__libc_realloc(void *p, size_t size) HK_ALIAS(hak_realloc);
void *__libc_memalign(size_t alignment, size_t size) HK_ALIAS(hak_memalign);
void *__libc_valloc(size_t size) HK_ALIAS(hak_valloc);
void *__libc_pvalloc(size_t size) HK_ALIAS(hak_pvalloc);
int __posix_memalign(void **out, size_t alignment, size_t size) HK_ALIAS(hak_posix_memalign);
void cfree(void *p) HK_ALIAS(hak_free);
#endif
