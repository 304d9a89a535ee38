/* SPDX-License-Identifier: MIT */
/* cpu_pingpong: how far apart CPUs 0 and 1 are, as the time a cache line
 * takes to go from one to the other and back (two pinned threads taking
 * turns to write one word; the median of 5 rounds of 100 000 trips, in ns).
 * Not an allocator benchmark: a virtual machine's CPUs may share a core one
 * hour and sit on different dies the next (about 120 ns against 450 ns on
 * the machine of docs/PERFORMANCE.md), and the benchmarks that hand blocks
 * between threads (prodcons_batch above all) move with it.  The reports of
 * `make bench` and `make bench-apps` give its figure. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench.h"

enum { TRIPS = 100000, ROUNDS = 5 };
static _Atomic long turn __attribute__((aligned(64)));

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void take_turns(long first) {
  for (long i = 0; i < TRIPS; i++) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + first) {
    }
    atomic_store_explicit(&turn, 2 * i + first + 1, memory_order_release);
  }
}

static void *second(void *arg) {
  pin(1);
  take_turns(1);
  return arg;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  double ns[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    pthread_t t;
    atomic_store(&turn, 0);
    pin(0);
    if (pthread_create(&t, NULL, second, NULL)) return 1;
    double start = now_sec();
    take_turns(0);
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * TRIPS) {
    }
    ns[r] = (now_sec() - start) * 1e9 / TRIPS;
    pthread_join(t, NULL);
  }
  qsort(ns, ROUNDS, sizeof ns[0], by_value);
  printf("%.0f\n", ns[ROUNDS / 2]);
  return 0;
}
