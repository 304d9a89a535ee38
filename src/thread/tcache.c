/* SPDX-License-Identifier: MIT */
/* Thread caches: the slow paths behind hk_malloc_fast / hk_free_fast, and
 * the registry of live caches that statistics read. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "thread/thread.h"

const uint64_t hk_list_end[2] __attribute__((aligned(16))) = {0, 2};
/* Every list starts empty: at HK_END, which a new thread's copy of this
 * image already points to (ld.so relocates it before any thread copies it). */
__thread hk_tcache_t hk_tc __attribute__((tls_model("initial-exec"))) = {.head = {[0 ... HK_NCLASS] = HK_END}};

/* The caches of live threads, for statistics, and the counters of the
 * threads that have exited.  An array rather than a list through the caches:
 * a thread whose first allocator call comes in the last round of its key
 * destructors sets up a cache that hk_thread_exit never hands back (glibc
 * runs no further round), and the next thread given the same TLS block finds
 * it here, the only trace of it left, and takes its place (its blocks are
 * lost: that thread's TLS image overwrote them).  Or its stack is unmapped
 * (glibc keeps 40 MiB of stacks for new threads; a stack the program gave
 * goes as the program wants), at any moment: whether its thread is alive
 * (registry_prune) is only a hint, since the stack may go between the look
 * and the read.  So nothing writes another thread's cache, and what reads
 * one copies it with hk_os_read, which a cache gone fails without a fault
 * (read_cache). */
typedef struct registered {
  hk_tcache_t *tc;
  pid_t tid;  /* its thread */
} registered_t;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered_t *registry;
static size_t registry_n, registry_cap;
static pid_t registry_pid;  /* the process the registered threads are of */
static hk_front_t exited[HK_NCLASS + 1];

/* Adds a change in the bytes out of the central caches to the process-wide
 * figure (and its peak) in steps, so that threads do not share a cache line
 * on every batch or huge block they move: a rise of HK_STATS_STEP, a fall of
 * HK_STATS_SLACK.  A thread that frees and takes back blocks of megabytes
 * reports nothing while its bytes stay within the slack.  So the peak is at
 * most HK_STATS_STEP per thread below the true one, and, since a thread's
 * unreported fall may meet another's reported rise, at most HK_STATS_SLACK
 * per other thread above it. */
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
  tc->front[cls].moved += count;
  note_out(tc, -(ptrdiff_t)((size_t)count * hk_classes[cls].size));
  return hk_central_put(cls, chain, count, tc);
}

/* Takes up to `want` blocks from the central cache onto *chain; a thread
 * whose list of the class never overflowed is a producer of it. */
static unsigned take(hk_tcache_t *tc, unsigned cls, unsigned want, void **chain) {
  const void *parker;
  unsigned n = hk_central_take(cls, tc->arena, want, chain, &parker, tc->front[cls].overflows == 0);
  hk_front_t *f = &tc->front[cls];
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

/* A block of a large class straight to the program, where the memory of a
 * new one is not touched: its page faults are the program's first writes,
 * not this call's (malloc's tail: `latency thread_churn`).  Memory that may
 * hold old data has its mark cleared (a block marked free in the program's
 * hands would read as freed to realloc). */
static void *take_large(hk_tcache_t *tc, unsigned cls) {
  bool zero;
  void *p = hk_central_take_large(cls, tc->arena, &zero);
  if (hk_unlikely(!p)) return NULL;
  tc->front[cls].moved++;
  note_out(tc, (ptrdiff_t)hk_classes[cls].size);
  if (HAK_HARDENED || !zero) hk_block_out(p, cls);  /* the hardened canary: at the end, not in calloc's bytes */
  if (zero) tc->zero_block = p;
  return p;
}

/* A thread whose cache is gone (it has exited) still allocates: one block at a time. */
static void *alloc_uncached(hk_tcache_t *tc, unsigned cls) {
  if (hk_class_is_large(cls)) return take_large(tc, cls);
  void *chain;
  unsigned n = take(tc, cls, 1, &chain);
  if (hk_unlikely(n == 0)) return NULL;
  void *p = hand_out(chain, cls);
  if (n > 1) give(tc, cls, hk_next(p), n - 1);
  return p;
}

void *hk_tcache_refill(unsigned cls) {
  hk_tcache_t *tc = &hk_tc;
  /* hk_tcache_pop found the list's first block not marked free */
  if (hk_unlikely(tc->head[cls] != HK_END)) hk_misuse_freed(tc->head[cls], cls);
  if (hk_unlikely(tc->state != HK_TC_ACTIVE)) {
    if (tc->state == HK_TC_UNINIT) hk_thread_init(tc);
    if (tc->state == HK_TC_DEAD) return alloc_uncached(tc, cls);  /* exited, or got no cache */
    void *p = hk_tcache_pop(cls);  /* prewarm may have filled the list */
    if (p) return p;
  }
  /* The list ran dry: the class is in demand, its capacity grows back. */
  tc->overflows[cls] = 0;
  tc->front[cls].misses++;
  if (hk_class_is_large(cls) && tc->large_misses < UINT32_MAX) tc->large_misses++;
  set_cap(tc, cls, hk_min(tc->cap[cls] * 2, (int)hk_classes[cls].cap));
  if (hk_class_is_large(cls)) return take_large(tc, cls);
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


static atomic_uint live_threads;  /* threads with an active cache */

/* A thread's budget for cached large blocks: HK_LARGE_CACHE_MIN, doubled
 * for every HK_LARGE_GROWTH large blocks its cache did not have, up to
 * HK_LARGE_CACHE, then its whole share of the process-wide budget after
 * HK_LARGE_GROWTH_MAX of them, and never more than that share.  A thread
 * that takes large blocks at a high rate earns a cache that serves most of
 * them; one that takes a few (a short-lived one) keeps few.  The last step
 * asks for 64 times the misses, and the one before it stops at 4 MiB: two
 * threads replacing blocks of up to 64 KiB (larson 2 1.0 1000 1 16 65536,
 * three threads with a cache: a share of 21 MiB) miss about a million times
 * a second each and take the last step within a tenth of a second.  Each
 * hands the other an array holding 24 MiB of large blocks a few thousand
 * times a second: a last step of 16 MiB sent a third more of them back to
 * the SuperSlabs to be carved again, and ran 0.89 times as fast (10 paired
 * rounds) at the same peak.  A thread with blocks up to 1 MiB (mixed_large
 * 500000 500 1, 46 000 misses) peaked 8 MiB higher with a step of 8 MiB
 * (68.4 against 60.4 MiB), no faster. */
static size_t large_budget(const hk_tcache_t *tc) {
  /* a class's list counts its blocks down from 0 in a 16-bit room */
  const size_t most = (size_t)INT16_MAX * HK_LARGE_MIN;
  size_t threads = hk_max(atomic_load_explicit(&live_threads, memory_order_relaxed), 1u);
  size_t share = hk_min(hk_max(hk_opt.large_cache / threads, HK_LARGE_CACHE_MIN), most);
  if (tc->large_misses >= HK_LARGE_GROWTH_MAX) return share;
  unsigned doublings = tc->large_misses / HK_LARGE_GROWTH;
  return hk_min(doublings >= 16 ? HK_LARGE_CACHE : hk_min(HK_LARGE_CACHE_MIN << doublings, HK_LARGE_CACHE), share);
}

/* Bytes of large blocks in the thread's cache (their rooms count down from 0). */
static size_t large_cached_bytes(const hk_tcache_t *tc) {
  size_t bytes = 0;
  for (unsigned c = HK_FIRST_LARGE_CLASS; c <= HK_NCLASS; c++)
    bytes += (size_t)-tc->room[c] * hk_classes[c].size;
  return bytes;
}

/* The capacity of a list whose thread only frees the class (it overflows
 * again before running dry): such a list is a batch in the making, parked
 * whole.  Where threads outnumber CPUs several times over, most of them wait
 * for a CPU at any moment and what their lists hold lies idle: the capacity
 * is divided by a quarter of the threads per CPU, by 4 at most, and kept at
 * two refills' worth.  Producer/consumer pairs on 2 CPUs peaked 15-22 %
 * lower (8, 16 and 32 pairs: 25.6, 45.9, 84.2 -> 21.7, 36.0, 68.4 MiB) at
 * 0.96, 1.02 and 1.12 times the speed (medians of 9 paired rounds).  Few
 * threads per CPU keep the whole capacity: a quarter of it cost one pair 27 %
 * of its speed, in 4 times as many batches to lock. */
static int freer_cap(unsigned cls) {
  unsigned per_cpu = atomic_load_explicit(&live_threads, memory_order_relaxed) / hk_central_cpu_sets();
  int shrink = (int)hk_min(hk_max(per_cpu / 4, 1u), 4u);
  return hk_max((int)hk_classes[cls].cap / shrink, hk_min(2 * (int)hk_classes[cls].batch, (int)hk_classes[cls].cap));
}

/* The list outgrew its capacity: keep the newest half, whose blocks are the
 * likeliest to be in cache, and give the rest to the central cache.  A large
 * block stays while the thread's large blocks fit its budget; past that its
 * class's list goes back. */
bool hk_tcache_overflow(void *p) {
  unsigned cls = (unsigned)hk_map_get(p);
  hk_tcache_t *tc = &hk_tc;
  if (hk_unlikely(tc->state != HK_TC_ACTIVE)) {
    /* A thread that has not allocated yet gets no cache for its first frees:
     * those may come after its key destructors have run (a late destructor,
     * the C library freeing the thread's own memory at exit), and a cache set
     * up then would never be handed back.  A thread that goes on freeing (a
     * consumer of other threads' blocks) gets one after a few. */
    if (tc->state != HK_TC_DEAD && ++tc->early_frees >= HK_FREES_BEFORE_CACHE) hk_thread_init(tc);
    if (tc->state != HK_TC_ACTIVE) {  /* no cache yet, or none to be had */
      tcache_drain(tc, cls, 0);
      return false;
    }
    if (tc->room[cls] >= 0) return false;
  }
  if (hk_class_is_large(cls)) {
    tc->front[cls].overflows++;
    /* The bound grows with every large block kept; mallocs shrink the real
     * figure unseen, so it is recounted only when the bound passes the budget. */
    size_t budget = large_budget(tc);
    tc->large_bound += hk_classes[cls].size;
    if (tc->large_bound <= budget) return false;
    tc->large_bound = large_cached_bytes(tc);
    if (tc->large_bound <= budget) return false;
    tc->large_bound -= (size_t)-tc->room[cls] * hk_classes[cls].size;
    tcache_drain(tc, cls, 0);
    return true;
  }
  /* The first overflow since the list ran dry keeps the newest half, so that
   * mallocs and frees swinging around the capacity cost one batch per half
   * list.  Overflowing again before running dry, frees outpace mallocs (a
   * consumer of other threads' blocks, a structure being freed): the whole
   * list goes, with no walk to split it.  A batch that finds a parking slot
   * feeds a thread that allocates, and full batches suit it best: after two
   * parked in a row the capacity grows back.  Batches that go back to their
   * slabs instead only come back through slabs, and what the list holds
   * between overflows pins slabs: after two of them in a row it halves. */
  unsigned count = (unsigned)(tc->cap[cls] - tc->room[cls]);
  int cap = tc->cap[cls];
  unsigned keep = tc->overflows[cls] ? 0 : (unsigned)cap / 2;
  tc->front[cls].overflows++;
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
  if (!parked && last >= HK_OVERFLOW_UNPARKED) next = hk_max(cap / 2, hk_min(HK_TCACHE_MIN_CAP, cap));
  if (last) next = hk_min(next, freer_cap(cls));
  if (next != cap) set_cap(tc, cls, next);
  return true;
}

/* A new thread's lists of blocks above 1 KiB start at a quarter of their
 * capacity (at least what prewarm puts in them) and double each time they
 * run dry: most threads use most of these classes little, and a list a
 * thread seldom takes from would otherwise fill up with its frees. */
static int start_cap(unsigned c) {
  int cap = hk_classes[c].cap;
  if (hk_classes[c].size <= 1024 || cap == 0) return cap;
  return hk_min(hk_max(cap / 4, (int)hk_prewarm_count(c)), cap);
}

/* Whether the thread of a registry entry has ended (its cache may be gone
 * with its stack); a refusal (a seccomp filter, EPERM) says nothing. */
static bool thread_gone(const registered_t *r) {
  int error = errno;
  bool gone = syscall(SYS_tgkill, registry_pid, r->tid, 0) != 0 && errno == ESRCH;
  errno = error;
  return gone;
}

/* Removes entry i, its place taken by the last one. */
static void registry_remove_at(size_t i) { registry[i] = registry[--registry_n]; }

/* The entry of cache tc; registry_n if it has none. */
static size_t registry_find(const hk_tcache_t *tc) {
  size_t i = 0;
  while (i < registry_n && registry[i].tc != tc) i++;
  return i;
}

/* What statistics and fork read of another thread's cache (all but its
 * lists' heads), copied into `copy` under registry_lock; false if its
 * memory is gone. */
static hk_tcache_t cache_copy;
static const hk_tcache_t *read_cache(const hk_tcache_t *tc) {
  const size_t from = offsetof(hk_tcache_t, room);
  if (tc == &hk_tc) return tc;
  if (!hk_os_read((uint8_t *)&cache_copy + from, (const uint8_t *)tc + from, sizeof *tc - from)) return NULL;
  return &cache_copy;
}

/* Drops the caches of threads that have ended without handing them back,
 * before the registry's caches are read; their counters are lost, and the
 * bytes they had not yet reported to the statistics' peak (note_out). */
static void registry_prune(void) {
  for (size_t i = registry_n; i-- > 0;) {
    if (registry[i].tc == &hk_tc || !thread_gone(&registry[i])) continue;
    atomic_fetch_sub_explicit(&live_threads, 1, memory_order_relaxed);
    registry_remove_at(i);
  }
}

/* Adds a new thread's cache, in place of entries of threads that ended
 * without handing theirs back: the one whose TLS block it reuses, and one
 * with its tid, which the kernel gave again (tgkill would take that thread
 * for alive, and its cache's memory be read and written); false if there
 * is no room. */
static bool registry_add(hk_tcache_t *tc) {
  pid_t tid = gettid();
  for (size_t i = registry_n; i-- > 0;) {  /* downwards: what moves to i was seen */
    if (registry[i].tc != tc && registry[i].tid != tid) continue;
    registry_remove_at(i);
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
  registry[registry_n++] = (registered_t){tc, tid};
  return true;
}

void hk_note_out(ptrdiff_t bytes) { note_out(&hk_tc, bytes); }

/* Given with its cache: a thread that takes only huge blocks gets one all
 * the same, for its statistics' steps (note_out) and their hand-over at
 * exit. */
unsigned hk_thread_arena(void) {
  if (hk_unlikely(hk_tc.state == HK_TC_UNINIT)) hk_thread_init(&hk_tc);
  return hk_tc.arena;
}

/* The key whose destructor runs each thread's exit (init.c), and whether
 * there is one. */
static pthread_key_t exit_key;
static bool exit_key_made;
void hk_thread_exit_key(pthread_key_t key) {
  exit_key = key;
  exit_key_made = true;
}

void hk_thread_init(hk_tcache_t *tc) {
  hk_lock(&registry_lock);
  bool registered = exit_key_made && registry_add(tc);
  hk_unlock(&registry_lock);
  if (!registered) {  /* no way to hand a cache back at exit, or to count it: none */
    tc->state = HK_TC_DEAD;
    return;
  }
  for (unsigned c = 1; c <= HK_NCLASS; c++) set_cap(tc, c, start_cap(c));
  tc->arena = (uint8_t)hk_arena_assign();
  atomic_fetch_add_explicit(&live_threads, 1, memory_order_relaxed);
  tc->state = HK_TC_ACTIVE;
  pthread_setspecific(exit_key, tc);  /* arms hk_thread_exit */
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    unsigned n = hk_prewarm_count(c);
    if (n && tc->head[c] == HK_END) tcache_fill(tc, c, n);
  }
}

void hk_tcache_flush(hk_tcache_t *tc) {
  if (tc->state != HK_TC_ACTIVE) return;
  for (unsigned c = 1; c <= HK_NCLASS; c++) tcache_drain(tc, c, tc->cap[c]);
}

/* Thread exit: everything cached goes back, and whatever the rest of the exit
 * frees or allocates bypasses the cache (room 0 sends each free to the
 * central cache).  False if the thread had no cache. */
bool hk_thread_exit(void) {
  hk_tcache_t *tc = &hk_tc;
  if (tc->state != HK_TC_ACTIVE) return false;
  tc->state = HK_TC_DEAD;
  atomic_fetch_sub_explicit(&live_threads, 1, memory_order_relaxed);
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    tcache_drain(tc, c, 0);
    tc->cap[c] = 0;
  }
  note_out(tc, 0);
  hk_lock(&registry_lock);
  size_t i = registry_find(tc);
  hk_assert(i < registry_n, "thread cache not registered");
  if (i < registry_n) registry_remove_at(i);
  hk_front_add(exited, tc->front);
  hk_unlock(&registry_lock);
  return true;
}

void hk_front_add(hk_front_t *sum, const hk_front_t *f) {
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    sum[c].hits += f[c].hits;
    sum[c].misses += f[c].misses;
    sum[c].overflows += f[c].overflows;
    sum[c].moved += f[c].moved;
    sum[c].parked_hits += f[c].parked_hits;
    sum[c].from_others += f[c].from_others;
  }
}

/* Blocks in the caches of live threads per class, and every thread's
 * counters.  Other threads' caches are read as they are, without stopping
 * them: each figure was true at some moment of the call. */
void hk_tcache_survey(size_t *cached, hk_front_t *front, unsigned *threads) {
  hk_lock(&registry_lock);
  registry_prune();
  memcpy(front, exited, sizeof exited);
  *threads = (unsigned)registry_n;
  for (size_t i = 0; i < registry_n; i++) {
    const hk_tcache_t *tc = read_cache(registry[i].tc);
    if (!tc) continue;
    for (unsigned c = 1; c <= HK_NCLASS; c++) {
      /* a cap and a room of different moments (set_cap, a thread's exit)
       * may say less than nothing */
      int n = __atomic_load_n(&tc->cap[c], __ATOMIC_RELAXED) - __atomic_load_n(&tc->room[c], __ATOMIC_RELAXED);
      cached[c] += (size_t)hk_max(n, 0);
    }
    hk_front_add(front, tc->front);
  }
  hk_unlock(&registry_lock);
}

/* The child reads the caches of the threads alive at the fork. */
void hk_tcache_fork_lock(void) {
  hk_lock(&registry_lock);
  registry_prune();
}

/* The child has one thread: it drops the others' caches.  Their traffic
 * and unreported bytes go to the statistics where the fork held the
 * registry's lock (its prepare handler dropped the caches of ended threads,
 * whose memory may be gone), and are lost where it did not (a fork from a
 * signal handler). */
void hk_tcache_fork_unlock(bool child, bool locked) {
  if (child) {
    for (size_t i = registry_n; i-- > 0;) {
      if (registry[i].tc == &hk_tc) continue;
      const hk_tcache_t *tc = locked ? read_cache(registry[i].tc) : NULL;
      if (tc) {  /* its TLS block, if its stack was still there, is the child's memory too */
        hk_front_add(exited, tc->front);
        hk_out_add(tc->out_pending);
      }
      registry_remove_at(i);
    }
    registry_pid = getpid();
    if (registry_n) registry[0].tid = gettid();
    pthread_mutex_init(&registry_lock, NULL);
    atomic_store_explicit(&live_threads, (unsigned)registry_n, memory_order_relaxed);
  } else {
    hk_unlock(&registry_lock);
  }
}

HK_EXPORT void hak_thread_flush(void) { hk_tcache_flush(&hk_tc); }

/* The calling thread's lists against their room, then the central cache's. */
HK_EXPORT size_t hak_heap_check(void) {
  hk_tcache_t *tc = &hk_tc;
  size_t walked = 0;
  if (tc->state == HK_TC_ACTIVE)
    for (unsigned cls = 1; cls < HK_FIRST_LARGE_CLASS; cls++) {
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
