/* SPDX-License-Identifier: MIT */
/* test-env: HAKMEM_PURGE_DELAY_MS=200 HAKMEM_BACKGROUND_PURGE=0 HAKMEM_SS_THP=0 */
/* test-builds: standard */
/* hakmem only.  Large blocks (32 KiB-1 MiB) that a thread's cache sends back
 * over its budget wait as spares of their class for the next thread short
 * of one:
 * - another thread's mallocs of the size get them, and make no slab for
 *   them; the statistics count them in the central cache meanwhile;
 * - they are bounded in all by a quarter of HAKMEM_LARGE_CACHE (the speed
 *   profile's 64 MiB: 16 MiB), the rest going back to the SuperSlabs;
 * - a block that would need memory new to the process, or a small class's
 *   slab that would need a SuperSlab more, sends them back first, and is
 *   carved where they were;
 * - a purge tick that finds their class idle since the last one gives them
 *   back (ticks every 200 ms here, run by the slow paths of this program:
 *   no purger thread), and malloc_trim at once.
 * SuperSlabs are on small pages here, so that a page's residency says
 * whether memory was used before. */
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include "testutil.h"

enum { SIZE = 40000, COUNT = 64 };
#define SPARES_MAX ((size_t)16 << 20)

static hak_stats_t stats;

static size_t central_blocks(size_t size) { return class_stats(size)->central_cached; }

/* The bytes of large blocks in the central caches, every class. */
static size_t central_large_bytes(void) {
  hak_stats_get(&stats);
  size_t bytes = 0;
  for (unsigned i = 0; i < stats.nclasses; i++)
    if (stats.classes[i].block_size > 32768) bytes += stats.classes[i].central_cached * stats.classes[i].block_size;
  return bytes;
}

static void *freed[COUNT];
static pthread_barrier_t freed_all;

static void *take_them(void *arg) {
  size_t *found = arg;
  void *p[COUNT];
  pthread_barrier_wait(&freed_all);
  for (int i = 0; i < COUNT; i++) {
    CHECK((p[i] = malloc(SIZE)) != NULL);
    for (int j = 0; j < COUNT; j++) *found += p[i] == freed[j];
  }
  for (int i = 0; i < COUNT; i++) free(p[i]);
  hak_thread_flush();
  return NULL;
}

/* The main thread frees 64 blocks of 40 000 B (2.5 MiB, ten times a new
 * thread's budget): most become spares, and a new thread gets them.  The
 * thread is made first: the C library's mallocs for it may need a slab,
 * which the spares would make room for. */
static void spares_serve_another_thread(void) {
  size_t found = 0;
  pthread_t t;
  CHECK(pthread_barrier_init(&freed_all, NULL, 2) == 0);
  CHECK(pthread_create(&t, NULL, take_them, &found) == 0);
  malloc_trim(0);
  for (int i = 0; i < COUNT; i++) CHECK((freed[i] = malloc(SIZE)) != NULL);
  for (int i = 0; i < COUNT; i++) free(freed[i]);
  hak_thread_flush();
  size_t spares = central_blocks(SIZE);
  unsigned long long made = class_stats(SIZE)->slabs_made;
  printf("  64 blocks freed and the cache flushed: %zu spares\n", spares);
  CHECK_EQ(spares, (size_t)COUNT);
  CHECK(hak_heap_check() >= COUNT);  /* walks the spares, marked free, of their class */
  pthread_barrier_wait(&freed_all);
  CHECK(pthread_join(t, NULL) == 0);
  pthread_barrier_destroy(&freed_all);
  unsigned long long made_after = class_stats(SIZE)->slabs_made;
  printf("  a new thread's 64 mallocs got %zu of them, %llu slabs made\n", found, made_after - made);
  CHECK_EQ(found, (size_t)COUNT);
  CHECK_EQ(made_after, made);
  malloc_trim(0);
  CHECK_EQ(central_blocks(SIZE), 0);
}

/* 1 000 blocks of 40 000 B (39 MiB) freed: at most 16 MiB of them kept,
 * and most of that (a thread sends its list back when it passes its budget,
 * up to 4 MiB, and a list that would not fit is not cut). */
static void spares_are_bounded(void) {
  enum { MANY = 1000 };
  static void *p[MANY];
  malloc_trim(0);
  for (int i = 0; i < MANY; i++) CHECK((p[i] = malloc(SIZE)) != NULL);
  for (int i = 0; i < MANY; i++) free(p[i]);
  hak_thread_flush();
  size_t kept = central_large_bytes();
  printf("  39 MiB freed: %.1f MiB kept as spares\n", kept / 1048576.0);
  CHECK(kept <= SPARES_MAX);
  CHECK(kept >= SPARES_MAX / 4 * 3);
  malloc_trim(0);
  CHECK_EQ(central_large_bytes(), 0);
}

/* With no free memory left resident (a trim), 64 blocks of 40 000 B freed
 * become spares; a block of 100 000 B then finds no free resident units but
 * theirs, and takes them: it is resident before the program writes it. */
static void spares_go_back_before_new_memory(void) {
  void *p[COUNT];
  for (int i = 0; i < COUNT; i++) CHECK((p[i] = malloc(SIZE)) != NULL);
  malloc_trim(0);
  for (int i = 0; i < COUNT; i++) free(p[i]);
  hak_thread_flush();
  CHECK_EQ(central_blocks(SIZE), (size_t)COUNT);
  char *q = malloc(100000);
  CHECK(q != NULL);
  unsigned char page;
  CHECK(mincore((void *)((uintptr_t)q & ~(uintptr_t)4095), 4096, &page) == 0);
  printf("  a block of 100 000 B after them: %zu spares left, its first page %sresident\n",
         central_blocks(SIZE), page & 1 ? "" : "not ");
  CHECK_EQ(central_blocks(SIZE), 0);
  CHECK(page & 1);
  free(q);
  malloc_trim(0);
}

/* The same for a small class's slab when no SuperSlab mapped has a free
 * unit: the spares go back rather than a SuperSlab more being mapped.  The
 * SuperSlabs are filled with blocks of 40 000 B (a unit each) up to the 63rd
 * in the newest (a SuperSlab's 64 units less its header's), the last 64
 * freed become spares, and the first block of 5 000 B (a class with no slab
 * yet) goes where one of them was. */
static void spares_go_back_before_a_new_superslab(void) {
  enum { MANY = 400, UNITS = 63 };
  static void *p[MANY];
  malloc_trim(0);
  int n = 0, in_newest = 0;
  for (uintptr_t newest = 0; n < MANY && in_newest < UNITS; n++) {
    CHECK((p[n] = malloc(SIZE)) != NULL);
    uintptr_t ss = (uintptr_t)p[n] >> 22;
    in_newest = ss == newest ? in_newest + 1 : 1;
    newest = ss;
  }
  CHECK_EQ(in_newest, UNITS);
  for (int i = n - COUNT; i < n; i++) free(p[i]);
  hak_thread_flush();
  CHECK_EQ(central_blocks(SIZE), (size_t)COUNT);
  CHECK_EQ(class_stats(5000)->slabs, 0);
  char *q = malloc(5000);
  CHECK(q != NULL);
  bool where = false;  /* in a 64 KiB unit that held a spare (carving writes its page: no mincore) */
  for (int i = n - COUNT; i < n; i++) where |= ((uintptr_t)q ^ (uintptr_t)p[i]) >> 16 == 0;
  printf("  %d blocks of 40 000 B, the last 64 freed, then one of 5 000 B: %zu spares left, %s\n", n,
         central_blocks(SIZE), where ? "in a unit of theirs" : "elsewhere");
  CHECK_EQ(central_blocks(SIZE), 0);
  CHECK(where);
  free(q);
  for (int i = 0; i < n - COUNT; i++) free(p[i]);
  malloc_trim(0);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Spares of a class no thread takes or gives go back within two ticks
 * (400 ms here), not at the first; the program's small mallocs run the
 * ticks. */
static void idle_spares_go_back(void) {
  malloc_trim(0);
  free(malloc(64));  /* its class's slab made before the spares are, which would make room for it */
  for (int i = 0; i < COUNT; i++) CHECK((freed[i] = malloc(SIZE)) != NULL);
  for (int i = 0; i < COUNT; i++) free(freed[i]);
  hak_thread_flush();
  CHECK_EQ(central_blocks(SIZE), (size_t)COUNT);
  double start = now_ms(), gone = 0;
  while (!gone && now_ms() - start < 2000) {
    free(malloc(64));
    hak_thread_flush();  /* the next malloc refills, and looks at the schedule */
    usleep(2000);
    if (central_blocks(SIZE) == 0) gone = now_ms() - start;
  }
  printf("  64 spares of an idle class gone after %.0f ms\n", gone);
  CHECK(gone > 0);
  CHECK(gone >= 150);  /* not at the first tick, which finds the class active */
}

int main(void) {
  test_init();
  RUN(spares_go_back_before_a_new_superslab);  /* first: no other thread's arena has free units */
  RUN(spares_serve_another_thread);
  RUN(spares_are_bounded);
  RUN(spares_go_back_before_new_memory);
  RUN(idle_spares_go_back);
  return 0;
}
