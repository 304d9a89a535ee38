/* SPDX-License-Identifier: MIT */
/* The purge schedule: when free memory goes back to the OS.  Time is cut into
 * epochs of HAKMEM_PURGE_DELAY_MS; at each tick the layers give back what has
 * been free since before the previous one (one to two delays), so memory
 * reused within the delay is never touched.  Ticks run on the slow paths
 * (whoever finds one due takes it), or, with HAKMEM_BACKGROUND_PURGE, on a
 * thread of their own, which runs them while the program idles too, started
 * by a malloc once the heap has held 4 MiB (small programs never see it).  In lean
 * mode, free resident memory above a cap goes back at once (as each thread
 * sees it: lean_view).  The cap starts at the target and learns: when within
 * four purge delays of a trim the program took back, at once or page fault by
 * page fault, half or more of what it gave, that was memory in use whose
 * giving back only bought page faults: the next trim doubles the cap (up to
 * HK_LEAN_CAP_GROWTH times the target); HK_LEAN_QUIET_TICKS ticks without a
 * trim halve it back.  Over the cap, lean first asks which pages of the huge
 * regions' free units are resident (hk_huge_nonresident): a freed block of
 * megabytes may have had one page written. */
#define _GNU_SOURCE
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include "service/service.h"

#define HK_PURGER_START ((size_t)4 << 20)  /* the heap's peak (bytes out) that starts the purger */
#define HK_LEAN_CAP_GROWTH 8               /* lean mode's cap: at most this times the target */
#define HK_LEAN_QUIET_TICKS 50              /* ticks without a trim before the cap halves */
#define HK_LEAN_LOOK_MS 20                  /* how long lean trusts a look at which pages are resident */

/* ms, CLOCK_MONOTONIC_COARSE; stored under tick_lock, read without it only
 * to decide whether to take it and again under it: relaxed (it only grows, so
 * a stale value costs one look too many). */
static _Atomic uint64_t next_tick;
/* Lean's cap (most free resident bytes kept; 0: the target), last trim (ms),
 * ticks since (others: counters.c); lean_trim, lean_quiet hold tick_lock.
 * The polls read the cap as a hint (relaxed): lean_trim reads it again under
 * the lock. */
static atomic_size_t lean_cap;
static uint64_t lean_trim_ms;
static unsigned lean_quiet_ticks;
static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;

/* RUNNING is stored after purger_wake's set-up, read before it is signalled
 * (release/acquire would do, and seq_cst loads cost what acquire ones do; the
 * compare-and-swap only elects the starter).  The purger says it sleeps, then
 * reads hk_purge_pending; a note sets that, then reads this: seq_cst, as
 * acquire and release leave a store then a load of another variable
 * unordered, and each could miss the other. */
enum { PURGER_OFF, PURGER_STARTING, PURGER_RUNNING, PURGER_STOPPING };
static atomic_int purger_state;
static atomic_int purger_tid;  /* its kernel thread id, once it runs (0 before) */
static atomic_bool purger_sleeping;
static pthread_mutex_t purger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t purger_wake;
atomic_bool hk_purger_off;

void hk_purge_init(void) { atomic_store_explicit(&hk_purger_off, hk_opt.background_purge, memory_order_relaxed); }

size_t hk_purge_resident(void) { return hk_region_resident(); }

static size_t lean_target(void) { return hk_opt.lean_target_mb << 20; }

static size_t lean_cap_now(void) {
  size_t cap = atomic_load_explicit(&lean_cap, memory_order_relaxed);
  return cap ? cap : lean_target();
}

/* Free bytes counted resident the last look found absent, and when (ms):
 * ignored by the cap for HK_LEAN_LOOK_MS after the look, or till a trim or
 * tick gives huge regions' memory back; not longer: they may be rewritten
 * meanwhile.  Looking at each free past the cap made two threads replacing
 * sparsely written 1-4 MiB blocks 3 times slower.  Stored under tick_lock,
 * read by the polls without it (relaxed): a mixed pair hastens or defers a
 * trim by a poll, and lean_trim reads them again under the lock. */
static atomic_size_t lean_absent;
static _Atomic uint64_t lean_look_ms;

static size_t lean_resident(size_t resident) {
  size_t absent = atomic_load_explicit(&lean_absent, memory_order_relaxed);
  if (absent && hk_now_ms() >= atomic_load_explicit(&lean_look_ms, memory_order_relaxed) + HK_LEAN_LOOK_MS) absent = 0;
  return resident - hk_min(resident, absent);
}

/* A thread's view of free resident bytes: the layers' counts at its last
 * read, plus its changes since (hk_resident_mine), less the last look's
 * absent bytes.  Reading all counts per slow path missed on others' lines
 * (0.4 times the speed above).  Misses others' changes for at most
 * HK_LEAN_VIEW_POLLS polls; reread when over the cap; ticks trim by counts. */
#define HK_LEAN_VIEW_POLLS 32
static __thread struct {
  size_t seen;
  unsigned polls;
} lean_view;

/* (Under HAKMEM_SS_MEM_LEAN_DECOMMIT=OFF nothing is given back: no trim.) */
static bool over_lean_target(void) {
  if (!hk_opt.mem_lean || hk_opt.decommit == HK_DECOMMIT_OFF) return false;
  size_t cap = lean_cap_now(), absent = atomic_load_explicit(&lean_absent, memory_order_relaxed);
  if (lean_view.polls) {
    lean_view.polls--;
    if (lean_view.seen + hk_resident_mine <= cap + absent) return false;  /* a negative sum wraps: read afresh */
  }
  lean_view.polls = HK_LEAN_VIEW_POLLS;
  hk_resident_mine = 0;
  lean_view.seen = hk_purge_resident();
  return lean_resident(lean_view.seen) > cap;
}

/* Lean mode over its cap (tick_lock held): gives back free resident memory,
 * oldest first, down to half the cap: the next trim waits for as much again. */
static void lean_trim(void) {
  if (!hk_opt.mem_lean || hk_opt.decommit == HK_DECOMMIT_OFF) return;  /* nothing to give back: no mincore scan */
  size_t cap = lean_cap_now();
  if (lean_resident(hk_purge_resident()) <= cap) return;
  uint64_t now = hk_now_ms();
  atomic_store_explicit(&lean_absent, hk_huge_nonresident(), memory_order_relaxed);
  atomic_store_explicit(&lean_look_ms, now, memory_order_relaxed);
  size_t resident = lean_resident(hk_purge_resident());
  if (resident <= cap) return;
  /* an exchange: a time stored meanwhile is read here or left for the next trim */
  uint64_t retaken_ms = atomic_exchange_explicit(&hk_lean_retaken_ms, 0, memory_order_relaxed);
  atomic_store_explicit(&hk_lean_retaken, 0, memory_order_relaxed);
  if (retaken_ms && retaken_ms - lean_trim_ms <= 4 * hk_max(hk_opt.purge_delay_ms, 1)) {
    /* what the last trim gave back was taken again at once: the cap was too low */
    cap = hk_min(cap * 2, lean_target() * HK_LEAN_CAP_GROWTH);
    atomic_store_explicit(&lean_cap, cap, memory_order_relaxed);
    if (resident <= cap) return;
  }
  size_t want = resident - cap / 2, bytes = 0;
  for (int mode = HK_PURGE_OLD; mode <= HK_PURGE_DIRTY && bytes < want; mode++) {  /* old in every layer first */
    bytes += hk_region_purge(mode, want - bytes, NULL);
  }
  atomic_store_explicit(&hk_lean_trimmed, bytes, memory_order_relaxed);
  atomic_store_explicit(&lean_absent, 0, memory_order_relaxed);  /* what it gave back may have been of it */
  lean_trim_ms = now;
  lean_quiet_ticks = 0;
}

/* A tick: a cap long without a trim halves back towards the target. */
static void lean_quiet(void) {
  if (++lean_quiet_ticks < HK_LEAN_QUIET_TICKS) return;
  lean_quiet_ticks = 0;
  atomic_store_explicit(&lean_cap, hk_max(lean_cap_now() / 2, lean_target()), memory_order_relaxed);
}

/* Runs a tick; the caller holds tick_lock.  `pending` is cleared first: a
 * layer left with memory to give back later says so again. */
static void tick(uint64_t now) {
  atomic_store_explicit(&next_tick, now + hk_max(hk_opt.purge_delay_ms, 1), memory_order_relaxed);
  atomic_store(&hk_purge_pending, false);  /* before the layers' locks, which order it (counters.c) */
  hk_central_purge(HK_PURGE_DUE);
  size_t huge = 0;  /* left alone where nothing is decommitted */
  hk_region_purge(HK_PURGE_DUE, 0, &huge);
  if (huge) atomic_store_explicit(&lean_absent, 0, memory_order_relaxed);
  if (hk_opt.mem_lean) lean_quiet();
  lean_trim();
}

static void tick_if_due(void) {
  uint64_t now = hk_now_ms();
  if (now < atomic_load_explicit(&next_tick, memory_order_relaxed) || hk_trylock(&tick_lock)) return;
  /* still due: another thread may have run the tick between the two looks */
  if (now >= atomic_load_explicit(&next_tick, memory_order_relaxed)) tick(now);
  hk_unlock(&tick_lock);
}

static void *purger_main(void *arg) {
  atomic_store(&purger_tid, hk_os_tid());
  hk_lock(&purger_lock);
  while (atomic_load(&purger_state) != PURGER_STOPPING) {
    /* Announced before `pending` is read: a thread setting `pending` then
     * reads `purger_sleeping`, so one of the two sees the other (seq_cst,
     * both sides). */
    atomic_store(&purger_sleeping, true);
    if (!atomic_load(&hk_purge_pending)) {
      pthread_cond_wait(&purger_wake, &purger_lock);
      continue;
    }
    atomic_store(&purger_sleeping, false);  /* a stale true costs a signal */
    uint64_t now = hk_now_ms(), due = atomic_load_explicit(&next_tick, memory_order_relaxed);
    if (now < due) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t ns = (uint64_t)ts.tv_nsec + (due - now) * 1000000;
      ts.tv_sec += (time_t)(ns / 1000000000);
      ts.tv_nsec = (long)(ns % 1000000000);
      pthread_cond_timedwait(&purger_wake, &purger_lock, &ts);
      continue;
    }
    /* Waits for a tick or trim under way rather than spinning on the lock:
     * a lean trim on another thread holds it for milliseconds. */
    hk_unlock(&purger_lock);
    hk_lock(&tick_lock);
    now = hk_now_ms();
    if (now >= atomic_load_explicit(&next_tick, memory_order_relaxed)) tick(now);
    hk_unlock(&tick_lock);
    hk_lock(&purger_lock);
  }
  hk_unlock(&purger_lock);
  return arg;
}

/* The kernel refuses a new user namespace to a process of more than one
 * thread (EINVAL), and a thread is gone from it only once reaped, after
 * its pthread_join would return: the wait is for its id to name no thread
 * (tgkill's ESRCH), a second at most. */
bool hk_purger_stop(void) {
  int running = PURGER_RUNNING;
  if (!atomic_compare_exchange_strong(&purger_state, &running, PURGER_STOPPING)) return false;
  hk_lock(&purger_lock);
  pthread_cond_signal(&purger_wake);
  hk_unlock(&purger_lock);
  int error = errno;  /* nanosleep's EINTR */
  pid_t pid = getpid(), tid;
  struct timespec pause = {0, 100000};
  for (unsigned i = 0; i < 10000 && !((tid = atomic_load(&purger_tid)) && hk_os_thread_gone(pid, tid)); i++)
    nanosleep(&pause, NULL);
  errno = error;
  return true;
}

void hk_purger_resume(void) {
  atomic_store(&purger_tid, 0);
  atomic_store(&purger_state, PURGER_OFF);
  hk_purge_init();
}

/* Starts the purger thread, with no lock held (pthread_create allocates). */
static void purger_start(void) {
  int off = PURGER_OFF;
  if (!atomic_compare_exchange_strong(&purger_state, &off, PURGER_STARTING)) return;
  atomic_store_explicit(&hk_purger_off, false, memory_order_relaxed);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&purger_wake, &attr);
  pthread_condattr_destroy(&attr);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  /* the thread inherits: no signal is ever delivered to it */
  pthread_t t;
  bool ok = pthread_create(&t, NULL, purger_main, NULL) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!ok) return;  /* stays STARTING: never tried again, ticks stay on the slow paths */
  pthread_setname_np(t, "hakmem-purge");
  pthread_detach(t);
  atomic_store(&purger_state, PURGER_RUNNING);
}

void hk_purge_poll_slow(bool from_malloc) {
  /* The purger starts once the heap has held HK_PURGER_START, so that a
   * program that then frees it and idles has it; by a malloc, and not from
   * another library's fork handler (hk_fork_depth): the child's handler
   * would take the new thread for none, and start a second. */
  if (from_malloc && atomic_load_explicit(&hk_purger_off, memory_order_relaxed) && !hk_fork_depth &&
      atomic_load_explicit(&hk_out_peak, memory_order_relaxed) >= HK_PURGER_START) {
    int error = errno;  /* malloc leaves errno alone: pthread_create, naming the thread */
    purger_start();
    errno = error;
  }
  if (!atomic_load_explicit(&hk_purge_pending, memory_order_relaxed)) return;
  if (over_lean_target()) {  /* waits for a tick under way rather than skip the trim */
    hk_lock(&tick_lock);
    lean_trim();
    hk_unlock(&tick_lock);
  }
  if (atomic_load(&purger_state) != PURGER_RUNNING) {
    tick_if_due();
  } else if (atomic_load(&purger_sleeping)) {
    hk_lock(&purger_lock);
    pthread_cond_signal(&purger_wake);
    hk_unlock(&purger_lock);
  }
}

/* malloc_trim, and out of memory before a last try: this thread's cache goes
 * back, then all free memory (but others' caches) to the OS; true if any. */
bool hk_purge_all(void) {
  hk_tcache_flush(&hk_tc);
  hk_lock(&tick_lock);
  hk_central_purge(HK_PURGE_ALL);
  size_t bytes = hk_region_purge(HK_PURGE_ALL, 0, NULL);
  hk_unlock(&tick_lock);
  return bytes > 0;
}

/* fork: the purger's and the tick's locks come first in the lock order. */
void hk_purge_fork_lock(void) {
  hk_lock(&purger_lock);
  hk_lock(&tick_lock);
}

void hk_purge_fork_unlock(bool child) {
  if (!child) {
    hk_unlock(&tick_lock);
    hk_unlock(&purger_lock);
    return;
  }
  /* The child has no purger thread: it starts its own if it needs one.  It
   * has one thread: any order. */
  pthread_mutex_init(&tick_lock, NULL);
  pthread_mutex_init(&purger_lock, NULL);
  atomic_store(&purger_state, PURGER_OFF);
  atomic_store(&purger_sleeping, false);
  hk_purge_init();
}
