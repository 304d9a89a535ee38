/* SPDX-License-Identifier: MIT */
/* hakmem only.  Memory goes to and from the OS as it should:
 *
 * - freed big blocks (megabytes) and large blocks (up to 1 MiB), freed by
 *   their thread or by threads created later, are reused without a system
 *   call (hak_os_stats) and without page faults while the program keeps
 *   using memory of that size;
 * - malloc_trim(0) gives everything free back (RSS back to where it was) and
 *   says so, and says 0 when there is nothing left to give;
 * - with the balanced profile, memory freed by a program that then sits idle
 *   (no allocator call at all) goes back within seconds, by the purger
 *   thread; the speed profile starts no thread;
 * - a process forked while the purger runs works, and gets a purger of its
 *   own when it needs one;
 * - lean mode keeps the free resident memory near its target without waiting,
 *   the memory free the longest going back first, raises its cap for a
 *   program that keeps taking back what it gave, and counts the pages of
 *   freed big blocks the kernel holds, not their whole size.
 *
 * Cases that need other settings run the program again with them (the
 * options are read at start-up).  While idling, the program reads /proc with
 * raw system calls only, so that the allocator is not called at all. */
#include "testutil.h"

#include <dirent.h>
#include <malloc.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

/* ---- /proc without the allocator ----------------------------------------- */

static size_t read_file(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);
  if (fd >= 0) close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return n > 0 ? (size_t)n : 0;
}

static size_t rss_bytes(void) {
  char buf[128];
  unsigned long pages, resident;
  read_file("/proc/self/statm", buf, sizeof buf);
  CHECK(sscanf(buf, "%lu %lu", &pages, &resident) == 2);
  return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Threads of this process named hakmem-purge. */
static int purger_threads(void) {
  char buf[4096], path[64], comm[32];
  int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY), found = 0;
  long n;
  CHECK(fd >= 0);
  while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      struct dirent64 *d = (struct dirent64 *)(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "/proc/self/task/%s/comm", d->d_name);
      read_file(path, comm, sizeof comm);
      found += strcmp(comm, "hakmem-purge\n") == 0;
    }
  }
  close(fd);
  return found;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) CHECK(errno == EINTR);
}

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static unsigned long long os_calls(void) {
  hak_os_stats_t s;
  CHECK(get_os_stats(&s));
  return s.mmap_calls + s.munmap_calls + s.madvise_calls + s.mremap_calls;
}

/* ---- reuse ---------------------------------------------------------------- */

enum { BIG_LIVE = 16 };

/* Replaces random blocks of 2-24 MiB, writing each new one whole. */
static size_t replace_big(char **slot, rng_t *rng, int iterations) {
  size_t written = 0;
  for (int i = 0; i < iterations; i++) {
    size_t k = (size_t)rng_below(rng, BIG_LIVE), n = rng_range(rng, 2 * MiB, 24 * MiB);
    free(slot[k]);
    slot[k] = malloc(n);
    CHECK(slot[k] != NULL);
    memset(slot[k], i, n);
    written += n;
  }
  return written;
}

static void big_blocks_reused(void) {
  char *slot[BIG_LIVE] = {0};
  rng_t rng = {11};
  replace_big(slot, &rng, 200);
  unsigned long long calls = os_calls();
  long faults = minor_faults();
  size_t written = replace_big(slot, &rng, 300);
  unsigned long long new_calls = os_calls() - calls;
  long pages = (long)(written / 4096), new_faults = minor_faults() - faults;
  printf("  300 replacements (%zu MiB written): %llu OS calls, %ld page faults\n", written / MiB, new_calls,
         new_faults);
  CHECK_EQ(new_calls, 0);
  CHECK_MSG(new_faults < pages / 50, "%ld page faults for %ld pages written", new_faults, pages);
  for (int k = 0; k < BIG_LIVE; k++) free(slot[k]);
}

/* Each round's thread frees what the last round's left, and leaves half of
 * its own blocks (40 KiB to 900 KiB) to the next. */
static void *large_round(void *arg) {
  void **handover = arg;
  rng_t rng = {(uint64_t)(uintptr_t)arg};
  for (int i = 0; i < 64; i++) free(handover[i]);
  for (int i = 0; i < 128; i++) {
    size_t n = rng_range(&rng, 40000, 900000);
    void *p = malloc(n);
    CHECK(p != NULL);
    memset(p, i, n);
    if (i % 2) free(p);
    else handover[i / 2] = p;
  }
  return NULL;
}

static void run_large_rounds(void **handover, int rounds) {
  for (int r = 0; r < rounds; r++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, large_round, handover) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
}

static void large_blocks_reused_across_threads(void) {
  static void *handover[64];
  run_large_rounds(handover, 8);
  unsigned long long calls = os_calls();
  run_large_rounds(handover, 16);
  unsigned long long new_calls = os_calls() - calls;
  printf("  16 more rounds of threads: %llu OS calls\n", new_calls);
  CHECK_EQ(new_calls, 0);
  for (int i = 0; i < 64; i++) free(handover[i]);
}

/* ---- giving back ---------------------------------------------------------- */

static void **fill(size_t count, size_t size) {
  void **v = malloc(count * sizeof *v);
  CHECK(v != NULL);
  for (size_t i = 0; i < count; i++) {
    v[i] = malloc(size);
    CHECK(v[i] != NULL);
    memset(v[i], 1, size);
  }
  return v;
}

static void release(void **v, size_t count) {
  rng_t rng = {3};
  for (size_t i = count; i > 1; i--) {  /* scrambled, as real programs free */
    size_t j = (size_t)rng_below(&rng, i);
    void *t = v[j];
    v[j] = v[i - 1];
    v[i - 1] = t;
  }
  for (size_t i = 0; i < count; i++) free(v[i]);
  free(v);
}

static void trim_gives_everything_back(void) {
  size_t start = rss_bytes(), count = 25 * MiB / 1024;
  release(fill(count, 1024), count);
  size_t before = rss_bytes();
  int r = malloc_trim(0);
  size_t after = rss_bytes();
  printf("  RSS %zu KiB at start, %zu KiB after freeing 25 MiB, %zu KiB after malloc_trim (it said %d)\n",
         start / 1024, before / 1024, after / 1024, r);
  CHECK_EQ(r, 1);
  CHECK_MSG(after < start + MiB, "malloc_trim left %zu KiB above the start", (after - start) / 1024);
  CHECK_EQ(malloc_trim(0), 0);
}

/* Frees a peak of small and medium blocks, then waits without calling the
 * allocator; returns how long RSS took to come back within `slack` of where
 * it started, or -1 if it did not within `wait_ms`. */
static long idle_after_peak(size_t peak, size_t slack, long wait_ms) {
  size_t start = rss_bytes(), small = peak / 2 / 100, medium = peak / 2 / 5000;
  void **a = fill(small, 100), **b = fill(medium, 5000);
  printf("  RSS %zu MiB at the peak\n", rss_bytes() / MiB);
  release(a, small);
  release(b, medium);
  printf("  RSS %zu MiB after freeing\n", rss_bytes() / MiB);
  for (long t = 0; t <= wait_ms; t += 50) {
    if (rss_bytes() < start + slack) return t;
    sleep_ms(50);
  }
  printf("  RSS %zu MiB after %ld ms idle\n", rss_bytes() / MiB, wait_ms);
  return -1;
}

static void idle_memory_goes_back(void) {
  long t = idle_after_peak(256 * MiB, 32 * MiB, 5000);
  printf("  back within 32 MiB of the start after %ld ms idle\n", t);
  CHECK(t >= 0);
  CHECK_EQ(purger_threads(), 1);
}

static void speed_starts_no_thread(void) {
  void **a = fill(100000, 100);
  release(a, 100000);
  sleep_ms(300);
  CHECK_EQ(purger_threads(), 0);
}

static void fork_with_purger_running(void) {
  idle_memory_goes_back();
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(30);
    CHECK_EQ(purger_threads(), 0);  /* the parent's does not exist here */
    long t = idle_after_peak(128 * MiB, 32 * MiB, 5000);
    printf("  child: back after %ld ms idle\n", t);
    CHECK(t >= 0);
    CHECK_EQ(purger_threads(), 1);
    _exit(0);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %s", describe_status(status));
  void **a = fill(1000, 300);  /* the parent goes on */
  release(a, 1000);
}

/* Lean mode gives back what goes over its target (8 MiB) at once: just after
 * 128 MiB were freed, RSS is within the target plus what the caches pin: the
 * thread's blocks of the class (up to 64, each holding its 64 KiB slab: 4
 * MiB), the batches parked in the central cache (up to 2 MiB), the freed
 * pointer array in the large-block cache (0.5 MiB).  Ten runs of this case
 * here: 13.0-16.6 MiB above the start. */
static void lean_keeps_little(void) {
  size_t start = rss_bytes(), count = 128 * MiB / 2000;
  release(fill(count, 2000), count);
  size_t after = rss_bytes();
  printf("  lean: RSS %zu KiB at start, %zu KiB just after freeing 128 MiB\n", start / 1024, after / 1024);
  CHECK_MSG(after < start + 20 * MiB, "%zu KiB above the start", (after - start) / 1024);
}

/* Lean mode's cap learns: a program that frees its working set and takes it
 * again at once, round after round, gets it back from the trims as page
 * faults only until the cap has grown past it (a few rounds); with a cap that
 * stayed at its 8 MiB target, every round would fault 24 MiB in again. */
static void lean_cap_learns(void) {
  enum { ROUNDS = 40, COUNT = 32 * MiB / 4000, PAGES = 32 * MiB / 4096 };
  void **a = malloc(COUNT * sizeof *a);
  CHECK(a != NULL);
  long first = 0, last = 0;
  for (int r = 0; r < ROUNDS; r++) {
    long before = minor_faults();
    for (int i = 0; i < COUNT; i++) {
      a[i] = malloc(4000);
      CHECK(a[i] != NULL);
      memset(a[i], r, 4000);
    }
    for (int i = 0; i < COUNT; i++) free(a[i]);
    long faults = minor_faults() - before;
    if (r >= 1 && r <= 10) first += faults;
    if (r >= ROUNDS - 10) last += faults;
  }
  free(a);
  printf("  lean: rounds 2-11 faulted %ld pages, the last 10 rounds %ld (a round uses %d)\n", first, last,
         (int)PAGES);
  CHECK_MSG(last * 4 < first, "%ld page faults in the last 10 rounds, %ld in rounds 2-11", last, first);
  CHECK_MSG(last < 10 * PAGES / 8, "%ld page faults in the last 10 rounds", last);
}

/* Lean mode holds against its cap the pages the kernel has, not whole freed
 * blocks.  Two threads take blocks of 1-4 MiB and write one page of each (a
 * buffer sized for the worst case): a freed block is 2.5 MiB on average, of
 * which 4 KiB is resident.  Counted whole, a few frees went over the 8 MiB
 * cap, and each trim gave back written pages too, faulted in again.  Then
 * the same memory, 128 MiB of it written whole and freed, is over the cap
 * and goes back at the first free once lean's look at the pages is 20 ms
 * old: what it found not resident was taken again.  (The purge delay is
 * long: only lean's trims give memory back.  Trims whose memory the program
 * takes again at once may have raised the cap to 64 MiB: lean then keeps up
 * to half that.) */
enum { SPARSE_WARM = 5000, SPARSE_ROUNDS = 50000 };

/* Replaces blocks as above; returns the page faults of the rounds after the warm-up. */
static void *replace_sparse(void *arg) {
  char *slot[BIG_LIVE] = {0};
  rng_t rng = {(uint64_t)(uintptr_t)arg};
  struct rusage ru;
  long faults = 0;
  for (int i = 0; i < SPARSE_WARM + SPARSE_ROUNDS; i++) {
    if (i == SPARSE_WARM) faults = getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt : 0;
    size_t k = (size_t)rng_below(&rng, BIG_LIVE);
    free(slot[k]);
    slot[k] = malloc(rng_range(&rng, MiB, 4 * MiB));
    CHECK(slot[k] != NULL);
    slot[k][0] = 1;
  }
  CHECK(getrusage(RUSAGE_THREAD, &ru) == 0);
  for (int k = 0; k < BIG_LIVE; k++) free(slot[k]);
  return (void *)(uintptr_t)(ru.ru_minflt - faults);
}

static void lean_counts_written_pages(void) {
  pthread_t t;
  void *theirs;
  CHECK(pthread_create(&t, NULL, replace_sparse, (void *)5) == 0);
  long faults = (long)(uintptr_t)replace_sparse((void *)6);
  CHECK(pthread_join(t, &theirs) == 0);
  faults += (long)(uintptr_t)theirs;
  printf("  lean: 2 threads, %d blocks of 1-4 MiB each after a warm-up, one page of each written: %ld page faults\n",
         SPARSE_ROUNDS, faults);
  CHECK_MSG(faults < SPARSE_ROUNDS / 50, "%ld page faults", faults);
  enum { WRITTEN = 32 };
  char *block[WRITTEN];
  size_t before = rss_bytes();
  for (int k = 0; k < WRITTEN; k++) {
    block[k] = malloc(4 * MiB);
    CHECK(block[k] != NULL);
    memset(block[k], k, 4 * MiB);
  }
  for (int k = 0; k < WRITTEN; k++) free(block[k]);
  sleep_ms(30);
  free(malloc(2 * MiB));
  size_t after = rss_bytes();
  printf("  then 128 MiB written whole and freed: RSS %zu KiB before, %zu KiB after\n", before / 1024, after / 1024);
  CHECK_MSG(after < before + 40 * MiB, "%zu KiB above the RSS before", (after - before) / 1024);
}

/* Lean mode gives back the memory free the longest first, across arenas: a
 * thread's blocks freed before a tick (a second's purge delay) go back
 * before the main thread's, freed after it in another arena (each CPU has
 * one; threads are spread over them).  The main thread's frees take the
 * free resident memory over the 16 MiB cap twice; each trim gives back down
 * to half the cap, 16 MiB in all, enough for the thread's 12 MiB. */
enum { OLD_BLOCKS = 192, OLD_SIZE = 60 * 1024 };
static void *old_blocks[OLD_BLOCKS];

static void *free_old_blocks(void *arg) {
  for (int i = 0; i < OLD_BLOCKS; i++) {
    old_blocks[i] = malloc(OLD_SIZE);
    CHECK(old_blocks[i] != NULL);
    memset(old_blocks[i], 1, OLD_SIZE);
  }
  for (int i = 0; i < OLD_BLOCKS; i++) free(old_blocks[i]);
  return arg;
}

static void lean_gives_back_oldest_first(void) {
  cpu_set_t cpus;
  CHECK(sched_getaffinity(0, sizeof cpus, &cpus) == 0);
  if (CPU_COUNT(&cpus) < 2) {
    printf("  one CPU: one arena, nothing to order (skipped)\n");
    return;
  }
  void **mine = fill(OLD_BLOCKS * 2, OLD_SIZE);  /* the main thread's arena */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, free_old_blocks, NULL) == 0);  /* the next arena */
  CHECK(pthread_join(t, NULL) == 0);
  sleep_ms(1100);
  free(malloc(4 * MiB));  /* a huge block's slow path runs the tick that ages them */
  release(mine, OLD_BLOCKS * 2);
  size_t page = (size_t)sysconf(_SC_PAGESIZE), resident = 0;
  unsigned char vec[OLD_SIZE / 4096 + 2];
  for (int i = 0; i < OLD_BLOCKS; i++) {
    uintptr_t start = (uintptr_t)old_blocks[i] & ~(page - 1);
    size_t len = (uintptr_t)old_blocks[i] + OLD_SIZE - start;
    CHECK(mincore((void *)start, len, vec) == 0);
    for (size_t p = 0; p < (len + page - 1) / page; p++) resident += vec[p] & 1;
  }
  printf("  lean: %zu KiB of the thread's 12 MiB freed before the tick still resident\n", resident * page / 1024);
  CHECK_MSG(resident * page < MiB, "%zu KiB of the oldest free memory kept", resident * page / 1024);
}

/* The same across layers: a huge block's 12 MiB freed before a tick go back
 * before blocks of a SuperSlab freed after it (the trim gave back all it
 * could of the SuperSlabs, new memory included, before any huge region's). */
static size_t resident_bytes_of(void *p, size_t size) {
  static unsigned char vec[16 * MiB / 4096];
  uintptr_t start = (uintptr_t)p & ~(uintptr_t)4095;
  size_t len = (uintptr_t)p + size - start, n = 0;
  CHECK(len <= sizeof vec * 4096 && mincore((void *)start, len, vec) == 0);
  for (size_t i = 0; i < (len + 4095) / 4096; i++) n += vec[i] & 1;
  return n * 4096;
}

static void lean_oldest_first_across_layers(void) {
  enum { NEW = 80, NEW_SIZE = 60 * 1024 };
  static void *blocks[NEW];
  char *keep = malloc(2 * MiB), *old = malloc(12 * MiB);  /* `keep`: the huge region stays */
  CHECK(keep != NULL && old != NULL);
  memset(keep, 1, 2 * MiB);
  memset(old, 1, 12 * MiB);
  sleep_ms(1100);
  free(malloc(3 * MiB));  /* a huge block's slow path runs a tick */
  free(old);
  sleep_ms(1100);
  free(malloc(100000));   /* the next tick ages `old` */
  for (int i = 0; i < NEW; i++) {
    blocks[i] = malloc(NEW_SIZE);
    CHECK(blocks[i] != NULL);
    memset(blocks[i], 1, NEW_SIZE);
  }
  for (int i = 0; i < NEW; i++) free(blocks[i]);  /* 4.7 MiB more free: over the 16 MiB cap */
  size_t kept = 0;
  for (int i = 0; i < NEW; i++) kept += resident_bytes_of(blocks[i], NEW_SIZE);
  printf("  lean: %zu KiB of the huge block freed before the tick resident, %zu KiB of the %d KiB freed after\n",
         resident_bytes_of(old, 12 * MiB) / 1024, kept / 1024, NEW * NEW_SIZE / 1024);
  CHECK_MSG(kept >= (size_t)NEW * NEW_SIZE * 3 / 4, "%zu KiB of the newest free memory kept", kept / 1024);
  free(keep);
}

/* A thread whose only call into the allocator is a free in the last round of
 * key destructors (PTHREAD_DESTRUCTOR_ITERATIONS, 4 in glibc: a destructor
 * that sets its key again is called again, up to that many times), when no
 * destructor of the allocator's would run any more: its block must not be
 * stranded in a cache that nothing hands back. */
static pthread_key_t late_key;
static __thread int late_rounds;

static void late_free(void *p) {
  if (++late_rounds < 4) pthread_setspecific(late_key, p);
  else free(p);
}

static void *set_late(void *p) {
  pthread_setspecific(late_key, p);
  return NULL;
}

static void late_frees_strand_nothing(void) {
  enum { THREADS = 200, SIZE = 512 * 1024 };
  free(malloc(16));  /* the allocator's key is created first */
  CHECK(pthread_key_create(&late_key, late_free) == 0);
  size_t start = rss_bytes();
  for (int i = 0; i < THREADS; i++) {
    char *p = malloc(SIZE);
    CHECK(p != NULL);
    memset(p, i, SIZE);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, set_late, p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  malloc_trim(0);
  size_t end = rss_bytes();
  printf("  %d threads freed a 512 KiB block each at exit: RSS %zu KiB above the start\n", THREADS,
         (end > start ? end - start : 0) / 1024);
  CHECK_MSG(end < start + 8 * MiB, "%zu MiB stranded", (end - start) / MiB);
}

/* ---- cases and their settings ------------------------------------------- */

static const self_case_t cases[] = {
    /* a delay longer than the cases: any system call would be reuse failing */
    {"big_blocks_reused", big_blocks_reused, {"HAKMEM_PURGE_DELAY_MS=60000"}},
    {"large_blocks_reused_across_threads", large_blocks_reused_across_threads, {"HAKMEM_PURGE_DELAY_MS=60000"}},
    {"trim_gives_everything_back", trim_gives_everything_back, {NULL}},
    {"idle_memory_goes_back", idle_memory_goes_back, {"HAKMEM_PROFILE=balanced"}},
    {"speed_starts_no_thread", speed_starts_no_thread, {"HAKMEM_PROFILE=speed"}},
    {"fork_with_purger_running", fork_with_purger_running, {"HAKMEM_PROFILE=balanced"}},
    {"lean_keeps_little", lean_keeps_little, {"HAKMEM_PROFILE=lean"}},
    {"lean_cap_learns", lean_cap_learns, {"HAKMEM_PROFILE=lean"}},
    {"lean_counts_written_pages", lean_counts_written_pages,
     {"HAKMEM_PROFILE=lean", "HAKMEM_PURGE_DELAY_MS=10000", "HAKMEM_BACKGROUND_PURGE=0"}},
    {"lean_gives_back_oldest_first", lean_gives_back_oldest_first,
     {"HAKMEM_PROFILE=lean", "HAKMEM_SS_MEM_LEAN_TARGET_MB=16", "HAKMEM_PURGE_DELAY_MS=1000", "HAKMEM_BACKGROUND_PURGE=0"}},
    {"lean_oldest_first_across_layers", lean_oldest_first_across_layers,
     {"HAKMEM_PROFILE=lean", "HAKMEM_SS_MEM_LEAN_TARGET_MB=16", "HAKMEM_PURGE_DELAY_MS=1000", "HAKMEM_BACKGROUND_PURGE=0"}},
    {"late_frees_strand_nothing", late_frees_strand_nothing, {NULL}},
};

int main(int argc, char **argv) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  return run_self_cases(argc, argv, cases, sizeof cases / sizeof cases[0], 60);
}
