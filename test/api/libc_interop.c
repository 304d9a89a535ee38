/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* libc functions that allocate or free for the caller go through the
 * allocator under test, and their blocks mix with the program's: strdup,
 * asprintf, getline/getdelim (which realloc the caller's buffer),
 * open_memstream, realpath, scandir, glob, regcomp, qsort of a large array,
 * many fopen/fclose, newlocale, getpwuid; and glibc's own statistics and
 * tuning calls (mallopt, malloc_trim, mallinfo2, malloc_info), which must not
 * crash when another allocator has replaced malloc. */
#include "testutil.h"

#include <dirent.h>
#include <glob.h>
#include <limits.h>
#include <locale.h>
#include <malloc.h>
#include <pwd.h>
#include <regex.h>

static void strings(void) {
  char *s, *t, *u;
  int i;
  for (i = 0; i < 10000; i++) {
    char buf[64];
    snprintf(buf, sizeof buf, "string number %d", i);
    s = strdup(buf);
    t = strndup(buf, 6);
    CHECK(s && t && strcmp(s, buf) == 0 && strcmp(t, "string") == 0);
    CHECK(asprintf(&u, "%s/%d/%s", s, i, t) > 0);
    CHECK(strncmp(u, s, strlen(s)) == 0);
    free(t);
    free(s);
    free(u);
  }
  CHECK(asprintf(&s, "%0*d", 100000, 7) == 100000);
  CHECK(s[0] == '0' && s[99999] == '7' && s[100000] == '\0');
  s = realloc(s, 10);
  CHECK(s != NULL && s[0] == '0');
  free(s);
}

static void streams(void) {
  char *buf = NULL, *line = malloc(4);
  size_t size = 0, cap = 4;
  ssize_t n;
  FILE *f = open_memstream(&buf, &size);
  int i;
  CHECK(f != NULL && line != NULL);
  for (i = 0; i < 100000; i++) fprintf(f, "line %d %s\n", i, i % 1000 == 0 ? "long long long long" : "");
  CHECK(fclose(f) == 0);
  CHECK(size > 100000 && buf[size] == '\0');
  /* Read it back with getline into a buffer of ours, which it reallocs. */
  f = fmemopen(buf, size, "r");
  CHECK(f != NULL);
  for (i = 0; (n = getline(&line, &cap, f)) > 0; i++) CHECK(strncmp(line, "line ", 5) == 0);
  CHECK_EQ(i, 100000);
  CHECK(fclose(f) == 0);
  free(line);
  /* getdelim with a NULL buffer: libc allocates it, we free it. */
  f = fmemopen(buf, size, "r");
  CHECK(f != NULL);
  line = NULL;
  cap = 0;
  CHECK(getdelim(&line, &cap, '7', f) > 0);
  CHECK(fclose(f) == 0);
  free(line);
  free(buf);
  /* FILE structures and their buffers. */
  for (i = 0; i < 2000; i++) {
    f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    CHECK(fgetc(f) != EOF);
    CHECK(fclose(f) == 0);
  }
}

static int only_lib(const struct dirent *d) { return strncmp(d->d_name, "lib", 3) == 0; }

static void files(void) {
  struct dirent **list;
  glob_t g;
  char *path = realpath("/proc/self/../self/exe", NULL);
  int n, i;
  CHECK(path != NULL);
  free(path);
  n = scandir("/usr/lib/x86_64-linux-gnu", &list, only_lib, alphasort);
  if (n < 0) n = scandir("/usr/lib", &list, only_lib, alphasort);
  CHECK(n > 0);
  for (i = 0; i < n; i++) {
    if (i > 0) CHECK(strcmp(list[i - 1]->d_name, list[i]->d_name) <= 0);
    free(list[i]);
  }
  free(list);
  CHECK(glob("/usr/lib/*", 0, NULL, &g) == 0);
  CHECK(g.gl_pathc > 0);
  globfree(&g);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void library_state(void) {
  regex_t re;
  regmatch_t m[2];
  locale_t loc;
  struct passwd *pw;
  uint64_t *v;
  rng_t rng = {3};
  size_t i, n = 2000000;
  int k;
  for (k = 0; k < 200; k++) {
    CHECK(regcomp(&re, "([a-z]+)[0-9]{2,}", REG_EXTENDED) == 0);
    CHECK(regexec(&re, "xx abc123 yy", 2, m, 0) == 0);
    CHECK(m[1].rm_so == 3 && m[1].rm_eo == 6);
    regfree(&re);
  }
  /* glibc's qsort takes a temporary buffer from malloc for large arrays. */
  v = malloc(n * sizeof *v);
  CHECK(v != NULL);
  for (i = 0; i < n; i++) v[i] = rng_next(&rng);
  qsort(v, n, sizeof *v, cmp_u64);
  for (i = 1; i < n; i++) CHECK(v[i - 1] <= v[i]);
  free(v);
  for (k = 0; k < 100; k++) {
    loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    CHECK(loc != (locale_t)0);
    freelocale(loc);
  }
  pw = getpwuid(0);
  CHECK(pw != NULL && strcmp(pw->pw_name, "root") == 0);
}

static void glibc_malloc_extras(void) {
  FILE *devnull = fopen("/dev/null", "w");
  struct mallinfo2 mi;
  void *p = malloc(1000);
  CHECK(devnull != NULL && p != NULL);
  CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 256 * 1024), 1);
  CHECK_EQ(mallopt(M_TRIM_THRESHOLD, 1024 * 1024), 1);
  /* what glibc refuses (0) and what it ignores (1) */
  CHECK_EQ(mallopt(M_MXFAST, 161), 0);
  CHECK_EQ(mallopt(M_MXFAST, -1), 0);
  CHECK_EQ(mallopt(M_ARENA_MAX, 0), 1);
  CHECK_EQ(mallopt(12345, 1), 1);
  malloc_trim(0);
  mi = mallinfo2();
  (void)mi;
  malloc_info(0, devnull);
  /* options other than 0: glibc returns EINVAL itself, errno untouched */
  errno = 0;
  CHECK_EQ(malloc_info(1, devnull), EINVAL);
  CHECK_EQ(errno, 0);
  fclose(devnull);
  memset(p, 1, 1000);
  free(p);
  p = malloc(5 * MiB);
  CHECK(p != NULL);
  free(p);
}

/* mallinfo2's fields add up as glibc's do: a block above 1 MiB (glibc's
 * mmapped chunk) counted in hblkhd and not again in uordblks; arena is
 * what is in use plus what is free of it.  malloc_info gives the process's
 * totals after its heap's, as glibc does. */
static void mallinfo_sums(void) {
  size_t big = 100 * MiB;
  char *p = malloc(big);
  CHECK(p != NULL);
  memset(p, 1, 4096);
  struct mallinfo2 m = mallinfo2();
  printf("  arena %zu, uordblks %zu, fordblks %zu, hblks %zu, hblkhd %zu\n", m.arena, m.uordblks, m.fordblks,
         m.hblks, m.hblkhd);
  CHECK(m.hblks >= 1 && m.hblkhd >= big);
  CHECK_MSG(m.uordblks < big, "the big block counted twice: uordblks %zu, hblkhd %zu", m.uordblks, m.hblkhd);
  /* what is free of the arena holds the thread caches' blocks, and what a trim would give back */
  CHECK(m.fordblks >= m.fsmblks && m.fordblks >= m.keepcost);
  char *buf;
  size_t len;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f && malloc_info(0, f) == 0);
  fclose(f);
  const char *after_heap = strstr(buf, "</heap>");
  CHECK(after_heap != NULL);
  CHECK(strstr(after_heap, "<total type=\"fast\"") && strstr(after_heap, "<total type=\"rest\"") &&
        strstr(after_heap, "<total type=\"mmap\"") && strstr(after_heap, "<aspace type=\"mprotect\""));
  free(buf);
  free(p);
}

int main(void) {
  test_init();
  RUN(strings);
  RUN(streams);
  RUN(files);
  RUN(library_state);
  RUN(glibc_malloc_extras);
  RUN(mallinfo_sums);
  return 0;
}
