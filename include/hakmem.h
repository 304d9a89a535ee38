/* SPDX-License-Identifier: MIT */
/* hakmem: a general-purpose memory allocator for Linux.
 *
 * Linked (libhakmem.a) or preloaded (LD_PRELOAD=libhakmem.so), hakmem replaces
 * the C and C++ allocation API of the process (malloc, free, operator new, ...).
 * The prefixed functions below are the same allocator under names of its own,
 * for programs that want to call it explicitly next to another malloc. */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 1
#define HAKMEM_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define HAKMEM_VERSION (HAKMEM_VERSION_MAJOR * 10000 + HAKMEM_VERSION_MINOR * 100 + HAKMEM_VERSION_PATCH)

#if defined(__GNUC__)
#define HAK_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#define HAK_ALLOC_SIZE(...) __attribute__((alloc_size(__VA_ARGS__)))
#else
#define HAK_MALLOC_ATTR
#define HAK_ALLOC_SIZE(...)
#endif

/* The version of the library actually loaded (HAKMEM_VERSION at its build). */
int hak_version(void);
/* "hakmem 0.1.0 (fast)": version and build variant. */
const char *hak_version_string(void);

void *hak_malloc(size_t size) HAK_MALLOC_ATTR HAK_ALLOC_SIZE(1);
void *hak_calloc(size_t count, size_t size) HAK_MALLOC_ATTR HAK_ALLOC_SIZE(1, 2);
void *hak_realloc(void *p, size_t size) HAK_ALLOC_SIZE(2);
void *hak_reallocarray(void *p, size_t count, size_t size) HAK_ALLOC_SIZE(2, 3);
void  hak_free(void *p);
void  hak_free_sized(void *p, size_t size);
void  hak_free_aligned_sized(void *p, size_t alignment, size_t size);
int   hak_posix_memalign(void **out, size_t alignment, size_t size);
void *hak_aligned_alloc(size_t alignment, size_t size) HAK_MALLOC_ATTR HAK_ALLOC_SIZE(2);
void *hak_memalign(size_t alignment, size_t size) HAK_MALLOC_ATTR HAK_ALLOC_SIZE(2);
void *hak_valloc(size_t size) HAK_MALLOC_ATTR HAK_ALLOC_SIZE(1);
void *hak_pvalloc(size_t size) HAK_MALLOC_ATTR;
size_t hak_malloc_usable_size(const void *p);

/* Hands the calling thread's cached free blocks back to the shared pool. The
 * thread can go on allocating; threads do this by themselves when they exit. */
void hak_thread_flush(void);
/* malloc_trim: hak_thread_flush, then every free 64 KiB unit is returned to
 * the OS now instead of after HAKMEM_PURGE_DELAY_MS.  Returns 1. */
int hak_malloc_trim(size_t pad);

/* Counters of the calls hakmem made to the OS since start-up. */
typedef struct hak_os_stats {
  unsigned long long mmap_calls;
  unsigned long long munmap_calls;
  unsigned long long madvise_calls;
  unsigned long long mremap_calls;
  unsigned long long mapped_bytes;     /* currently mapped by hakmem */
  unsigned long long peak_mapped_bytes;
} hak_os_stats_t;
void hak_os_stats(hak_os_stats_t *out);

/* Writes hakmem's statistics, human-readable, to stderr. */
void hak_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif
