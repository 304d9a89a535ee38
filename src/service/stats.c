/* SPDX-License-Identifier: MIT */
/* Statistics: hak_stats_get, its text, JSON and CSV forms, and the exit
 * printing (HAKMEM_STATS, HAKMEM_TINY_FRONT_METRICS, HAKMEM_SS_OS_STATS),
 * derived from counters the slow paths keep (central caches' per-class
 * counts, thread caches' traffic, SuperSlab and huge-block totals) and from
 * thread caches read as they are: the fast paths count nothing but in the
 * observe build.  Output is formatted on the stack, a snapshot mapped:
 * nothing here calls malloc. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "service/service.h"

/* The process's resident set, read with raw system calls. */
static size_t resident_bytes(void) {
  char buf[128];
  int fd = hk_keep_errno(open("/proc/self/statm", O_RDONLY | O_CLOEXEC));
  ssize_t n = fd < 0 ? -1 : hk_keep_errno(read(fd, buf, sizeof buf - 1));
  if (fd >= 0) hk_keep_errno(close(fd));
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long size, resident;
  return sscanf(buf, "%lu %lu", &size, &resident) == 2 ? resident * hk_os_page_size() : 0;
}

static void front_into(hak_class_stats_t *cs, const hk_front_t *f) {
  cs->hits = f->hits;
  cs->misses = f->misses;
  cs->overflows = f->overflows;
  cs->moved = f->moved;
  cs->parked_hits = f->parked_hits;
  cs->from_other_threads = f->from_others;
}

/* Taken by fork first, before the allocator's locks: the threads' survey
 * (static: 6.5 KiB, which a monitoring thread's stack of PTHREAD_STACK_MIN
 * cannot spare) and the rows of an exiting thread's traffic. */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

void hk_stats_fork_lock(void) { hk_lock(&stats_lock); }

void hk_stats_fork_unlock(bool child) {
  if (child) pthread_mutex_init(&stats_lock, NULL);
  else hk_unlock(&stats_lock);
}

HK_EXPORT void hak_stats_get(hak_stats_t *s) {
  static size_t cached[HK_NCLASS + 1];
  static hk_front_t front[HK_NCLASS + 1];
  hk_process_init();
  memset(s, 0, sizeof *s);
  hk_lock(&stats_lock);
  memset(cached, 0, sizeof cached);
  hk_tcache_survey(cached, front, &s->threads);
  s->nclasses = HAK_NCLASSES;
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    hk_class_counts_t k;
    hk_central_counts(c, &k);
    hak_class_stats_t *cs = &s->classes[c - 1];
    size_t size = hk_classes[c].size - HK_CANARY;
    cs->block_size = size;
    /* the caches were read one after the other: never below zero */
    cs->thread_cached = hk_min(cached[c], k.out - hk_min(k.parked, k.out));
    cs->in_use = k.out - hk_min(k.parked, k.out) - cs->thread_cached;
    cs->central_cached = k.parked + k.slab_free;
    cs->slabs = k.slabs;
    cs->slabs_made = k.slabs_made;
    front_into(cs, &front[c]);
    s->in_use_bytes += cs->in_use * size;
    s->thread_cached_bytes += cs->thread_cached * size;
    s->central_cached_bytes += cs->central_cached * size;
  }
  hk_unlock(&stats_lock);
  hk_huge_counts(&s->huge_blocks, &s->huge_bytes, false);
  s->in_use_bytes += s->huge_bytes;
  /* what is seen here counts too: the slow paths report in steps (note_out, tcache.c) */
  s->peak_in_use_bytes = hk_out_note_peak(s->in_use_bytes + s->thread_cached_bytes);
  s->free_resident_bytes = hk_purge_resident();
  s->committed_bytes = hk_region_used_bytes() + s->free_resident_bytes;
  hak_os_stats_t os;
  hak_os_stats(&os);
  s->mapped_bytes = os.mapped_bytes;
  s->peak_mapped_bytes = os.peak_mapped_bytes;
  s->mmap_calls = os.mmap_calls;
  s->munmap_calls = os.munmap_calls;
  s->madvise_calls = os.madvise_calls;
  s->mremap_calls = os.mremap_calls;
  s->resident_bytes = resident_bytes();
}

/* ---- output ----------------------------------------------------------------- */

typedef void (*hk_out_t)(const char *text, void *arg);

static void to_stderr(const char *text, void *arg) { hk_message("%s", text); }

static void say(hk_out_t out, void *arg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(hk_out_t out, void *arg, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  (out ? out : to_stderr)(buf, arg);
}

static double mib(size_t bytes) { return (double)bytes / (1 << 20); }

static bool class_seen(const hak_class_stats_t *c) {
  return c->slabs || c->slabs_made || c->misses || c->in_use || c->central_cached || c->hits;
}

/* A snapshot for the text and JSON forms and glibc's calls: 11 KiB, mapped
 * rather than on the caller's stack (a thread's of PTHREAD_STACK_MIN cannot
 * spare it); NULL if there is no memory for it. */
hak_stats_t *hk_stats_snapshot(void) {
  hak_stats_t *s = hk_os_map(sizeof *s);
  if (s) hak_stats_get(s);
  return s;
}
void hk_stats_drop(hak_stats_t *s) { hk_os_unmap(s, sizeof *s); }

HK_EXPORT void hak_stats_print(hk_out_t out, void *arg) {
  hak_stats_t *s = hk_stats_snapshot();
  if (!s) {
    say(out, arg, "hakmem: statistics: no memory for them\n");
    return;
  }
  say(out, arg, "%s, %u thread%s with a cache\n", hak_version_string(), s->threads, s->threads == 1 ? "" : "s");
  say(out, arg, "in use          %10.1f MiB (peak %.1f MiB, thread caches included)\n", mib(s->in_use_bytes),
      mib(s->peak_in_use_bytes));
  say(out, arg, "thread caches   %10.1f MiB\ncentral caches  %10.1f MiB\n", mib(s->thread_cached_bytes),
      mib(s->central_cached_bytes));
  say(out, arg, "huge blocks     %10zu      (%.1f MiB)\n", s->huge_blocks, mib(s->huge_bytes));
  say(out, arg, "committed       %10.1f MiB (%.1f MiB of it free, to be given back)\n", mib(s->committed_bytes),
      mib(s->free_resident_bytes));
  say(out, arg, "mapped          %10.1f MiB (peak %.1f MiB)\nresident (RSS)  %10.1f MiB\n", mib(s->mapped_bytes),
      mib(s->peak_mapped_bytes), mib(s->resident_bytes));
  say(out, arg, "OS calls        mmap %llu, munmap %llu, madvise %llu, mremap %llu\n", s->mmap_calls, s->munmap_calls,
      s->madvise_calls, s->mremap_calls);
  say(out, arg, "%5s %8s %10s %8s %8s %6s %10s %9s %9s %10s %8s %10s\n", "class", "size", "in use", "thread",
      "central", "slabs", "hits", "misses", "overflows", "moved", "parked", "others");
  for (unsigned i = 0; i < s->nclasses; i++) {
    const hak_class_stats_t *c = &s->classes[i];
    if (!class_seen(c)) continue;
    say(out, arg, "%5u %8zu %10zu %8zu %8zu %6zu %10llu %9llu %9llu %10llu %8llu %10llu\n", i + 1, c->block_size,
        c->in_use, c->thread_cached, c->central_cached, c->slabs, c->hits, c->misses, c->overflows, c->moved,
        c->parked_hits, c->from_other_threads);
  }
  hk_stats_drop(s);
}

HK_EXPORT void hak_stats_json(hk_out_t out, void *arg) {
  hak_stats_t *s = hk_stats_snapshot();
  if (!s) {
    say(out, arg, "{\"error\":\"no memory for the statistics\"}\n");
    return;
  }
  say(out, arg,
      "{\"version\":\"%s\",\"threads\":%u,\"in_use_bytes\":%zu,\"peak_in_use_bytes\":%zu,"
      "\"thread_cached_bytes\":%zu,\"central_cached_bytes\":%zu,\"huge_blocks\":%zu,\"huge_bytes\":%zu,",
      hak_version_string(), s->threads, s->in_use_bytes, s->peak_in_use_bytes, s->thread_cached_bytes,
      s->central_cached_bytes, s->huge_blocks, s->huge_bytes);
  say(out, arg,
      "\"committed_bytes\":%zu,\"free_resident_bytes\":%zu,\"mapped_bytes\":%zu,\"peak_mapped_bytes\":%zu,"
      "\"resident_bytes\":%zu,\"os_calls\":{\"mmap\":%llu,\"munmap\":%llu,\"madvise\":%llu,\"mremap\":%llu},"
      "\"classes\":[",
      s->committed_bytes, s->free_resident_bytes, s->mapped_bytes, s->peak_mapped_bytes, s->resident_bytes,
      s->mmap_calls, s->munmap_calls, s->madvise_calls, s->mremap_calls);
  for (unsigned i = 0; i < s->nclasses; i++) {
    const hak_class_stats_t *c = &s->classes[i];
    say(out, arg,
        "%s{\"class\":%u,\"block_size\":%zu,\"in_use\":%zu,\"thread_cached\":%zu,\"central_cached\":%zu,"
        "\"slabs\":%zu,\"hits\":%llu,\"misses\":%llu,\"overflows\":%llu,\"moved\":%llu,\"parked_hits\":%llu,"
        "\"from_other_threads\":%llu,\"slabs_made\":%llu}",
        i ? "," : "", i + 1, c->block_size, c->in_use, c->thread_cached, c->central_cached, c->slabs, c->hits,
        c->misses, c->overflows, c->moved, c->parked_hits, c->from_other_threads, c->slabs_made);
  }
  say(out, arg, "]}\n");
  hk_stats_drop(s);
}

/* The front metrics as CSV, a row per size class, empty where a figure is not
 * known: hits but in the observe build, slabs_carved in a thread's rows
 * (slabs are the process's, not a thread's). */
static void front_csv(const char *who, const hak_stats_t *s, bool process) {
  hk_message("# hakmem front metrics, %s (%s)\n", who, hak_version_string());
  hk_message("class,block_size,hits,misses,overflows,moved,parked_hits,slabs_carved,from_other_threads\n");
  for (unsigned i = 0; i < s->nclasses; i++) {
    const hak_class_stats_t *c = &s->classes[i];
    char hits[24] = "", slabs[24] = "";
    if (HAK_OBSERVE) snprintf(hits, sizeof hits, "%llu", c->hits);
    if (process) snprintf(slabs, sizeof slabs, "%llu", c->slabs_made);
    hk_message("%u,%zu,%s,%llu,%llu,%llu,%llu,%s,%llu\n", i + 1, c->block_size, hits, c->misses, c->overflows,
               c->moved, c->parked_hits, slabs, c->from_other_threads);
  }
}

_Static_assert(HAK_NCLASSES == HK_NCLASS, "the statistics have a row per class");

/* One thread's traffic, when it exits (HAKMEM_TINY_FRONT_DUMP). */
void hk_front_print(const char *who, const hk_front_t *front) {
  static hak_stats_t s;
  char name[48];
  hk_lock(&stats_lock);  /* one thread's table at a time: too big for its stack */
  memset(&s, 0, sizeof s);
  s.nclasses = HAK_NCLASSES;
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    hak_class_stats_t *cs = &s.classes[c - 1];
    cs->block_size = hk_classes[c].size - HK_CANARY;
    front_into(cs, &front[c]);
  }
  snprintf(name, sizeof name, "%s %ld", who, (long)hk_os_tid());
  front_csv(name, &s, false);
  hk_unlock(&stats_lock);
}

void hk_os_stats_print(void) {
  hak_os_stats_t s;
  hak_os_stats(&s);
  hk_message("[SS_OS_STATS] mmap=%llu munmap=%llu madvise=%llu mremap=%llu mapped_bytes=%llu peak_mapped_bytes=%llu\n",
             s.mmap_calls, s.munmap_calls, s.madvise_calls, s.mremap_calls, s.mapped_bytes, s.peak_mapped_bytes);
}

void hk_stats_at_exit(void) {
  if (hk_opt.os_stats) hk_os_stats_print();
  if (hk_opt.stats) hak_stats_print(NULL, NULL);
  if (hk_opt.front_metrics || hk_opt.front_dump) {
    static hak_stats_t s;
    hak_stats_get(&s);
    front_csv("process", &s, true);
  }
}
