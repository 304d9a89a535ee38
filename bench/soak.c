/* SPDX-License-Identifier: MIT */
/* soak: one workload run for SECONDS, reported every EPOCH seconds, to see
 * what a long run does that a short one hides: throughput that drifts, a
 * resident set that creeps up, system calls that never stop.  The workload
 * (workload.h) keeps its state from one epoch to the next; the main thread
 * only wakes at each epoch's end, reads the counters and prints
 *
 *   EPOCH n=3 t_s=3.000 ops=... ops_per_sec=... ns_per_op=... rss_kb=... minflt=... maps=...
 *
 * ops: malloc and free calls done in the epoch, all threads; ns_per_op: the
 * epoch's wall time divided by them; rss_kb: the resident set at its end;
 * minflt: the page faults taken in it; maps: the process's mappings at its
 * end.  Under an allocator that exports hak_os_stats (hakmem) the line adds
 * its own count of the epoch's mmap, munmap, madvise and mremap calls and
 * the bytes it has mapped (mapped_kb).  Then the RESULT line.
 *
 * SOAK_CPUS=a,b,...: every thread runs on CPU a in the first epoch, b in the
 * next, and so on round the list (the line says cpu=), so that two soaks
 * side by side, given the list in two rotations, take turns on each CPU and
 * neither's figures are one CPU's.  SOAK_START=t: the first epoch starts at
 * t, a CLOCK_MONOTONIC time in seconds (default: now); two soaks side by
 * side are given the same, so that they swap CPUs at the same instants.
 *
 * Once the workload runs, nothing but the workload calls malloc or free:
 * stdout's buffer is static, /proc is read with raw system calls.
 *
 * WORKLOAD, with the parameters of `make bench`:
 *   random_mixed  random_mixed 400 slots, 16..1040 B, single thread
 *   larson        larson 2 threads, 1000 slots, 16..1024 B
 *   thread_churn  thread_churn 4 threads a round, 100000 replacements each,
 *                 1000 live blocks, up to 2 MiB; rounds until the end */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "../include/hakmem.h"
#include "workload.h"

/* random_mixed iterations between two publications of the work done. */
#define MIXED_BATCH 65536

static uint64_t seed;
static pthread_t driver;

static void *mixed_driver(void *arg) {
  struct mixed *m = arg;
  while (!stopped()) {
    mixed_run(m, MIXED_BATCH);
    publish(MIXED_BATCH);
  }
  return NULL;
}

static struct mixed mixed;

static void mixed_start(void) {
  mixed_init(&mixed, 400, seed, 16, 1040);
  if (pthread_create(&driver, NULL, mixed_driver, &mixed)) {
    perror("pthread_create");
    exit(1);
  }
}

static void mixed_finish(void) {
  pthread_join(driver, NULL);
  mixed_fini(&mixed);
}

static void larson_begin(void) { larson_start(2, 1000, seed, 16, 1024); }

static void larson_finish(void) {
  larson_join();
  larson_fini();
}

static void *churn_driver(void *arg) {
  (void)arg;
  for (uint64_t r = 0; !stopped(); r++) churn_round(seed, r);
  return NULL;
}

static void churn_start(void) {
  churn_init(4, 100000, 1000, 2u << 20);
  if (pthread_create(&driver, NULL, churn_driver, NULL)) {
    perror("pthread_create");
    exit(1);
  }
}

static void churn_finish(void) {
  pthread_join(driver, NULL);
  churn_fini();
}

static const struct workload {
  const char *name, *params;
  void (*start)(void), (*finish)(void);
} workloads[] = {
    {"random_mixed", "ws=400 min=16 max=1040", mixed_start, mixed_finish},
    {"larson", "threads=2 slots=1000 min=16 max=1024", larson_begin, larson_finish},
    {"thread_churn", "threads=4 ops=100000 live=1000 max=2097152", churn_start, churn_finish},
};

/* The number of mappings of the process: lines of /proc/self/maps, read
 * with raw system calls. */
static long mappings(void) {
  char buf[4096];
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return -1;
  long lines = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
  close(fd);
  return lines;
}

/* SOAK_CPUS, parsed: at most 64 CPUs. */
static int cpus[64], ncpus;

static void cpus_init(void) {
  const char *list = getenv("SOAK_CPUS");
  for (char *end; list && *list && ncpus < 64; list = *end == ',' ? end + 1 : end) {
    long c = strtol(list, &end, 10);
    if (end == list || c < 0 || c >= CPU_SETSIZE) {
      fprintf(stderr, "soak: bad SOAK_CPUS\n");
      exit(2);
    }
    cpus[ncpus++] = (int)c;
  }
}

/* An entry of /proc/self/task as getdents64 returns it (linux_dirent64). */
struct task_entry {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

/* Puts every thread of the process on one CPU; threads started later take
 * their creator's.  Returns the CPU, or -1 without SOAK_CPUS.  The threads
 * are listed with getdents64 into a static buffer, not opendir, which
 * would malloc a buffer at every epoch. */
static int pin_all(uint64_t epoch_index) {
  static _Alignas(8) char buf[4096];
  if (!ncpus) return -1;
  int cpu = cpus[epoch_index % (uint64_t)ncpus];
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
  for (long n; fd >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
    for (long off = 0; off < n; off += ((struct task_entry *)(buf + off))->reclen) {
      const char *name = ((struct task_entry *)(buf + off))->name;
      if (name[0] != '.') sched_setaffinity((pid_t)atoi(name), sizeof set, &set);
    }
  if (fd >= 0) close(fd);
  return cpu;
}

/* SOAK_START, or now without it: when the first epoch starts. */
static double start_time(void) {
  const char *text = getenv("SOAK_START");
  if (!text) return now_sec();
  char *end;
  double t = strtod(text, &end);
  if (end == text || *end || !(t > 0)) {
    fprintf(stderr, "soak: bad SOAK_START\n");
    exit(2);
  }
  if (now_sec() > t) {  /* started late: its first epoch would be short, or several empty */
    fprintf(stderr, "soak: SOAK_START has passed (%.3f s ago)\n", now_sec() - t);
    exit(2);
  }
  return t;
}

static void sleep_until(double t) {
  struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

int main(int argc, char **argv) {
  args_init(argc, "soak [random_mixed|larson|thread_churn [SECONDS [EPOCH [SEED]]]]", 4);
  const struct workload *w = NULL;
  const char *name = argc > 1 ? argv[1] : "random_mixed";
  for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++)
    if (strcmp(name, workloads[i].name) == 0) w = &workloads[i];
  if (!w) usage();
  double duration = arg_double(argc, argv, 2, 60, 7 * 86400);
  double epoch = arg_double(argc, argv, 3, 1, duration);
  seed = arg_u64(argc, argv, 4, 1, 0, UINT64_MAX);
  uint64_t epochs = (uint64_t)(duration / epoch + 1e-9);
  stdout_static_buffer();

  /* hakmem's own count of its system calls, when hakmem is the allocator */
  void (*os_stats)(hak_os_stats_t *) = (void (*)(hak_os_stats_t *))dlsym(RTLD_DEFAULT, "hak_os_stats");
  hak_os_stats_t os_before = {0}, os_now;
  if (os_stats) os_stats(&os_before);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  long minflt_before = ru.ru_minflt;
  /* The report's own code (the C library's formatting of numbers) runs once
   * before the first epoch, so that the pages it faults in (about 150 KiB of
   * the C library's) count from the start and not as growth after epoch 1. */
  char warm[256];
  snprintf(warm, sizeof warm, "%.3f %.0f %llu %ld %ld", now_sec(), 1.0, 1ull, rss_kb(), mappings());

  cpus_init();
  /* Soaks side by side end their epochs together: on clocks of their own,
   * the one started later would share the CPU the other has just moved to
   * until its own epoch ended. */
  double t0 = start_time(), t_before = t0;
  sleep_until(t0);
  int cpu = pin_all(0);
  w->start();
  uint64_t ops_before = 0;
  for (uint64_t n = 1; n <= epochs; n++) {
    sleep_until(t0 + (double)n * epoch);
    int next = pin_all(n);
    uint64_t ops = atomic_load_explicit(&bench_ops_done, memory_order_relaxed);
    double t = now_sec();
    getrusage(RUSAGE_SELF, &ru);
    if (os_stats) os_stats(&os_now);
    long rss = rss_kb(), maps = mappings();
    double secs = t - t_before;
    uint64_t done = ops - ops_before;
    printf("EPOCH n=%llu t_s=%.3f ops=%llu ops_per_sec=%.0f ns_per_op=%.3f rss_kb=%ld minflt=%ld maps=%ld",
           (unsigned long long)n, t - t0, (unsigned long long)done, (double)done / secs,
           done ? secs * 1e9 / (double)done : 0.0, rss, ru.ru_minflt - minflt_before, maps);
    if (cpu >= 0) printf(" cpu=%d", cpu);
    cpu = next;
    if (os_stats) {
      printf(" mmap=%llu munmap=%llu madvise=%llu mremap=%llu mapped_kb=%llu",
             os_now.mmap_calls - os_before.mmap_calls, os_now.munmap_calls - os_before.munmap_calls,
             os_now.madvise_calls - os_before.madvise_calls, os_now.mremap_calls - os_before.mremap_calls,
             os_now.mapped_bytes >> 10);
      os_before = os_now;
    }
    printf("\n");
    fflush(stdout);
    t_before = t;
    ops_before = ops;
    minflt_before = ru.ru_minflt;
  }
  atomic_store(&bench_stop, true);
  w->finish();

  printf("RESULT bench=soak workload=%s %s duration=%g epoch=%g seed=%llu epochs=%llu", w->name, w->params,
         duration, epoch, (unsigned long long)seed, (unsigned long long)epochs);
  result_end((double)ops_before, t_before - t0);
  return 0;
}
