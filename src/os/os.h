/* SPDX-License-Identifier: MIT */
/* The OS layer (os.c): every mmap, munmap, mremap, madvise and mprotect of
 * hakmem's, counted; the space reserved at start for SuperSlabs and regions. */
#ifndef HK_OS_H
#define HK_OS_H

#include "base/base.h"

HK_HIDDEN void *hk_os_map_aligned(size_t size, size_t alignment, size_t offset);
HK_HIDDEN void *hk_os_map(size_t size);  /* read-write where the kernel puts it, off the aligned mappings' way */
HK_HIDDEN void hk_os_unmap(void *p, size_t size);  /* size as given to the map; a slot of the space goes back to it */
#define HK_SPACE_SIZE ((size_t)1 << 30)           /* reserved with the class map when it can be */
HK_HIDDEN void hk_os_space_init(void *start, size_t size);
HK_HIDDEN void *hk_os_space_take(size_t size);  /* HK_SS_SIZE or HK_REGION_SIZE; NULL if none free */
/* in place, or moved onto target (a mapping of new_size), given back if refused */
HK_HIDDEN void *hk_os_remap(void *p, size_t old_size, size_t new_size, void *target);
HK_HIDDEN size_t hk_os_page_size(void);
HK_HIDDEN void *hk_os_reserve(size_t size);  /* address space, inaccessible, not counted as mapped */
HK_HIDDEN void hk_os_unreserve(void *p, size_t size);  /* hk_os_reserve's, given back */
HK_HIDDEN bool hk_os_protect_as(void *p, size_t size, int prot);    /* mprotect: PROT_* */
HK_HIDDEN void hk_os_munlock(void *p, size_t size);
HK_HIDDEN void hk_os_space_unlock_untaken(void);           /* after mlockall without MCL_FUTURE */
HK_HIDDEN void hk_os_space_lock(void);                      /* no slot taken meanwhile */
HK_HIDDEN void hk_os_space_unlock(bool child);
HK_HIDDEN int hk_os_mlockall(int flags);                             /* the system call itself */
HK_HIDDEN int hk_os_unshare(int flags);                              /* the system calls themselves */
HK_HIDDEN int hk_os_setns(int fd, int nstype);
/* Whether thread tid of process pid has ended and been reaped (tgkill's
 * ESRCH); a refusal (a seccomp filter, EPERM) says no.  errno untouched. */
HK_HIDDEN bool hk_os_thread_gone(pid_t pid, pid_t tid);
HK_HIDDEN bool hk_os_read(void *dst, const void *src, size_t n);  /* a fault-safe copy of this process's memory */
HK_HIDDEN bool hk_os_discard(void *p, size_t size);  /* its pages gone: zero when next read; false if refused (mlock) */
HK_HIDDEN bool hk_os_decommit(void *p, size_t size);  /* as HAKMEM_SS_MEM_LEAN_DECOMMIT says; false if refused */
HK_HIDDEN bool hk_os_huge_pages_available(void);  /* the kernel gives transparent huge pages to this process */
HK_HIDDEN void hk_os_advise_huge(void *p, size_t size);  /* transparent huge pages wanted */
HK_HIDDEN bool hk_os_collapse_huge(void *p, size_t size);  /* and made of the pages there now; false if refused */
/* The pages of [p, p + size) written in now, those not resident yet, as a
 * write would (a kernel without MADV_POPULATE_WRITE leaves them to the
 * writes): where each page fault exits to a hypervisor, one call for a page
 * cost a fourth of its fault (2.8 against 11 us a page, 1 against 11 for
 * 16 pages: docs/DESIGN.md, Page faults on a virtual machine). */
HK_HIDDEN void hk_os_populate(void *p, size_t size);
HK_HIDDEN bool hk_os_unit_pages(void *p, unsigned n, uint8_t *pages);  /* pages[i]: 4 KiB pages resident in unit i of n <= 64 from p */
HK_HIDDEN unsigned hk_os_resident_pages(void *p, size_t size);  /* of [p, p+size), in 4 KiB pages, at most 4 MiB of them */
HK_HIDDEN void hk_os_advise_small(void *p, size_t size);  /* no huge pages there, even where THP is "always" */
HK_HIDDEN void *hk_os_space_first(void);  /* the space's first SuperSlab slot, or NULL */
HK_HIDDEN void hk_os_protect(void *p, size_t size, bool access);  /* guard pages: access or not */
HK_HIDDEN bool hk_os_tid_init(void);  /* once the allocator is ready; true if hk_os_tid needs no system call */
HK_HIDDEN pid_t hk_os_tid(void);  /* gettid(), read from the C library's thread descriptor where it can be */
HK_HIDDEN unsigned hk_os_cpus(void);  /* CPUs the process may run on */
HK_HIDDEN void hk_os_set_ceiling(uintptr_t ceiling);  /* new mappings go below it */

#endif
