// SPDX-License-Identifier: MIT
// Part of the "cxx_replaced_dlopen" test: a library whose constructor, which
// dlopen runs with the loader's lock held, takes a block from the program's
// operator new, wakes the program's other thread (a byte on the pipe whose
// end CXX_CTOR_FD names) for its first sized delete, and gives the block
// back through the sized delete a while later.
#include <cstdlib>
#include <new>
#include <unistd.h>

__attribute__((constructor)) static void take_and_give_back() {
  long *p = new long(2);
  const char *fd = getenv("CXX_CTOR_FD");
  if (fd && write(atoi(fd), "x", 1) != 1) abort();
  usleep(50000);
  ::operator delete(p, sizeof *p);
}
