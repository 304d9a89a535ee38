/* SPDX-License-Identifier: MIT */
/* Services: the purge schedule (purge.c), statistics (stats.c), the heap
 * profile (prof.c), and the process's set-up, thread exit and fork (init.c). */
#ifndef HK_SERVICE_H
#define HK_SERVICE_H

#include "thread/thread.h"

/* ---- the purge schedule (purge.c): when free memory goes back to the OS ---- */
HK_HIDDEN size_t hk_purge_resident(void);        /* bytes free but still resident, all layers */
HK_HIDDEN void hk_purge_init(void);
HK_HIDDEN void hk_purge_poll_slow(bool from_malloc);
extern atomic_bool hk_purger_off HK_HIDDEN;  /* the purger thread is asked for and not started yet */
HK_HIDDEN bool hk_purge_all(void);
/* The purger thread ended, for a call that needs the process to have one
 * thread (unshare, setns: api/override.c); false if none ran.  Then
 * hk_purger_resume lets a later malloc start it again. */
HK_HIDDEN bool hk_purger_stop(void);
HK_HIDDEN void hk_purger_resume(void);
HK_HIDDEN void hk_purge_fork_lock(void);
HK_HIDDEN void hk_purge_fork_unlock(bool child);
/* Called by the slow paths, with no lock held: runs a tick if one is due.
 * Only malloc's may start the purger thread (from_malloc): the C library
 * frees a joined thread's TLS under a lock that creating a thread takes. */
static inline void hk_purge_poll(bool from_malloc) {
  if (hk_unlikely(atomic_load_explicit(&hk_purge_pending, memory_order_relaxed) ||
                  (from_malloc && atomic_load_explicit(&hk_purger_off, memory_order_relaxed))))
    hk_purge_poll_slow(from_malloc);
}

/* ---- process set-up (init.c) ------------------------------------------------ */
extern atomic_bool hk_ready HK_HIDDEN;
extern atomic_bool hk_route_plain HK_HIDDEN;  /* set up, and no heap profile: the router's one test */
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
HK_HIDDEN hak_stats_t *hk_stats_snapshot(void);  /* hak_stats_get's, mapped; NULL without memory */
HK_HIDDEN void hk_stats_drop(hak_stats_t *s);

/* ---- the sampled heap profile (prof.c): called from the slow paths only ------ */
extern bool hk_prof_on HK_HIDDEN;             /* set at start-up, never changed */
HK_HIDDEN void hk_prof_init(void);
/* Bytes handed out by a refill: the samples they cross (the thread's
 * countdown to its next sample, drawn anew at each). */
extern __thread int64_t hk_prof_countdown __attribute__((tls_model("initial-exec"))) HK_HIDDEN;
HK_HIDDEN uint64_t hk_prof_crossed(size_t bytes);
static inline uint64_t hk_prof_count(size_t bytes) {
  hk_prof_countdown -= (int64_t)bytes;  /* below 2^48 */
  return hk_likely(hk_prof_countdown > 0) ? 0 : hk_prof_crossed(bytes);
}
/* Records p, a block of `size` usable bytes taken for a sample of that
 * weight; stand_in: the usable size of the class's block a huge block
 * stands for, else 0.  p NULL: a stand-in kept from a free, if one is.
 * `flagged`: p is a large class's block, which its class map entry says
 * is sampled (its free calls hk_prof_forget flagged too), else a huge one.
 * Returns the block recorded; NULL if none is or the tables are full. */
HK_HIDDEN void *hk_prof_sample(void *p, size_t size, size_t stand_in, uint64_t crossings, bool flagged);
HK_HIDDEN size_t hk_prof_stand_in(const void *p, bool *freed);  /* p's stand_in (kept if *freed); 0 if none */
typedef struct { uint64_t word[4]; } hk_prof_lifted_t;    /* a sampled block's record, out while realloc moves it */
HK_HIDDEN bool hk_prof_lift(const void *p, hk_prof_lifted_t *lifted);  /* false: p is not sampled */
HK_HIDDEN void hk_prof_land(void *p, const hk_prof_lifted_t *lifted);  /* the lifted record, now p's; NULL: gone */
typedef enum { HK_PROF_UNSAMPLED, HK_PROF_FORGOTTEN, HK_PROF_KEPT, HK_PROF_FREED_TWICE } hk_prof_freed_t;
HK_HIDDEN hk_prof_freed_t hk_prof_forget(void *p, bool flagged);  /* p is freed: what its record said, and became */
HK_HIDDEN void hk_prof_at_exit(void);
/* The return addresses of the caller's frame and those above it, up to max,
 * as backtrace() gives them, from rules kept per address (unwind.c); 0 if
 * a frame's rule is not one it keeps.  Takes no lock. */
HK_HIDDEN unsigned hk_unwind(void **pc, unsigned max);
HK_HIDDEN void hk_unwind_forked(void);  /* in a fork's child: no thread is making a rule */
HK_HIDDEN void hk_prof_fork_lock(void);
HK_HIDDEN void hk_prof_fork_unlock(bool child);

#endif
