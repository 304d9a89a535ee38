/* SPDX-License-Identifier: MIT */
/* A C program (no C++ runtime at start-up) that loads a C++ library with
 * dlopen, as a scripting language loads an extension: a failing operator new
 * in it throws std::bad_alloc, after calling the new-handler until it gives
 * up, as the C++ standard says, though libstdc++ came after the allocator.
 * Runs against glibc as well. */
#include "testutil.h"

#include <dlfcn.h>

static int call(void *h, const char *name) {
  int (*fn)(void) = (int (*)(void))dlsym(h, name);
  CHECK_MSG(fn != NULL, "dlsym(%s): %s", name, dlerror());
  return fn();
}

int main(void) {
  char path[4096];
  test_init();
  CHECK_MSG(dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv") == NULL, "the C++ runtime is loaded already");
  helper_lib_path(path, sizeof path, "libcxx_plugin.so");
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(h != NULL, "dlopen(%s): %s", path, dlerror());
  CHECK_MSG(call(h, "plugin_new_fails") == 1, "operator new(SIZE_MAX / 2) did not throw std::bad_alloc");
  CHECK_EQ(call(h, "plugin_new_handler_calls"), 2);
  CHECK_MSG(call(h, "plugin_aligned_new_fails") == 1, "aligned operator new(SIZE_MAX / 2) did not throw");
  CHECK_EQ(dlclose(h), 0);
  return 0;
}
