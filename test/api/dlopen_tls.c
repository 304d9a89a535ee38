/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* Thread-local storage of a dlopen'ed library: glibc allocates each thread's
 * block with malloc (on the thread's first access) and frees it with free
 * (at thread exit, and at dlclose), so these calls go through the allocator
 * under test, aligned blocks included.  Threads check that their copies are
 * initialised and independent; the library is loaded and unloaded again and
 * again. */
#include "testutil.h"

#include <pthread.h>

enum { ROUNDS = 30, THREADS = 8, ADDS = 1000 };

typedef unsigned long (*tls_add_fn)(unsigned long);
static tls_add_fn tls_add;

static void *thread_main(void *arg) {
  unsigned long id = (unsigned long)(uintptr_t)arg, sum = 0, got = 0;
  int i;
  for (i = 1; i <= ADDS; i++) {
    sum += id * (unsigned long)i;
    got = tls_add(id * (unsigned long)i);
    CHECK_MSG(got != 0, "thread %lu: TLS block not initialised", id);
  }
  CHECK_EQ(got, sum);
  /* Some heap use around the TLS blocks. */
  free(malloc(1000 + id));
  return NULL;
}

static void dlopen_tls_in_threads(void) {
  char path[4096];
  unsigned long main_sum = 0, got;
  int round, t;
  helper_lib_path(path, sizeof path, "libtls_dl.so");
  for (round = 0; round < ROUNDS; round++) {
    pthread_t th[THREADS];
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h != NULL, "dlopen(%s): %s", path, dlerror());
    tls_add = (tls_add_fn)dlsym(h, "tls_add");
    CHECK(tls_add != NULL);
    /* The main thread's copy: fresh if dlclose unloaded the library. */
    got = tls_add(5);
    CHECK_MSG(got == 5 || got == main_sum + 5, "main thread's TLS counter %lu", got);
    main_sum = got;
    for (t = 0; t < THREADS; t++)
      CHECK(pthread_create(&th[t], NULL, thread_main, (void *)(uintptr_t)(t + 1)) == 0);
    for (t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    CHECK(dlclose(h) == 0);
  }
}

int main(void) {
  test_init();
  RUN(dlopen_tls_in_threads);
  return 0;
}
