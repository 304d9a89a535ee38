/* SPDX-License-Identifier: MIT */
/* test-builds: standard hardened */
/* test-needs: google-pprof */
/* hakmem only.  The sampled heap profile: three call sites that allocate
 * 60, 30 and 10 % of 200 MiB in blocks of 24 B to 600 KiB, interleaved, each
 * within 5 points of its share in `google-pprof --text` of hak_prof_dump's
 * profile; the one site of twelve whose blocks are not freed, first in the
 * leak report at exit (HAKMEM_PROF_LEAKS=1), and none of the others; a profile at exit
 * (HAKMEM_PROF), one at each 50 MiB of growth, and a forked child's
 * beside its parent's; four threads sampling at once, each freeing the
 * blocks its neighbour took, leave the one site that keeps its blocks in
 * the leak report, at its bytes within a quarter, and no other site; and with every allocation
 * sampled, blocks as without sampling (usable sizes, alignment, realloc
 * keeping the contents), a double free still caught, and a block of 5 GiB
 * (5 GiB sampling periods of one byte), grown by realloc, reported at its
 * size; the profile at exit written where HAKMEM_PROF said, though the
 * program wrote its title over its environment; and HAKMEM_PROF_SAMPLE=0
 * said to turn the profile off, and hak_prof_dump's ENOENT without
 * sampling; a library unloaded (its destructor sampled as it goes) and
 * another loaded at its addresses, each frame of its samples' stacks walked
 * by its own rules; blocks resized by realloc where they are, profiled at
 * their new sizes; 100 huge blocks counted as 100 (not as their requested
 * bytes over their usable size); more stacks than the table holds, said once; and twelve
 * sites keeping blocks, every one live in the profile in the leak report,
 * ties and all; a program of one block writes its profile at exit without
 * reading the table of stacks whole (1 000 page faults more than without
 * the profile at most, where the table's 13 MiB took 3 300). */
#include "testutil.h"

#include <malloc.h>
#include <sys/resource.h>

static const size_t sizes[] = {24, 100, 700, 3000, 20000, 90000, 600000};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define TOTAL ((size_t)200 << 20)

static void *blocks[1 << 20];
static size_t nblocks;

/* Distinct functions, so that pprof names each; the pointer is stored, so
 * the call to malloc is not a tail call that would leave the site's frame. */
#define SITE(name)                                                          \
  static __attribute__((noinline)) size_t name(size_t n) {                  \
    blocks[nblocks] = malloc(n);                                            \
    CHECK(blocks[nblocks] != NULL);                                         \
    return malloc_usable_size(blocks[nblocks++]) ? n : 0;                   \
  }
SITE(site_sixty)
SITE(site_thirty)
SITE(site_ten)

/* One round gives 6, 3 and 1 blocks of each size to the sites. */
static void accuracy(void) {
  char dump[] = "/tmp/hakmem-prof-XXXXXX";
  int fd = mkstemp(dump);
  CHECK(fd >= 0);
  close(fd);
  for (size_t done = 0; done < TOTAL;) {
    for (size_t s = 0; s < NSIZES; s++) {
      for (int i = 0; i < 6; i++) done += site_sixty(sizes[s]);
      for (int i = 0; i < 3; i++) done += site_thirty(sizes[s]);
      done += site_ten(sizes[s]);
    }
  }
  CHECK(hak_prof_dump(dump) == 0);
  /* a profile that cannot be written whole says so */
  errno = 0;
  CHECK(hak_prof_dump("/dev/full") == -1);
  CHECK_ERRNO(ENOSPC);
  char exe[4096], cmd[8400], line[512];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = 0;
  snprintf(cmd, sizeof cmd, "google-pprof --text '%s' '%s' 2>/dev/null", exe, dump);
  FILE *f = popen(cmd, "r");
  CHECK(f != NULL);
  double share[3] = {-1, -1, -1};
  const char *names[3] = {"site_sixty", "site_thirty", "site_ten"};
  while (fgets(line, sizeof line, f)) {
    double flat, pct;
    char name[256];
    printf("  %s", line);
    if (sscanf(line, " %lf %lf%% %*f%% %*f %*f%% %255s", &flat, &pct, name) != 3) continue;
    for (int i = 0; i < 3; i++)
      if (!strcmp(name, names[i])) share[i] = pct;
  }
  CHECK(pclose(f) == 0);
  unlink(dump);
  const double want[3] = {60, 30, 10};
  for (int i = 0; i < 3; i++)
    CHECK_MSG(share[i] >= want[i] - 5 && share[i] <= want[i] + 5, "%s: %.1f%% of the profile, want %.0f%%",
              names[i], share[i], want[i]);
  for (size_t i = 0; i < nblocks; i++) free(blocks[i]);
}

/* Twelve sites take blocks; all but one free theirs.  Exported, so that
 * the report names them (dladdr). */
#define LEAK_SITE(k)                                                               \
  void churn_##k(size_t n, bool keep);                                             \
  __attribute__((noinline)) void churn_##k(size_t n, bool keep) {                  \
    void *p = malloc(n);                                                           \
    CHECK(p != NULL);                                                              \
    memset(p, k, 16);                                                              \
    if (keep) blocks[nblocks++] = p;                                               \
    else free(opaque_ptr(p));                                                      \
  }
LEAK_SITE(0) LEAK_SITE(1) LEAK_SITE(2) LEAK_SITE(3) LEAK_SITE(4) LEAK_SITE(5)
LEAK_SITE(6) LEAK_SITE(7) LEAK_SITE(8) LEAK_SITE(9) LEAK_SITE(10) LEAK_SITE(11)
static __attribute__((noinline)) void leaky_site(size_t n) { churn_0(n, true); }

static void leaks(void) {
  void (*const sites[])(size_t, bool) = {churn_1, churn_2, churn_3, churn_4,  churn_5,
                                         churn_6, churn_7, churn_8, churn_9, churn_10, churn_11};
  for (int round = 0; round < 4000; round++) {
    size_t n = sizes[round % NSIZES];
    for (size_t s = 0; s < sizeof sites / sizeof *sites; s++) sites[s](n, false);
    if (round % 4 == 0) leaky_site(n);
  }
}

/* Four threads: each round, each takes 256 blocks and frees its
 * neighbour's; every 40th, it keeps one of 64 KiB (sampled for sure). */
#define THREADS 4
#define HANDED 256
static void *handed[THREADS][HANDED], *kept_blocks[THREADS][8];
static pthread_barrier_t turn;
void thread_hands(int t, int i, size_t n);
__attribute__((noinline)) void thread_hands(int t, int i, size_t n) {
  CHECK((handed[t][i] = malloc(n)) != NULL);
}
void thread_keeps(int t, int i);
__attribute__((noinline)) void thread_keeps(int t, int i) { CHECK((kept_blocks[t][i] = malloc(65536)) != NULL); }

static void *threads_body(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < HANDED; i++) thread_hands(t, i, sizes[(size_t)(i + round) % 5]);
    pthread_barrier_wait(&turn);
    for (int i = 0; i < HANDED; i++) free(handed[(t + 1) % THREADS][i]);
    pthread_barrier_wait(&turn);
    if (round % 40 == 0) thread_keeps(t, round / 40);
  }
  return NULL;
}

static void threads(void) {
  pthread_t th[THREADS];
  CHECK(pthread_barrier_init(&turn, NULL, THREADS) == 0);
  for (intptr_t t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, threads_body, (void *)t) == 0);
  for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
}

/* The same requests answered with and without sampling: printed, and compared by the parent. */
static void blocks_seen(void) {
  static const size_t aligns[] = {16, 64, 4096, 65536};
  for (size_t n = 1; n < (2 << 20); n += n / 3 + 1) {
    char *p = malloc(n);
    CHECK(p != NULL);
    memset(p, 0x5a, n);
    printf("%zu %zu", n, malloc_usable_size(p));
    char *q = realloc(p, n + n / 2 + 1);
    CHECK(q != NULL);
    CHECK(find_not_byte(q, 0x5a, n) == SIZE_MAX);
    printf(" %zu", malloc_usable_size(q));
    free(q);
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) {
      void *r = NULL;
      CHECK(posix_memalign(&r, aligns[a], n) == 0);
      CHECK_ALIGNED(r, aligns[a]);
      printf(" %zu", malloc_usable_size(r));
      free(r);
    }
    printf("\n");
  }
  fflush(stdout);
}

/* Every block sampled: a small one (a stand-in, kept by the profile once
 * freed) and a large one (flagged in the class map) freed twice, and a kept
 * stand-in given to realloc. */
static void freed_twice(size_t size, bool realloc_it) {
  void *p = malloc(size);
  CHECK(p != NULL);
  free(p);
  if (realloc_it) p = realloc(opaque_ptr(p), size * 2);
  else free(opaque_ptr(p));
  /* the standard build finds a class's block freed twice when its list gives it out again */
  void *a = malloc(size), *b = malloc(size);
  CHECK(a != b);
}

/* A block of more periods than a 32-bit count holds, kept: grown, it keeps its record. */
#define GIANT ((size_t)5 << 30)
void giant_site(void);
__attribute__((noinline)) void giant_site(void) {
  void *p = malloc(GIANT);
  if (!p) {
    fprintf(stderr, "no 5 GiB of address space\n");
    return;
  }
  blocks[nblocks++] = realloc(p, GIANT + (1 << 20));
  CHECK(blocks[nblocks - 1] != NULL);
}

/* A buffer grown where it is, and one shrunk: each profiled at its new
 * size (blocks of a mapping of their own, resized by the kernel). */
#define GROWN ((size_t)600 << 20)
#define SHRUNK ((size_t)2 << 20)
void grown_site(void);
__attribute__((noinline)) void grown_site(void) {
  void *p = malloc(GROWN / 8);
  CHECK(p != NULL);
  CHECK((blocks[nblocks++] = realloc(p, GROWN)) != NULL);
}
void shrunk_site(void);
__attribute__((noinline)) void shrunk_site(void) {
  void *p = malloc(GROWN);
  CHECK(p != NULL);
  CHECK((blocks[nblocks++] = realloc(p, SHRUNK)) != NULL);
}
static void resized(void) {
  grown_site();
  shrunk_site();
}

/* Huge blocks just above a size their usable size rounds up from: the
 * report's count of blocks is its bytes over that usable size. */
void huge_site(void);
__attribute__((noinline)) void huge_site(void) {
  for (int i = 0; i < 100; i++) CHECK((blocks[nblocks++] = malloc((1 << 20) + 1)) != NULL);
}

/* Every block sampled from 2^15 stacks, more than the profile keeps: it
 * says so once, and goes on.  A path of 15 turns, each through left or
 * right, made distinct functions by noipa. */
void *turns(unsigned path, unsigned depth);
__attribute__((noipa)) static void *left(unsigned path, unsigned depth) {
  void *p = turns(path, depth);
  __asm__ volatile("" : : "r"(p) : "memory");  /* not a tail call */
  return p;
}
__attribute__((noipa)) static void *right(unsigned path, unsigned depth) {
  void *p = turns(path, depth);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}
__attribute__((noipa)) void *turns(unsigned path, unsigned depth) {
  if (!depth) return malloc(3 << 20);  /* huge: each one counted, so sampled */
  return path & 1 ? left(path >> 1, depth - 1) : right(path >> 1, depth - 1);
}
static void many_stacks(void) {
  for (unsigned path = 0; path < 1u << 15; path++) {
    void *p = turns(path, 15);
    CHECK(p != NULL);
    free(p);
  }
}

/* Twelve sites keep blocks of one size, a few samples each: sites whose
 * estimates tie are all in the leak report (the profile says which live). */
static void tied(void) {
  void (*const sites[])(size_t, bool) = {churn_0, churn_1, churn_2, churn_3, churn_4,  churn_5,
                                         churn_6, churn_7, churn_8, churn_9, churn_10, churn_11};
  for (int round = 0; round < 3000; round++)
    for (size_t s = 0; s < sizeof sites / sizeof *sites; s++) sites[s](1000, true);
}

/* The bytes the leak report gives for the stack that holds `site`, and
 * its blocks in *blocks if not NULL; -1 if none. */
static double leak_of(const char *err, const char *site, double *blocks) {
  for (const char *at = strstr(err, "hakmem: leak: about"); at;) {
    const char *next = strstr(at + 1, "hakmem: leak: about");
    const char *found = strstr(at, site);
    double bytes, n;
    if (found && (!next || found < next) && sscanf(at, "hakmem: leak: about %lf bytes in %lf", &bytes, &n) == 2) {
      if (blocks) *blocks = n;
      return bytes;
    }
    at = next;
  }
  return -1;
}

/* As servers set their process title: the environment copied away, and
 * the title written over the memory of the arguments and the environment. */
extern char **environ;
/* Blocks sampled through a library's code, the library unloaded, and
 * another one loaded at its addresses, with a call to malloc at the same
 * place in a frame of another shape: its samples' stacks must be walked by
 * its own frames' rules (the build's checks compare each stack with
 * backtrace()'s and abort). */
#if defined(__x86_64__)
/* On a frame pointer, so that a walk by the old library's rule, which
 * takes the caller's frame from rbp, returns a stack one frame short
 * rather than stopping at a value in rbp that is no frame's. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void *through(void *(*f)(size_t), size_t n) {
  void *p = f(n);
  __asm__ volatile("" : : "r"(p) : "memory");  /* not a tail call: this frame stays on the stack */
  return p;
}
#endif

static void unloaded(void) {
#if defined(__x86_64__)
  void *at[2];
  for (int i = 0; i < 2; i++) {
    char path[4096];
    helper_lib_path(path, sizeof path, i ? "libframe_b.so" : "libframe_a.so");
    void *lib = dlopen(path, RTLD_NOW);
    CHECK_MSG(lib != NULL, "%s", dlerror());
    void *(*frame_alloc)(size_t) = (void *(*)(size_t))dlsym(lib, "frame_alloc");
    CHECK(frame_alloc != NULL);
    at[i] = (void *)frame_alloc;
    for (int k = 0; k < 20; k++) free(through(frame_alloc, 3 << 20));
    if (!i) CHECK(dlclose(lib) == 0);
  }
  CHECK_MSG(at[0] == at[1], "the second library loaded at %p, not at the first's %p", at[1], at[0]);
#endif
  exit(0);
}

/* No sampling: hak_prof_dump says so, and writes nothing. */
static void sampling_off(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/hakmem-prof-off-%d", (int)getpid());
  free(opaque_ptr(malloc(100)));
  errno = 0;
  CHECK(hak_prof_dump(path) == -1);
  CHECK_ERRNO(ENOENT);
  CHECK(access(path, F_OK) != 0);
  exit(0);
}

static void title(char **argv) {
  size_t n = 0;
  while (environ[n]) n++;
  char **copy = malloc((n + 1) * sizeof *copy);
  CHECK(copy != NULL && n > 0);
  for (size_t i = 0; i < n; i++) CHECK((copy[i] = strdup(environ[i])) != NULL);
  copy[n] = NULL;
  char *start = argv[0], *end = environ[n - 1] + strlen(environ[n - 1]);
  environ = copy;
  memset(start, 0, (size_t)(end - start));
  strcpy(start, "server: worker");
  site_ten(1000);
}

/* A forked child's profile at its exit goes beside its parent's, named by its pid. */
static void forked(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) exit(site_ten(1000) ? 0 : 1);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char name[128];
  snprintf(name, sizeof name, "%s.%d", getenv("HAKMEM_PROF"), (int)pid);
  CHECK_MSG(access(name, R_OK) == 0, "no profile %s from the child", name);
  unlink(name);
}

static void run(const char *name, const char *const *env, child_result_t *res) {
  run_self(name, env, 60, res);
  printf("%s: %s\n%s", name, describe_status(res->status), res->err);
}

static bool exited_0(const child_result_t *r) { return WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0; }

/* blocks_seen's output with env, through a file: run_self keeps only stderr. */
static void blocks_output(const char *const *env, const char *out, child_result_t *res) {
  char redirect[300];
  snprintf(redirect, sizeof redirect, "HAKMEM_TEST_OUT=%s", out);
  const char *e[4] = {redirect, env[0], env[1], NULL};
  run("blocks_seen", e, res);
  CHECK(exited_0(res));
}

int main(int argc, char **argv) {
  if (argc > 1) {
    const char *out = getenv("HAKMEM_TEST_OUT");
    if (out) CHECK(freopen(out, "w", stdout) != NULL);
    if (!strcmp(argv[1], "accuracy")) accuracy();
    if (!strcmp(argv[1], "leaks")) leaks();
    if (!strcmp(argv[1], "blocks_seen")) blocks_seen();
    if (!strcmp(argv[1], "double_free")) freed_twice(100, false);
    if (!strcmp(argv[1], "double_free_large")) freed_twice(90000, false);
    if (!strcmp(argv[1], "realloc_freed")) freed_twice(100, true);
    if (!strcmp(argv[1], "forked")) forked();
    if (!strcmp(argv[1], "threads")) threads();
    if (!strcmp(argv[1], "giant")) giant_site();
    if (!strcmp(argv[1], "title")) title(argv);
    if (!strcmp(argv[1], "unloaded")) unloaded();
    if (!strcmp(argv[1], "off")) sampling_off();
    if (!strcmp(argv[1], "one_block")) exit(opaque_ptr(malloc(100)) ? 0 : 1);
    if (!strcmp(argv[1], "resized")) resized();
    if (!strcmp(argv[1], "huge_objects")) huge_site();
    if (!strcmp(argv[1], "many_stacks")) many_stacks();
    if (!strcmp(argv[1], "tied")) tied();
    return 0;
  }
  child_result_t res;
  char prof[64], prof_env[80], name[96];
  snprintf(prof, sizeof prof, "/tmp/hakmem-prof-%d", (int)getpid());
  snprintf(prof_env, sizeof prof_env, "HAKMEM_PROF=%s", prof);
  const char *accuracy_env[] = {"HAKMEM_PROF_SAMPLE=65536", prof_env, "HAKMEM_PROF_INTERVAL_MB=50", NULL};
  run("accuracy", accuracy_env, &res);
  CHECK(exited_0(&res));
  /* 200 MiB kept: a profile at each 50 MiB of growth, about 4, and one at exit */
  for (int i = 0; i <= 3; i++) {
    snprintf(name, sizeof name, i ? "%s.%d.heap" : "%s", prof, i);
    FILE *f = fopen(name, "r");
    CHECK_MSG(f != NULL, "no profile %s", name);
    char head[32] = "";
    CHECK(fgets(head, sizeof head, f) && !strncmp(head, "heap profile: ", 14));
    fclose(f);
  }
  snprintf(name, sizeof name, "rm -f %s %s.*.heap", prof, prof);
  CHECK(system(name) == 0);
  const char *prof_only_env[] = {prof_env, NULL};  /* HAKMEM_PROF alone */
  run("title", prof_only_env, &res);
  CHECK(exited_0(&res));
  CHECK_MSG(access(prof, R_OK) == 0, "no profile %s after the program wrote over its environment", prof);
  unlink(prof);
  const char *zero_env[] = {prof_env, "HAKMEM_PROF_SAMPLE=0", NULL};
  run("title", zero_env, &res);
  CHECK(exited_0(&res) && strstr(res.err, "hakmem: heap profile off: HAKMEM_PROF_SAMPLE=0"));
  CHECK(access(prof, F_OK) != 0);
  const char *off_env[] = {NULL};
  run("off", off_env, &res);
  CHECK(exited_0(&res));
  run("forked", prof_only_env, &res);
  CHECK(exited_0(&res));
  unlink(prof);
  /* the page faults of a program of one block, with its profile written
   * at exit and without (an emulator's own count in both) */
  long faults[2];
  for (int on = 0; on < 2; on++) {
    struct rusage before, after;
    CHECK(getrusage(RUSAGE_CHILDREN, &before) == 0);
    run("one_block", on ? prof_only_env : off_env, &res);
    CHECK(getrusage(RUSAGE_CHILDREN, &after) == 0);
    CHECK(exited_0(&res) && (access(prof, R_OK) == 0) == on);
    faults[on] = after.ru_minflt - before.ru_minflt;
  }
  CHECK_MSG(faults[1] - faults[0] < 1000, "a profile of one block took %ld page faults more than none",
            faults[1] - faults[0]);
  unlink(prof);

  const char *leaks_env[] = {"HAKMEM_PROF_LEAKS=1", "HAKMEM_PROF_SAMPLE=16384", NULL};
  run("leaks", leaks_env, &res);
  CHECK(exited_0(&res));
  char *first = strstr(res.err, "hakmem: leak:");
  CHECK_MSG(first != NULL, "no leak reported");
  char *frame = strchr(first, '\n');
  CHECK(frame != NULL);
  CHECK_MSG(!strncmp(frame + 1, "hakmem:   ", 10) && strstr(frame, "churn_0") &&
                strstr(frame, "churn_0") < strstr(frame + 1, "\n"),
            "the first stack reported is not the leaking site's");
  CHECK_MSG(!strstr(res.err, "churn_1"), "a site that freed its blocks is reported as leaking");

  const char *threads_env[] = {"HAKMEM_PROF_LEAKS=1", "HAKMEM_PROF_SAMPLE=4096", NULL};
  run("threads", threads_env, &res);
  CHECK(exited_0(&res));
  double leaked = 0;
  first = strstr(res.err, "hakmem: leak:");
  int read = first ? sscanf(first, "hakmem: leak: about %lf bytes", &leaked) : 0;  /* not in CHECK's format */
  CHECK_MSG(read == 1, "no leak reported");
  frame = strchr(first, '\n');
  CHECK_MSG(frame && strstr(frame, "thread_keeps") && strstr(frame, "thread_keeps") < strstr(frame + 1, "\n"),
            "the first stack reported is not the keeping site's");
  CHECK_MSG(!strstr(res.err, "thread_hands"), "a site whose blocks were all freed is reported as leaking");
  /* what refills hand out is counted: the blocks' class size (the hardened
   * build's canary puts 64 KiB in the class of 72 KiB) */
  void *probe = malloc(65536);
  const double kept_bytes = THREADS * 5 * (double)malloc_usable_size(probe);
  free(probe);
  CHECK_MSG(leaked > kept_bytes * 0.75 && leaked < kept_bytes * 1.25, "%.0f bytes reported leaked of %.0f", leaked,
            kept_bytes);

  char plain[] = "/tmp/hakmem-prof-plain-XXXXXX", sampled[] = "/tmp/hakmem-prof-sampled-XXXXXX";
  close(mkstemp(plain)), close(mkstemp(sampled));
  const char *off[] = {NULL, NULL}, *every[] = {"HAKMEM_PROF_SAMPLE=1", "HAKMEM_PROF=/dev/null"};
  blocks_output(off, plain, &res);
  blocks_output(every, sampled, &res);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "cmp -s %s %s", plain, sampled);
  CHECK_MSG(system(cmd) == 0, "sizes differ with sampling: diff %s %s", plain, sampled);
  unlink(plain), unlink(sampled);

  const char *giant_env[] = {"HAKMEM_PROF_LEAKS=1", "HAKMEM_PROF_SAMPLE=1", NULL};
  run("giant", giant_env, &res);
  CHECK(exited_0(&res));
  if (!strstr(res.err, "no 5 GiB")) {
    first = strstr(res.err, "hakmem: leak:");
    read = first ? sscanf(first, "hakmem: leak: about %lf bytes", &leaked) : 0;
    CHECK_MSG(read == 1 && strstr(first, "giant_site"), "the 5 GiB block is not reported");
    CHECK_MSG(leaked > GIANT * 0.95 && leaked < GIANT * 1.05, "%.0f bytes reported of %zu", leaked, GIANT);
  }

  const char *resized_env[] = {"HAKMEM_PROF_LEAKS=1", "HAKMEM_PROF_SAMPLE=1", NULL};
  run("resized", resized_env, &res);
  CHECK(exited_0(&res));
  double grown = leak_of(res.err, "grown_site", NULL), shrunk = leak_of(res.err, "shrunk_site", NULL);
  CHECK_MSG(grown > GROWN * 0.95 && grown < GROWN * 1.05, "a block grown to %zu reported at %.0f bytes", GROWN, grown);
  CHECK_MSG(shrunk > SHRUNK * 0.95 && shrunk < SHRUNK * 1.05, "a block shrunk to %zu reported at %.0f bytes", SHRUNK,
            shrunk);

  run("huge_objects", resized_env, &res);
  CHECK(exited_0(&res));
  double objects = 0;
  CHECK_MSG(leak_of(res.err, "huge_site", &objects) > 0, "no leak reported for huge_site");
  CHECK_MSG(objects >= 99 && objects <= 101, "100 huge blocks reported as %.0f", objects);

  const char *many_env[] = {"HAKMEM_PROF_SAMPLE=1", NULL};
  run("many_stacks", many_env, &res);
  CHECK(exited_0(&res));
  const char *full = "hakmem: heap profile: no room for more stacks", *said = strstr(res.err, full);
  CHECK_MSG(said != NULL, "a full stack table is not said");
  CHECK_MSG(!strstr(said + strlen(full), full), "a full stack table is said more than once");

  /* every stack the profile at exit has live is in the report, up to 10 */
  char tied_env_prof[80];
  snprintf(tied_env_prof, sizeof tied_env_prof, "HAKMEM_PROF=%s", prof);
  const char *tied_env[] = {"HAKMEM_PROF_LEAKS=1", "HAKMEM_PROF_SAMPLE=1048576", tied_env_prof, NULL};
  run("tied", tied_env, &res);
  CHECK(exited_0(&res));
  FILE *f = fopen(prof, "r");
  CHECK_MSG(f != NULL, "no profile %s", prof);
  char line[4096];
  unsigned live = 0, reported = 0;
  CHECK(fgets(line, sizeof line, f) != NULL);  /* the header */
  while (fgets(line, sizeof line, f) && line[0] != '\n') {
    unsigned long objs, bytes;
    CHECK(sscanf(line, "%lu: %lu [", &objs, &bytes) == 2);
    live += bytes > 0;
  }
  fclose(f);
  unlink(prof);
  for (const char *at = strstr(res.err, "hakmem: leak: about"); at; at = strstr(at + 1, "hakmem: leak: about"))
    reported++;
  CHECK_MSG(live >= 2, "%u stacks live in the profile", live);
  CHECK_MSG(reported == (live < 10 ? live : 10), "%u stacks in the leak report, %u live in the profile", reported,
            live);

  const char *double_env[] = {"HAKMEM_PROF_SAMPLE=1", NULL};
  run("unloaded", double_env, &res);
  CHECK(exited_0(&res));
  const char *misuse[][2] = {{"double_free", "hakmem: double free of"},
                             {"double_free_large", "hakmem: double free of"},
                             {"realloc_freed", "a block already freed"}};
  for (size_t i = 0; i < sizeof misuse / sizeof *misuse; i++) {
    run(misuse[i][0], double_env, &res);
    CHECK_MSG(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGABRT, "%s", describe_status(res.status));
    CHECK_MSG(strstr(res.err, misuse[i][1]) != NULL, "%s: no \"%s\"", misuse[i][0], misuse[i][1]);
  }
  printf("ok\n");
  return 0;
}
