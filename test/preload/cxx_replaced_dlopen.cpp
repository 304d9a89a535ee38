/* SPDX-License-Identifier: MIT */
// A program that replaces operator new and operator delete over malloc, with
// a header before each block, run with hakmem preloaded: a library it loads
// with dlopen gives a block back through the sized delete in its constructor,
// with the loader's lock held, while another thread makes its first sized
// delete.  Neither may wait for the other, and each block reaches the
// program's delete: hakmem learns at load which operators the program
// replaced, not at the first such call (whose look-up, waiting for the
// loader's lock, had the constructor's delete give up and free the block
// as its own: an abort, "inside a block").
#include "testutil.h"

#include <atomic>
#include <dlfcn.h>
#include <new>
#include <pthread.h>

namespace {
const size_t MAGIC = 0xfeedface;
std::atomic<int> made, unmade;
int wake[2];
}  // namespace

void *operator new(size_t n) {
  size_t *h = (size_t *)malloc(n + 16);
  if (!h) throw std::bad_alloc();
  h[0] = MAGIC;
  made++;
  return h + 2;
}
void operator delete(void *p) noexcept {
  if (!p) return;
  size_t *h = (size_t *)p - 2;
  CHECK_MSG(h[0] == MAGIC, "the program's delete got %p, not one of its new's", p);
  h[0] = 0;
  unmade++;
  free(h);
}

static void *first_delete(void *) {
  char c;
  CHECK(read(wake[0], &c, 1) == 1);  // the library's constructor is running
  long *q = new long(1);
  ::operator delete(q, sizeof *q);
  return nullptr;
}

int main() {
  test_init();
  CHECK(pipe(wake) == 0);
  char fd[16];
  snprintf(fd, sizeof fd, "%d", wake[1]);
  setenv("CXX_CTOR_FD", fd, 1);
  pthread_t t;
  CHECK(pthread_create(&t, nullptr, first_delete, nullptr) == 0);
  char path[4096];
  helper_lib_path(path, sizeof path, "libcxx_ctor.so");
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(h != NULL, "dlopen(%s): %s", path, dlerror());
  CHECK(pthread_join(t, nullptr) == 0);
  CHECK(made == 2 && unmade == 2);
  printf("  %d blocks through the program's new and delete\n", (int)made);
  return 0;
}
