/* SPDX-License-Identifier: MIT */
/* test-builds: static */
/* test-run: preload_first LD_PRELOAD={test}/libearly.so:{lib} */
/* Early and unusual callers.  libearly.so, linked to this program, allocates
 * in its constructor before main(); main() frees a block from it; it frees
 * one in its destructor after main() returns, as does an atexit handler.
 * This program never calls pthread_create.  It loads libearly_dl.so (whose
 * constructor allocates too) with dlopen, uses dlsym, dlerror and the
 * failing dlopen of a missing library (libc allocates for all of these), and
 * frees memory that the libraries allocated. */
#include "testutil.h"

#include <malloc.h>

int early_constructor_ok(void);
void *early_take_block(void);
char *early_make_string(const char *s);

static void *kept_for_atexit;

static void at_exit(void) {
  CHECK_TAGGED(kept_for_atexit);
  free(kept_for_atexit);
  free(calloc(10, 10));
}

static void constructor_allocated_before_main(void) {
  void *p;
  char *s;
  CHECK_MSG(early_constructor_ok(), "an allocation in libearly.so's constructor failed");
  p = early_take_block();
  CHECK(p != NULL);
  CHECK_TAGGED(p);
  free(p);
  s = early_make_string("made in a library");
  CHECK(s != NULL && strcmp(s, "made in a library") == 0);
  free(s);
}

static void dlopen_and_dlsym(void) {
  char path[4096];
  void *h;
  int (*ok)(void);
  void *(*take)(void);
  char *(*make)(const char *);
  int round;
  helper_lib_path(path, sizeof path, "libearly_dl.so");

  /* A missing library: dlerror's message is allocated by libc. */
  CHECK(dlopen("libdoes-not-exist-hakmem-test.so", RTLD_NOW) == NULL);
  CHECK(dlerror() != NULL);
  CHECK(dlsym(RTLD_DEFAULT, "no_such_symbol_hakmem_test") == NULL);
  CHECK(dlerror() != NULL);

  for (round = 0; round < 20; round++) {
    void *p;
    char *s;
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h != NULL, "dlopen(%s): %s", path, dlerror());
    ok = (int (*)(void))dlsym(h, "early_dl_constructor_ok");
    take = (void *(*)(void))dlsym(h, "early_dl_take_block");
    make = (char *(*)(const char *))dlsym(h, "early_dl_make_string");
    CHECK(ok && take && make);
    CHECK_MSG(ok(), "an allocation in libearly_dl.so's constructor failed");
    p = take();
    CHECK(p != NULL);
    CHECK_TAGGED(p);
    free(p);
    s = make("from dlopen");
    CHECK(strcmp(s, "from dlopen") == 0);
    CHECK(dlclose(h) == 0);
    /* The library is gone; its string is still ours. */
    CHECK(strcmp(s, "from dlopen") == 0);
    free(s);
  }
}

static void no_threads_ever(void) {
  void *p[1000];
  int i;
  for (i = 0; i < 1000; i++) {
    p[i] = malloc((size_t)i * 13 + TAGGED_MIN);
    CHECK(p[i] != NULL);
    tagged_fill(p[i], (size_t)i * 13 + TAGGED_MIN, (uint64_t)i);
  }
  for (i = 0; i < 1000; i++) {
    CHECK_TAGGED(p[i]);
    free(p[i]);
  }
  kept_for_atexit = malloc(123);
  CHECK(kept_for_atexit != NULL);
  tagged_fill(kept_for_atexit, 123, 4);
  CHECK(atexit(at_exit) == 0);
}

int main(void) {
  test_init();
  RUN(constructor_allocated_before_main);
  RUN(dlopen_and_dlsym);
  RUN(no_threads_ever);
  return 0;
}
