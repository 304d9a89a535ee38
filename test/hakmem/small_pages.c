/* SPDX-License-Identifier: MIT */
/* test-not-emulated: qemu-user drops madvise's huge-page advice, which smaps shows */
/* hakmem only, speed profile.  The process's first SuperSlab starts on small
 * pages, where the kernel's default is huge pages too (THP "always"): a
 * program with a few blocks in each of many size classes keeps it so (no
 * huge page there, and the SuperSlabs after it untouched), and a half of it
 * whose pages its blocks fill becomes one huge page.  Past it, classes'
 * first slabs go to a SuperSlab on small pages, apart from large blocks.  A
 * huge region starts on small pages too, until it holds 1 MiB; a page it
 * skipped meanwhile is a huge page when a block first touches it, and the
 * rest of that page counts as free and resident.  Skipped where the
 * kernel has no transparent huge pages or cannot collapse small pages into
 * one (MADV_COLLAPSE, Linux 6.1). */
#include <sys/mman.h>
#include "hakmem.h"
#include "testutil.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define SS_SIZE ((uintptr_t)4 << 20)

/* Whether the mapping that holds address a is marked to get no huge pages
 * (MADV_NOHUGEPAGE: "nh" among smaps' VmFlags), whatever the kernel's THP
 * mode: so a small program stays small where the default is "always". */
static bool no_huge_pages_asked(uintptr_t a) {
  FILE *f = fopen("/proc/self/smaps", "r");
  CHECK(f != NULL);
  char line[512];
  bool inside = false, nh = false, seen = false;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      if (inside) break;
      inside = lo <= a && a < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      nh = strstr(line, " nh") != NULL;
      seen = true;
      break;
    }
  }
  fclose(f);
  CHECK_MSG(seen, "no VmFlags for %#lx in smaps", (unsigned long)a);
  return nh;
}

/* AnonHugePages of the mapping that holds address a, in KiB, from smaps. */
static long anon_huge_kib(uintptr_t a) {
  FILE *f = fopen("/proc/self/smaps", "r");
  CHECK(f != NULL);
  char line[512];
  bool inside = false;
  long kib = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      if (inside) break;
      inside = lo <= a && a < hi;
    } else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) {
      break;
    }
  }
  fclose(f);
  CHECK_MSG(kib >= 0, "no mapping at %#lx in smaps", (unsigned long)a);
  return kib;
}

/* Whether madvise can collapse a range into a huge page here. */
static bool can_collapse(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char mode[128] = "";
  if (!f) return false;
  bool ok = fgets(mode, sizeof mode, f) && !strstr(mode, "[never]");
  fclose(f);
  if (!ok) return false;
  size_t size = (size_t)2 << 20;
  uint8_t *m = mmap(NULL, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  uint8_t *p = (uint8_t *)(((uintptr_t)m + size - 1) & ~(uintptr_t)(size - 1));
  p[0] = 1;
  ok = madvise(p, size, MADV_COLLAPSE) == 0;
  munmap(m, 2 * size);
  return ok;
}

enum { SMALL_PER_SIZE = 3, DENSE_BLOCKS = 100000 };
static void *small[SMALL_PER_SIZE * 65];
static void *dense[DENSE_BLOCKS];
static uintptr_t first_ss;

static void many_classes_stay_small(void) {
  int k = 0;
  for (size_t size = 16; size <= 1040; size += 16)
    for (int i = 0; i < SMALL_PER_SIZE; i++) {
      CHECK((small[k] = malloc(size)) != NULL);
      memset(small[k++], 1, size);
    }
  first_ss = (uintptr_t)small[0] & ~(SS_SIZE - 1);
  long lo = anon_huge_kib(first_ss), hi = anon_huge_kib(first_ss + SS_SIZE / 2);
  printf("  %d blocks of 16-1040 B: huge pages in the first SuperSlab's halves %ld, %ld KiB\n", k, lo, hi);
  CHECK_EQ(lo, 0);
  CHECK_EQ(hi, 0);
  CHECK(no_huge_pages_asked(first_ss) && no_huge_pages_asked(first_ss + SS_SIZE / 2));
}

/* The lean profile (no huge pages for SuperSlabs) asks for small pages on
 * all of them: a child, since the profile is read once. */
static void lean_asks_for_small_pages(void) {
  child_result_t res;
  const char *env[] = {"HAKMEM_PROFILE=lean", NULL};
  run_self("lean", env, 30, &res);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s\n%s", describe_status(res.status), res.err);
}

static void lean_child(void) {
  void *p = malloc(100), *q[64];
  for (int i = 0; i < 64; i++) CHECK((q[i] = malloc(60000)) != NULL);  /* a few SuperSlab units more */
  CHECK(p != NULL);
  for (int i = 0; i < 64; i++) CHECK(no_huge_pages_asked((uintptr_t)q[i]));
  CHECK(no_huge_pages_asked((uintptr_t)p));
  for (int i = 0; i < 64; i++) free(q[i]);
  free(p);
}

/* A class's first slab is sparse (its blocks carved a few at a time) and
 * goes to a SuperSlab on small pages once the first is full; the class's
 * later slabs, and large blocks, to SuperSlabs on huge pages.  A child,
 * whose first SuperSlab is its own. */
static void sparse_slabs_on_small_pages(void) {
  child_result_t res;
  run_self("sparse", NULL, 30, &res);
  if (res.err[0]) printf("%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s\n%s", describe_status(res.status), res.err);
}

enum { LARGE_BLOCKS = 80 };
static void sparse_child(void) {
  static void *large[LARGE_BLOCKS], *dense64[4096];
  uintptr_t first = 0, sparse = 0, dense = 0;
  for (int i = 0; i < LARGE_BLOCKS; i++) {  /* 40 KiB, a unit each: the first SuperSlab full, then another */
    CHECK((large[i] = malloc(40000)) != NULL);
    memset(large[i], 3, 40000);
    uintptr_t ss = (uintptr_t)large[i] & ~(SS_SIZE - 1);
    if (!first) first = ss;
    if (ss != first) dense = ss;
  }
  CHECK_MSG(dense != 0, "%d blocks of 40 000 B all in one SuperSlab", LARGE_BLOCKS);
  CHECK(!no_huge_pages_asked(dense));
  int k = 0;
  for (size_t size = 16; size <= 1040; size += 16)
    for (int i = 0; i < SMALL_PER_SIZE; i++) {
      CHECK((small[k] = malloc(size)) != NULL);
      memset(small[k], 1, size);
      uintptr_t ss = (uintptr_t)small[k++] & ~(SS_SIZE - 1);
      CHECK_MSG(ss != dense, "a first slab of blocks of %zu B among the large blocks", size);
      if (ss != first) sparse = ss;
    }
  CHECK_MSG(sparse != 0, "the first SuperSlab took every class's first slab: no room made for the test");
  CHECK(no_huge_pages_asked(sparse) && no_huge_pages_asked(sparse + SS_SIZE / 2));
  long lo = anon_huge_kib(sparse), hi = anon_huge_kib(sparse + SS_SIZE / 2);
  printf("  %d blocks of 16-1040 B, a SuperSlab of first slabs: huge pages in its halves %ld, %ld KiB\n", k, lo, hi);
  CHECK_EQ(lo + hi, 0);
  /* a class given more slabs: the later ones among the large blocks, whose SuperSlab has room */
  int n = 0;
  for (; n < 4096; n++) {
    CHECK((dense64[n] = malloc(64)) != NULL);
    if (((uintptr_t)dense64[n] & ~(SS_SIZE - 1)) == dense) break;
  }
  CHECK_MSG(n < 4096, "4096 blocks of 64 B, none beside the large blocks");
  for (int i = 0; i <= n; i++) free(dense64[i]);
  for (int i = 0; i < k; i++) free(small[i]);
  for (int i = 0; i < LARGE_BLOCKS; i++) free(large[i]);
}

/* 64-byte blocks, slab after slab, into the units of the second half (the
 * small blocks took the first), until it is one huge page: its pages are
 * looked at on every 8th new slab, so within 8 slabs of its 256th page
 * written, before the blocks fill it and go to another SuperSlab. */
static void filled_half_becomes_huge(void) {
  static hak_stats_t stats;
  size_t slabs = 0;
  long hi = 0;
  int n = 0;
  while (hi < 2048) {
    CHECK(n < DENSE_BLOCKS);
    CHECK((dense[n] = malloc(64)) != NULL);
    memset(dense[n], 2, 64);
    CHECK_MSG(((uintptr_t)dense[n++] & ~(SS_SIZE - 1)) == first_ss,
              "%d blocks of 64 B filled the first SuperSlab, and its second half is not a huge page", n);
    hak_stats_get(&stats);
    for (unsigned i = 0; i < stats.nclasses; i++)
      if (stats.classes[i].block_size == 64 && stats.classes[i].slabs != slabs) {
        slabs = stats.classes[i].slabs;
        hi = anon_huge_kib(first_ss + SS_SIZE / 2);
      }
  }
  long lo = anon_huge_kib(first_ss);
  printf("  then %d blocks of 64 B (%zu slabs), all in it: %ld, %ld KiB\n", n, slabs, lo, hi);
  CHECK_EQ(lo, 0);
  for (int i = 0; i < n; i++) CHECK(((uint8_t *)dense[i])[63] == 2);
  for (size_t i = 0; i < sizeof small / sizeof *small; i++) CHECK(((uint8_t *)small[i])[0] == 1);
  for (int i = 0; i < n; i++) free(dense[i]);
  for (size_t i = 0; i < sizeof small / sizeof *small; i++) free(small[i]);
}

/* A huge region starts on small pages: blocks of some hundred KiB written
 * whole take no huge page there; once the region holds 1 MiB of blocks,
 * the page they touched becomes one, their contents kept.  A child, whose
 * regions are its own. */
static void region_starts_small(void) {
  child_result_t res;
  run_self("region", NULL, 30, &res);
  if (res.err[0]) printf("%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s\n%s", describe_status(res.status), res.err);
}

#define REGION_SIZE ((uintptr_t)128 << 20)
static void region_child(void) {
  size_t sizes[3] = {300 << 10, 400 << 10, 1 << 20};  /* 12 units, then 28: over 16 */
  uint8_t *p[3];
  for (int i = 0; i < 3; i++) {
    CHECK((p[i] = malloc(sizes[i])) != NULL);
    CHECK_EQ((uintptr_t)p[i] & ~(REGION_SIZE - 1), (uintptr_t)p[0] & ~(REGION_SIZE - 1));
    memset(p[i], i + 1, sizes[i]);
    long kib = anon_huge_kib((uintptr_t)p[0]);
    bool nh = no_huge_pages_asked((uintptr_t)p[0]);
    printf("  blocks of %zu KiB in a region: huge pages under the first %ld KiB%s\n", sizes[i] >> 10, kib,
           nh ? ", asked for none" : "");
    if (i < 2) CHECK(nh && kib == 0);
    else CHECK(!nh && kib >= 2048);
  }
  for (int i = 0; i < 3; i++) {
    for (size_t j = 0; j < sizes[i]; j += 4093) CHECK_EQ(p[i][j], i + 1);
    free(p[i]);
  }
}

/* A block aligned to 32 MiB goes past the pages before it; a block of
 * 3 MiB then fills one of them and half the next, each a huge page. */
static void skipped_page_child(void) {
  uint8_t *a = aligned_alloc(32 << 20, 2 << 20), *b = malloc(3 << 20);
  CHECK(a && b);
  CHECK_EQ((uintptr_t)b & ~(REGION_SIZE - 1), (uintptr_t)a & ~(REGION_SIZE - 1));
  memset(b, 1, 3 << 20);
  long kib = anon_huge_kib((uintptr_t)b);
  hak_stats_t s;
  hak_stats_get(&s);
  printf("  a block of 3 MiB after a skip: huge pages %ld KiB, free and resident %zu KiB\n", kib,
         s.free_resident_bytes >> 10);
  if (kib >= 4096) CHECK_MSG(s.free_resident_bytes >= (1 << 20), "the rest of the block's last huge page is not counted");
  free(b), free(a);
}

static void skipped_page_is_counted(void) {
  child_result_t res;
  run_self("skipped", NULL, 30, &res);
  if (res.err[0]) printf("%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s\n%s", describe_status(res.status), res.err);
}

int main(int argc, char **argv) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  if (argc > 1) {  /* the child of one of the cases below */
    if (strcmp(argv[1], "sparse") == 0) sparse_child();
    else if (strcmp(argv[1], "region") == 0) region_child();
    else if (strcmp(argv[1], "skipped") == 0) skipped_page_child();
    else lean_child();
    return 0;
  }
  RUN(lean_asks_for_small_pages);
  if (!can_collapse()) {
    printf("skip: no transparent huge pages, or no MADV_COLLAPSE\n");
    return 77;
  }
  RUN(sparse_slabs_on_small_pages);
  RUN(many_classes_stay_small);
  RUN(filled_half_becomes_huge);
  RUN(region_starts_small);
  RUN(skipped_page_is_counted);
  return 0;
}
