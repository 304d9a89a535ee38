/* SPDX-License-Identifier: MIT */
/* first_touch: what the machine charges for memory new to a process, with
 * no allocator in the way.  Maps PAGES 2 MiB pages' worth of memory, asks
 * for huge pages (MADV_HUGEPAGE) or small ones (MADV_NOHUGEPAGE), writes
 * each page once (a huge page with one write, a small one with one write
 * per 4 KiB), and reports the time of each 2 MiB: the kernel's zeroing of
 * it, and on a virtual machine whatever the host adds.  A guest kernel
 * that reports its free memory to the host (free page reporting: see
 * page_reporting.* on /proc/cmdline) gets memory freed a few seconds ago
 * back from the host at each first touch, where a machine of its own only
 * zeroes it: the cost that a benchmark's first runs, or runs after a pause,
 * pay more than its others.  Not an allocator benchmark: make bench does
 * not run it.
 *
 *   first_touch [PAGES [huge|small]]
 *
 * Prints one `RESULT bench=first_touch pages=N kind=K huge_pages=H
 * per_2mib_us=...` line: how many of the pages were huge ones (the
 * kernel's AnonHugePages), then the median, the least and the most
 * microseconds per 2 MiB. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#define HUGE_PAGE ((size_t)2 << 20)

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  args_init(argc, "first_touch [PAGES [huge|small]]", 2);
  uint64_t pages = arg_u64(argc, argv, 1, 16, 1, 4096);
  const char *kind = argc > 2 ? argv[2] : "huge";
  if (strcmp(kind, "huge") && strcmp(kind, "small")) usage();
  size_t size = pages * HUGE_PAGE;
  char *map = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) out_of_memory(size + HUGE_PAGE);
  char *p = (char *)(((uintptr_t)map + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (madvise(p, size, strcmp(kind, "huge") ? MADV_NOHUGEPAGE : MADV_HUGEPAGE)) {
    perror("first_touch: madvise");
    return 1;
  }
  double *us = malloc(pages * sizeof *us);
  if (!us) out_of_memory(pages * sizeof *us);
  size_t step = strcmp(kind, "huge") ? 4096 : HUGE_PAGE;
  for (uint64_t i = 0; i < pages; i++) {
    double t0 = now_sec();
    for (size_t off = 0; off < HUGE_PAGE; off += step) p[i * HUGE_PAGE + off] = 1;
    us[i] = (now_sec() - t0) * 1e6;
  }
  /* the process's huge pages, by the kernel's count: only these can be */
  uint64_t huge = 0;
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %llu kB", (unsigned long long *)&huge) == 1) break;
  if (f) fclose(f);
  huge /= HUGE_PAGE >> 10;
  qsort(us, pages, sizeof *us, compare);
  printf("RESULT bench=first_touch pages=%llu kind=%s huge_pages=%llu per_2mib_us=%.0f min_us=%.0f max_us=%.0f\n",
         (unsigned long long)pages, kind, (unsigned long long)huge, us[pages / 2], us[0], us[pages - 1]);
  free(us);
  munmap(map, size + HUGE_PAGE);
  return 0;
}
