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

/* Writes the sampled heap profile to `path` in the legacy heap-profile text
 * that pprof reads (google-pprof --text PROGRAM FILE).  0, or -1 with errno:
 * ENOENT if sampling is off (HAKMEM_PROF, HAKMEM_PROF_LEAKS or
 * HAKMEM_PROF_SAMPLE turn it on), else that of the open, write or close
 * that failed. */
int hak_prof_dump(const char *path);

/* Hands the calling thread's cached free blocks back to the shared pool. The
 * thread can go on allocating; threads do this by themselves when they exit. */
void hak_thread_flush(void);
/* malloc_trim: hak_thread_flush, then everything free is given back to the OS
 * now rather than on the purge schedule.  1 if any memory was, else 0. */
int hak_malloc_trim(size_t pad);
/* Walks the calling thread's cache, every size class's slabs, every
 * parked batch of blocks up to 32 KiB and the spare larger blocks (32-256
 * KiB), under their locks, and checks that
 * each list's length agrees with its count and that each block belongs where
 * it is; a mismatch (heap corruption) ends in a `hakmem:` line and abort().
 * Returns the free blocks walked.  For tests and debugging: it takes time in
 * proportion to the free blocks, and other threads wait on the locks. */
size_t hak_heap_check(void);

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

/* ---- statistics -------------------------------------------------------------
 * hak_stats_get fills a snapshot without stopping the threads: each figure
 * was true at some moment of the call (other threads' caches are read as
 * they are), and the call takes each lock it needs briefly, one at a time:
 * cheap enough to call once a second from a monitoring thread. */
#define HAK_NCLASSES 116

typedef struct hak_class_stats {
  size_t block_size;              /* bytes a block of the class can hold */
  size_t in_use;                  /* blocks the program holds */
  size_t thread_cached;           /* blocks in thread caches */
  size_t central_cached;          /* blocks parked in the central cache or free in their slabs */
  size_t slabs;                   /* slabs of the class */
  /* traffic (HAKMEM_TINY_FRONT_METRICS), since start-up: */
  unsigned long long hits;        /* mallocs a thread cache served (observe build; 0 otherwise) */
  unsigned long long misses;      /* mallocs that found the thread's list empty */
  unsigned long long overflows;   /* frees that found it full */
  unsigned long long moved;       /* blocks moved between thread caches and the central cache */
  unsigned long long parked_hits; /* refills served whole by a parked batch */
  unsigned long long from_other_threads;  /* blocks received in batches another thread parked */
  unsigned long long slabs_made;  /* slabs ever made */
} hak_class_stats_t;

typedef struct hak_stats {
  size_t in_use_bytes;            /* in blocks the program holds, huge ones included */
  size_t peak_in_use_bytes;       /* the most bytes ever out of the central caches (in use plus in
                                     thread caches), tracked on the slow paths in steps per thread
                                     (a rise of 1 MiB, a fall of 8 MiB) and by every hak_stats_get:
                                     at most 1 MiB per thread below the true peak, at most 8 MiB per
                                     other thread above it, and never below a figure returned before */
  size_t thread_cached_bytes;     /* in blocks in thread caches */
  size_t central_cached_bytes;    /* in blocks parked in the central caches or free in slabs */
  size_t huge_blocks;             /* blocks above 1 MiB in use */
  size_t huge_bytes;              /* and their bytes */
  size_t committed_bytes;         /* SuperSlab and huge-region units in use, or free and resident */
  size_t free_resident_bytes;     /* of which free, waiting for the purge schedule */
  size_t mapped_bytes;            /* address space hakmem has mapped */
  size_t peak_mapped_bytes;
  size_t resident_bytes;          /* the process's resident set, from the OS */
  unsigned long long mmap_calls, munmap_calls, madvise_calls, mremap_calls;
  unsigned threads;               /* threads with a cache */
  unsigned nclasses;              /* HAK_NCLASSES */
  hak_class_stats_t classes[HAK_NCLASSES];  /* classes[i]: class i + 1 */
} hak_stats_t;
void hak_stats_get(hak_stats_t *out);

/* Writes the statistics as text (hak_stats_print) or as one JSON object
 * (hak_stats_json) through out(text, arg), a piece at a time; out NULL:
 * to stderr.  Neither allocates. */
void hak_stats_print(void (*out)(const char *text, void *arg), void *arg);
void hak_stats_json(void (*out)(const char *text, void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif
