/* SPDX-License-Identifier: MIT */
/* test-builds: standard */
/* Litmus test of the remote-free hand-off (weak ordering on arm64): in each
 * round every thread allocates blocks, writes a pattern into every word, and
 * hands them to the next thread, which checks and frees them; its cache parks
 * them as whole batches (central.c's transfer slots, hak_thread_flush) that
 * other threads take.  A block taken again must show the words its last
 * user wrote, but the few the allocator links through; the free lists and
 * counts must be whole at the end (hak_heap_check). */
#include "testutil.h"

#include <pthread.h>

enum { THREADS = 4, PER = 400, ROUNDS = 2000, LINK_WORDS = 2 };
static const size_t sizes[] = {16, 32, 48, 64, 128, 256, 512, 1024};
static uint64_t *box[THREADS][PER];
static pthread_barrier_t barrier;
static _Atomic unsigned long reused;  /* blocks seen again with their last user's words */

static uint64_t word(const void *p, size_t i) { return ((uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ (i * 0x100000001b3ull); }
static size_t words_of(unsigned k) { return sizes[k % (sizeof sizes / sizeof *sizes)] / 8; }

static void *run(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  for (unsigned r = 0; r < ROUNDS; r++) {
    for (unsigned k = 0; k < PER; k++) {
      size_t n = words_of(k + r);
      uint64_t *p = hak_malloc(n * 8);
      CHECK(p);
      /* a block used before holds its last user's words past the links, all of them */
      if (n > LINK_WORDS + 1 && p[LINK_WORDS] == word(p, LINK_WORDS) && ++reused)
        for (size_t i = LINK_WORDS; i < n; i++) CHECK_MSG(p[i] == word(p, i), "reused block %p word %zu", (void *)p, i);
      p[0] = (uint64_t)r << 8 | t;
      for (size_t i = 1; i < n; i++) p[i] = word(p, i);
      box[t][k] = p;
    }
    pthread_barrier_wait(&barrier);
    unsigned from = (t + 1) % THREADS;
    for (unsigned k = 0; k < PER; k++) {
      uint64_t *p = box[from][k];
      size_t n = words_of(k + r);
      CHECK_MSG(p[0] == ((uint64_t)r << 8 | from), "block %p: tag %llx", (void *)p, (unsigned long long)p[0]);
      for (size_t i = 1; i < n; i++) CHECK_MSG(p[i] == word(p, i), "block %p word %zu", (void *)p, i);
      hak_free(p);
    }
    if (r % 4 == t % 4) hak_thread_flush();  /* parks the cache's batches for others to take */
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  pthread_t th[THREADS];
  pthread_barrier_init(&barrier, NULL, THREADS);
  for (unsigned t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, run, (void *)(uintptr_t)t) == 0);
  for (unsigned t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
  size_t walked = hak_heap_check();
  printf("%u rounds of %u blocks by %u threads: %lu reused whole; %zu free blocks walked\n", ROUNDS, PER, THREADS,
         (unsigned long)reused, walked);
  CHECK(reused > ROUNDS * PER);  /* the hand-offs were taken again, not only fresh memory */
  return 0;
}
