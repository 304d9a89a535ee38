/* SPDX-License-Identifier: MIT */
/* Services: the purge schedule (purge.c), statistics (stats.c), and the
 * process's set-up, thread exit and fork (init.c). */
#ifndef HK_SERVICE_H
#define HK_SERVICE_H

#include "thread/thread.h"

/* ---- the purge schedule (purge.c): when free memory goes back to the OS ---- */
HK_HIDDEN size_t hk_purge_resident(void);        /* bytes free but still resident, all layers */
HK_HIDDEN void hk_purge_poll_slow(void);
HK_HIDDEN bool hk_purge_all(void);
HK_HIDDEN void hk_purge_fork_lock(void);
HK_HIDDEN void hk_purge_fork_unlock(bool child);
/* Called by the slow paths, with no lock held: runs a tick if one is due. */
static inline void hk_purge_poll(void) {
  if (hk_unlikely(atomic_load_explicit(&hk_purge_pending, memory_order_relaxed))) hk_purge_poll_slow();
}

/* ---- process set-up (init.c) ------------------------------------------------ */
extern atomic_bool hk_ready HK_HIDDEN;
HK_HIDDEN void hk_process_init_slow(void);
static inline void hk_process_init(void) {
  if (hk_unlikely(!atomic_load_explicit(&hk_ready, memory_order_acquire))) hk_process_init_slow();
}

/* ---- statistics (stats.c) --------------------------------------------------- */
HK_HIDDEN void hk_os_stats_print(void);
HK_HIDDEN void hk_front_print(const char *who, const hk_front_t *front);
HK_HIDDEN void hk_stats_fork_lock(void);
HK_HIDDEN void hk_stats_fork_unlock(bool child);
HK_HIDDEN void hk_stats_at_exit(void);

#endif
