/* SPDX-License-Identifier: MIT */
/* hakmem only.  A block of a large class (32 KiB-1 MiB) that malloc takes
 * from memory new from the OS, or given back to it, is handed out without
 * being written: its pages fault when the program writes them, not inside
 * malloc (whose tail latency they were), and calloc leaves it alone, since
 * it reads as zero.  But where huge pages start small (some of a process's
 * first blocks, under the default profile), the pages of the bytes asked
 * for are written in at once, no more: they read as zero all the same.
 * Memory given back with MADV_FREE, or whose giving back the kernel
 * refused, may still hold old data: a block there is cleared by calloc, and
 * a live block there is never taken for a freed one. */
#include <malloc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include "hakmem.h"
#include "testutil.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Resident pages among the `pages` from p's page on (mincore). */
static size_t resident(const void *p, size_t pages) {
  unsigned char vec[128];
  CHECK(pages <= sizeof vec);
  uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
  CHECK(mincore((void *)page, pages * 4096, vec) == 0);
  size_t n = 0;
  for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
  return n;
}

/* Sizes of both kinds of large block: a slab of a SuperSlab, and a run of
 * units of a region (above 256 KiB); each has a page past the bytes asked
 * for (its class: 26 and 104 pages). */
static const size_t sizes[] = {100000, 400000};

/* The pages of a new block of n bytes that malloc may write in: those of
 * the bytes asked for where huge pages may start small (transparent huge
 * pages on, HAKMEM_SS_THP and HAKMEM_HUGE_THP not 0) and the kernel has
 * MADV_POPULATE_WRITE (Linux 5.14: an emulator may take it and do
 * nothing), else none. */
static size_t written_in(size_t n) {
  const char *ss = getenv("HAKMEM_SS_THP"), *huge = getenv("HAKMEM_HUGE_THP");
  if ((ss && !strcmp(ss, "0")) || (huge && !strcmp(huge, "0")) || prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1) return 0;
  char mode[96] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return 0;
  bool on = fgets(mode, sizeof mode, f) && !strstr(mode, "[never]");
  fclose(f);
  void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  bool populate = madvise(m, 4096, MADV_POPULATE_WRITE) == 0 && resident(m, 1) == 1;
  munmap(m, 4096);
  return on && populate ? (n + 4095) / 4096 : 0;
}

static void malloc_leaves_a_new_block_untouched(void) {
  for (size_t i = 0; i < 2; i++) {
    size_t n = sizes[i], in = written_in(n);
    char *p = malloc(n);
    CHECK(p != NULL);
    size_t r = resident(p, in + 1);
    /* the process's first region starts on small pages: its first block is written in */
    CHECK_MSG(r == in || (r == 0 && n < 262144), "malloc(%zu): %zu pages of its new block resident, not %s%zu", n, r,
              n < 262144 ? "0 or " : "", in);
    p[0] = 1;
    CHECK(resident(p, 1) == 1);
    void *q = realloc(p, sizes[i] - 1000);  /* a live block, not taken for a freed one */
    CHECK(q == p);
    free(q);
  }
}

static void calloc_leaves_a_new_block_untouched(void) {
  for (size_t i = 0; i < 2; i++) {
    size_t n = sizes[i];
    unsigned char *p = calloc(1, n);
    CHECK(p != NULL);
    size_t in = written_in(n) < 16 ? written_in(n) : 16, r = resident(p, 16);
    CHECK_MSG(r == 0 || r == in, "calloc(1, %zu): %zu of its first 16 pages resident, not 0 or %zu", n, r, in);
    CHECK_EQ(find_not_byte(p, 0, n), SIZE_MAX);
    memset(p, 0xa5, n);
    free(p);
    /* the same memory again (the thread's cache, or resident units): written, so cleared */
    unsigned char *q = calloc(1, n);
    CHECK(q != NULL);
    CHECK_EQ(find_not_byte(q, 0, n), SIZE_MAX);
    free(q);
  }
}

/* Under HAKMEM_PURGE_DELAY_MS=0 a large block's memory goes back to the OS
 * at its free (past the thread's cache); with MADV_FREE it keeps its data
 * while the kernel has memory to spare. */
static void given_back_with_madv_free(void) {
  for (size_t i = 0; i < 2; i++) {
    size_t n = sizes[i];
    /* more blocks than the thread may cache, so that some go back */
    enum { BLOCKS = 64 };
    unsigned char *p[BLOCKS];
    for (int k = 0; k < BLOCKS; k++) {
      p[k] = malloc(n);
      CHECK(p[k] != NULL);
      memset(p[k], 0xa5, n);
    }
    for (int k = 0; k < BLOCKS; k++) free(p[k]);
    for (int k = 0; k < BLOCKS; k++) {
      p[k] = calloc(1, n);
      CHECK(p[k] != NULL);
      CHECK_MSG(find_not_byte(p[k], 0, n) == SIZE_MAX, "calloc(1, %zu): old data at %zu", n,
                find_not_byte(p[k], 0, n));
    }
    for (int k = 0; k < BLOCKS; k++) free(p[k]);
    for (int k = 0; k < BLOCKS; k++) {
      p[k] = malloc(n);
      CHECK(p[k] != NULL);
      p[k] = realloc(p[k], n - 1000);  /* aborts if taken for a freed block */
      CHECK(p[k] != NULL);
    }
    for (int k = 0; k < BLOCKS; k++) free(p[k]);
  }
}

/* Free units side by side, every other one given back to the OS (reads as
 * zero) and the others freed after it, still holding their data: a block
 * of two that starts on a clean one ends on a dirty one, and calloc clears
 * it all the same.  `one`: a block of one unit (or of `units` for the
 * regions' classes), `two`: a block one unit longer. */
static void mixed_runs_for(size_t one, size_t two, int clean_first) {
  enum { BLOCKS = 120 };
  static unsigned char *p[BLOCKS];
  for (int k = 0; k < BLOCKS; k++) {
    p[k] = malloc(one);
    CHECK(p[k] != NULL);
    memset(p[k], 0xa5, one);
  }
  for (int k = clean_first; k < BLOCKS; k += 2) free(p[k]);
  hak_thread_flush();
  malloc_trim(0);
  for (int k = 1 - clean_first; k < BLOCKS; k += 2) free(p[k]);
  hak_thread_flush();
  for (int k = 0; k < BLOCKS / 2; k++) {
    p[k] = calloc(1, two);
    CHECK(p[k] != NULL);
    CHECK_MSG(find_not_byte(p[k], 0, two) == SIZE_MAX, "calloc(1, %zu) #%d: old data at %zu", two, k,
              find_not_byte(p[k], 0, two));
  }
  for (int k = 0; k < BLOCKS / 2; k++) free(p[k]);
}

/* Each in a process of its own: which units a run starts on depends on
 * what came before. */
static void mixed_runs_superslab_even(void) { mixed_runs_for(60000, 120000, 0); }  /* 1 and 2 units */
static void mixed_runs_superslab_odd(void) { mixed_runs_for(60000, 120000, 1); }
static void mixed_runs_region_even(void) { mixed_runs_for(5 * 65536, 6 * 65536, 0); }  /* 5 and 6 units */
static void mixed_runs_region_odd(void) { mixed_runs_for(5 * 65536, 6 * 65536, 1); }

static const self_case_t cases[] = {
    {"malloc", malloc_leaves_a_new_block_untouched, {NULL}},
    {"malloc_no_huge_pages", malloc_leaves_a_new_block_untouched, {"HAKMEM_SS_THP=0", "HAKMEM_HUGE_THP=0", NULL}},
    {"calloc", calloc_leaves_a_new_block_untouched, {NULL}},
    {"calloc_no_huge_pages", calloc_leaves_a_new_block_untouched, {"HAKMEM_SS_THP=0", "HAKMEM_HUGE_THP=0", NULL}},
    {"madv_free", given_back_with_madv_free,
     {"HAKMEM_PURGE_DELAY_MS=0", "HAKMEM_SS_MEM_LEAN_DECOMMIT=FREE", NULL}},
    {"mixed_runs_superslab_even", mixed_runs_superslab_even, {NULL}},
    {"mixed_runs_superslab_odd", mixed_runs_superslab_odd, {NULL}},
    {"mixed_runs_region_even", mixed_runs_region_even, {NULL}},
    {"mixed_runs_region_odd", mixed_runs_region_odd, {NULL}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 60);
}
