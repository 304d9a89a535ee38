/* SPDX-License-Identifier: MIT */
/* glibc's statistics and tuning calls, answered by hakmem: mallinfo2,
 * mallinfo, malloc_stats, malloc_info and mallopt.  Defined here, a program
 * that calls them (or links statically) gets hakmem's figures rather than
 * those of glibc's own, unused, heap.
 *
 * struct mallinfo2's fields, as hakmem fills them:
 *   arena     bytes of SuperSlab units and huge regions' units committed (committed_bytes)
 *   ordblks   free blocks in the central caches (parked or in slabs)
 *   smblks    0 (no fastbins)
 *   hblks     huge blocks in use
 *   hblkhd    their bytes
 *   usmblks   0 (as glibc)
 *   fsmblks   bytes of blocks in thread caches
 *   uordblks  bytes in use
 *   fordblks  bytes free: cached in thread and central caches, and free resident units
 *   keepcost  bytes free and resident that malloc_trim would give back */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

#ifndef HAK_NO_OVERRIDE  /* the standard names only: nothing else calls these */

HK_EXPORT struct mallinfo2 mallinfo2(void) {
  hak_stats_t s;
  hak_stats_get(&s);
  size_t free_blocks = 0;
  for (unsigned i = 0; i < s.nclasses; i++) free_blocks += s.classes[i].central_cached;
  return (struct mallinfo2){
      .arena = s.committed_bytes,
      .ordblks = free_blocks,
      .hblks = s.huge_blocks,
      .hblkhd = s.huge_bytes,
      .fsmblks = s.thread_cached_bytes,
      .uordblks = s.in_use_bytes,
      .fordblks = s.thread_cached_bytes + s.central_cached_bytes + s.free_resident_bytes,
      .keepcost = s.free_resident_bytes,
  };
}

/* glibc's older form: int fields, which saturate instead of wrapping. */
HK_EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 m = mallinfo2();
#define HK_INT(x) ((int)hk_min((x), (size_t)INT32_MAX))
  return (struct mallinfo){HK_INT(m.arena), HK_INT(m.ordblks), HK_INT(m.smblks), HK_INT(m.hblks), HK_INT(m.hblkhd),
                           HK_INT(m.usmblks), HK_INT(m.fsmblks), HK_INT(m.uordblks), HK_INT(m.fordblks),
                           HK_INT(m.keepcost)};
#undef HK_INT
}

/* glibc's format, one arena: hakmem's heap as a whole. */
HK_EXPORT void malloc_stats(void) {
  hak_stats_t s;
  hak_stats_get(&s);
  hk_message("Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", s.committed_bytes,
             s.in_use_bytes - s.huge_bytes);
  hk_message("Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n",
             s.committed_bytes, s.in_use_bytes);
  size_t peak_blocks, peak_bytes;  /* glibc's mmapped chunks: hakmem's huge blocks */
  hk_huge_counts(&peak_blocks, &peak_bytes, true);
  hk_message("max mmap regions = %10zu\nmax mmap bytes   = %10zu\n", peak_blocks, peak_bytes);
}

/* glibc's XML, with hakmem's size classes as its bins. */
HK_EXPORT int malloc_info(int options, FILE *f) {
  if (options != 0) return EINVAL;  /* glibc's answer (errno untouched), not its manual's -1 */
  hak_stats_t s;
  hak_stats_get(&s);
  fprintf(f, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  for (unsigned i = 0; i < s.nclasses; i++) {
    const hak_class_stats_t *c = &s.classes[i];
    if (c->central_cached + c->thread_cached)
      fprintf(f, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", i ? s.classes[i - 1].block_size + 1 : 1,
              c->block_size, (c->central_cached + c->thread_cached) * c->block_size, c->central_cached + c->thread_cached);
  }
  fprintf(f, "</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n",
          s.thread_cached_bytes + s.central_cached_bytes);
  fprintf(f, "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n", s.committed_bytes,
          s.peak_mapped_bytes);
  fprintf(f, "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n</heap>\n",
          s.mapped_bytes, s.mapped_bytes);
  fprintf(f, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n<system type=\"current\" size=\"%zu\"/>\n",
          s.huge_blocks, s.huge_bytes, s.committed_bytes);
  fprintf(f, "<system type=\"max\" size=\"%zu\"/>\n<aspace type=\"total\" size=\"%zu\"/>\n</malloc>\n",
          s.peak_mapped_bytes, s.mapped_bytes);
  return 0;
}

/* glibc's parameters and its answers: M_ARENA_MAX sets how many arenas hold
 * SuperSlabs (for threads started from then on; 0 or less is ignored); the
 * others are accepted and ignored, since nothing in hakmem matches them, but
 * refused (0) where glibc refuses the value: M_MXFAST above 160 bytes or
 * negative.  An unknown parameter gets 1, as from glibc 2.36. */
HK_EXPORT int mallopt(int param, int value) {
  switch (param) {
    case M_ARENA_MAX:
      if (value < 1) return 1;
      hk_process_init();
      hk_arenas_init((unsigned)value);
      return 1;
    case M_MXFAST:
      return value >= 0 && value <= 80 * (int)sizeof(size_t) / 4;
    default:
      return 1;
  }
}

#endif
