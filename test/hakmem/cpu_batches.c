/* SPDX-License-Identifier: MIT */
/* hakmem only.  Freed blocks travel between threads in batches parked per
 * CPU.  A thread whose own CPU has none takes another CPU's, except that a
 * thread that only allocates blocks of a small class (a producer) leaves a
 * CPU whose own threads take the batches it parks, and takes only spare ones
 * (the CPU parks more than its threads take).
 *
 * Each case runs in a fresh process (this program again) with two threads
 * pinned to two CPUs: a freer on the second parks 64-byte blocks there, and
 * a taker on the first allocates; the case checks whether the taker got
 * blocks the freer parked.  Skipped on a machine with one CPU.
 *
 * Spare batches freed out of address order carry lanes, which the taking
 * thread walks side by side before its pops: a block written after its
 * free must stop that walk and be reported by the pops, not followed. */
#include "testutil.h"

#include <sched.h>

/* FREES: past the capacity of a thread's list of 64-byte blocks (512), so
 * that the list overflows once and parks blocks on the taker's own CPU. */
enum { BLOCKS = 2048, ROUNDS = 4, TAKES = 1000, FREES = 600, SIZE = 64 };

static int cpus[2];
static void *held[BLOCKS];      /* the freer's blocks */
static void *parked[BLOCKS];    /* the ones it freed last, parked on its CPU */
static size_t nparked;
static pthread_barrier_t freed, taken;

enum { UNPINNED = 254 };  /* the child's exit status when it could not pin a thread */

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0 || sched_getcpu() != cpu) _exit(UNPINNED);
}

static bool was_parked(const void *p) {
  for (size_t i = 0; i < nparked; i++)
    if (parked[i] == p) return true;
  return false;
}

static void free_from(size_t first, size_t n) {
  for (size_t i = first; i < first + n; i++) free(held[i]);
  memcpy(parked, held + first, n * sizeof *held);
  nparked = n;
}

/* Frees all the blocks 7 apart (7 is prime to BLOCKS): no two freed one
 * after the other are neighbours.  `written`: then writes over the first 16
 * bytes of those freed first, all parked (the list keeps at most 512). */
static void free_scattered(bool written) {
  for (size_t i = 0; i < BLOCKS; i++) parked[i] = held[i * 7 % BLOCKS];
  nparked = BLOCKS;
  for (size_t i = 0; i < BLOCKS; i++) free(parked[i]);
  for (size_t i = 0; written && i < BLOCKS - 512; i++) memset(parked[i], 0x41, 16);
}

/* On the second CPU.  "taken": the CPU's threads take back what it parks,
 * round after round, then it parks half the blocks.  "spare": it parks them
 * all, and nobody there takes them; "scattered" and "written" likewise, in
 * free_scattered's order.  Stays alive (its cache with it) until the taker
 * is done. */
static void *freer(void *arg) {
  bool taken_back = strcmp(arg, "taken") == 0;
  bool written = strcmp(arg, "written") == 0;
  pin(cpus[1]);
  for (size_t i = 0; i < BLOCKS; i++) CHECK((held[i] = malloc(SIZE)) != NULL);
  for (int r = 0; taken_back && r < ROUNDS; r++) {
    for (size_t i = 0; i < BLOCKS; i++) free(held[i]);
    for (size_t i = 0; i < BLOCKS; i++) CHECK((held[i] = malloc(SIZE)) != NULL);
  }
  if (taken_back) free_from(0, BLOCKS / 2);
  else if (written || strcmp(arg, "scattered") == 0) free_scattered(written);
  else free_from(0, BLOCKS);
  pthread_barrier_wait(&freed);
  pthread_barrier_wait(&taken);
  return NULL;
}

/* On the first CPU: TAKES mallocs of SIZE bytes; returns how many were
 * blocks the freer parked.  A taker that frees (`frees_first`) first gives
 * back blocks of its own, so that it is no producer. */
static size_t take(bool frees_first) {
  static void *got[TAKES];
  pin(cpus[0]);
  if (frees_first) {
    for (int i = 0; i < FREES; i++) CHECK((got[i] = malloc(SIZE)) != NULL);
    for (int i = 0; i < FREES; i++) free(got[i]);
  }
  size_t hits = 0;
  for (int i = 0; i < TAKES; i++) {
    CHECK((got[i] = malloc(SIZE)) != NULL);
    hits += was_parked(got[i]);
    for (int j = 0; j < i; j++) CHECK(got[j] != got[i]);  /* none handed out twice */
  }
  for (int i = 0; i < TAKES; i++) free(got[i]);
  return hits;
}

/* The child, run as `cpu_batches FREER/TAKER` (FREER "taken" or "spare",
 * TAKER "producer" or "freeing"): exits with the number of parked blocks the
 * taker got, up to 200. */
static int child(const char *name) {
  pthread_t t;
  char mode[16];
  const char *taker = strchr(name, '/');
  CHECK(taker != NULL && (size_t)(taker - name) < sizeof mode);
  memcpy(mode, name, (size_t)(taker - name));
  mode[taker - name] = '\0';
  CHECK(pthread_barrier_init(&freed, NULL, 2) == 0);
  CHECK(pthread_barrier_init(&taken, NULL, 2) == 0);
  CHECK(pthread_create(&t, NULL, freer, mode) == 0);
  pthread_barrier_wait(&freed);
  size_t hits = take(strcmp(taker + 1, "freeing") == 0);
  pthread_barrier_wait(&taken);
  CHECK(pthread_join(t, NULL) == 0);
  return hits > 200 ? 200 : (int)hits;
}

/* The number of parked blocks the taker got; the test is skipped if the
 * threads could not be pinned (a container may forbid it). */
static int run_case(const char *name) {
  child_result_t res;
  run_self(name, NULL, 60, &res);
  CHECK_MSG(WIFEXITED(res.status), "%s", res.err);
  int hits = WEXITSTATUS(res.status);
  if (hits == UNPINNED) {
    printf("skip: threads cannot be pinned to CPUs here\n");
    exit(77);
  }
  printf("  freer/taker %s: %d of %d blocks had been parked on the other CPU\n", name, hits, TAKES);
  return hits;
}

/* The freer's CPU takes its batches back: a producer on the other CPU
 * carves blocks of its own. */
static void producer_leaves_taken_batches(void) { CHECK(run_case("taken/producer") <= 0); }

/* Nobody on the freer's CPU takes them: spare, the producer takes them. */
static void producer_takes_spare_batches(void) { CHECK(run_case("spare/producer") != 0); }

/* A thread that frees blocks of the class too takes any CPU's batches once
 * its own CPU has none. */
static void freeing_thread_takes_batches(void) { CHECK(run_case("taken/freeing") != 0); }

/* Spare batches out of address order: taken, each block once. */
static void scattered_batches_are_taken(void) { CHECK(run_case("scattered/producer") != 0); }

/* The same with blocks written after their free: the taker's malloc reports
 * one and aborts, where a walk that followed the written links would crash. */
static void written_block_in_lanes_is_reported(void) {
  child_result_t res;
  run_self("written/producer", NULL, 60, &res);
  if (WIFEXITED(res.status) && WEXITSTATUS(res.status) == UNPINNED) {
    printf("skip: threads cannot be pinned to CPUs here\n");
    exit(77);
  }
  CHECK_MSG(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGABRT, "%s: %s", describe_status(res.status), res.err);
  CHECK_MSG(strstr(res.err, "hakmem: double free of") != NULL, "%s", res.err);
}

int main(int argc, char **argv) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  cpu_set_t allowed;
  CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
  if (argc > 1) return child(argv[1]);
  if (n < 2) {
    printf("skip: one CPU\n");
    return 77;
  }
  RUN(producer_leaves_taken_batches);
  RUN(producer_takes_spare_batches);
  RUN(freeing_thread_takes_batches);
  RUN(scattered_batches_are_taken);
  RUN(written_block_in_lanes_is_reported);
  return 0;
}
