/* SPDX-License-Identifier: MIT */
/* Thread caches: the slow paths behind hk_malloc_fast / hk_free_fast, and
 * the registry of live caches that statistics read. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>
#include "thread/thread.h"

const uint64_t hk_list_end[2] __attribute__((aligned(16))) = {0, 2};
/* Every list starts empty: at HK_END, which a new thread's copy of this
 * image already points to (ld.so relocates it before any thread copies it). */
__thread hk_tcache_t hk_tc __attribute__((tls_model("initial-exec"))) = {.head = {[0 ... HK_NCLASS] = HK_END}};

/* Live threads' caches (for statistics) and exited threads' counters: an
 * array, not a list through the caches, which may vanish (docs/DESIGN.md,
 * Thread exit and the registry of caches).  A dead thread's stack may be
 * unmapped at any moment: no one writes another thread's cache, and readers
 * copy it with hk_os_read, which fails without a fault (read_cache). */
typedef struct registered {
  hk_tcache_t *tc;
  hk_front_t *front;  /* its counters */
  pid_t tid;          /* its thread */
} registered_t;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered_t *registry;
static size_t registry_n, registry_cap;
static pid_t registry_pid;  /* the process the registered threads are of */
static hk_front_t exited[HK_NCLASS + 1];

/* Threads' counters by class, in blocks of a pool under registry_lock: a
 * thread's start copies its TLS block's image, and 5.6 KiB of counters
 * there cost a thread that lives for one allocation about 5 % of its
 * time (thread_once).  A free block is zero and linked through its class 0,
 * which no class uses; a new chunk's blocks are handed out one by one,
 * untouched till then (linked all at once, they cost a process of one
 * thread a page fault each).  A thread without one (before its set-up, after
 * its exit, or none to be had) counts into `unkept`, which no one reads. */
#define FRONTS_CHUNK 8
typedef hk_front_t fronts_t[HK_NCLASS + 1];
static hk_front_t *fronts_free;
static fronts_t *fronts_fresh;  /* the chunk's blocks never handed out, `fronts_fresh_n` of them */
static unsigned fronts_fresh_n;
static __thread hk_front_t unkept __attribute__((tls_model("initial-exec")));

static hk_front_t *front(hk_tcache_t *tc, unsigned cls) {
  if (!tc->front) return &unkept;
  tc->front[0].counted[cls / 64] |= 1ull << cls % 64;
  return &tc->front[cls];
}

static hk_front_t *fronts_take(void) {
  if (!fronts_free) {
    if (!fronts_fresh_n) {
      if (!(fronts_fresh = hk_os_map(FRONTS_CHUNK * sizeof(fronts_t)))) return NULL;
      fronts_fresh_n = FRONTS_CHUNK;
    }
    fronts_fresh_n--;
    return *fronts_fresh++;
  }
  hk_front_t *f = fronts_free;
  fronts_free = (hk_front_t *)(uintptr_t)f[0].link;
  f[0].link = 0;
  return f;
}

/* Adds n classes' counters to sum's.  A live thread writes its own meanwhile,
 * unlocked: each is read whole (their block is the pool's, never unmapped,
 * so it needs no fault-safe copy as a cache in TLS does). */
static void fronts_add(hk_front_t *sum, const hk_front_t *f, unsigned n) {
#define HK_ADD(field) sum[i].field += __atomic_load_n(&f[i].field, __ATOMIC_RELAXED)
  for (unsigned i = 0; i < n; i++) {
    HK_ADD(hits);
    HK_ADD(misses);
    HK_ADD(overflows);
    HK_ADD(moved);
    HK_ADD(parked_hits);
    HK_ADD(from_others);
  }
#undef HK_ADD
}

/* A block's counters added to `exited`, then the block back to the pool,
 * zero again: only the classes that counted, so that a thread that lives
 * for one allocation costs little (the observe build's pops count hits
 * unmarked: all of its classes). */
static void fronts_give(hk_front_t *f) {
  if (!f) return;
  for (unsigned w = 0; w < 2; w++)
    for (uint64_t set = HAK_OBSERVE ? ~0ull : f[0].counted[w]; set; set &= set - 1) {
      unsigned c = w * 64 + (unsigned)__builtin_ctzll(set);
      if (c == 0 || c > HK_NCLASS) continue;
      fronts_add(&exited[c], &f[c], 1);
      f[c] = (hk_front_t){0};
    }
  f[0] = (hk_front_t){.link = (uintptr_t)fronts_free};
  fronts_free = f;
}

/* Adds a change in bytes out of the central caches to the process's figure
 * (and peak) in steps (HK_STATS_STEP up, HK_STATS_SLACK down), so threads
 * share no line per batch or huge block: the peak is at most a step per
 * thread low, a slack per other high (unreported falls meet others' rises). */
static void note_out(hk_tcache_t *tc, ptrdiff_t bytes) {
  ptrdiff_t pending = tc->out_pending + bytes;
  tc->out_pending = pending;
  if (pending > HK_STATS_STEP || pending < -HK_STATS_SLACK || tc->state != HK_TC_ACTIVE) {
    tc->out_pending = 0;  /* before: a fork child counts a thread stopped here at most once */
    hk_out_add(pending);
  }
}

/* Gives `count` blocks of a chain to the central cache; true if they were
 * parked whole for another thread to take. */
static bool give(hk_tcache_t *tc, unsigned cls, void *chain, unsigned count) {
  front(tc, cls)->moved += count;
  note_out(tc, -(ptrdiff_t)((size_t)count * hk_classes[cls].size));
  return hk_central_put(cls, chain, count, tc);
}

/* Takes up to `want` blocks from the central cache onto *chain; a thread
 * whose list of the class never overflowed is a producer of it. */
static unsigned take(hk_tcache_t *tc, unsigned cls, unsigned want, void **chain) {
  const void *parker;
  hk_front_t *f = front(tc, cls);
  unsigned n = hk_central_take(cls, tc->arena, want, chain, &parker, f->overflows == 0);
  f->moved += n;
  f->parked_hits += parker != NULL;
  if (parker && parker != tc) f->from_others += n;
  note_out(tc, (ptrdiff_t)((size_t)n * hk_classes[cls].size));
  return n;
}

/* Hands a class's whole list to the central cache and sets its room. */
static void tcache_drain(hk_tcache_t *tc, unsigned cls, int new_room) {
  void *chain = tc->head[cls];
  unsigned count = (unsigned)(tc->cap[cls] - tc->room[cls]);
  hk_assert(hk_chain_length(chain, count + 1) == count, "thread cache list differs from its room");
  tc->head[cls] = HK_END;
  tc->room[cls] = (int16_t)new_room;
  if (count) give(tc, cls, chain, count);
}

/* Sets the capacity of a class's list; its room follows. */
static void set_cap(hk_tcache_t *tc, unsigned cls, int cap) {
  hk_assert(cap >= 0 && cap <= hk_classes[cls].cap, "thread cache capacity out of range");
  tc->room[cls] = (int16_t)(tc->room[cls] + cap - tc->cap[cls]);
  tc->cap[cls] = (int16_t)cap;
}

/* The first block of a chain from the central cache, to the program. */
static void *hand_out(void *p, unsigned cls) {
  hk_expect_free(p, cls);
  hk_block_out(p, cls);
  return p;
}

/* The block after b on a list or chain, which b must be a free block of. */
static void *next_free(void *b, unsigned cls) {
  hk_expect_free(b, cls);
  return hk_next(b);
}

/* A large block straight to the program, a new one untouched: its page
 * faults are the program's first writes, not malloc's (`latency
 * thread_churn`), but where huge pages start small (hk_large_take).  Old
 * memory has its mark cleared for realloc's check. */
static void *take_large(hk_tcache_t *tc, unsigned cls, size_t size) {
  bool zero;
  void *p = hk_central_take_large(cls, tc->arena, size, &zero);
  if (hk_unlikely(!p)) return NULL;
  front(tc, cls)->moved++;
  note_out(tc, (ptrdiff_t)hk_classes[cls].size);
  if (HAK_HARDENED || !zero) hk_block_out(p, cls);  /* the hardened canary: at the end, not in calloc's bytes */
  if (zero) tc->zero_block = p;
  return p;
}

/* A thread whose cache is gone (it has exited) still allocates: one block at a time. */
static void *alloc_uncached(hk_tcache_t *tc, unsigned cls, size_t size) {
  if (hk_class_is_large(cls)) return take_large(tc, cls, size);
  void *chain;
  unsigned n = take(tc, cls, 1, &chain);
  if (hk_unlikely(n == 0)) return NULL;
  void *p = hand_out(chain, cls);
  if (n > 1) give(tc, cls, hk_next(p), n - 1);
  return p;
}

void *hk_tcache_refill(unsigned cls, size_t size) {
  hk_tcache_t *tc = &hk_tc;
  /* hk_tcache_pop found the list's first block not marked free */
  if (hk_unlikely(tc->head[cls] != HK_END)) hk_misuse_freed(tc->head[cls], cls);
  if (hk_unlikely(tc->state != HK_TC_ACTIVE)) {
    if (tc->state == HK_TC_UNINIT) hk_thread_init(tc);
    if (tc->state == HK_TC_DEAD) return alloc_uncached(tc, cls, size);  /* exited, or got no cache */
    void *p = hk_tcache_pop(cls);  /* prewarm may have filled the list */
    if (p) return p;
  }
  /* The list ran dry: the class is in demand, its capacity grows back. */
  tc->overflows[cls] = 0;
  front(tc, cls)->misses++;
  if (hk_class_is_large(cls) && tc->large_misses < UINT32_MAX) tc->large_misses++;
  set_cap(tc, cls, hk_min(tc->cap[cls] * 2, (int)hk_classes[cls].cap));
  if (hk_class_is_large(cls)) return take_large(tc, cls, size);
  void *chain;
  unsigned want = hk_min(hk_classes[cls].batch, (unsigned)tc->cap[cls] + 1);
  unsigned n = take(tc, cls, want, &chain);
  void *p = n ? hand_out(chain, cls) : NULL;
  if (p) {
    tc->head[cls] = hk_next(p);
    tc->room[cls] = (int16_t)(tc->room[cls] - (int)(n - 1));
  }
  return p;
}

/* Puts up to n blocks of class cls in an empty list of the cache. */
static void tcache_fill(hk_tcache_t *tc, unsigned cls, unsigned n) {
  n = hk_min(n, (unsigned)tc->cap[cls]);
  while (n) {
    void *chain;
    unsigned got = take(tc, cls, n, &chain);
    if (got == 0) return;
    void *last = chain;
    for (unsigned i = 1; i < got; i++) last = next_free(last, cls);
    hk_set_next(last, tc->head[cls]);
    tc->head[cls] = chain;
    tc->room[cls] = (int16_t)(tc->room[cls] - (int)got);
    n -= hk_min(got, n);
  }
}

static atomic_uint live_threads;  /* threads with an active cache: a hint that sizes caches (relaxed) */

/* A thread's budget for cached large blocks: HK_LARGE_CACHE_MIN, doubled
 * every HK_LARGE_GROWTH misses up to HK_LARGE_CACHE, then after
 * HK_LARGE_GROWTH_MAX its whole share of the process-wide budget, never more:
 * a thread taking many large blocks earns a cache serving most.  Why:
 * docs/DESIGN.md, Large blocks: budgets and spares. */
static size_t large_budget(const hk_tcache_t *tc, unsigned threads) {
  /* a class's list counts its blocks down from 0 in a 16-bit room */
  const size_t most = (size_t)INT16_MAX * HK_LARGE_MIN;
  size_t share = hk_min(hk_max(hk_opt.large_cache / hk_max(threads, 1u), HK_LARGE_CACHE_MIN), most);
  if (tc->large_misses >= HK_LARGE_GROWTH_MAX) return share;
  unsigned doublings = tc->large_misses / HK_LARGE_GROWTH;
  return hk_min(doublings >= 16 ? HK_LARGE_CACHE : hk_min(HK_LARGE_CACHE_MIN << doublings, HK_LARGE_CACHE), share);
}

/* Large classes' sizes in pages (hk_tcache_init): summed with the 16-bit
 * rooms in 32 bits, the products are vectorized (with the sizes read from
 * the class table, the sum was 11 % of mixed_large's instructions). */
static int16_t large_pages[HK_NCLASS + 1];

/* Bytes of large blocks in the thread's cache (their rooms count down from
 * 0): at most its budget and one list, well within 32 bits of pages. */
static size_t large_cached_bytes(const hk_tcache_t *tc) {
  int32_t pages = 0;  /* negative: a sum of 16-bit products, which SSE2 multiplies and adds in one */
  for (unsigned c = HK_FIRST_LARGE_CLASS; c <= HK_NCLASS; c++) pages += tc->room[c] * large_pages[c];
  return (size_t)-pages * HK_PAGE_SIZE;
}

/* The capacity of a list whose thread only frees the class (overflowing again
 * before running dry): with threads many times the CPUs, its blocks lie idle,
 * so it is divided by a quarter of the threads per CPU, by 4 at most, down to
 * two refills (docs/DESIGN.md, Capacities).  Few per CPU keep it whole: a
 * quarter cost one pair 27 % of its speed, in 4 times the batches. */
static int freer_cap(unsigned cls) {
  unsigned per_cpu = atomic_load_explicit(&live_threads, memory_order_relaxed) / hk_central_cpu_sets();
  int shrink = (int)hk_min(hk_max(per_cpu / 4, 1u), 4u);
  return hk_max((int)hk_classes[cls].cap / shrink, hk_min(2 * (int)hk_classes[cls].batch, (int)hk_classes[cls].cap));
}

/* A large class's free whose bytes passed the budget last worked out (or
 * the threads changed): worked out again, and the list sent back if over. */
static __attribute__((noinline)) bool large_over_budget(hk_tcache_t *tc, unsigned cls, unsigned threads) {
  tc->budget_threads = threads;
  size_t budget = tc->large_budget = large_budget(tc, threads);
  if (tc->large_bound <= budget) return false;
  tc->large_bound = large_cached_bytes(tc);
  if (tc->large_bound <= budget) return false;
  tc->large_bound -= (size_t)-tc->room[cls] * hk_classes[cls].size;
  tcache_drain(tc, cls, 0);
  return true;
}

static bool list_overflow(hk_tcache_t *tc, unsigned cls);

/* A free into a thread's lists while it has no cache.  No cache for a
 * thread's first frees before any malloc: they may come after its key
 * destructors ran (the C library freeing the thread's own memory at exit),
 * and a cache set up then is never handed back.  A consumer of other
 * threads' blocks gets one after a few. */
static __attribute__((noinline)) bool overflow_uncached(hk_tcache_t *tc, unsigned cls) {
  if (tc->state != HK_TC_DEAD && ++tc->early_frees >= HK_FREES_BEFORE_CACHE) hk_thread_init(tc);
  if (tc->state != HK_TC_ACTIVE) {  /* no cache yet, or none to be had */
    tcache_drain(tc, cls, 0);
    return false;
  }
  return tc->room[cls] < 0 && hk_tcache_overflow(cls);
}

/* Every free of a large block comes here, and each of a small one whose
 * list is full.  A large block stays while the thread's large blocks fit its
 * budget; past that its list goes back.  A small class's list keeps its
 * newest half, likeliest to be in cache, and gives the rest to the central
 * cache.  The large blocks' way is kept short, the others apart (the
 * registers they save cost every large free 16 instructions). */
bool hk_tcache_overflow(unsigned cls) {
  hk_tcache_t *tc = &hk_tc;
  if (hk_unlikely(tc->state != HK_TC_ACTIVE)) return overflow_uncached(tc, cls);
  if (!hk_class_is_large(cls)) return list_overflow(tc, cls);
  front(tc, cls)->overflows++;
  /* The bound grows with every large block kept; mallocs shrink the real
   * figure unseen, so it is recounted only when the bound passes the budget.
   * The budget last worked out while the threads are as many (it grows with
   * the misses, and one passed is worked out again): its division at every
   * such free was 7 % of larson-64k's instructions. */
  tc->large_bound += hk_classes[cls].size;
  unsigned threads = atomic_load_explicit(&live_threads, memory_order_relaxed);
  if (hk_likely(tc->large_bound <= tc->large_budget && threads == tc->budget_threads)) return false;
  return large_over_budget(tc, cls, threads);
}

/* A small class's list outgrew its capacity. */
static __attribute__((noinline)) bool list_overflow(hk_tcache_t *tc, unsigned cls) {
  /* The first overflow since the list ran dry keeps the newest half (mallocs
   * and frees swinging at capacity: a batch per half list); another before
   * running dry (frees outpace) sends all unwalked.  Parked batches feed an
   * allocating thread, best full: two in a row regrow the capacity.  Batches
   * sent home return only via slabs, which the list pins: two halve it. */
  unsigned count = (unsigned)(tc->cap[cls] - tc->room[cls]);
  int cap = tc->cap[cls];
  unsigned keep = tc->overflows[cls] ? 0 : (unsigned)cap / 2;
  front(tc, cls)->overflows++;
  void *chain = tc->head[cls];
  if (keep == 0) {
    tc->head[cls] = HK_END;
  } else {
    void *last = chain;
    for (unsigned i = 1; i < keep; i++) last = next_free(last, cls);
    chain = next_free(last, cls);
    hk_set_next(last, HK_END);
  }
  tc->room[cls] = (int16_t)(cap - (int)keep);
  bool parked = give(tc, cls, chain, count - keep);
  uint8_t last = tc->overflows[cls];
  tc->overflows[cls] = parked ? HK_OVERFLOW_PARKED : last >= HK_OVERFLOW_UNPARKED ? HK_OVERFLOW_UNPARKED2 : HK_OVERFLOW_UNPARKED;
  int next = cap;
  if (parked && last == HK_OVERFLOW_PARKED) next = hk_min(cap * 2, (int)hk_classes[cls].cap);
  if (!parked && last >= HK_OVERFLOW_UNPARKED) {
    /* Lean keeps the fewest blocks pinning slabs; else each trip home carries
     * enough blocks to pay for its locks and the slots' checks, up to 16 KiB
     * of them (a structure of 2 M blocks of 16-64 B freed whole: 14 times
     * the batches with 8). */
    int least = HK_TCACHE_MIN_CAP_LEAN;
    if (!hk_opt.mem_lean)
      least = hk_max(least, hk_min(HK_TCACHE_MIN_CAP, (int)(HK_TCACHE_MIN_BYTES / hk_classes[cls].size)));
    next = hk_max(cap / 2, hk_min(least, cap));
  }
  if (last) next = hk_min(next, freer_cap(cls));
  if (next != cap) set_cap(tc, cls, next);
  return true;
}

/* New threads' lists over 1 KiB start at cap / 4 (at least prewarm's),
 * doubling as they run dry: one seldom used would fill with frees.  Worked
 * out at set-up, with the last class prewarmed (0: none), so that a thread
 * that lives for one allocation pays for no more than it uses. */
static int16_t start_caps[HK_LISTS];
static unsigned last_prewarmed;

/* Whether the thread of a registry entry has ended (its cache may be gone
 * with its stack). */
static bool thread_gone(const registered_t *r) { return hk_os_thread_gone(registry_pid, r->tid); }

/* Removes entry i, its place taken by the last one; its counters are
 * added up and their block goes back to the pool if `give`. */
static void registry_remove_at(size_t i, bool give) {
  if (give) fronts_give(registry[i].front);
  registry[i] = registry[--registry_n];
}

/* The entry of cache tc; registry_n if it has none. */
static size_t registry_find(const hk_tcache_t *tc) {
  size_t i = 0;
  while (i < registry_n && registry[i].tc != tc) i++;
  return i;
}

/* What statistics and fork read of another thread's cache (all but its
 * lists' heads), copied under registry_lock; NULL if its memory is gone. */
static hk_tcache_t cache_copy;
static const hk_tcache_t *read_cache(const hk_tcache_t *tc) {
  const size_t from = offsetof(hk_tcache_t, room);
  if (tc == &hk_tc) return tc;
  if (!hk_os_read((uint8_t *)&cache_copy + from, (const uint8_t *)tc + from, sizeof *tc - from)) return NULL;
  return &cache_copy;
}

/* Drops the caches of threads that ended without handing them back, before
 * the caches are read; their counters are kept, their unreported bytes lost. */
static void registry_prune(void) {
  for (size_t i = registry_n; i-- > 0;) {
    if (registry[i].tc == &hk_tc || !thread_gone(&registry[i])) continue;
    atomic_fetch_sub_explicit(&live_threads, 1, memory_order_relaxed);
    registry_remove_at(i, true);
  }
}

/* Adds a new thread's cache, replacing entries of threads that ended without
 * handing theirs back: the one whose TLS block it reuses, and one with its
 * tid, which the kernel reused (tgkill would say alive).  False if no room. */
static bool registry_add(hk_tcache_t *tc, pid_t tid) {
  for (size_t i = registry_n; i-- > 0;) {  /* downwards: what moves to i was seen */
    if (registry[i].tc != tc && registry[i].tid != tid) continue;
    registry_remove_at(i, true);
    atomic_fetch_sub_explicit(&live_threads, 1, memory_order_relaxed);
  }
  if (registry_n == registry_cap) {
    size_t cap = hk_max(registry_cap * 2, HK_PAGE_SIZE / sizeof *registry);
    registered_t *grown = hk_os_map_aligned(cap * sizeof *registry, HK_PAGE_SIZE, 0);
    if (!grown) return false;
    if (registry_n) memcpy(grown, registry, registry_n * sizeof *registry);
    registered_t *old = registry;  /* unmapped once no longer in use: a fork child may copy any moment */
    size_t old_cap = registry_cap;
    registry = grown;
    registry_cap = cap;
    if (old) hk_os_unmap(old, old_cap * sizeof *registry);
  }
  if (!registry_pid) registry_pid = getpid();
  registry[registry_n++] = (registered_t){tc, tc->front, tid};
  return true;
}

void hk_note_out(ptrdiff_t bytes) { note_out(&hk_tc, bytes); }

/* Given with its cache: a thread that takes only huge blocks gets one all
 * the same, for its statistics' steps (note_out) and their hand-over. */
unsigned hk_thread_arena(void) {
  if (hk_unlikely(hk_tc.state == HK_TC_UNINIT)) hk_thread_init(&hk_tc);
  return hk_tc.arena;
}

/* The key whose destructor runs each thread's exit (init.c), if made. */
static pthread_key_t exit_key;
static bool exit_key_made;
void hk_tcache_init(const pthread_key_t *key) {
  if (key) exit_key = *key, exit_key_made = true;
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    const hk_class_info_t *ci = &hk_classes[c];
    if (hk_class_is_large(c)) {
      hk_assert(ci->size % HK_PAGE_SIZE == 0 && ci->size / HK_PAGE_SIZE <= INT16_MAX, "a large class not in pages");
      large_pages[c] = (int16_t)(ci->size / HK_PAGE_SIZE);
    }
    start_caps[c] = ci->size <= 1024 ? ci->cap : (int16_t)hk_min(hk_max(ci->cap / 4, (int)ci->prewarm), (int)ci->cap);
    if (ci->prewarm) last_prewarmed = c;
  }
}

void hk_thread_init(hk_tcache_t *tc) {
  pid_t tid = hk_os_tid();  /* outside the lock every new thread takes: maybe a system call */
  hk_lock(&registry_lock);
  tc->front = exit_key_made ? fronts_take() : NULL;
  bool registered = exit_key_made && registry_add(tc, tid);
  if (!registered) fronts_give(tc->front), tc->front = NULL;
  hk_unlock(&registry_lock);
  if (!registered) {  /* no way to hand a cache back at exit, or to count it: none */
    tc->state = HK_TC_DEAD;
    return;
  }
  for (unsigned c = 0; c < HK_LISTS; c++) {  /* set_cap's, vectorized: every cap was 0 */
    tc->room[c] = (int16_t)(tc->room[c] + start_caps[c]);
    tc->cap[c] = start_caps[c];
  }
  tc->arena = (uint8_t)hk_arena_assign();
  atomic_fetch_add_explicit(&live_threads, 1, memory_order_relaxed);
  tc->state = HK_TC_ACTIVE;
  pthread_setspecific(exit_key, tc);  /* arms hk_thread_exit */
  for (unsigned c = 1; c <= last_prewarmed; c++)
    if (hk_classes[c].prewarm && tc->head[c] == HK_END) tcache_fill(tc, c, hk_classes[c].prewarm);
}

void hk_tcache_flush(hk_tcache_t *tc) {
  if (tc->state != HK_TC_ACTIVE) return;
  for (unsigned c = 1; c <= HK_NCLASS; c++) tcache_drain(tc, c, tc->cap[c]);
}

/* Thread exit: everything cached goes back, and the rest of the exit
 * bypasses the cache (room 0 sends each free on).  False if it had none. */
bool hk_thread_exit(hk_front_t *counters) {
  hk_tcache_t *tc = &hk_tc;
  if (tc->state != HK_TC_ACTIVE) return false;
  tc->state = HK_TC_DEAD;
  atomic_fetch_sub_explicit(&live_threads, 1, memory_order_relaxed);
  for (unsigned c = 0; c < HK_LISTS; c += 4) {  /* a list holds blocks where its room is not its cap */
    uint64_t room, cap;
    memcpy(&room, &tc->room[c], sizeof room);
    memcpy(&cap, &tc->cap[c], sizeof cap);
    if (room != cap)
      for (unsigned k = c; k < c + 4; k++)
        if (tc->room[k] != tc->cap[k]) tcache_drain(tc, k, 0);
  }
  memset(tc->room, 0, sizeof tc->room);
  memset(tc->cap, 0, sizeof tc->cap);
  note_out(tc, 0);
  hk_lock(&registry_lock);
  size_t i = registry_find(tc);
  hk_assert(i < registry_n, "thread cache not registered");
  if (counters && tc->front) memcpy(counters, tc->front, sizeof(fronts_t));
  else if (counters) memset(counters, 0, sizeof(fronts_t));  /* it had no block to count in */
  if (i < registry_n) registry_remove_at(i, true);
  tc->front = NULL;
  hk_unlock(&registry_lock);
  return true;
}

/* Blocks in the caches of live threads per class, and every thread's
 * counters, read unstopped: each figure was true at some moment. */
void hk_tcache_survey(size_t *cached, hk_front_t *front, unsigned *threads) {
  hk_lock(&registry_lock);
  registry_prune();
  memcpy(front, exited, sizeof exited);
  *threads = (unsigned)registry_n;
  for (size_t i = 0; i < registry_n; i++) {
    if (registry[i].front) fronts_add(front + 1, registry[i].front + 1, HK_NCLASS);
    const hk_tcache_t *tc = read_cache(registry[i].tc);
    if (!tc) continue;
    for (unsigned c = 1; c <= HK_NCLASS; c++) {
      /* a cap and a room of different moments (set_cap, a thread's exit)
       * may say less than nothing */
      int n = __atomic_load_n(&tc->cap[c], __ATOMIC_RELAXED) - __atomic_load_n(&tc->room[c], __ATOMIC_RELAXED);
      cached[c] += (size_t)hk_max(n, 0);
    }
  }
  hk_unlock(&registry_lock);
}

/* The child reads the caches of the threads alive at the fork. */
void hk_tcache_fork_lock(void) {
  hk_lock(&registry_lock);
  registry_prune();
}

/* The child has one thread: it drops the others' caches, their traffic and
 * unreported bytes counted if the fork held the registry's lock (its prepare
 * handler pruned ended threads), else (fork in a signal handler) lost. */
void hk_tcache_fork_unlock(bool child, bool locked) {
  if (child) {
    for (size_t i = registry_n; i-- > 0;) {
      if (registry[i].tc == &hk_tc) continue;
      const hk_tcache_t *tc = locked ? read_cache(registry[i].tc) : NULL;
      if (tc) hk_out_add(tc->out_pending);  /* its TLS block, if its stack was still there, is the child's memory too */
      registry_remove_at(i, locked);
    }
    registry_pid = getpid();
    if (registry_n) registry[0].tid = hk_os_tid();
    pthread_mutex_init(&registry_lock, NULL);
    atomic_store_explicit(&live_threads, (unsigned)registry_n, memory_order_relaxed);
  } else {
    hk_unlock(&registry_lock);
  }
}

/* The calling thread's lists against their room, then the central cache's. */
HK_EXPORT size_t hak_heap_check(void) {
  hk_tcache_t *tc = &hk_tc;
  size_t walked = 0;
  if (tc->state == HK_TC_ACTIVE)
    for (unsigned cls = 1; cls <= HK_NCLASS; cls++) {
      unsigned count = (unsigned)(tc->cap[cls] - tc->room[cls]);
      unsigned n = hk_chain_length(tc->head[cls], count + 1);
      if (n != count) hk_fatal("heap check: thread cache list and room", tc->head[cls]);
      for (const void *b = tc->head[cls]; b != HK_END; b = hk_next(b)) {
        if (hk_map_get(b) != cls) hk_fatal("heap check: a cached block of another class", b);
        if (!hk_is_free(b)) hk_fatal("heap check: a cached block not marked free", b);
      }
      walked += n;
    }
  return walked + hk_central_check();
}
