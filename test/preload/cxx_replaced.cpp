/* SPDX-License-Identifier: MIT */
// A program that replaces operator new(size_t) and operator delete(void *)
// alone (C++98's pair, over a pool of its own), run with hakmem preloaded:
// its sized and nothrow deletes, which libstdc++ writes as calls to its
// operator delete(void *), reach that one, as they do without hakmem, rather
// than hakmem's free (which would abort on a pointer it did not hand out).
// new[] and delete[] stay a pair, whichever allocator serves them.
#include "testutil.h"

#include <new>

namespace {
alignas(64) char pool[1 << 20];
size_t used;
int deleted;
bool in_pool(const void *p) { return (const char *)p >= pool && (const char *)p < pool + sizeof pool; }
struct Node {
  long v[3];
};
}  // namespace

void *operator new(size_t n) {
  n = (n + 15) & ~size_t(15);
  if (used + n > sizeof pool) throw std::bad_alloc();
  void *p = pool + used;
  used += n;
  return p;
}
#pragma GCC diagnostic ignored "-Wsized-deallocation"  // the point: the sized one is not replaced
void operator delete(void *p) noexcept {
  if (!p) return;
  CHECK_MSG(in_pool(p), "the program's delete got %p, not its own", p);
  deleted++;
}

int main() {
  test_init();
  Node *n = new Node;  // the program's
  CHECK(in_pool(n));
  delete n;  // operator delete(void *, size_t): sized
  CHECK_EQ(deleted, 1);
  Node *m = new Node;
  operator delete(m, std::nothrow);  // nothrow delete
  CHECK_EQ(deleted, 2);
  Node *a = new Node[4];  // whichever allocator, its own delete[]
  a[3].v[2] = 1;
  delete[] a;
  printf("  %d deletes reached the program's operator delete\n", deleted);
  return 0;
}
