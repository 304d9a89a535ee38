/* SPDX-License-Identifier: MIT */
/* test-builds: static standard hardened */
/* Stress: worker threads (4 at a time by default) allocate, check, resize
 * and free blocks of random sizes over every size class (1 B to 1 MiB) and
 * huge blocks (1 to 64 MiB, rarer) with random lifetimes, for a given time.
 * Every block is filled with a pattern derived from its address and size
 * and checked before it is freed or reallocated.  Blocks come from malloc,
 * calloc (checked zero), realloc(NULL), posix_memalign, aligned_alloc and
 * memalign (alignment checked); realloc grows and shrinks them, in place and
 * across size ranges; malloc_usable_size must cover the size asked for.  A
 * share of the blocks goes through a shared pool to be checked, reallocated
 * and freed by other threads, among them threads started later: each worker
 * lives for a random number of operations (100 to 200 000) and leaves some of
 * its blocks in the pool, and a new one takes its place, until the time is
 * up.  Each worker's choices follow from the seed; which blocks travel
 * between threads depends on timing as well.
 *
 *   stress [--seconds S] [--threads N] [--seed X]   (default: 3 s, 4, clock)
 *
 * At the end it prints the operations done and the peak RSS.  `make stress`
 * runs it for long (STRESS_SECONDS, STRESS_THREADS, STRESS_SEED). */
#include "testutil.h"

#include <malloc.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

enum { SLOTS = 256, POOL_CAP = 1024, MAX_THREADS = 64 };
enum { MIN_LIFE = 100, MAX_LIFE = 200000 };

typedef struct block {
  unsigned char *p;
  size_t size;
} block_t;

typedef struct counts {
  unsigned long long allocs, frees, reallocs, checks, handed, taken, huge, trims;
} counts_t;

static struct {
  double seconds;
  int threads;
  uint64_t seed;
} opt = {3.0, 4, 0};

static atomic_bool stop;

/* ---- blocks and their patterns ---------------------------------------- */

static uint64_t block_seed(const void *p, size_t size) {
  return (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull ^ (uint64_t)size * 0xc2b2ae3d27d4eb4full;
}

static void fill_block(block_t b) { fill_pattern(b.p, b.size, block_seed(b.p, b.size)); }

static void check_block(block_t b) {
  size_t off = check_pattern(b.p, b.size, block_seed(b.p, b.size));
  CHECK_MSG(off == SIZE_MAX, "block %p (%zu bytes) corrupted at offset %zu", (void *)b.p, b.size,
            off);
}

/* A fresh block p of size bytes: usable size, alignment, then its pattern. */
static block_t new_block(void *p, size_t size, size_t align) {
  block_t b = {p, size};
  CHECK_MSG(p != NULL, "allocation of %zu bytes failed", size);
  CHECK_ALIGNED(p, align);
  CHECK_MSG(malloc_usable_size(p) >= size, "malloc_usable_size(%p) = %zu < %zu", p,
            malloc_usable_size(p), size);
  fill_block(b);
  return b;
}

/* Mostly small blocks, some of every size class, few huge ones; now and
 * then a size next to a power of two, where size ranges meet. */
static size_t random_size(rng_t *r) {
  uint64_t x = rng_below(r, 20000);
  if (x < 1) return rng_size(r, MiB + 1, 64 * MiB);
  if (x < 200) return rng_size(r, 32 * 1024 + 1, MiB);
  if (x < 1200) return rng_size(r, 1025, 32 * 1024);
  if (x < 1600) return ((size_t)1 << rng_range(r, 4, 20)) + rng_range(r, 0, 2) - 1;
  return rng_size(r, 1, 1024);
}

static block_t allocate(rng_t *r, counts_t *c) {
  size_t size = random_size(r), align = 16;
  void *p = NULL;
  uint64_t kind = rng_below(r, 100);
  if (size > MiB) c->huge++;
  c->allocs++;
  if (kind < 60) {
    p = malloc(size);
  } else if (kind < 75) {
    p = calloc(1, size);
    CHECK_MSG(p == NULL || find_not_byte(p, 0, size) == SIZE_MAX, "calloc(1, %zu) not zeroed", size);
  } else if (kind < 96) {
    /* 8 B .. 64 KiB mostly, up to 2 MiB now and then. */
    align = (size_t)1 << (rng_below(r, 50) ? rng_range(r, 3, 16) : rng_range(r, 17, 21));
    if (kind < 83) {
      int rc = posix_memalign(&p, align, size);
      CHECK_MSG(rc == 0, "posix_memalign(%zu, %zu) = %d", align, size, rc);
    } else if (kind < 91) {
      p = aligned_alloc(align, size);
    } else {
      p = memalign(align, size);
    }
  } else {
    p = realloc(NULL, size);
  }
  return new_block(p, size, align < 16 ? 16 : align);
}

static void release(block_t b, counts_t *c) {
  check_block(b);
  free(b.p);
  c->frees++;
}

/* Grows or shrinks b: by up to a quarter (often in place), or to any size. */
static block_t resize(block_t b, rng_t *r, counts_t *c) {
  size_t size = b.size, keep;
  unsigned char *q;
  uint64_t seed = block_seed(b.p, b.size);
  check_block(b);
  if (rng_below(r, 2)) {
    size_t delta = rng_range(r, 0, size / 4 + 1);
    size = rng_below(r, 2) || delta >= size ? size + delta : size - delta;
  } else {
    size = random_size(r);
  }
  q = realloc(b.p, size);
  CHECK_MSG(q != NULL, "realloc(%p, %zu) failed", (void *)b.p, size);
  keep = size < b.size ? size : b.size;
  CHECK_MSG(check_pattern(q, keep, seed) == SIZE_MAX, "realloc(%p, %zu -> %zu) = %p lost data",
            (void *)b.p, b.size, size, (void *)q);
  if (size > MiB) c->huge++;
  c->reallocs++;
  return new_block(q, size, 16);
}

/* ---- the pool of blocks handed from thread to thread -------------------- */

static struct {
  pthread_mutex_t lock;
  block_t item[POOL_CAP];
  size_t count;
} pool = {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0};

/* Hands b over; false if the pool is full. */
static bool pool_put(block_t b) {
  bool ok;
  pthread_mutex_lock(&pool.lock);
  ok = pool.count < POOL_CAP;
  if (ok) pool.item[pool.count++] = b;
  pthread_mutex_unlock(&pool.lock);
  return ok;
}

/* A block another thread handed over, or one with p NULL. */
static block_t pool_take(rng_t *r) {
  block_t b = {NULL, 0};
  pthread_mutex_lock(&pool.lock);
  if (pool.count > 0) {
    size_t i = (size_t)rng_below(r, pool.count);
    b = pool.item[i];
    pool.item[i] = pool.item[--pool.count];
  }
  pthread_mutex_unlock(&pool.lock);
  return b;
}

/* ---- workers ------------------------------------------------------------- */

typedef struct worker {
  pthread_t tid;
  uint64_t seed;
  bool running, finished;
  counts_t counts;
} worker_t;

static worker_t workers[MAX_THREADS];
static pthread_mutex_t sup_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sup_cond; /* on CLOCK_MONOTONIC, see stress() */

static void hand_over_or_free(block_t b, counts_t *c) {
  if (pool_put(b))
    c->handed++;
  else
    release(b, c);
}

/* Checks a block from the pool, then frees it or resizes it and hands it on. */
static void take_from_pool(rng_t *r, counts_t *c) {
  block_t b = pool_take(r);
  if (!b.p) return;
  c->taken++;
  if (rng_below(r, 2))
    release(b, c);
  else
    hand_over_or_free(resize(b, r, c), c);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  rng_t r = {w->seed};
  block_t slot[SLOTS] = {{0}};
  counts_t c = {0};
  uint64_t life = rng_size(&r, MIN_LIFE, MAX_LIFE), op;
  int i;
  for (op = 0; op < life && !atomic_load_explicit(&stop, memory_order_relaxed); op++) {
    block_t *s = &slot[rng_below(&r, SLOTS)];
    uint64_t what = rng_below(&r, 100);
    if (!s->p) {
      *s = allocate(&r, &c);
    } else if (what < 35) {
      release(*s, &c);
      s->p = NULL;
    } else if (what < 55) {
      *s = resize(*s, &r, &c);
    } else if (what < 62) {
      hand_over_or_free(*s, &c);
      s->p = NULL;
    } else if (what < 70) {
      take_from_pool(&r, &c);
    } else if (what < 85) {
      check_block(*s);
      CHECK(malloc_usable_size(s->p) >= s->size);
      c.checks++;
    } else {
      release(*s, &c);
      *s = allocate(&r, &c);
    }
    if (rng_below(&r, 50000) == 0) {
      malloc_trim(0);
      c.trims++;
    }
  }
  /* What a thread leaves behind: some for threads yet to come. */
  for (i = 0; i < SLOTS; i++)
    if (slot[i].p) {
      if (rng_below(&r, 4) == 0)
        hand_over_or_free(slot[i], &c);
      else
        release(slot[i], &c);
    }
  pthread_mutex_lock(&sup_lock);
  w->counts = c;
  w->finished = true;
  pthread_cond_signal(&sup_cond);
  pthread_mutex_unlock(&sup_lock);
  return NULL;
}

static uint64_t mix(uint64_t a, uint64_t b) {
  rng_t r = {a ^ (b * 0xd1b54a32d192ed03ull)};
  return rng_next(&r);
}

static void add_counts(counts_t *to, const counts_t *c) {
  to->allocs += c->allocs;
  to->frees += c->frees;
  to->reallocs += c->reallocs;
  to->checks += c->checks;
  to->handed += c->handed;
  to->taken += c->taken;
  to->huge += c->huge;
  to->trims += c->trims;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool any_finished(void) {
  int i;
  for (i = 0; i < opt.threads; i++)
    if (workers[i].running && workers[i].finished) return true;
  return false;
}

/* Waits, with sup_lock held, for a worker to finish or until the
 * CLOCK_MONOTONIC time t. */
static void wait_until(double t) {
  struct timespec ts;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(&sup_cond, &sup_lock, &ts);
}

/* Starts workers, replaces each one that ends, until the time is up; then
 * frees what is left in the pool. */
static void stress(void) {
  counts_t total = {0};
  unsigned long long started = 0;
  double start = now_seconds(), deadline = start + opt.seconds;
  struct rusage ru;
  block_t b;
  rng_t r = {opt.seed};
  pthread_condattr_t attr;
  int i;

  CHECK(pthread_condattr_init(&attr) == 0);
  CHECK(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0);
  CHECK(pthread_cond_init(&sup_cond, &attr) == 0);
  pthread_mutex_lock(&sup_lock);
  for (;;) {
    bool time_up = now_seconds() >= deadline;
    for (i = 0; i < opt.threads; i++) {
      worker_t *w = &workers[i];
      if (w->running && !w->finished) continue;
      if (w->running) {
        pthread_mutex_unlock(&sup_lock);
        CHECK(pthread_join(w->tid, NULL) == 0);
        pthread_mutex_lock(&sup_lock);
        add_counts(&total, &w->counts);
        w->running = false;
      }
      if (time_up) continue;
      w->seed = mix(opt.seed, started);
      w->finished = false;
      w->running = true;
      CHECK(pthread_create(&w->tid, NULL, worker_main, w) == 0);
      started++;
    }
    if (time_up) {
      bool any = false;
      atomic_store(&stop, true);
      for (i = 0; i < opt.threads; i++) any |= workers[i].running;
      if (!any) break;
    }
    /* A worker may have finished while the lock was released for a join. */
    if (!any_finished()) wait_until(time_up ? now_seconds() + 0.1 : deadline);
  }
  pthread_mutex_unlock(&sup_lock);

  while ((b = pool_take(&r)).p) {
    total.taken++;
    release(b, &total);
  }
  /* Every block is freed: under hakmem, its heap check walks the thread
   * cache, every class's slabs and parked batches and aborts on a count
   * that disagrees with its list. */
  size_t (*heap_check)(void) = (size_t (*)(void))hakmem_sym("hak_heap_check");
  if (heap_check) printf("stress: heap check walked %zu free blocks\n", heap_check());

  CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
  printf("stress: %.1f s, %d threads at a time, %llu threads in all: %llu operations "
         "(%llu allocations, %llu huge, %llu reallocs, %llu frees, %llu checks, %llu handed over, "
         "%llu taken by another thread, %llu trims); peak RSS %.1f MiB\n",
         now_seconds() - start, opt.threads, started,
         total.allocs + total.reallocs + total.frees + total.checks + total.trims, total.allocs,
         total.huge, total.reallocs, total.frees, total.checks, total.handed, total.taken,
         total.trims, ru.ru_maxrss / 1024.0);
  CHECK_EQ(total.frees, total.allocs);
  CHECK(started >= (unsigned long long)opt.threads);
}

static void usage(const char *prog) {
  fprintf(stderr, "usage: %s [--seconds S] [--threads N (1..%d)] [--seed X]\n", prog, MAX_THREADS);
  exit(2);
}

int main(int argc, char **argv) {
  int i;
  bool seeded = false;
  for (i = 1; i < argc; i++) {
    char *end = NULL;
    if (i + 1 >= argc) usage(argv[0]);
    if (strcmp(argv[i], "--seconds") == 0)
      opt.seconds = strtod(argv[++i], &end);
    else if (strcmp(argv[i], "--threads") == 0)
      opt.threads = (int)strtol(argv[++i], &end, 10);
    else if (strcmp(argv[i], "--seed") == 0)
      opt.seed = strtoull(argv[++i], &end, 0), seeded = true;
    else
      usage(argv[0]);
    if (!end || *end || end == argv[i]) usage(argv[0]);
  }
  if (opt.seconds <= 0 || opt.threads < 1 || opt.threads > MAX_THREADS) usage(argv[0]);
  if (!seeded) opt.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  test_init();
  printf("stress: seed 0x%llx (run again with --seed 0x%llx)\n", (unsigned long long)opt.seed,
         (unsigned long long)opt.seed);
  RUN(stress);
  return 0;
}
