/* SPDX-License-Identifier: MIT */
/* Part of the "fork_handlers" test: a shared library whose constructor
 * registers fork handlers before it or anything else has allocated (so,
 * under LD_PRELOAD or with the allocator linked into the program, before
 * the allocator's own handlers), and whose handlers allocate on the
 * allocator's slow paths: block sizes the thread has not used yet, a large
 * and a huge block, and malloc_trim, which takes the purge schedule's locks. */
#include "testutil.h"

#include <malloc.h>

static int ran[3];

static void allocate(int which) {
  void *p[64];
  for (int i = 0; i < 64; i++) {
    size_t n = 100 + (size_t)i * 500 + (size_t)which * 16;
    p[i] = malloc(n);
    if (!p[i]) return;
    memset(p[i], which, n);
  }
  /* less than the 4 MiB free that start a purger thread (balanced profile) */
  void *large = malloc(300 * 1024), *huge = malloc(3 << 19);
  if (!large || !huge) return;
  memset(large, which, 300 * 1024);
  memset(huge, which, 3 << 19);
  for (int i = 0; i < 64; i++) free(p[i]);
  free(large);
  free(huge);
  if (which == 2) {  /* more free memory in the child: enough to start a purger thread */
    for (int i = 0; i < 3; i++) {
      void *q = malloc(8 << 20);
      if (!q) return;
      memset(q, 1, 8 << 20);
      free(q);
    }
  } else {
    malloc_trim(0);
  }
  ran[which]++;
}

static void prepare(void) { allocate(0); }
static void parent(void) { allocate(1); }
static void child(void) { allocate(2); }

/* How many times each handler ran and allocated all it wanted. */
int atfork_ran(int which) { return ran[which]; }

__attribute__((constructor)) static void atfork_constructor(void) { pthread_atfork(prepare, parent, child); }
