/* SPDX-License-Identifier: MIT */
// A program that replaces operator new(size_t) and operator delete(void *),
// and the aligned pair, over malloc and aligned_alloc with a header before
// each block (as leak checkers and counting wrappers do), run with hakmem
// preloaded: every other form (new[], the sized, array and nothrow deletes)
// reaches the program's pair, as libstdc++'s forms do, so that each block
// comes back to the operator that made it and the counts balance.  With
// hakmem's forms freeing directly, the sized delete of `delete s` (C++14)
// got a pointer 16 bytes into a block and aborted.
#include "testutil.h"

#include <new>
#include <vector>

namespace {
const size_t MAGIC = 0x5eed1e55;
int made, unmade, aligned_made, aligned_unmade;
struct Node {
  long v[3];
};
struct alignas(64) Wide {
  long v[12];
};
size_t *header(void *p) { return (size_t *)p - 2; }
}  // namespace

void *operator new(size_t n) {
  size_t *h = (size_t *)malloc(n + 16);
  if (!h) throw std::bad_alloc();
  h[0] = MAGIC, h[1] = n;
  made++;
  return h + 2;
}
#pragma GCC diagnostic ignored "-Wsized-deallocation"  // the point: the sized one is not replaced
void operator delete(void *p) noexcept {
  if (!p) return;
  CHECK_MSG(header(p)[0] == MAGIC, "the program's delete got %p, not one of its new's", p);
  header(p)[0] = 0;
  unmade++;
  free(header(p));
}
void *operator new(size_t n, std::align_val_t a) {
  size_t al = size_t(a);
  char *base = (char *)aligned_alloc(al, (n + 2 * al - 1) / al * al);
  if (!base) throw std::bad_alloc();
  void *p = base + al;
  header(p)[0] = MAGIC, header(p)[1] = al;
  aligned_made++;
  return p;
}
void operator delete(void *p, std::align_val_t a) noexcept {
  if (!p) return;
  CHECK_MSG(header(p)[0] == MAGIC && header(p)[1] == size_t(a), "the program's aligned delete got %p", p);
  header(p)[0] = 0;
  aligned_unmade++;
  free((char *)p - size_t(a));
}

int main() {
  test_init();
  Node *n = new Node;
  delete n;  // operator delete(void *, size_t)
  CHECK(made == 1 && unmade == 1);
  int *a = new int[4];  // operator new[](size_t): the program's new
  a[3] = 1;
  delete[] a;  // operator delete[](void *): the program's delete
  CHECK(made == 2 && unmade == 2);
  n = new Node;
  operator delete(n, std::nothrow);
  CHECK(made == 3 && unmade == 3);
  {
    std::vector<long> v(100, 7);  // std::allocator: operator new, the sized delete
    CHECK(v[99] == 7);
  }
  CHECK(made == 4 && unmade == 4);
  Wide *w = new Wide;
  CHECK((uintptr_t)w % alignof(Wide) == 0);
  delete w;  // operator delete(void *, size_t, align_val_t)
  CHECK(aligned_made == 1 && aligned_unmade == 1);
  Wide *wa = new Wide[3];  // operator new[](size_t, align_val_t): the program's
  wa[2].v[11] = 1;
  delete[] wa;
  CHECK(aligned_made == 2 && aligned_unmade == 2);
  w = new Wide;
  operator delete(w, std::align_val_t(alignof(Wide)), std::nothrow);
  CHECK(aligned_made == 3 && aligned_unmade == 3);
  printf("  %d blocks through the program's new and delete, %d through the aligned pair\n", made, aligned_made);
  return 0;
}
