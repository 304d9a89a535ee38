/* SPDX-License-Identifier: MIT */
/* Options: one table drives reading the environment (once, at start), the
 * HAKMEM_VERBOSE dump and the README's list (scripts/options_doc.c).  A
 * profile (HAKMEM_PROFILE) picks every row's default; a variable set in the
 * environment beats it.  A bad value is reported on stderr, never fatal.
 * Setuid programs ignore the environment, like glibc's malloc tunables. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>
#include "base/base.h"

hk_options_t hk_opt;
unsigned hk_profile;

static const char *const profile_names[] = {"speed", "balanced", "lean", NULL};
static const char *const decommit_names[] = {"OFF", "FREE", "DONTNEED", NULL};

#define FIELD(f) offsetof(hk_options_t, f)
#define SAME(v) {v, v, v}
#define PREWARM(k, sizes)                                                                      \
  {"HAKMEM_TINY_PREWARM_C" #k, FIELD(prewarm[k]), HK_OPT_UINT, SAME(HK_OPT_UNSET), 512, NULL, \
   "as _ALL, for the classes of " sizes " (the seeds' C" #k ")"}

const hk_option_t hk_option_table[] = {
    {"HAKMEM_PROFILE", HK_OPT_PROFILE_FIELD, HK_OPT_ENUM, {HK_PROFILE_SPEED, HK_PROFILE_BALANCED, HK_PROFILE_LEAN}, 0,
     profile_names, "named presets of the options below: speed (the default), balanced or lean"},
    {"HAKMEM_PURGE_DELAY_MS", FIELD(purge_delay_ms), HK_OPT_UINT, {1000, 100, 20}, 3600000, NULL,
     "free memory unused for this long (up to twice as long) is given back to the OS; 0: at once"},
    {"HAKMEM_BACKGROUND_PURGE", FIELD(background_purge), HK_OPT_BOOL, {0, 1, 1}, 1, NULL,
     "a thread of hakmem's gives free memory back while the program is idle (started once the heap has held 4 MiB)"},
    {"HAKMEM_WARM_POOL_SIZE", FIELD(warm_pool_size), HK_OPT_UINT, {4, 2, 0}, 1024, NULL,
     "empty 4 MiB SuperSlabs kept mapped per arena (their pages are given back all the same)"},
    {"HAKMEM_SS_MEM_LEAN", FIELD(mem_lean), HK_OPT_BOOL, {0, 0, 1}, 1, NULL,
     "lean mode: free memory above HAKMEM_SS_MEM_LEAN_TARGET_MB is given back at once; no prewarm"},
    {"HAKMEM_SS_MEM_LEAN_DECOMMIT", FIELD(decommit), HK_OPT_ENUM, SAME(HK_DECOMMIT_DONTNEED), 0, decommit_names,
     "how free memory is given back: DONTNEED (madvise MADV_DONTNEED), FREE (MADV_FREE: taken "
     "when the kernel needs it) or OFF (only by malloc_trim, and before failing for want of memory)"},
    {"HAKMEM_SS_MEM_LEAN_TARGET_MB", FIELD(lean_target_mb), HK_OPT_UINT, SAME(8), 1 << 20, NULL,
     "lean mode: most free memory (MiB) kept resident; up to 8 times more for a program that takes back at once "
     "what was given back"},
    {"HAKMEM_LARGE_CACHE", FIELD(large_cache), HK_OPT_SIZE, {64 << 20, 32 << 20, 8 << 20}, (size_t)1 << 40, NULL,
     "bytes of 32 KiB-1 MiB blocks all thread caches together may hold, each thread at least 256 KiB "
     "(a thread starts there and grows to 4 MiB, then to its whole share, as it takes many)"},
    {"HAKMEM_HUGE_THP", FIELD(huge_thp), HK_OPT_BOOL, {1, 1, 0}, 1, NULL,
     "blocks above 256 KiB on transparent huge pages where the kernel allows, a region's once it holds 1 MiB"},
    {"HAKMEM_SS_THP", FIELD(ss_thp), HK_OPT_BOOL, {1, 0, 0}, 1, NULL,
     "SuperSlabs on transparent huge pages (a small process's first and sparse ones each half once filled): fewer page faults and TLB misses, a larger footprint"},
    {"HAKMEM_TINY_PREWARM_ALL", FIELD(prewarm_all), HK_OPT_UINT, SAME(0), 512, NULL,
     "blocks put in a new thread's cache for each class up to 2 KiB (capped at the class's capacity)"},
    PREWARM(0, "1-16 B"), PREWARM(1, "17-32 B"), PREWARM(2, "33-64 B"), PREWARM(3, "65-128 B"),
    PREWARM(4, "129-256 B"), PREWARM(5, "257-512 B"), PREWARM(6, "513-1024 B"), PREWARM(7, "1025-2048 B"),
    {"HAKMEM_SS_OS_STATS", FIELD(os_stats), HK_OPT_BOOL, SAME(0), 1, NULL,
     "at exit, print the OS calls and mapped bytes (`[SS_OS_STATS] mmap=... munmap=...`) on stderr"},
    {"HAKMEM_STATS", FIELD(stats), HK_OPT_BOOL, SAME(0), 1, NULL,
     "at exit, print the statistics (hak_stats_print) on stderr"},
    {"HAKMEM_TINY_FRONT_METRICS", FIELD(front_metrics), HK_OPT_BOOL, SAME(0), 1, NULL,
     "at exit, print each size class's thread-cache traffic as CSV on stderr (hits: observe build)"},
    {"HAKMEM_TINY_FRONT_DUMP", FIELD(front_dump), HK_OPT_BOOL, SAME(0), 1, NULL,
     "the same CSV for each thread, when it exits, and at exit"},
    {"HAKMEM_VERBOSE", FIELD(verbose), HK_OPT_BOOL, SAME(0), 1, NULL,
     "print the version, the build, the profile and every option in force at start-up"},
    {"HAKMEM_PROF", FIELD(prof), HK_OPT_PATH, SAME(0), 0, NULL,
     "sample the heap; write its profile (for pprof) to this file at exit"},
    {"HAKMEM_PROF_SAMPLE", FIELD(prof_sample), HK_OPT_SIZE, SAME(512 << 10), (size_t)1 << 40, NULL,
     "mean bytes allocated between two samples (set alone: sampling for hak_prof_dump)"},
    {"HAKMEM_PROF_INTERVAL_MB", FIELD(prof_interval_mb), HK_OPT_UINT, SAME(0), 1 << 20, NULL,
     "also write HAKMEM_PROF.N.heap each time the live heap grows by this many MiB"},
    {"HAKMEM_PROF_LEAKS", FIELD(prof_leaks), HK_OPT_BOOL, SAME(0), 1, NULL,
     "sample the heap; at exit, list the stacks of the blocks not freed on stderr"},
};
const unsigned hk_option_count = sizeof hk_option_table / sizeof hk_option_table[0];

static size_t *field_of(const hk_option_t *o) {
  return o->offset == HK_OPT_PROFILE_FIELD ? NULL : (size_t *)((char *)&hk_opt + o->offset);
}

/* A path is kept as a copy: a program may write over its environment (a
 * server's process title), and the heap profile's is used at exit. */
static char paths[4096];
static size_t paths_used;

/* Reads s as the option's type; false if it is not a valid value. */
static bool parse(const hk_option_t *o, const char *s, size_t *out) {
  static const char *const truths[] = {"1", "on", "yes", "true"}, *const lies[] = {"0", "off", "no", "false"};
  if (o->type == HK_OPT_BOOL) {
    for (unsigned i = 0; i < 4; i++) {
      if (!strcasecmp(s, truths[i])) return *out = 1, true;
      if (!strcasecmp(s, lies[i])) return *out = 0, true;
    }
    return false;
  }
  if (o->type == HK_OPT_ENUM) {
    for (size_t i = 0; o->names[i]; i++)
      if (!strcasecmp(s, o->names[i])) return *out = i, true;
    return false;
  }
  if (o->type == HK_OPT_PATH) {
    size_t n = strlen(s) + 1;
    if (n == 1 || n > sizeof paths - paths_used) return false;
    *out = (size_t)(uintptr_t)memcpy(paths + paths_used, s, n);
    paths_used += n;
    return true;
  }
  size_t v = 0;
  const char *p = s;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (SIZE_MAX - 9) / 10) return false;
    v = v * 10 + (size_t)(*p - '0');
  }
  if (p == s) return false;
  if (o->type == HK_OPT_SIZE && *p) {
    const char *units = "KMG", *u = *p & ~0x20 ? strchr(units, *p & ~0x20) : NULL;  /* not the NUL */
    if (!u) return false;
    unsigned shift = 10 * (unsigned)(u - units + 1);
    if (v > (SIZE_MAX >> shift)) return false;
    v <<= shift;
    p++;
    if (!strcasecmp(p, "ib") || !strcasecmp(p, "b")) p += strlen(p);
  }
  if (*p || v > o->max) return false;
  *out = v;
  return true;
}

void hk_option_format(const hk_option_t *o, size_t v, char *buf, size_t len) {
  if (o->type == HK_OPT_ENUM) {
    snprintf(buf, len, "%s", o->names[v]);
  } else if (o->type == HK_OPT_PATH) {
    snprintf(buf, len, "%s", v ? (const char *)(uintptr_t)v : "unset");
  } else if (v == HK_OPT_UNSET) {
    snprintf(buf, len, "unset");
  } else if (o->type == HK_OPT_SIZE && v && v % 1024 == 0) {
    unsigned u = 0;
    while (u < 3 && v % 1024 == 0) v /= 1024, u++;
    snprintf(buf, len, "%zu%c", v, " KMG"[u]);
  } else {
    snprintf(buf, len, "%zu", v);
  }
}

/* The option's value from the environment, else `def` (warned if invalid). */
static size_t read_option(const hk_option_t *o, size_t def, bool *from_env) {
  const char *s = secure_getenv(o->name);  /* a setuid program runs with the defaults */
  size_t v;
  *from_env = false;
  if (!s) return def;
  if (parse(o, s, &v)) {
    *from_env = true;
    return v;
  }
  char shown[32], expected[96] = "1/0, on/off, yes/no or true/false";
  if (o->type == HK_OPT_PATH) snprintf(expected, sizeof expected, "a file's path, shorter than 4 KiB");
  hk_option_format(o, def, shown, sizeof shown);
  if (o->type == HK_OPT_UINT) snprintf(expected, sizeof expected, "a whole number, at most %zu", o->max);
  if (o->type == HK_OPT_SIZE) snprintf(expected, sizeof expected, "a size, with K, M or G or without, at most %zu", o->max);
  for (size_t i = 0, len = 0; o->type == HK_OPT_ENUM && o->names[i] && len < sizeof expected; i++)
    len += (size_t)snprintf(expected + len, sizeof expected - len, "%s%s", i ? ", " : "one of ", o->names[i]);
  /* the value as given, its first 64 bytes: the rest of the line says what was expected */
  hk_message("hakmem: ignoring %s=%.64s%s (expected %s); using %s\n", o->name, s, strlen(s) > 64 ? "..." : "",
             expected, shown);
  return def;
}

static uint32_t from_env_mask;  /* bit i: row i was set in the environment */
_Static_assert(sizeof hk_option_table / sizeof hk_option_table[0] <= 32, "a row per bit of from_env_mask");

static bool no_huge_pages;  /* the THP options were turned off: the kernel gives none */

/* Whether the environment has a HAKMEM_ variable at all: one pass over it
 * rather than one per row where it has none (most processes). */
static bool any_variable(void) {
  for (char **e = environ; e && *e; e++)
    if (!strncmp(*e, "HAKMEM_", 7)) return true;
  return false;
}

/* Whether the variable whose name is var's first len bytes is `name`. */
static bool named(const char *var, size_t len, const char *name) { return strlen(name) == len && !strncmp(var, name, len); }

/* A HAKMEM_ variable that no row reads, a misspelt option most often
 * (HAKMEM_PURGE_DELAY for HAKMEM_PURGE_DELAY_MS): a line each.  Those of
 * hakmem's own tools (the tests', the bench kit's) are no options either. */
static void unknown_variables(void) {
  static const char *const tools[] = {"HAKMEM_LIB", "HAKMEM_NO_APT", "HAKMEM_PEERS"};
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "HAKMEM_", 7)) continue;
    size_t len = strcspn(*e, "=");
    bool known = len > 12 && !strncmp(*e, "HAKMEM_TEST_", 12);
    for (size_t i = 0; i < sizeof tools / sizeof *tools && !known; i++) known = named(*e, len, tools[i]);
    for (unsigned i = 0; i < hk_option_count && !known; i++) known = named(*e, len, hk_option_table[i].name);
    if (!known) hk_message("hakmem: ignoring %.*s: no such option\n", (int)hk_min(len, (size_t)64), *e);
  }
}

void hk_options_init(bool huge_pages) {
  bool env = false, any = any_variable() && !getauxval(AT_SECURE);  /* setuid: the defaults, unsaid */
  if (any) unknown_variables();
  hk_profile = any ? (unsigned)read_option(&hk_option_table[0], HK_PROFILE_SPEED, &env) : HK_PROFILE_SPEED;
  for (unsigned i = 1; i < hk_option_count; i++) {
    const hk_option_t *o = &hk_option_table[i];
    *field_of(o) = any ? read_option(o, o->def[hk_profile], &env) : o->def[hk_profile];
    if (env) from_env_mask |= 1u << i;
  }
  /* No kernel huge pages (THP "never", or off for us): units a huge page
   * would have made resident beside a block would count resident wrongly. */
  if ((hk_opt.huge_thp || hk_opt.ss_thp) && !huge_pages) {
    hk_opt.huge_thp = hk_opt.ss_thp = 0;
    no_huge_pages = true;
  }
}

bool hk_option_from_env(const size_t *field) {
  for (unsigned i = 1; i < hk_option_count; i++)
    if (field_of(&hk_option_table[i]) == field) return from_env_mask & (1u << i);
  return false;
}

/* One line per option: its value and where it came from. */
void hk_options_print(void) {
  hk_message("hakmem: %s, profile %s\n", hak_version_string(), profile_names[hk_profile]);
  for (unsigned i = 1; i < hk_option_count; i++) {
    const hk_option_t *o = &hk_option_table[i];
    char value[32];
    hk_option_format(o, *field_of(o), value, sizeof value);
    size_t *f = field_of(o);
    bool thp = f == &hk_opt.huge_thp || f == &hk_opt.ss_thp;
    bool prewarm = f == &hk_opt.prewarm_all || (f >= hk_opt.prewarm && f < hk_opt.prewarm + sizeof hk_opt.prewarm / sizeof *f);
    const char *source = thp && no_huge_pages                            ? "no huge pages from the kernel"
                         : prewarm && hk_opt.mem_lean && *f && *f != HK_OPT_UNSET ? "ignored: lean mode prewarms nothing"
                         : from_env_mask & (1u << i)                   ? "environment"
                         : o->def[hk_profile] != o->def[HK_PROFILE_SPEED] ? "profile"
                                                                          : "default";
    hk_message("hakmem:   %s=%s (%s)\n", o->name, value, source);
  }
}

