/* SPDX-License-Identifier: MIT */
/* hakmem only.  A purge tick runs once per delay, whichever threads find it
 * due: memory freed just before a tick goes back one to two delays later,
 * never at once.  A thread that found the tick due and reached the tick's
 * lock only after another thread had run the whole tick ran a second one
 * (which gave back what the first had just aged).  Thread A is held for
 * 50 ms between its look at the schedule and its try of the lock (this
 * program's pthread_mutex_trylock, which the library linked into it calls:
 * the tick's is its only trylock); meanwhile the main thread frees a block
 * and runs the tick.  The block's memory must not go back (this program's
 * madvise sees it) before a whole delay has passed. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include "hakmem.h"
#include "testutil.h"

enum { DELAY_MS = 300, BLOCK = 100000 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static __thread bool hold_at_trylock;
static atomic_bool held;

int pthread_mutex_trylock(pthread_mutex_t *m) {
  static int (*real)(pthread_mutex_t *);
  if (!real) real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_trylock");
  if (hold_at_trylock) {
    hold_at_trylock = false;
    atomic_store(&held, true);
    usleep(50000);
  }
  return real(m);
}

static uintptr_t watch_lo, watch_hi;
static _Atomic double given_back_ms;

int madvise(void *p, size_t n, int advice) {
  uintptr_t a = (uintptr_t)p;
  double unset = 0;
  if (advice == MADV_DONTNEED && a < watch_hi && a + n > watch_lo)
    atomic_compare_exchange_strong(&given_back_ms, &unset, now_ms());
  return (int)syscall(SYS_madvise, p, n, advice);
}

static void poll_schedule(void) { free(malloc(3 << 20)); }  /* a huge block's slow paths look */

static atomic_bool go;

static void *late_thread(void *arg) {
  while (!atomic_load(&go)) usleep(100);
  hold_at_trylock = true;
  poll_schedule();
  return arg;
}

static void tick_runs_once(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, late_thread, NULL) == 0);
  void *keep = malloc(3 << 20);  /* the huge region stays */
  poll_schedule();               /* the first tick: the next is a delay away */
  char *x = malloc(BLOCK);
  CHECK(x != NULL);
  memset(x, 1, BLOCK);
  watch_lo = (uintptr_t)x;
  watch_hi = watch_lo + BLOCK;
  usleep((DELAY_MS + 20) * 1000);  /* a tick is due */
  atomic_store(&go, true);
  while (!atomic_load(&held)) usleep(100);
  free(x);
  hak_thread_flush();  /* its units back in their SuperSlab, free */
  double freed = now_ms();
  poll_schedule();     /* the tick: they are aged */
  CHECK(pthread_join(t, NULL) == 0);
  while (atomic_load(&given_back_ms) == 0 && now_ms() < freed + 4 * DELAY_MS) {
    usleep(10000);
    poll_schedule();
  }
  double after = atomic_load(&given_back_ms) - freed;
  printf("  freed block given back %.0f ms after its free (delay %d ms)\n", after, DELAY_MS);
  CHECK_MSG(atomic_load(&given_back_ms) != 0, "never given back");
  CHECK_MSG(after >= DELAY_MS * 2 / 3, "given back %.0f ms after its free", after);
  free(keep);
}

static const self_case_t cases[] = {
    {"tick_runs_once", tick_runs_once, {"HAKMEM_PURGE_DELAY_MS=300"}},
};

int main(int argc, char **argv) {
  test_init();
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 30);
}
