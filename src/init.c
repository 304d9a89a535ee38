/* SPDX-License-Identifier: MIT */
/* Process set-up (on the first call, whoever makes it: ld.so, a constructor,
 * main), the thread-exit hook and fork safety. */
#include "internal.h"

atomic_bool hk_ready;
pthread_key_t hk_thread_key;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* Lock order: a class's central lock, the SuperSlab lock, the class map's. */
static void fork_prepare(void) {
  hk_central_fork_lock();
  hk_superslab_fork_lock();
  hk_class_map_fork_lock();
}
static void fork_parent(void) {
  hk_class_map_fork_unlock(false);
  hk_superslab_fork_unlock(false);
  hk_central_fork_unlock(false);
}
static void fork_child(void) {
  hk_class_map_fork_unlock(true);
  hk_superslab_fork_unlock(true);
  hk_central_fork_unlock(true);
}

void hk_process_init_slow(void) {
  bool first = false;
  pthread_mutex_lock(&init_lock);
  if (!atomic_load_explicit(&hk_ready, memory_order_relaxed)) {
    hk_options_init();
    hk_size_classes_init();
    hk_class_map_init();
    pthread_key_create(&hk_thread_key, hk_thread_exit);
    atomic_store_explicit(&hk_ready, true, memory_order_release);
    first = true;
  }
  pthread_mutex_unlock(&init_lock);
  /* May allocate, so only once the allocator is ready. */
  if (first) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (hk_opt.verbose)
      hk_message("hakmem: %s; warm_pool_size=%u purge_delay_ms=%u os_stats=%d\n", hak_version_string(),
                 hk_opt.warm_pool_size, hk_opt.purge_delay_ms, hk_opt.os_stats);
  }
}

__attribute__((constructor)) static void hk_load(void) { hk_process_init(); }

__attribute__((destructor)) static void hk_unload(void) {
  if (hk_opt.os_stats) hk_os_stats_print();
}
