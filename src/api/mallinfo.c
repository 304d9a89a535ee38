/* SPDX-License-Identifier: MIT */
/* glibc's statistics and tuning calls (mallinfo2, mallinfo, malloc_stats,
 * malloc_info, mallopt): a program calling them (or linked statically) gets
 * hakmem's figures, not those of glibc's own, unused, heap.
 *
 * Huge blocks (above 1 MiB) stand for glibc's mmapped chunks, the rest of
 * hakmem's memory for its arenas, so that programs' sums of the fields come
 * out as with glibc: bytes in use are uordblks + hblkhd, and arena is
 * uordblks + fordblks.  struct mallinfo2's fields, as hakmem fills them:
 *   arena     bytes committed (SuperSlab and huge-region units in use, or free
 *             and resident) but those of huge blocks
 *   ordblks   free blocks in the central caches (parked or in slabs)
 *   smblks    free blocks in thread caches (glibc's fastbins: kept by threads)
 *   hblks     huge blocks in use; hblkhd their bytes
 *   usmblks   0 (as glibc)
 *   fsmblks   bytes of blocks in thread caches
 *   uordblks  bytes in use in blocks up to 1 MiB
 *   fordblks  the rest of arena: cached in thread and central caches, free
 *             resident units, and slab space not yet cut into blocks
 *   keepcost  free units still resident, waiting for the purge schedule
 *             (malloc_trim gives them back, and the caches' blocks besides) */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include "api/api.h"

#ifndef HAK_NO_OVERRIDE  /* the standard names only: nothing else calls these */

/* hak_stats_get's figures in glibc's terms (above). */
typedef struct glibc_terms {
  size_t arena, in_use, free_blocks, thread_blocks;
} glibc_terms_t;

static glibc_terms_t glibc_terms(const hak_stats_t *s) {
  glibc_terms_t g = {.arena = s->committed_bytes - hk_min(s->huge_bytes, s->committed_bytes),
                     .in_use = s->in_use_bytes - hk_min(s->huge_bytes, s->in_use_bytes)};
  for (unsigned i = 0; i < s->nclasses; i++) {
    g.free_blocks += s->classes[i].central_cached;
    g.thread_blocks += s->classes[i].thread_cached;
  }
  g.arena = hk_max(g.arena, g.in_use);  /* figures read one after another: never a negative rest */
  return g;
}

/* The statistics are mapped (hk_stats_snapshot): zeros without memory. */
HK_EXPORT struct mallinfo2 mallinfo2(void) {
  hak_stats_t *s = hk_stats_snapshot();
  if (!s) return (struct mallinfo2){0};
  glibc_terms_t g = glibc_terms(s);
  struct mallinfo2 m = {
      .arena = g.arena,
      .ordblks = g.free_blocks,
      .smblks = g.thread_blocks,
      .hblks = s->huge_blocks,
      .hblkhd = s->huge_bytes,
      .fsmblks = s->thread_cached_bytes,
      .uordblks = g.in_use,
      .fordblks = g.arena - g.in_use,
      .keepcost = s->free_resident_bytes,
  };
  hk_stats_drop(s);
  return m;
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
struct mallinfo __libc_mallinfo(void) __attribute__((alias("mallinfo"), visibility("default")));

/* glibc's format: one arena, hakmem's heap but huge blocks (mmapped chunks). */
HK_EXPORT void malloc_stats(void) {
  hak_stats_t *s = hk_stats_snapshot();
  if (!s) return;
  glibc_terms_t g = glibc_terms(s);
  hk_message("Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", g.arena, g.in_use);
  hk_message("Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n",
             g.arena + s->huge_bytes, g.in_use + s->huge_bytes);
  hk_stats_drop(s);
  size_t peak_blocks, peak_bytes;
  hk_huge_counts(&peak_blocks, &peak_bytes, true);
  hk_message("max mmap regions = %10zu\nmax mmap bytes   = %10zu\n", peak_blocks, peak_bytes);
}

/* glibc's XML, with hakmem's size classes as its bins: the heap's totals,
 * then the process's, the huge blocks as mmapped chunks. */
static void info_totals(FILE *f, const hak_stats_t *s, const glibc_terms_t *g) {
  fprintf(f, "<total type=\"fast\" count=\"%zu\" size=\"%zu\"/>\n", g->thread_blocks, s->thread_cached_bytes);
  fprintf(f, "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n", g->free_blocks, s->central_cached_bytes);
}

static void info_system(FILE *f, const hak_stats_t *s, const glibc_terms_t *g) {
  fprintf(f, "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n", g->arena,
          s->peak_mapped_bytes);
  fprintf(f, "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n",
          s->mapped_bytes, s->mapped_bytes);
}

HK_EXPORT int malloc_info(int options, FILE *f) {
  if (options != 0) return EINVAL;  /* glibc's answer (errno untouched), not its manual's -1 */
  hak_stats_t *s = hk_stats_snapshot();
  if (!s) return ENOMEM;
  glibc_terms_t g = glibc_terms(s);
  fprintf(f, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  for (unsigned i = 0; i < s->nclasses; i++) {
    const hak_class_stats_t *c = &s->classes[i];
    if (c->central_cached + c->thread_cached)
      fprintf(f, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", i ? s->classes[i - 1].block_size + 1 : 1,
              c->block_size, (c->central_cached + c->thread_cached) * c->block_size, c->central_cached + c->thread_cached);
  }
  fprintf(f, "</sizes>\n");
  info_totals(f, s, &g);
  info_system(f, s, &g);
  fprintf(f, "</heap>\n");
  info_totals(f, s, &g);
  fprintf(f, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", s->huge_blocks, s->huge_bytes);
  info_system(f, s, &g);
  fprintf(f, "</malloc>\n");
  hk_stats_drop(s);
  return 0;
}

/* glibc's parameters and answers: M_ARENA_MAX sets how many arenas hold
 * SuperSlabs (for new threads; below 1 ignored); others match nothing here:
 * accepted and ignored, but refused (0) where glibc 2.36 refuses it: M_MXFAST
 * above 160 bytes or negative (it takes any M_MMAP_THRESHOLD, and unknown
 * parameters). */
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
int __libc_mallopt(int param, int value) __THROW __attribute__((alias("mallopt"), visibility("default")));

#endif
