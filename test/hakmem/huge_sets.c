/* SPDX-License-Identifier: MIT */
/* test-env: HAKMEM_PURGE_DELAY_MS=1000 HAKMEM_BACKGROUND_PURGE=0 */
/* hakmem only.  Huge blocks (and large ones above 256 KiB) come from sets
 * of regions, one per arena, each under its own lock, so that threads of
 * two arenas take blocks of megabytes without waiting for each other:
 * - threads of two arenas (given in turn) place their huge blocks in two
 *   regions, and a third thread, of the first arena again, in the first's;
 * - a thread whose set would need fresh pages takes another set's free
 *   resident units first: a block freed by a thread of one arena is where
 *   a thread of the other finds its next block of the size;
 * - large blocks of 256 KiB-1 MiB likewise, through the thread caches;
 * - out of address space, a malloc_trim keeps one empty region in all, not
 *   one per set: under RLIMIT_AS = 1 GiB, with four arenas that have each
 *   had a region, a block of 500 MiB is still had after a trim.
 * Each case runs in a child of its own with two arenas (mallopt
 * M_ARENA_MAX), whatever the CPUs of the machine, and freed memory stays
 * resident for a second (test-env). */
#include <malloc.h>
#include <pthread.h>
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define REGION ((uintptr_t)128 << 20)   /* src/base/base.h HK_REGION_SIZE */
#define HEADER ((uintptr_t)2 << 20)     /* a region's header: blocks start past it */

typedef struct job {
  size_t size;
  void *block;     /* in: a block to free first (NULL: none); out: the block taken */
  int write;       /* write the new block whole */
  int keep;        /* keep it (else free it before the thread ends) */
} job_t;

static uintptr_t region_of(const void *p) { return ((uintptr_t)p - HEADER) & ~(REGION - 1); }

static void *work(void *arg) {
  job_t *j = arg;
  free(j->block);
  void *p = malloc(j->size);
  CHECK(p != NULL);
  if (j->write) memset(p, 0x5a, j->size);
  j->block = p;
  if (!j->keep) free(p);
  return NULL;
}

/* Runs the job on a thread of its own (each new thread is given the next arena). */
static void on_new_thread(job_t *j) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, work, j) == 0);
  CHECK(pthread_join(t, NULL) == 0);
}

static void two_arenas_two_regions(void *arg) {
  (void)arg;
  CHECK(mallopt(M_ARENA_MAX, 2) == 1);
  job_t a = {3 * MIB, NULL, 0, 1}, b = a, c = a;
  on_new_thread(&a);
  on_new_thread(&b);
  on_new_thread(&c);
  fprintf(stderr, "  regions: %#lx, %#lx, %#lx\n", (unsigned long)region_of(a.block), (unsigned long)region_of(b.block),
         (unsigned long)region_of(c.block));
  CHECK_MSG(region_of(a.block) != region_of(b.block), "threads of two arenas took blocks from one region");
  CHECK_MSG(region_of(a.block) == region_of(c.block), "two threads of one arena took blocks from two regions");
  free(a.block);
  free(b.block);
  free(c.block);
}

/* A thread of one arena takes a block of `size`, writes it and frees it
 * (its exit hands its cache back); a thread of the other arena then takes
 * one of the size: it is where the first was. */
static void reuse_across(size_t size) {
  CHECK(mallopt(M_ARENA_MAX, 2) == 1);
  job_t a = {size, NULL, 1, 0}, b = {size, NULL, 0, 1};
  on_new_thread(&a);
  on_new_thread(&b);
  fprintf(stderr, "  %zu B: freed %p, taken on the other arena %p\n", size, a.block, b.block);
  CHECK_MSG(b.block == a.block, "a block of %zu B came from fresh memory while another arena's, freed, was resident",
            size);
  free(b.block);
}

static void huge_block_reused_across_arenas(void *arg) {
  (void)arg;
  reuse_across(3 * MIB);
}

static void large_block_reused_across_arenas(void *arg) {
  (void)arg;
  reuse_across(600 * 1024);
}

/* Under the limit (run_self_under_as_limit): no address space is reserved
 * at start-up, so each region is a mapping of its own. */
static int under_limit(void) {
  CHECK(mallopt(M_ARENA_MAX, 4) == 1);
  job_t j[4];
  for (int i = 0; i < 4; i++) {  /* each held till all four have theirs: four regions */
    j[i] = (job_t){3 * MIB, NULL, 1, 1};
    on_new_thread(&j[i]);
  }
  for (int i = 0; i < 4; i++) free(j[i].block);
  malloc_trim(0);
  void *big = malloc(500 * MIB);
  fprintf(stderr, "  after four arenas' regions and a trim: malloc(500 MiB) = %p\n", big);
  CHECK_MSG(big != NULL, "a trim left the address space to empty regions");
  free(big);
  return 0;
}

static void run(const char *name, void (*fn)(void *)) {
  child_result_t res;
  printf("%s\n", name);
  run_in_child(fn, NULL, 60, &res);
  if (res.err[0]) fputs(res.err, stderr);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "%s: %s", name, describe_status(res.status));
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return under_limit();
  test_init();
  run("two_arenas_two_regions", two_arenas_two_regions);
  run("huge_block_reused_across_arenas", huge_block_reused_across_arenas);
  run("large_block_reused_across_arenas", large_block_reused_across_arenas);
  printf("one_empty_region_after_a_trim\n");
  run_self_under_as_limit((rlim_t)1 << 30, 60);
  return 0;
}
