/* SPDX-License-Identifier: MIT */
/* Process set-up (on the first call, whoever makes it: ld.so, a constructor,
 * main), the thread-exit hook and fork safety. */
#include <sys/random.h>
#include <time.h>
#include <sys/single_threaded.h>
#include "service/service.h"

/* Stored (release) once all the set-up is done, read (acquire) before what
 * it set up is used (keys, options, classes, arenas, the map): a thread older
 * than the set-up is ordered after it by nothing else. */
atomic_bool hk_ready;
atomic_bool hk_route_plain;

/* A key no program writes by chance: random, else from the clock and the
 * address space layout; never 0 (the contents of fresh memory). */
static uint64_t random_key(void) {
  uint64_t k = 0;
  if (hk_keep_errno(getrandom(&k, sizeof k, GRND_NONBLOCK)) != sizeof k) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    k = ((uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uintptr_t)&ts) * 0x9e3779b97f4a7c15ull;
  }
  return k | 1;
}
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* Lock order: an exiting thread's printing of its traffic, the heap
 * profile's, the purger's and the tick's, the thread-cache registry, a
 * class's central lock (a small class's before a large one's), an arena's,
 * the class map's protection, the space's slots. */
__thread bool hk_forking __attribute__((tls_model("initial-exec")));

__thread unsigned hk_locks_held __attribute__((tls_model("initial-exec")));

/* A fork takes no lock where one would wait forever or is not needed: the
 * process has one thread (as glibc's malloc does), the forking thread holds
 * an allocator lock (a signal handler interrupted the allocator), or another
 * fork's handlers hold them all; the child gets the locks anew all the same,
 * and after a fork from a signal handler beside other threads should only
 * exec or _exit (docs/DESIGN.md, fork).  Forks nest (a signal handler's fork
 * between another fork's handlers): each level keeps what it found. */
typedef struct fork_level {
  bool unlocked;  /* this fork took no lock */
  bool forking;   /* hk_forking as it was */
  unsigned held;  /* hk_locks_held as it was */
} fork_level_t;
#define FORK_LEVELS 4
static __thread fork_level_t fork_levels[FORK_LEVELS];
__thread unsigned hk_fork_depth __attribute__((tls_model("initial-exec")));

static void fork_prepare(void) {
  if (hk_fork_depth == FORK_LEVELS) hk_fatal("fork: nested too deep in signal handlers", NULL);
  fork_level_t *l = &fork_levels[hk_fork_depth];
  *l = (fork_level_t){__libc_single_threaded || hk_locks_held || hk_forking, hk_forking, hk_locks_held};
  hk_fork_depth++;
  /* the level in place before locks and hk_forking change: only a signal
   * handler on this thread reads it, so the compiler's order is enough */
  atomic_signal_fence(memory_order_seq_cst);
  if (l->unlocked) {
    /* with other threads running, what other handlers allocate takes its
     * locks: only a lock this thread holds would wait forever */
    hk_forking = l->forking || (l->held && __libc_single_threaded);
    return;
  }
  hk_stats_fork_lock();
  hk_prof_fork_lock();
  hk_purge_fork_lock();
  hk_tcache_fork_lock();
  hk_central_fork_lock();
  hk_region_fork_lock();
  hk_class_map_fork_lock();
  hk_forking = true;
}
static void fork_after(bool child) {
  if (!hk_fork_depth) return;  /* a prepare handler registered too late to have run */
  fork_level_t l = fork_levels[hk_fork_depth - 1];
  hk_forking = false;
  if (!l.unlocked || child) {
    hk_class_map_fork_unlock(child);
    hk_region_fork_unlock(child);
    hk_central_fork_unlock(child);
    hk_tcache_fork_unlock(child, !l.unlocked);
    hk_purge_fork_unlock(child);
    hk_prof_fork_unlock(child);
    hk_stats_fork_unlock(child);
  }
  if (child) hk_locks_held = l.held;  /* the child's locks are new, but for those its thread's frames let go */
  hk_forking = l.forking;
  atomic_signal_fence(memory_order_seq_cst);  /* the state restored before the level is let go, as above */
  hk_fork_depth--;
}
static void fork_parent(void) { fork_after(false); }
static void fork_child(void) { fork_after(true); }

/* A thread's exit (its key's destructor): its cache goes back, its traffic
 * is printed if asked, and a tick runs if one is due. */
static void thread_exit(void *arg) {
  (void)arg;
  if (hk_opt.front_dump) {
    hk_front_t counters[HK_NCLASS + 1];
    if (!hk_thread_exit(counters)) return;
    hk_front_print("thread", counters);
  } else if (!hk_thread_exit(NULL)) {
    return;
  }
  hk_purge_poll(false);
}

void hk_process_init_slow(void) {
  bool first = false;
  hk_lock(&init_lock);
  if (!atomic_load_explicit(&hk_ready, memory_order_relaxed)) {  /* relaxed: stored under this lock */
    hk_fast.free_key = random_key();  /* before any block exists */
    if (HAK_HARDENED) hk_fast.link_key = random_key();
    hk_options_init(hk_os_huge_pages_available());
    hk_purge_init();
    hk_prof_init();
    hk_size_classes_init();
    hk_arenas_init(hk_os_cpus());
    hk_central_init(hk_os_cpus());
    static uint32_t magic[256];
    static uint64_t magic_first[256];
    hk_class_magic_fill(magic, magic_first);
    hk_class_map_init(magic, magic_first);
    pthread_key_t key;
    hk_tcache_init(pthread_key_create(&key, thread_exit) == 0 ? &key : NULL);
    atomic_store_explicit(&hk_ready, true, memory_order_release);
    atomic_store_explicit(&hk_route_plain, !hk_prof_on, memory_order_release);  /* the router reads it (acquire) */
    first = true;
  }
  hk_unlock(&init_lock);
  /* May allocate, so only once the allocator is ready. */
  if (first) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    hk_os_tid_init();
    if (hk_opt.verbose) hk_options_print();
  }
}

__attribute__((constructor)) static void hk_load(void) { hk_process_init(); }

/* The reports at exit take the allocator's locks: exit() from a signal
 * handler that interrupted malloc or free on this thread, one held, would
 * wait for ever. */
__attribute__((destructor)) static void hk_unload(void) {
  if (hk_locks_held) {
    if (hk_opt.os_stats || hk_opt.stats || hk_opt.front_metrics || hk_opt.front_dump || hk_prof_on)
      hk_message("hakmem: reports at exit left out: exit() was called inside malloc or free (from a signal handler)\n");
    return;
  }
  hk_stats_at_exit();
  hk_prof_at_exit();
}
