/* SPDX-License-Identifier: MIT */
/* test-builds: static standard */
/* Running out of memory.  The program runs itself again under RLIMIT_AS
 * (256 MiB, set before exec) and, for each kind of allocation -- small,
 * large and huge blocks, calloc, a block grown by realloc from 64 B to
 * 8 MiB, and posix_memalign / aligned_alloc / memalign -- allocates until a
 * call fails.  The failure must be NULL (or ENOMEM from posix_memalign) with
 * errno ENOMEM, a failed realloc must leave its block intact, and nothing may
 * abort.  While memory is exhausted every other kind fails as cleanly.  Then
 * half of the blocks are freed and the same kind must succeed again a
 * quarter as many times; threads that existed before the failures, a new
 * thread and a forked child must all allocate and free (a lock left held
 * would hang them: the run is killed after 60 s).  Every block carries a
 * mark, checked when it is freed.  Before all that, blocks above 256 KiB
 * must be had with only 16 MiB of address space left.  Runs against glibc
 * as well. */
#include "testutil.h"

#include <malloc.h>

#define LIMIT ((rlim_t)256 << 20)
#define GROWN_SIZE (8 * MiB)
#define HELPER_STACK ((size_t)256 << 10)

/* ---- blocks: a list through their first word, a mark, a pattern ---- */

typedef struct node {
  struct node *next;
  size_t size;
  uint64_t mark;
} node_t;

#define MARKED_BYTES 256 /* patterned at each end of a block, at most */

static size_t marked_ends(size_t size) {
  size_t half = (size - sizeof(node_t)) / 2;
  return half < MARKED_BYTES ? half : MARKED_BYTES;
}

static uint64_t mark_of(const node_t *n) { return (uint64_t)(uintptr_t)n * 0x9e3779b97f4a7c15ull ^ n->size; }

static void mark_block(void *p, size_t size) {
  node_t *n = p;
  size_t ends = marked_ends(size);
  n->size = size;
  n->mark = mark_of(n);
  fill_pattern(n + 1, ends, n->mark);
  fill_pattern((char *)p + size - ends, ends, ~n->mark);
}

/* The contents, against the mark the block carries (which realloc moves). */
static void check_contents(const node_t *n) {
  size_t ends = marked_ends(n->size);
  CHECK_PATTERN(n + 1, ends, n->mark);
  CHECK_PATTERN((const char *)n + n->size - ends, ends, ~n->mark);
}

static void check_block(const node_t *n) {
  CHECK_MSG(n->mark == mark_of(n), "block %p: mark overwritten", (const void *)n);
  check_contents(n);
}

typedef struct list {
  node_t *head;
  size_t count, bytes;
} list_t;

static void push(list_t *l, void *p, size_t size) {
  node_t *n = p;
  mark_block(p, size);
  n->next = l->head;
  l->head = n;
  l->count++;
  l->bytes += size;
}

/* Frees the newest `count` blocks of l, checking each. */
static void free_newest(list_t *l, size_t count) {
  while (count-- > 0 && l->head) {
    node_t *n = l->head;
    check_block(n);
    l->head = n->next;
    l->count--;
    l->bytes -= n->size;
    free(n);
  }
}

/* ---- the kinds of allocation ---- */

/* Each makes the i-th block of its kind, or returns NULL with errno set. */
typedef void *(*make_fn)(size_t i, size_t *size);

static void *make_small(size_t i, size_t *size) { return malloc(*size = 48); }
static void *make_large(size_t i, size_t *size) { return malloc(*size = 200000); }
static void *make_huge(size_t i, size_t *size) { return malloc(*size = 16 * MiB); }

static void *make_calloc(size_t i, size_t *size) {
  size_t count = 1 + i % 512;
  void *p = calloc(count, 200);
  *size = count * 200;
  CHECK_MSG(!p || find_not_byte(p, 0, *size) == SIZE_MAX, "calloc(%zu, 200) not zeroed", count);
  return p;
}

/* 64 B, doubled by realloc up to GROWN_SIZE: small, large, then huge.  The
 * first failure must leave the block as it was. */
static void *make_grown(size_t i, size_t *size) {
  size_t n = 64;
  node_t *p = malloc(n), *q;
  if (!p) return NULL;
  mark_block(p, n);
  for (; n < GROWN_SIZE; n *= 2) {
    errno = 0;
    q = realloc(p, 2 * n);
    if (!q) {
      int err = errno;
      CHECK_MSG(p->size == n, "realloc failed and changed the block");
      check_block(p);
      free(p);
      errno = err;
      return NULL;
    }
    CHECK_MSG(q->size == n, "realloc(%zu -> %zu) lost the block's header", n, 2 * n);
    check_contents(q);
    p = q;
    mark_block(p, 2 * n);
  }
  *size = GROWN_SIZE;
  return p;
}

static void *make_aligned(size_t i, size_t *size) {
  static const size_t align[] = {4096, 256, 65536, 2 * MiB};
  static const size_t bytes[] = {10000, 3000, 100000, 3 * MiB};
  size_t k = i % 4;
  void *p = NULL;
  *size = bytes[k];
  if (k == 1) {
    p = aligned_alloc(align[k], bytes[k]);
  } else if (k == 2) {
    p = memalign(align[k], bytes[k]);
  } else {
    int rc = posix_memalign(&p, align[k], bytes[k]);
    CHECK_MSG(rc == 0 || rc == ENOMEM, "posix_memalign(%zu, %zu) = %d", align[k], bytes[k], rc);
    CHECK_MSG(rc == 0 || p == NULL, "a failed posix_memalign set its result");
    if (rc) errno = rc;
  }
  if (p) CHECK_ALIGNED(p, align[k]);
  return p;
}

static const struct kind {
  const char *name;
  make_fn make;
} kinds[] = {
    {"small (48 B)", make_small},       {"large (200 KB)", make_large},
    {"huge (16 MiB)", make_huge},       {"calloc (200 B .. 100 KB)", make_calloc},
    {"realloc, 64 B to 8 MiB", make_grown}, {"aligned (256 B .. 2 MiB)", make_aligned},
};
enum { KINDS = sizeof kinds / sizeof kinds[0] };

/* ---- threads and processes that allocate after the failures ---- */

/* Allocates and frees a mix of sizes; every allocation must succeed. */
static void churn(uint64_t seed) {
  rng_t r = {seed};
  void *held[32] = {0};
  int i;
  for (i = 0; i < 4000; i++) {
    void **s = &held[rng_below(&r, 32)];
    size_t n = rng_size(&r, 16, 256 * 1024);
    free(*s);
    *s = rng_below(&r, 4) ? malloc(n) : calloc(1, n);
    CHECK_MSG(*s != NULL, "churn %llu: malloc(%zu) failed after memory was freed", (unsigned long long)seed, n);
    memset(*s, 0x5a, n < 64 ? n : 64);
  }
  for (i = 0; i < 32; i++) free(held[i]);
  held[0] = malloc(4 * MiB);
  CHECK_MSG(held[0] != NULL, "malloc(4 MiB) failed after memory was freed");
  memset(held[0], 1, 4096);
  free(held[0]);
}

/* Threads started before anything failed; each round, each churns once. */
enum { HELPERS = 2 };
static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t helper_cond = PTHREAD_COND_INITIALIZER;
static unsigned helper_round, helpers_done;

static void *helper_main(void *arg) {
  unsigned seen = 0;
  churn((uintptr_t)arg); /* its caches are set up before the failures */
  pthread_mutex_lock(&helper_lock);
  for (;;) {
    helpers_done++;
    pthread_cond_broadcast(&helper_cond);
    while (helper_round == seen) pthread_cond_wait(&helper_cond, &helper_lock);
    seen = helper_round;
    if (seen == ~0u) break;
    pthread_mutex_unlock(&helper_lock);
    churn((uintptr_t)arg + seen);
    pthread_mutex_lock(&helper_lock);
  }
  pthread_mutex_unlock(&helper_lock);
  return NULL;
}

/* Runs a round of the helpers (or, with last, ends them) and waits. */
static void helpers_run(bool last) {
  pthread_mutex_lock(&helper_lock);
  helpers_done = 0;
  helper_round = last ? ~0u : helper_round + 1;
  pthread_cond_broadcast(&helper_cond);
  while (!last && helpers_done < HELPERS) pthread_cond_wait(&helper_cond, &helper_lock);
  pthread_mutex_unlock(&helper_lock);
}

/* A thread started before the failures that allocates only after them
 * (hakmem only: glibc gives a thread its arena on its first malloc, and
 * cannot map one then, so that the malloc fails). */
typedef struct late_thread {
  pthread_t tid;
  bool go;
  uint64_t seed;
} late_thread_t;

static void *late_main(void *arg) {
  late_thread_t *l = arg;
  pthread_mutex_lock(&helper_lock);
  while (!l->go) pthread_cond_wait(&helper_cond, &helper_lock);
  pthread_mutex_unlock(&helper_lock);
  churn(l->seed);
  return NULL;
}

static pthread_t start_thread(void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  pthread_t t;
  int rc;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, HELPER_STACK) == 0);
  rc = pthread_create(&t, &attr, fn, arg);
  CHECK_MSG(rc == 0, "pthread_create: %s", strerror(rc));
  pthread_attr_destroy(&attr);
  return t;
}

static void fork_and_churn(uint64_t seed) {
  int status;
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    churn(seed);
    _exit(0);
  }
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child %s",
            describe_status(status));
}

/* ---- under the limit ---- */

/* Allocates blocks of kind k until one fails, which must say ENOMEM. */
static void exhaust(const struct kind *k, list_t *l) {
  for (;;) {
    size_t size = 0;
    void *p;
    errno = 0;
    p = k->make(l->count, &size);
    if (!p) {
      CHECK_MSG(errno == ENOMEM, "%s: allocation failed with errno %d (%s), not ENOMEM", k->name,
                errno, strerror(errno));
      return;
    }
    push(l, p, size);
  }
}

/* While memory is exhausted, any allocation fails cleanly or works. */
static void everything_fails_cleanly(void) {
  int k;
  for (k = 0; k < KINDS; k++) {
    size_t size = 0;
    void *p;
    errno = 0;
    p = kinds[k].make(k, &size);
    if (p)
      free(p);
    else
      CHECK_MSG(errno == ENOMEM, "%s, memory exhausted: errno %d (%s), not ENOMEM", kinds[k].name,
                errno, strerror(errno));
  }
}

static void exhaust_and_recover(const struct kind *k, unsigned index) {
  list_t l = {NULL, 0, 0};
  size_t n, again, i, exhausted_bytes;
  late_thread_t late = {0, false, 1000 + index};
  bool with_late = hakmem_active();
  if (with_late) late.tid = start_thread(late_main, &late);
  exhaust(k, &l);
  n = l.count;
  exhausted_bytes = l.bytes;
  CHECK_MSG(n > 0, "%s: not a single block before ENOMEM", k->name);
  everything_fails_cleanly();

  free_newest(&l, n / 2);
  again = n / 4 > 0 ? n / 4 : 1;
  for (i = 0; i < again; i++) {
    size_t size = 0;
    void *p;
    errno = 0;
    p = k->make(i, &size);
    CHECK_MSG(p != NULL, "%s: %zu of %zu blocks freed, then allocation %zu of %zu failed (%s)",
              k->name, n / 2, n, i + 1, again, strerror(errno));
    push(&l, p, size);
  }
  helpers_run(false);
  if (with_late) {
    pthread_mutex_lock(&helper_lock);
    late.go = true;
    pthread_cond_broadcast(&helper_cond);
    pthread_mutex_unlock(&helper_lock);
    CHECK(pthread_join(late.tid, NULL) == 0);
  }
  fork_and_churn(2000 + index);
  printf("  %-24s %8zu blocks (%3zu MiB) before ENOMEM; half freed, %zu again; "
         "threads and a child allocate\n",
         k->name, n, exhausted_bytes >> 20, again);
  free_newest(&l, l.count);
}

/* Blocks of the large classes above 256 KiB (which hakmem keeps in regions
 * of 128 MiB) where less address space is left than such a region takes:
 * the test maps 1 MiB chunks of its own up to the limit, then unmaps 16. */
static void large_blocks_in_little_address_space(void) {
  enum { CHUNKS = LIMIT >> 20 };
  static void *chunk[CHUNKS];
  size_t n = 0, i;
  void *p[2];
  malloc_trim(0);  /* no empty region of huge blocks kept */
  while (n < CHUNKS && (chunk[n] = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) != MAP_FAILED)
    n++;
  CHECK_MSG(n >= 16 && n < CHUNKS, "%zu MiB mapped under a limit of %zu MiB", n, (size_t)CHUNKS);
  for (i = n - 16; i < n; i++) CHECK(munmap(chunk[i], MiB) == 0);
  p[0] = malloc(600 << 10);
  p[1] = malloc(MiB);
  CHECK_MSG(p[0] && p[1], "malloc of 600 KiB, 1 MiB with 16 MiB of address space left: %p, %p", p[0], p[1]);
  memset(p[0], 1, 600 << 10);
  memset(p[1], 2, MiB);
  free(p[0]);
  free(p[1]);
  for (i = 0; i < n - 16; i++) CHECK(munmap(chunk[i], MiB) == 0);
  printf("  600 KiB and 1 MiB blocks with 16 MiB of address space left\n");
}

static int under_limit(void) {
  pthread_t helpers[HELPERS];
  int i;
  test_init();
  printf("  RLIMIT_AS = %llu MiB\n", (unsigned long long)(LIMIT >> 20));
  for (i = 0; i < HELPERS; i++) helpers[i] = start_thread(helper_main, (void *)(uintptr_t)(i + 1));
  pthread_mutex_lock(&helper_lock);
  while (helpers_done < HELPERS) pthread_cond_wait(&helper_cond, &helper_lock);
  pthread_mutex_unlock(&helper_lock);
  large_blocks_in_little_address_space();
  for (i = 0; i < KINDS; i++) exhaust_and_recover(&kinds[i], (unsigned)i);
  helpers_run(true);
  for (i = 0; i < HELPERS; i++) CHECK(pthread_join(helpers[i], NULL) == 0);
  return 0;
}

static void every_kind_runs_out_and_recovers(void) { run_self_under_as_limit(LIMIT, 60); }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return under_limit();
  test_init();
  RUN(every_kind_runs_out_and_recovers);
  return 0;
}
