/* SPDX-License-Identifier: MIT */
// A program that replaces operator new(size_t) and operator delete(void *)
// alone (C++98's pair, over a pool of its own), and the aligned pair
// (C++17's operator new(size_t, align_val_t) and operator delete(void *,
// align_val_t)), run with hakmem preloaded: its sized and nothrow deletes,
// which libstdc++ writes as calls to the pair's delete, reach that one, as
// they do without hakmem, rather than hakmem's free (which would abort on a
// pointer it did not hand out).  new[] and delete[] stay a pair, whichever
// allocator serves them.
#include "testutil.h"

#include <new>

namespace {
alignas(64) char pool[1 << 20];
size_t used;
int deleted, aligned_deleted;
bool in_pool(const void *p) { return (const char *)p >= pool && (const char *)p < pool + sizeof pool; }
struct Node {
  long v[3];
};
struct alignas(64) Wide {
  long v[12];
};
}  // namespace

void *operator new(size_t n) {
  n = (n + 15) & ~size_t(15);
  if (used + n > sizeof pool) throw std::bad_alloc();
  void *p = pool + used;
  used += n;
  return p;
}
void *operator new(size_t n, std::align_val_t a) {
  used = (used + size_t(a) - 1) & ~(size_t(a) - 1);
  return operator new(n);
}
#pragma GCC diagnostic ignored "-Wsized-deallocation"  // the point: the sized one is not replaced
void operator delete(void *p) noexcept {
  if (!p) return;
  CHECK_MSG(in_pool(p), "the program's delete got %p, not its own", p);
  deleted++;
}
void operator delete(void *p, std::align_val_t a) noexcept {
  if (!p) return;
  CHECK_MSG(in_pool(p), "the program's aligned delete got %p, not its own", p);
  CHECK_EQ(size_t(a), alignof(Wide));
  aligned_deleted++;
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
  Wide *w = new Wide;  // the program's aligned new
  CHECK(in_pool(w) && (uintptr_t)w % alignof(Wide) == 0);
  delete w;  // operator delete(void *, size_t, align_val_t): sized
  CHECK_EQ(aligned_deleted, 1);
  w = new Wide;
  operator delete(w, std::align_val_t(alignof(Wide)), std::nothrow);  // nothrow aligned delete
  CHECK_EQ(aligned_deleted, 2);
  Wide *wa = new Wide[3];  // whichever allocator, its own delete[]
  wa[2].v[11] = 1;
  delete[] wa;
  printf("  %d deletes reached the program's operator delete, %d its aligned one\n", deleted, aligned_deleted);
  return 0;
}
