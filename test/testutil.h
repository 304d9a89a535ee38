/* SPDX-License-Identifier: MIT */
/* Code shared by the hakmem tests: CHECK macros, a seeded random number
 * generator, byte patterns to fill and verify blocks, running a function in a
 * child process or the program itself under an address-space limit, and
 * finding out which allocator the process is using.
 *
 * A test program exits 0 when it passes; a failed CHECK prints the file, line
 * and expression and aborts.  scripts/run_tests.py sets
 * HAKMEM_TEST_ALLOCATOR=hakmem or =glibc to say which allocator it expects;
 * test_init() verifies that the expectation holds, so that a mistyped
 * LD_PRELOAD (which the dynamic loader ignores with a warning) cannot turn a
 * hakmem run into a glibc run that passes. */
#ifndef HAKMEM_TESTUTIL_H
#define HAKMEM_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checks ------------------------------------------------------------ */

static void test_fail_(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static void test_fail_(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "%s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  abort();
}

#define CHECK(expr) \
  ((expr) ? (void)0 : test_fail_(__FILE__, __LINE__, "CHECK(%s) failed", #expr))

#define CHECK_MSG(expr, ...) \
  ((expr) ? (void)0 : test_fail_(__FILE__, __LINE__, "CHECK(" #expr ") failed: " __VA_ARGS__))

/* Integers and pointers; prints both values on failure. */
#define CHECK_EQ(a, b)                                                          \
  do {                                                                          \
    unsigned long long a_ = (unsigned long long)(a);                            \
    unsigned long long b_ = (unsigned long long)(b);                            \
    if (a_ != b_)                                                               \
      test_fail_(__FILE__, __LINE__, "CHECK_EQ(%s, %s) failed: %llu (0x%llx) != %llu (0x%llx)", \
                 #a, #b, a_, a_, b_, b_);                                       \
  } while (0)

#define CHECK_ERRNO(expected)                                                   \
  do {                                                                          \
    int e_ = errno;                                                             \
    if (e_ != (expected))                                                       \
      test_fail_(__FILE__, __LINE__, "errno is %d (%s), expected %s", e_,       \
                 strerror(e_), #expected);                                      \
  } while (0)

/* The address is a multiple of align (a power of two). */
#define CHECK_ALIGNED(p, align)                                                 \
  do {                                                                          \
    uintptr_t p_ = (uintptr_t)(p);                                              \
    size_t al_ = (size_t)(align);                                               \
    if (p_ & (al_ - 1))                                                         \
      test_fail_(__FILE__, __LINE__, "%s = %p is not aligned to %zu", #p,       \
                 (void *)p_, al_);                                              \
  } while (0)

/* A test program is a list of cases; the name is printed first so that the
 * output of a failure says which case was running. */
#define RUN(fn)                        \
  do {                                 \
    printf("  %s\n", #fn);             \
    fflush(stdout);                    \
    fn();                              \
  } while (0)

/* Something the reader of the output should know (a case left out, ...). */
#define NOTE(...) (printf("  note: " __VA_ARGS__), putchar('\n'), fflush(stdout))

/* Hides a value from the compiler, so that malloc(opaque(SIZE_MAX)) is really
 * called instead of being folded away or warned about. */
static inline size_t opaque(size_t x) {
  volatile size_t v = x;
  return v;
}
static inline void *opaque_ptr(void *p) {
  void *volatile v = p;
  return v;
}

/* ---- random numbers (splitmix64: small, fast, and the same everywhere) ---- */

typedef struct rng {
  uint64_t state;
} rng_t;

static inline uint64_t rng_next(rng_t *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline uint64_t rng_below(rng_t *r, uint64_t n) { return rng_next(r) % n; }

/* Uniform in [lo, hi]. */
static inline size_t rng_range(rng_t *r, size_t lo, size_t hi) {
  return lo + (size_t)rng_below(r, (uint64_t)(hi - lo) + 1);
}

/* Log-uniform in [lo, hi] (lo >= 1): each power of two is about as likely, so
 * small sizes dominate but every size class gets its share. */
static inline size_t rng_size(rng_t *r, size_t lo, size_t hi) {
  int lo_bit = 63 - __builtin_clzll(lo), hi_bit = 63 - __builtin_clzll(hi);
  int bit = lo_bit + (int)rng_below(r, (uint64_t)(hi_bit - lo_bit + 1));
  size_t a = (size_t)1 << bit, b = (a << 1) - 1;
  if (a < lo) a = lo;
  if (b > hi) b = hi;
  return rng_range(r, a, b);
}

/* ---- byte patterns ------------------------------------------------------ */

/* The 8 bytes at word index i of a block filled with seed. */
static inline uint64_t pattern_word(uint64_t seed, size_t i) {
  uint64_t v = (seed ^ 0x5851f42d4c957f2dull) * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xd1b54a32d192ed03ull;
  return v ^ (v >> 29);
}

/* (The tests are built with -fno-builtin so that the compiler leaves the
 * allocation calls alone; __builtin_memcpy keeps these loops fast anyway.) */
static inline void fill_pattern(void *p, size_t n, uint64_t seed) {
  unsigned char *b = (unsigned char *)p;
  size_t words = n / 8, i;
  for (i = 0; i < words; i++) {
    uint64_t w = pattern_word(seed, i);
    __builtin_memcpy(b + 8 * i, &w, 8);
  }
  if (n % 8) {
    uint64_t w = pattern_word(seed, words);
    __builtin_memcpy(b + 8 * words, &w, n % 8);
  }
}

/* Offset of the first byte that differs from fill_pattern(p, n, seed), or
 * SIZE_MAX when all n bytes are intact. */
static inline size_t check_pattern(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = (const unsigned char *)p;
  size_t words = n / 8, i, j;
  for (i = 0; i <= words; i++) {
    size_t len = i < words ? 8 : n % 8;
    uint64_t want = pattern_word(seed, i), have = want;
    __builtin_memcpy(&have, b + 8 * i, len);
    if (have != want) {
      unsigned char w[8];
      __builtin_memcpy(w, &want, 8);
      for (j = 0; j < len; j++)
        if (b[8 * i + j] != w[j]) return 8 * i + j;
    }
  }
  return SIZE_MAX;
}

#define CHECK_PATTERN(p, n, seed)                                               \
  do {                                                                          \
    size_t n__ = (size_t)(n);                                                   \
    size_t off_ = check_pattern((p), n__, (seed));                              \
    if (off_ != SIZE_MAX)                                                       \
      test_fail_(__FILE__, __LINE__,                                            \
                 "block %p (%zu bytes) corrupted at offset %zu", (void *)(p),   \
                 n__, off_);                                                    \
  } while (0)

/* Offset of the first byte of p[0..n) that is not c, or SIZE_MAX. */
static inline size_t find_not_byte(const void *p, int c, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; i++)
    if (b[i] != (unsigned char)c) return i;
  return SIZE_MAX;
}

/* A block that describes itself, for blocks that travel between threads: the
 * first 16 bytes hold its size and seed, the rest is the pattern. */
#define TAGGED_MIN 16
static inline void tagged_fill(void *p, size_t size, uint64_t seed) {
  uint64_t hdr[2] = {(uint64_t)size, seed};
  __builtin_memcpy(p, hdr, sizeof hdr);
  fill_pattern((char *)p + 16, size - 16, seed);
}

/* Size of the tagged block p after verifying it (fails the test if corrupt). */
#define CHECK_TAGGED(p) tagged_check_((p), __FILE__, __LINE__)
static inline size_t tagged_check_(const void *p, const char *file, int line) {
  uint64_t hdr[2];
  size_t off;
  __builtin_memcpy(hdr, p, sizeof hdr);
  if (hdr[0] < TAGGED_MIN || hdr[0] > ((uint64_t)1 << 40))
    test_fail_(file, line, "tagged block %p: bad header (size %llu)", p,
               (unsigned long long)hdr[0]);
  off = check_pattern((const char *)p + 16, (size_t)hdr[0] - 16, hdr[1]);
  if (off != SIZE_MAX)
    test_fail_(file, line, "tagged block %p (%llu bytes) corrupted at offset %zu", p,
               (unsigned long long)hdr[0], off + 16);
  return (size_t)hdr[0];
}

/* ---- which allocator ---------------------------------------------------- */

/* The path of one of the libraries the tests load (test/lib/), built next
 * to the test program or one directory up (build/test/static/X). */
static inline void helper_lib_path(char *path, size_t cap, const char *name) {
  ssize_t n = readlink("/proc/self/exe", path, cap - 64);
  CHECK(n > 0 && strlen(name) < 60);
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  CHECK(slash != NULL);
  strcpy(slash + 1, name);
  if (access(path, R_OK) != 0) {
    strcpy(slash + 1, "../");
    strcpy(slash + 4, name);
  }
}

/* hakmem's own functions, looked up at run time: the tests of the standard API
 * are plain programs that run against glibc or, preloaded, against hakmem. */
static inline void *hakmem_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

static inline int hakmem_active(void) { return hakmem_sym("hak_version") != NULL; }

/* The runner's expectation: 1 hakmem, 0 glibc, -1 not said. */
static inline int expected_hakmem(void) {
  const char *e = getenv("HAKMEM_TEST_ALLOCATOR");
  if (!e) return -1;
  return strcmp(e, "hakmem") == 0;
}

/* Fills *out from hak_os_stats; 0 when hakmem is not in the process. */
static inline int get_os_stats(hak_os_stats_t *out) {
  void (*fn)(hak_os_stats_t *) = (void (*)(hak_os_stats_t *))hakmem_sym("hak_os_stats");
  if (!fn) return 0;
  fn(out);
  return 1;
}

/* The figures of the smallest class that holds `size` bytes, from a
 * snapshot taken now (hak_stats_get); hakmem only. */
static inline const hak_class_stats_t *class_stats(size_t size) {
  static hak_stats_t snapshot;
  void (*get)(hak_stats_t *) = (void (*)(hak_stats_t *))hakmem_sym("hak_stats_get");
  CHECK(get != NULL);
  get(&snapshot);
  for (unsigned i = 0; i < snapshot.nclasses; i++)
    if (snapshot.classes[i].block_size >= size) return &snapshot.classes[i];
  CHECK(!"no class holds the size");
  return NULL;
}

/* The base address of the object (executable or shared library) defining
 * the symbol, or NULL. */
static inline void *symbol_object(const char *name, const char **file) {
  Dl_info info;
  void *addr = dlsym(RTLD_DEFAULT, name);
  if (!addr || !dladdr(addr, &info)) return NULL;
  if (file) *file = info.dli_fname;
  return info.dli_fbase;
}

/* Fails unless every symbol in names (NULL-terminated) resolves to the object
 * that defines hak_version, i.e. hakmem really replaces it. */
static inline void check_symbols_from_hakmem(const char *const *names) {
  const char *hak_file = "?", *file = "?";
  void *hak = symbol_object("hak_version", &hak_file);
  CHECK_MSG(hak != NULL, "hak_version not found: hakmem is not in the process");
  for (; *names; names++) {
    void *obj = symbol_object(*names, &file);
    CHECK_MSG(obj == hak, "%s comes from %s, not from hakmem (%s)", *names,
              obj ? file : "nowhere", hak_file);
  }
}

/* First call of every test's main: checks that the allocator is the one the
 * runner expects, and makes stdout line-buffered. */
static inline void test_init(void) {
  static const char *const api[] = {"malloc", "free", "calloc", "realloc",
                                    "posix_memalign", "aligned_alloc", "memalign",
                                    "malloc_usable_size", NULL};
  int expect = expected_hakmem();
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (expect == 1) check_symbols_from_hakmem(api);
  if (expect == 0) CHECK_MSG(!hakmem_active(), "hakmem is loaded, glibc expected");
}

/* ---- memory footprint ----------------------------------------------------- */

/* A field of /proc/self/status in KiB ("VmRSS", "VmSize"), 0 if absent. */
static inline size_t proc_status_kib(const char *field) {
  char line[256];
  size_t len = strlen(field), kib = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0 && line[len] == ':') {
      kib = strtoul(line + len + 1, NULL, 10);
      break;
    }
  fclose(f);
  return kib;
}

/* Memory the allocator holds: hakmem's committed bytes (in use, cached, and
 * free but resident: untouched blocks count too) when it is in the process,
 * otherwise the resident set size.  Not hakmem's mapped bytes: address space
 * made accessible once and kept (a huge region per arena) is not memory. */
static inline size_t heap_footprint(void) {
  void (*get)(hak_stats_t *) = (void (*)(hak_stats_t *))hakmem_sym("hak_stats_get");
  if (get) {
    hak_stats_t s;
    get(&s);
    return s.committed_bytes;
  }
  return proc_status_kib("VmRSS") * 1024;
}

static inline const char *footprint_name(void) {
  return hakmem_active() ? "hak_stats committed_bytes" : "VmRSS";
}

#define MiB ((size_t)1 << 20)

/* ---- an emulated run ------------------------------------------------------ */

/* Under an emulator (make test-arm64: scripts/run_tests.py --exec-wrapper
 * and --timeout-scale) the runner sets HAKMEM_TEST_TIMEOUT_SCALE, which
 * multiplies the timeouts the tests give their children, and
 * HAKMEM_TEST_EXEC_WRAPPER, the emulator's command (words separated by
 * spaces), through which a program runs itself again: this machine's kernel
 * cannot execute it. */
static inline unsigned scaled_timeout(unsigned seconds) {
  const char *s = getenv("HAKMEM_TEST_TIMEOUT_SCALE");
  unsigned long scale = s ? strtoul(s, NULL, 10) : 1;
  return seconds * (unsigned)(scale ? scale : 1);
}

/* Replaces the process with this program run again with argv (argv[0]
 * aside); returns only if that fails. */
static inline void exec_self(char *const *argv) {
  const char *wrapper = getenv("HAKMEM_TEST_EXEC_WRAPPER");
  char exe[4096], words[1024], *args[64];
  size_t n = 0;
  ssize_t len;
  if (!wrapper || !*wrapper) {
    execv("/proc/self/exe", argv);
    return;
  }
  len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0 || strlen(wrapper) >= sizeof words) return;
  exe[len] = '\0';
  strcpy(words, wrapper);
  for (char *w = strtok(words, " "); w && n < 32; w = strtok(NULL, " ")) args[n++] = w;
  args[n++] = exe;
  for (size_t i = 1; argv[i] && n < 63; i++) args[n++] = argv[i];
  args[n] = NULL;
  /* The emulator is a program of this machine: its loader must not try the
   * library of the other.  The runner hands the preload to the emulator in
   * QEMU_SET_ENV, which this process passes on. */
  unsetenv("LD_PRELOAD");
  execvp(args[0], args);
}

/* Whether an address-space limit set now would hold.  qemu-user accepts
 * setrlimit(RLIMIT_AS) and ignores it, since the limit would bind the
 * emulator's own memory too; the limit is tried on the soft value and put
 * back. */
static inline bool as_limit_holds(void) {
  struct rlimit was, lim;
  if (getrlimit(RLIMIT_AS, &was) != 0) return false;
  lim = was;
  lim.rlim_cur = was.rlim_cur == RLIM_INFINITY ? (rlim_t)1 << 46 : was.rlim_cur - 1;
  if (setrlimit(RLIMIT_AS, &lim) != 0) return false;
  bool held = getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != was.rlim_cur;
  CHECK(setrlimit(RLIMIT_AS, &was) == 0);
  return held;
}

/* Takes out of text the lines that start with prefix. */
static inline void drop_lines(char *text, const char *prefix) {
  char *out = text;
  for (char *line = text; *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
    if (strncmp(line, prefix, strlen(prefix)) != 0) {
      memmove(out, line, len);
      out += len;
    }
    line += len;
  }
  *out = '\0';
}

#define AS_LIMIT_IGNORED "RLIMIT_AS does not hold here (qemu-user ignores it)"

/* Leaves a case that needs an address-space limit, with a note, where it
 * would not hold. */
#define REQUIRE_AS_LIMIT()                                 \
  do {                                                     \
    if (!as_limit_holds()) {                               \
      NOTE("%s: case skipped", AS_LIMIT_IGNORED);          \
      return;                                              \
    }                                                      \
  } while (0)

/* ---- child processes ------------------------------------------------------ */

typedef struct child_result {
  int status;       /* from waitpid */
  char err[16384];  /* what the child wrote to stderr, NUL-terminated */
} child_result_t;

/* Runs fn(arg) in a child process whose stderr goes to res->err (its start,
 * if it is long); the child exits 0 when fn returns, and is killed by SIGALRM
 * after timeout seconds so that a deadlock fails instead of hanging. */
static inline void run_in_child(void (*fn)(void *), void *arg, unsigned timeout,
                                child_result_t *res) {
  int fds[2];
  size_t len = 0;
  ssize_t n;
  pid_t pid;
  char rest[4096];
  CHECK(pipe(fds) == 0);
  fflush(NULL);
  pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    close(fds[1]);
    alarm(scaled_timeout(timeout));
    fn(arg);
    _exit(0);
  }
  close(fds[1]);
  for (;;) {
    size_t room = sizeof res->err - 1 - len;
    n = room ? read(fds[0], res->err + len, room) : read(fds[0], rest, sizeof rest);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (room) len += (size_t)n;
  }
  res->err[len] = '\0';
  close(fds[0]);
  while (waitpid(pid, &res->status, 0) < 0) CHECK(errno == EINTR);
  /* qemu-user reports the signal that killed the program on the program's
   * stderr: not the program's output */
  if (getenv("HAKMEM_TEST_EXEC_WRAPPER")) drop_lines(res->err, "qemu: uncaught target signal");
}

/* Runs this program again, as `argv0 name`, with the variables of `env`
 * ("NAME=value" strings, NULL-terminated) added to the environment: for cases
 * that need the allocator started with other settings (hakmem reads its
 * options once, at start-up).  Its stderr goes to res->err as with
 * run_in_child. */
static void run_self_child(void *arg) {
  char *const *argv = (char *const *)arg;
  const char *const *env = (const char *const *)argv[2];
  char *args[] = {argv[0], argv[1], NULL};
  for (; env && *env; env++) putenv((char *)*env);
  exec_self(args);
  _exit(127);
}

static inline void run_self(const char *name, const char *const *env, unsigned timeout,
                            child_result_t *res) {
  char *argv[3] = {(char *)"self", (char *)name, (char *)env};
  run_in_child(run_self_child, argv, timeout, res);
}

/* "exited 3", "killed by SIGABRT", ... for messages. */
static inline const char *describe_status(int status) {
  static char buf[64];
  if (WIFEXITED(status))
    snprintf(buf, sizeof buf, "exited %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, sizeof buf, "killed by SIG%s", sigabbrev_np(WTERMSIG(status)));
  else
    snprintf(buf, sizeof buf, "status 0x%x", status);
  return buf;
}

/* Case `name`: fn(arg) in a child process (run_in_child, 60 s), which must
 * exit 0; prints how it ended and what it wrote to stderr. */
static inline void run_child_ok(const char *name, void (*fn)(void *), void *arg) {
  child_result_t res;
  run_in_child(fn, arg, 60, &res);
  printf("  %s: %s%s%s", name, describe_status(res.status), res.err[0] ? ", stderr: " : "\n", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s: %s", name, describe_status(res.status));
}

/* A case of a program whose cases each need the allocator started with
 * their own settings: run_self_cases runs each in a child of its own (this
 * program again, with `env`), or, as that child, the one named. */
typedef struct self_case {
  const char *name;
  void (*fn)(void);
  const char *env[6];  /* NULL-terminated */
} self_case_t;

static inline int run_self_cases(int argc, char **argv, const self_case_t *cases, size_t n,
                                 unsigned timeout) {
  for (size_t i = 0; i < n; i++) {
    if (argc > 1) {
      if (strcmp(argv[1], cases[i].name) == 0) cases[i].fn();
      continue;
    }
    child_result_t res;
    printf("  %s\n", cases[i].name);
    fflush(stdout);
    run_self(cases[i].name, cases[i].env, timeout, &res);
    if (res.err[0]) printf("%s", res.err);
    CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s: %s", cases[i].name,
              describe_status(res.status));
  }
  return 0;
}

/* From now on the system call `nr` fails with `error` in this process (a
 * seccomp filter); false where no filter can be installed. */
static inline bool refuse_syscall(long nr, int error) {
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (uint32_t)error),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

/* Runs fn(arg) in a thread on a stack mapped for it, and unmaps the stack
 * once the thread has ended: the C library keeps neither the stack nor the
 * TLS block in it for a later thread. */
static inline void run_on_own_stack(void *(*fn)(void *), void *arg) {
  size_t size = 1 << 20;
  void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(stack != MAP_FAILED);
  pthread_attr_t attr;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstack(&attr, stack, size) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, &attr, fn, arg) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(pthread_attr_destroy(&attr) == 0);
  CHECK(munmap(stack, size) == 0);
}

/* ---- a limited address space --------------------------------------------- */

/* The option a program given to run_self_under_as_limit() runs with. */
#define UNDER_AS_LIMIT "--under-as-limit"

typedef struct as_limited {
  rlim_t limit;
  const char *arg;  /* a second argument, or NULL */
} as_limited_t;

static inline void exec_self_under_as_limit_(void *arg) {
  const as_limited_t *a = (const as_limited_t *)arg;
  struct rlimit lim;
  char *const argv[] = {(char *)"self", (char *)UNDER_AS_LIMIT, (char *)a->arg, NULL};
  CHECK(getrlimit(RLIMIT_AS, &lim) == 0);
  lim.rlim_cur = a->limit;
  CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
  exec_self(argv);
  fprintf(stderr, "execv: %s\n", strerror(errno));
  _exit(127);
}

/* Runs this program again, with the arguments UNDER_AS_LIMIT and `arg` (if
 * not NULL), under RLIMIT_AS = limit set before exec, so that the limit
 * holds from the allocator's start-up on.  Fails, showing the program's
 * stderr, unless it exits 0 within timeout seconds; its stdout goes to ours.
 * Where the limit would not hold, the rest of the test is skipped. */
static inline void run_self_under_as_limit_arg(rlim_t limit, const char *arg, unsigned timeout) {
  child_result_t res;
  as_limited_t a = {limit, arg};
  if (!as_limit_holds()) {
    printf("skip: %s\n", AS_LIMIT_IGNORED);
    exit(77);
  }
  run_in_child(exec_self_under_as_limit_, &a, timeout, &res);
  if (res.err[0]) fprintf(stderr, "stderr of the limited process:\n%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0,
            "the process started under RLIMIT_AS = %llu MiB%s%s %s",
            (unsigned long long)(limit >> 20), arg ? ", case " : "", arg ? arg : "", describe_status(res.status));
}
static inline void run_self_under_as_limit(rlim_t limit, unsigned timeout) {
  run_self_under_as_limit_arg(limit, NULL, timeout);
}

/* ---- a queue of blocks between threads ------------------------------------ */

/* Bounded, protected by a mutex; consumers see NULL once it is empty and all
 * its producers have said they are done. */
enum { BLOCK_QUEUE_CAP = 256 };

typedef struct block_queue {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  void *item[BLOCK_QUEUE_CAP];
  size_t head, count;
  int producers_left;
} block_queue_t;

static inline void block_queue_init(block_queue_t *q, int producers) {
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->not_empty, NULL);
  pthread_cond_init(&q->not_full, NULL);
  q->head = q->count = 0;
  q->producers_left = producers;
}

static inline void block_queue_push(block_queue_t *q, void *p) {
  pthread_mutex_lock(&q->lock);
  while (q->count == BLOCK_QUEUE_CAP) pthread_cond_wait(&q->not_full, &q->lock);
  q->item[(q->head + q->count++) % BLOCK_QUEUE_CAP] = p;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

static inline void *block_queue_pop(block_queue_t *q) {
  void *p = NULL;
  pthread_mutex_lock(&q->lock);
  while (q->count == 0 && q->producers_left > 0) pthread_cond_wait(&q->not_empty, &q->lock);
  if (q->count > 0) {
    p = q->item[q->head];
    q->head = (q->head + 1) % BLOCK_QUEUE_CAP;
    q->count--;
    pthread_cond_signal(&q->not_full);
  }
  pthread_mutex_unlock(&q->lock);
  return p;
}

static inline void block_queue_producer_done(block_queue_t *q) {
  pthread_mutex_lock(&q->lock);
  q->producers_left--;
  pthread_cond_broadcast(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

/* Runs `consumers` threads of consumer and `producers` of producer (each given
 * its index as argument) over `queues` block queues shared by the producers in
 * turn, and joins them all. */
enum { MAX_QUEUE_THREADS = 16 };
static inline void run_producers_consumers(block_queue_t *queues, int nqueues, void *(*producer)(void *),
                                           int producers, void *(*consumer)(void *), int consumers) {
  pthread_t prod[MAX_QUEUE_THREADS], cons[MAX_QUEUE_THREADS];
  int i;
  CHECK(producers <= MAX_QUEUE_THREADS && consumers <= MAX_QUEUE_THREADS);
  for (i = 0; i < nqueues; i++) block_queue_init(&queues[i], producers / nqueues);
  for (i = 0; i < consumers; i++)
    CHECK(pthread_create(&cons[i], NULL, consumer, (void *)(uintptr_t)i) == 0);
  for (i = 0; i < producers; i++)
    CHECK(pthread_create(&prod[i], NULL, producer, (void *)(uintptr_t)i) == 0);
  for (i = 0; i < producers; i++) CHECK(pthread_join(prod[i], NULL) == 0);
  for (i = 0; i < consumers; i++) CHECK(pthread_join(cons[i], NULL) == 0);
}

#ifdef __cplusplus
}
#endif
#endif
