/* SPDX-License-Identifier: MIT */
/* Part of the "early" test: a shared library whose constructor allocates
 * before main() runs, and before the constructors of the program, possibly
 * before hakmem's own initialisation.  It keeps one block for main() to free
 * and frees another one in its destructor, after main() has returned.  The
 * same source builds libearly.so (linked to the program) and, with
 * -DEARLY_DLOPEN, libearly_dl.so (loaded by dlopen). */
#include "testutil.h"

#include <malloc.h>

#ifdef EARLY_DLOPEN
#define EXPORT(name) early_dl_##name
#else
#define EXPORT(name) early_##name
#endif

static void *kept_for_main, *kept_for_destructor;
static int ctor_ok;

__attribute__((constructor)) static void early_constructor(void) {
  void *p[64];
  int i;
  for (i = 0; i < 64; i++) {
    size_t n = TAGGED_MIN + (size_t)i * (size_t)i * 37;
    p[i] = i % 3 == 0 ? calloc(1, n) : malloc(n);
    if (!p[i]) return;
    tagged_fill(p[i], n, (uint64_t)i);
  }
  for (i = 0; i < 64; i += 2) free(p[i]);
  for (i = 1; i < 64; i += 2) {
    CHECK_TAGGED(p[i]);
    p[i] = realloc(p[i], 5000);
    if (!p[i]) return;
    free(p[i]);
  }
  if (posix_memalign(&p[0], 4096, 100) != 0) return;
  free(p[0]);
  p[0] = malloc(8 << 20); /* huge, before main */
  if (!p[0]) return;
  memset(p[0], 1, 8 << 20);
  free(p[0]);
  kept_for_main = malloc(777);
  kept_for_destructor = malloc(333);
  if (!kept_for_main || !kept_for_destructor) return;
  tagged_fill(kept_for_main, 777, 1);
  tagged_fill(kept_for_destructor, 333, 2);
  ctor_ok = 1;
}

__attribute__((destructor)) static void early_destructor(void) {
  if (!kept_for_destructor) return;
  CHECK_TAGGED(kept_for_destructor);
  free(kept_for_destructor);
  free(malloc(100));
}

/* 1 if the constructor did all its allocations. */
int EXPORT(constructor_ok)(void) { return ctor_ok; }

/* The block the constructor kept, now the caller's to free. */
void *EXPORT(take_block)(void) {
  void *p = kept_for_main;
  kept_for_main = NULL;
  return p;
}

/* A block allocated in the library, to be freed by the caller. */
char *EXPORT(make_string)(const char *s) { return strdup(s); }
