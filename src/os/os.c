/* SPDX-License-Identifier: MIT */
/* OS layer: every mmap/munmap/mremap/madvise hakmem makes, counted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "os/os.h"

/* Statistics, nothing reached through them: relaxed (the peak, on its own,
 * only raised by compare-and-swap). */
static atomic_ullong n_mmap, n_munmap, n_mremap, n_madvise;
static atomic_size_t mapped_bytes, peak_mapped_bytes;
/* Where the next aligned mapping may fit: relaxed, only tried with
 * MAP_FIXED_NOREPLACE, never read through; a stale one costs a try. */
static atomic_uintptr_t next_aligned_hint;

static void account_mapped(size_t size) {
  hk_atomic_max(&peak_mapped_bytes, atomic_fetch_add_explicit(&mapped_bytes, size, memory_order_relaxed) + size);
}

/* errno stays as it was; *error (if asked) gets the call's, 0 on success. */
static void *map_prot(void *hint, size_t size, int prot, int extra_flags, int *error) {
  atomic_fetch_add_explicit(&n_mmap, 1, memory_order_relaxed);
  int saved = errno;
  void *p = mmap(hint, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  if (error) *error = p == MAP_FAILED ? errno : 0;
  errno = saved;
  return p == MAP_FAILED ? NULL : p;
}

static void *map_at(void *hint, size_t size, int extra_flags) {
  return map_prot(hint, size, PROT_READ | PROT_WRITE, extra_flags, NULL);
}

static bool unmap_raw(void *p, size_t size) {
  atomic_fetch_add_explicit(&n_munmap, 1, memory_order_relaxed);
  return hk_keep_errno(munmap(p, size)) == 0;
}

static uintptr_t ceiling = UINTPTR_MAX;  /* mappings must end below it (the class map's) */

void hk_os_set_ceiling(uintptr_t c) { ceiling = c; }

/* Tries a mapping exactly at `at`; NULL if anything is there, or if the
 * kernel refused it for want of memory (*no_room, if asked: an address-space
 * limit, or too many mappings, which no other place would escape). */
static uint8_t *map_exactly(uintptr_t at, size_t size, bool *no_room) {
  int error;
  uint8_t *p = map_prot((void *)at, size, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE, &error);
  if (no_room) *no_room = error == ENOMEM;
  if (p && (uintptr_t)p != at) {  /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
    unmap_raw(p, size);
    p = NULL;
  }
  return p;
}

/* A mapping of `size` bytes at an aligned place at or below `top` (p +
 * offset a multiple of `alignment`), trying places `step` apart going down;
 * NULL if none of the first 4 096 is free, or at once if the kernel has no
 * room for it anywhere.  The first place may end past the kernel's own top
 * (x86-64's is 2^47 less a page): its ENOMEM says nothing of the others. */
static uint8_t *map_below(uintptr_t top, size_t size, size_t alignment, size_t offset, size_t step) {
  if (top < size + alignment) return NULL;
  uint8_t *p = NULL;
  bool no_room = false;
  for (uintptr_t at = (top - size + offset) / alignment * alignment - offset, tries = 0;
       !p && !no_room && at >= HK_UNIT_SIZE && at <= top && tries < 4096; at = at >= step ? at - step : 0, tries++)
    p = map_exactly(at, size, tries ? &no_room : NULL);
  return p;
}

/* Metadata mapped where the kernel puts it: by hk_os_map_aligned, it would
 * lead the next aligned mappings below it, where ThreadSanitizer under
 * qemu-aarch64 refused them. */
void *hk_os_map(size_t size) {
  size = hk_align_up(size, HK_PAGE_SIZE);  /* counted as the kernel maps it */
  void *p = map_at(NULL, size, 0);
  if (p) account_mapped(size);
  return p;
}

/* `size` bytes mapped at p, p + offset a multiple of `alignment`, below the
 * ceiling.  Mappings come top-down, so just below the last aligned one is
 * usually free and aligned: one call, where over-map and trim take three.  If
 * the kernel maps above the ceiling or the limit leaves no room to over-map
 * (no ceiling: below the kernel's pick), places are tried downwards. */
void *hk_os_map_aligned(size_t size, size_t alignment, size_t offset) {
  size = hk_align_up(size, HK_PAGE_SIZE);  /* counted as the kernel maps it, and as hk_os_unmap counts it */
  uintptr_t hint = atomic_load_explicit(&next_aligned_hint, memory_order_relaxed);
  uintptr_t step = hk_align_up(size, alignment);
  uint8_t *p = NULL;
  uintptr_t below = hint >= step ? (hint - step + offset) / alignment * alignment - offset : 0;
  if (below >= HK_UNIT_SIZE && below < hint) p = map_exactly(below, size, NULL);  /* not page 0, nor wrapped */
  size_t over = size + alignment - HK_PAGE_SIZE;
  if (over < size) return NULL;
  uint8_t *raw = p ? NULL : map_at(NULL, over, 0);
  if (raw) {
    p = (uint8_t *)hk_align_up((uintptr_t)raw + offset, alignment) - offset;
    if (p > raw) unmap_raw(raw, (size_t)(p - raw));
    if (raw + over > p + size) unmap_raw(p + size, (size_t)(raw + over - (p + size)));
    if ((uintptr_t)p + size > ceiling) {
      unmap_raw(p, size);
      p = map_below(ceiling, size, alignment, offset, step);
    }
  } else if (!p && ceiling != UINTPTR_MAX) {
    p = map_below(ceiling, size, alignment, offset, step);
  } else if (!p && (raw = map_at(NULL, size, 0))) {
    p = ((uintptr_t)raw + offset) % alignment ? NULL : raw;
    if (!p) {
      unmap_raw(raw, size);
      p = map_below((uintptr_t)raw + size, size, alignment, offset, step);
    }
  }
  if (!p) return NULL;
  /* the next mapping of this size and alignment would fit just below */
  atomic_store_explicit(&next_aligned_hint, (uintptr_t)p, memory_order_relaxed);
  account_mapped(size);
  return p;
}

/* The space: address space reserved with the class map, in slots (SuperSlabs
 * in its first HK_SPACE_SS bytes, huge regions after), inaccessible so
 * mlockall does not fill 1 GiB of it.  A slot is taken by an atomic bitmap,
 * made accessible, given back inaccessible and zero: no mmap or munmap calls
 * for them.  Without one, or once full, callers map their own. */
#define HK_SPACE_SS ((size_t)256 << 20)
static uint8_t *space;
/* A bit per slot: SuperSlabs, regions.  Set under space_lock (acquire),
 * cleared by a giver without it (release) after its last use and discard of
 * the slot, so these come before the next taker's use; takers race only
 * with givers, the lock orders them among themselves. */
static atomic_ullong space_taken[2];
static atomic_bool space_advised;     /* the SuperSlab slots have had their madvise; under space_lock */
/* SuperSlab slots mapped anew since, without it: set before the slot's bit is
 * cleared (release), read by its next taker after its bit is set (acquire), so
 * relaxed itself. */
static atomic_ullong space_remapped;

static const struct {
  size_t offset, slot, slots;
} pools[2] = {{0, HK_SS_SIZE, HK_SPACE_SS / HK_SS_SIZE},
              {HK_SPACE_SS, HK_REGION_SIZE, (HK_SPACE_SIZE - HK_SPACE_SS) / HK_REGION_SIZE}};

void hk_os_space_init(void *start, size_t size) {
  uint8_t *s = (uint8_t *)hk_align_up((uintptr_t)start, HK_REGION_SIZE);
  if (s + HK_SPACE_SIZE > (uint8_t *)start + size || (uintptr_t)s + HK_SPACE_SIZE > ceiling) return;
  space = s;
}

/* Taking a slot waits for an mlockall under way (class_map.c), which then
 * unlocks the slots not taken: one taken meanwhile would be filled, locked. */
static pthread_mutex_t space_lock = PTHREAD_MUTEX_INITIALIZER;

void hk_os_space_lock(void) { hk_lock(&space_lock); }

void hk_os_space_unlock(bool child) {
  if (child) pthread_mutex_init(&space_lock, NULL);
  else hk_unlock(&space_lock);
}

/* A free slot of `size` bytes aligned to its size (HK_SS_SIZE or
 * HK_REGION_SIZE), zero, or NULL if there is none. */
void *hk_os_space_take(size_t size) {
  unsigned k = size == HK_REGION_SIZE;
  if (!space || size != pools[k].slot) return NULL;
  hk_lock(&space_lock);
  void *slot = NULL;
  unsigned long long all = pools[k].slots >= 64 ? ~0ull : (1ull << pools[k].slots) - 1;
  unsigned long long taken = atomic_load_explicit(&space_taken[k], memory_order_relaxed);  /* the CAS orders */
  while (!slot && taken != all) {
    unsigned i = (unsigned)__builtin_ctzll(~taken);
    if (!atomic_compare_exchange_weak_explicit(&space_taken[k], &taken, taken | 1ull << i, memory_order_acquire,
                                               memory_order_relaxed))
      continue;
    slot = space + pools[k].offset + i * size;
    if (!hk_os_protect_as(slot, size, PROT_READ | PROT_WRITE)) {  /* no memory to commit it */
      atomic_fetch_and_explicit(&space_taken[k], ~(1ull << i), memory_order_release);  /* slot unused: any order */
      slot = NULL;
      break;
    }
    account_mapped(size);
    /* huge pages for all but the first SuperSlab, else small ones (a slot
     * given back and mapped anew has lost its advice); seq_cst, where the lock
     * and the acquire above would do */
    if (k == 0 && !atomic_exchange(&space_advised, true)) {
      if (hk_opt.ss_thp) hk_os_advise_huge(space + HK_SS_SIZE, HK_SPACE_SS - HK_SS_SIZE);
      else hk_os_advise_small(space, HK_SPACE_SS);
    } else if (k == 0 && i > 0 && atomic_fetch_and(&space_remapped, ~(1ull << i)) >> i & 1) {
      if (hk_opt.ss_thp) hk_os_advise_huge(slot, size);
      else hk_os_advise_small(slot, size);
    }
  }
  hk_unlock(&space_lock);
  return slot;
}

static bool space_give(void *p, size_t size) {
  if (!space || (uint8_t *)p < space || (uint8_t *)p >= space + HK_SPACE_SIZE) return false;
  uintptr_t off = (uintptr_t)((uint8_t *)p - space);
  unsigned k = off >= HK_SPACE_SS;
  /* The slot is taken again as fresh, zero memory, inaccessible till then.
   * Locked pages refuse MADV_DONTNEED: a new inaccessible mapping in their
   * place drops them; should that fail, the slot stays taken. */
  if (hk_os_discard(p, size)) {
    hk_os_protect_as(p, size, PROT_NONE);
  } else {
    if (map_prot(p, size, PROT_NONE, MAP_FIXED | MAP_NORESERVE, NULL) != p) return true;
    if (k == 0) atomic_fetch_or_explicit(&space_remapped, 1ull << ((off - pools[k].offset) / size), memory_order_relaxed);
  }
  atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed);
  atomic_fetch_and_explicit(&space_taken[k], ~(1ull << ((off - pools[k].offset) / size)), memory_order_release);
  return true;
}

void hk_os_unmap(void *p, size_t size) {
  size = hk_align_up(size, HK_PAGE_SIZE);  /* as hk_os_map counted it */
  if (space_give(p, size)) return;
  if (unmap_raw(p, size)) atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed);
  else hk_os_discard(p, size);  /* a split refused (vm.max_map_count): its pages go, the range stays, counted */
}

/* Whether nothing is mapped at p's page. */
static bool hole_at(void *p) {
  unsigned char resident;
  int saved = errno;
  bool hole = mincore(p, 1, &resident) != 0 && errno == ENOMEM;
  errno = saved;
  return hole;
}

/* Resizes a mapping in place, or with `target` (a mapping of new_size made by
 * hk_os_map_aligned) moves it there, replacing the target; a move refused
 * gives the target back.  The kernel unmaps the target before it moves, so
 * a move refused late leaves a hole there, which another thread's mapping
 * may have filled by now: the target is unmapped only if the word written at
 * its start is still there.  Where that word cannot be read and the place
 * is not a hole, the target stays, counted: a leak, not another's mapping
 * unmapped. */
void *hk_os_remap(void *p, size_t old_size, size_t new_size, void *target) {
  atomic_fetch_add_explicit(&n_mremap, 1, memory_order_relaxed);
  uintptr_t mine = ~(uintptr_t)target, seen = 0;
  if (target) *(uintptr_t *)target = mine;
  void *q = hk_keep_errno(target ? mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, target)
                                 : mremap(p, old_size, new_size, 0));
  if (q == MAP_FAILED && target) {
    bool read = hk_os_read(&seen, target, sizeof seen);
    if (read && seen == mine) hk_os_unmap(target, new_size);
    else if (read || hole_at(target)) atomic_fetch_sub_explicit(&mapped_bytes, new_size, memory_order_relaxed);
  }
  if (q == MAP_FAILED) return NULL;
  if (target) atomic_fetch_sub_explicit(&mapped_bytes, old_size, memory_order_relaxed);
  else if (new_size > old_size) account_mapped(new_size - old_size);
  else atomic_fetch_sub_explicit(&mapped_bytes, old_size - new_size, memory_order_relaxed);
  return q;
}

/* Gives pages back as HAKMEM_SS_MEM_LEAN_DECOMMIT says: DONTNEED (zero when
 * read again) or FREE (kept till the kernel needs memory); OFF comes here
 * only from malloc_trim and the out-of-memory retry: DONTNEED. */
bool hk_os_decommit(void *p, size_t size) {
  atomic_fetch_add_explicit(&n_madvise, 1, memory_order_relaxed);
  return hk_keep_errno(madvise(p, size, hk_opt.decommit == HK_DECOMMIT_FREE ? MADV_FREE : MADV_DONTNEED)) == 0;
}

bool hk_os_discard(void *p, size_t size) {
  atomic_fetch_add_explicit(&n_madvise, 1, memory_order_relaxed);
  return hk_keep_errno(madvise(p, size, MADV_DONTNEED)) == 0;
}

void hk_os_protect(void *p, size_t size, bool access) {
  hk_os_protect_as(p, size, access ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* Asks for transparent huge pages in [p, p + size). */
void hk_os_advise_huge(void *p, size_t size) {
  atomic_fetch_add_explicit(&n_madvise, 1, memory_order_relaxed);
  hk_keep_errno(madvise(p, size, MADV_HUGEPAGE));
}

bool hk_os_huge_pages_available(void) {
  if (hk_keep_errno(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0)) == 1) return false;
  char mode[96] = "";
  int fd = hk_keep_errno(open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  ssize_t n = hk_keep_errno(read(fd, mode, sizeof mode - 1));
  hk_keep_errno(close(fd));
  return n > 0 && !strstr(mode, "[never]");
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older kernels refuse it with EINVAL */
#endif

bool hk_os_unit_pages(void *p, unsigned n, uint8_t *pages) {
  unsigned char vec[64 * HK_UNIT_PAGES];
  size_t page = (size_t)sysconf(_SC_PAGESIZE), per_unit = HK_UNIT_SIZE / page;  /* mincore's own */
  if (page > HK_UNIT_SIZE || hk_keep_errno(mincore(p, (size_t)n << HK_UNIT_SHIFT, vec))) return false;
  for (unsigned i = 0; i < n; i++) {
    unsigned resident = 0;
    for (size_t j = 0; j < per_unit; j++) resident += vec[i * per_unit + j] & 1;
    pages[i] = (uint8_t)(resident * (page / HK_PAGE_SIZE));
  }
  return true;
}

unsigned hk_os_resident_pages(void *p, size_t size) {
  uint8_t pages[64];
  unsigned n = (unsigned)hk_min(size >> HK_UNIT_SHIFT, 64), sum = 0;
  if (!hk_os_unit_pages(p, n, pages)) return 0;
  for (unsigned i = 0; i < n; i++) sum += pages[i];
  return sum;
}

void hk_os_advise_small(void *p, size_t size) {
  atomic_fetch_add_explicit(&n_madvise, 1, memory_order_relaxed);
  hk_keep_errno(madvise(p, size, MADV_NOHUGEPAGE));
}

void *hk_os_space_first(void) { return space; }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it with EINVAL */
#endif

void hk_os_populate(void *p, size_t size) {
  static bool refused;
  if (__atomic_load_n(&refused, __ATOMIC_RELAXED) || !size) return;
  uintptr_t page = hk_os_page_size(), lo = (uintptr_t)p & ~(page - 1), hi = hk_align_up((uintptr_t)p + size, page);
  atomic_fetch_add_explicit(&n_madvise, 1, memory_order_relaxed);
  int error = errno;
  if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    __atomic_store_n(&refused, true, __ATOMIC_RELAXED);
  errno = error;
}

bool hk_os_collapse_huge(void *p, size_t size) {
  hk_os_advise_huge(p, size);
  atomic_fetch_add_explicit(&n_madvise, 1, memory_order_relaxed);
  return hk_keep_errno(madvise(p, size, MADV_COLLAPSE)) == 0;
}

/* A thread's id without a system call (gettid took about 1 us here, a
 * thirtieth of a short-lived thread's whole cost): the C library keeps it in
 * its thread descriptor, where the kernel clears it at the thread's end, and
 * publishes the field for debuggers (glibc's _thread_db_pthread_tid: width
 * in bits, count, offset in the descriptor).  Used once it agrees with
 * gettid here; else, or before, every call is the system call. */
static size_t tid_offset;

bool hk_os_tid_init(void) {
  const uint32_t *field = dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid");  /* after start-up: may allocate */
  if (!field || field[0] != 8 * sizeof(pid_t) || field[1] != 1) return false;
  if (*(const pid_t *)((const char *)pthread_self() + field[2]) != gettid()) return false;
  __atomic_store_n(&tid_offset, field[2], __ATOMIC_RELAXED);
  return true;
}

pid_t hk_os_tid(void) {
  size_t offset = __atomic_load_n(&tid_offset, __ATOMIC_RELAXED);
  return offset ? *(volatile const pid_t *)((const char *)pthread_self() + offset) : gettid();
}

unsigned hk_os_cpus(void) {
  cpu_set_t set;
  if (hk_keep_errno(sched_getaffinity(0, sizeof set, &set)) != 0) return 1;
  return (unsigned)CPU_COUNT(&set);
}

void *hk_os_reserve(size_t size) {
  return map_prot(NULL, size, PROT_NONE, MAP_NORESERVE, NULL);
}

void hk_os_unreserve(void *p, size_t size) { unmap_raw(p, size); }

bool hk_os_protect_as(void *p, size_t size, int prot) { return hk_keep_errno(mprotect(p, size, prot)) == 0; }

void hk_os_munlock(void *p, size_t size) { hk_keep_errno(munlock(p, size)); }

void hk_os_space_unlock_untaken(void) {
  if (!space) return;
  for (unsigned k = 0; k < 2; k++)
    for (unsigned i = 0; i < pools[k].slots; i++)
      /* relaxed: space_lock holds takers off; a slot given back meanwhile is
       * read either way in any order */
      if (!(atomic_load_explicit(&space_taken[k], memory_order_relaxed) >> i & 1))
        hk_os_munlock(space + pools[k].offset + i * pools[k].slot, pools[k].slot);
}

int hk_os_mlockall(int flags) { return (int)syscall(SYS_mlockall, flags); }
int hk_os_unshare(int flags) { return (int)syscall(SYS_unshare, flags); }
int hk_os_setns(int fd, int nstype) { return (int)syscall(SYS_setns, fd, nstype); }

bool hk_os_thread_gone(pid_t pid, pid_t tid) {
  int error = errno;
  bool gone = syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH;
  errno = error;
  return gone;
}

/* Copies n bytes of this process's memory, maybe unmapped meanwhile (a dead
 * thread's stack): EFAULT, not a fault; false then.  Where process_vm_readv
 * is refused (seccomp, an emulator), through a pipe. */
bool hk_os_read(void *dst, const void *src, size_t n) {
  struct iovec local = {dst, n}, remote = {(void *)src, n};
  int saved = errno, fd[2];
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got < 0 && errno != EFAULT && n <= 4096 && pipe2(fd, O_CLOEXEC) == 0) {  /* a pipe holds a page at least */
    got = write(fd[1], src, n) == (ssize_t)n ? read(fd[0], dst, n) : -1;
    close(fd[0]);
    close(fd[1]);
  }
  errno = saved;
  return got == (ssize_t)n;
}

HK_EXPORT void hak_os_stats(hak_os_stats_t *out) {
  out->mmap_calls = atomic_load_explicit(&n_mmap, memory_order_relaxed);
  out->munmap_calls = atomic_load_explicit(&n_munmap, memory_order_relaxed);
  out->madvise_calls = atomic_load_explicit(&n_madvise, memory_order_relaxed);
  out->mremap_calls = atomic_load_explicit(&n_mremap, memory_order_relaxed);
  out->mapped_bytes = atomic_load_explicit(&mapped_bytes, memory_order_relaxed);
  /* read after the figure it bounds, which may have grown since */
  out->peak_mapped_bytes = hk_max(atomic_load_explicit(&peak_mapped_bytes, memory_order_relaxed), out->mapped_bytes);
}

#ifdef HK_TEST_PAGE_SIZE /* a test build pretends larger pages: their ranges are valid on small ones */
#include <stdlib.h>
static size_t test_page(size_t real) {
  const char *s = getenv("HAKMEM_TEST_PAGE_SIZE");  /* getenv does not allocate */
  size_t p = s ? strtoul(s, NULL, 10) : 0;
  return p >= real && p <= HK_UNIT_SIZE && !(p & (p - 1)) ? p : real;
}
#else
#define test_page(real) (real)
#endif
size_t hk_os_page_size(void) {
  static size_t page_size;
  if (!page_size) page_size = test_page((size_t)sysconf(_SC_PAGESIZE));
  return page_size;
}
