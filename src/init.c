/* SPDX-License-Identifier: MIT */
/* Process set-up (on the first call, whoever makes it: ld.so, a constructor,
 * main), the thread-exit hook and fork safety. */
#include <sys/random.h>
#include <time.h>
#include <sys/single_threaded.h>
#include "internal.h"

atomic_bool hk_ready;

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
pthread_key_t hk_thread_key;
bool hk_thread_key_made;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* Lock order: an exiting thread's printing of its traffic, the purger's and the tick's, the
 * thread-cache registry, a class's central lock, an arena's, the huge blocks', the class
 * map's protection, the space's slots. */
__thread bool hk_forking __attribute__((tls_model("initial-exec")));

/* A process of one thread forks with no lock taken, as glibc's malloc
 * does: the one thread may be in a signal handler that interrupted the
 * allocator with a lock held, and would wait for itself; the child gets
 * the locks anew all the same. */
static bool fork_unlocked;

static void fork_prepare(void) {
  if ((fork_unlocked = __libc_single_threaded)) {
    hk_forking = true;
    return;
  }
  hk_stats_fork_lock();
  hk_purge_fork_lock();
  hk_tcache_fork_lock();
  hk_central_fork_lock();
  hk_superslab_fork_lock();
  hk_huge_fork_lock();
  hk_class_map_fork_lock();
  hk_forking = true;
}
static void fork_after(bool child) {
  hk_forking = false;
  if (fork_unlocked && !child) return;
  hk_class_map_fork_unlock(child);
  hk_huge_fork_unlock(child);
  hk_superslab_fork_unlock(child);
  hk_central_fork_unlock(child);
  hk_tcache_fork_unlock(child);
  hk_purge_fork_unlock(child);
  hk_stats_fork_unlock(child);
}
static void fork_parent(void) { fork_after(false); }
static void fork_child(void) { fork_after(true); }

void hk_process_init_slow(void) {
  bool first = false;
  hk_lock(&init_lock);
  if (!atomic_load_explicit(&hk_ready, memory_order_relaxed)) {
    hk_fast.free_key = random_key();  /* before any block exists */
    if (HAK_HARDENED) hk_fast.link_key = random_key();
    hk_options_init();
    hk_size_classes_init();
    hk_arenas_init(hk_os_cpus());
    hk_central_init(hk_os_cpus());
    hk_class_map_init();
    hk_thread_key_made = pthread_key_create(&hk_thread_key, hk_thread_exit) == 0;
    atomic_store_explicit(&hk_ready, true, memory_order_release);
    first = true;
  }
  hk_unlock(&init_lock);
  /* May allocate, so only once the allocator is ready. */
  if (first) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (hk_opt.verbose) hk_options_print();
  }
}

__attribute__((constructor)) static void hk_load(void) { hk_process_init(); }

__attribute__((destructor)) static void hk_unload(void) {
  hk_stats_at_exit();
}
