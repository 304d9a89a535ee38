/* SPDX-License-Identifier: MIT */
/* Counters: how layers tell those above of their work without a call up: free
 * memory awaiting purge (hk_purge_note), how much resident (hk_resident_add),
 * fresh memory taken (lean's cap learns from it), bytes out (stats' peak). */
#include <time.h>
#include "base/base.h"

/* Each on a line of its own: every thread's slow paths read the first,
 * threads moving bytes out write the others (two threads replacing 1-4 MiB
 * blocks ran 0.79 times as fast sharing one). */
#define HK_OWN_LINE __attribute__((aligned(HK_CACHELINE)))
/* Set (seq_cst) by a note, whose thread then polls, reading purger_sleeping
 * (seq_cst); the purger stores that, then reads this: one of the two sees the
 * other (purge.c).  Polls read it relaxed, a hint.  A tick clears it before
 * taking each layer's lock: memory written under a lock is in that tick's
 * pass, or the lock orders the clear before the note's read, which sets it
 * anew. */
atomic_bool hk_purge_pending HK_OWN_LINE;
__thread size_t hk_resident_mine;
/* Lean's learning, written by each trim and by any thread taking fresh
 * memory: relaxed, numbers only; a race with a trim counts bytes to the trim
 * before or after it. */
atomic_size_t hk_lean_trimmed HK_OWN_LINE;
atomic_size_t hk_lean_retaken HK_OWN_LINE;
_Atomic uint64_t hk_lean_retaken_ms HK_OWN_LINE;
/* Statistics: relaxed (the peak, on its own, only raised by compare-and-swap). */
atomic_llong hk_out_bytes HK_OWN_LINE;
atomic_size_t hk_out_peak HK_OWN_LINE;

uint64_t hk_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void hk_fresh_taken(size_t bytes) {
  if (!hk_opt.mem_lean) return;
  size_t before = atomic_fetch_add_explicit(&hk_lean_retaken, bytes, memory_order_relaxed);
  size_t half = atomic_load_explicit(&hk_lean_trimmed, memory_order_relaxed) / 2;
  if (half && before < half && before + bytes >= half)
    atomic_store_explicit(&hk_lean_retaken_ms, hk_now_ms(), memory_order_relaxed);
}

size_t hk_out_note_peak(size_t now) { return hk_atomic_max(&hk_out_peak, now); }

/* Signed: threads report in steps, and one may give back what another has
 * not reported taking yet. */
void hk_out_add(ptrdiff_t bytes) {
  long long now = atomic_fetch_add_explicit(&hk_out_bytes, bytes, memory_order_relaxed) + bytes;
  if (bytes > 0 && now > 0) hk_out_note_peak((size_t)now);
}
