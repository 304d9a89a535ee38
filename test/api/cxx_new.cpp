/* SPDX-License-Identifier: MIT */
// test-builds: static
// C++ allocation: operator new and delete in all their forms (plain, array,
// sized, aligned with std::align_val_t, nothrow); an impossible size throws
// std::bad_alloc or, nothrow, returns nullptr; the new_handler is called and
// can free a reserve so that the allocation succeeds, or uninstall itself so
// that bad_alloc is thrown; STL containers under load, in several threads.
// Runs against glibc/libstdc++ as well as against hakmem.
#include "testutil.h"

#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kImpossible[] = {SIZE_MAX, SIZE_MAX - 4095, size_t(PTRDIFF_MAX) + 1,
                                  size_t(1) << 48};

// libstdc++ 12's aligned operator new rounds the size up to the alignment
// without an overflow check, so that SIZE_MAX becomes 0 and "succeeds"; hakmem
// must fail.  With libstdc++ those sizes are left out.
bool aligned_overflow_checked(size_t n) {
  static bool noted;
  if (hakmem_active() || n < SIZE_MAX - 8192) return true;
  if (!noted) NOTE("aligned new of SIZE_MAX left out (libstdc++ overflows)");
  noted = true;
  return false;
}

void plain_new_delete() {
  for (size_t n = 1; n < (size_t(4) << 20); n = n * 2 + 3) {
    auto *p = static_cast<unsigned char *>(::operator new(n));
    CHECK_ALIGNED(p, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    fill_pattern(p, n, n);
    auto *a = new unsigned char[n];
    fill_pattern(a, n, n + 1);
    CHECK_PATTERN(p, n, n);
    CHECK_PATTERN(a, n, n + 1);
    ::operator delete(p);
    delete[] a;
  }
  // Many small objects, then an array of objects with constructors and
  // destructors (new[] stores their count in front of them).
  struct Node {
    uint64_t v[5];
    Node *next;
  };
  Node *head = nullptr;
  for (int i = 0; i < 100000; i++) head = new Node{{uint64_t(i), 1, 2, 3, 4}, head};
  for (int i = 99999; i >= 0; i--) {
    Node *n = head;
    CHECK_EQ(n->v[0], i);
    head = n->next;
    delete n;
  }
  auto *strings = new std::string[1000];
  for (int i = 0; i < 1000; i++) strings[i] = std::string(size_t(i), 'x');
  for (int i = 0; i < 1000; i++) CHECK_EQ(strings[i].size(), i);
  delete[] strings;
}

void sized_delete() {
  for (size_t n = 1; n < (size_t(4) << 20); n = n * 3 + 1) {
    void *p = ::operator new(n);
    memset(p, 1, n);
    ::operator delete(p, n);
    p = ::operator new[](n);
    memset(p, 2, n);
    ::operator delete[](p, n);
  }
}

template <size_t A>
struct alignas(A) Aligned {
  unsigned char bytes[A];
};

template <size_t A>
void aligned_type() {
  auto *one = new Aligned<A>;
  CHECK_ALIGNED(one, A);
  memset(one->bytes, 0x61, A);
  auto *many = new Aligned<A>[7];
  CHECK_ALIGNED(many, A);
  memset(many, 0x62, sizeof(Aligned<A>) * 7);
  delete one;
  delete[] many;
}

void aligned_new_delete() {
  aligned_type<32>();
  aligned_type<64>();
  aligned_type<256>();
  aligned_type<4096>();
  aligned_type<65536>();
  for (size_t a = 1; a <= (size_t(4) << 20); a *= 2)
    for (size_t n : {size_t(1), a - 1 + (a == 1), a, a + 1, 3 * a + 5, size_t(100)}) {
      std::align_val_t al{a};
      auto *p = static_cast<unsigned char *>(::operator new(n, al));
      CHECK_ALIGNED(p, a);
      fill_pattern(p, n, a);
      auto *q = static_cast<unsigned char *>(::operator new[](n, al));
      CHECK_ALIGNED(q, a);
      fill_pattern(q, n, a + 1);
      auto *r = static_cast<unsigned char *>(::operator new(n, al, std::nothrow));
      CHECK(r != nullptr);
      CHECK_ALIGNED(r, a);
      CHECK_PATTERN(p, n, a);
      CHECK_PATTERN(q, n, a + 1);
      switch (n % 3) {
        case 0:
          ::operator delete(p, al);
          ::operator delete[](q, al);
          break;
        case 1:
          ::operator delete(p, n, al);
          ::operator delete[](q, n, al);
          break;
        default:
          ::operator delete(p, al, std::nothrow);
          ::operator delete[](q, al, std::nothrow);
          break;
      }
      ::operator delete(r, al);
    }
}

void nothrow_new() {
  for (size_t n = 1; n < (size_t(1) << 20); n = n * 5 + 1) {
    int *p = new (std::nothrow) int[n];
    CHECK(p != nullptr);
    p[0] = p[n - 1] = 7;
    delete[] p;
    void *q = ::operator new(n, std::nothrow);
    CHECK(q != nullptr);
    ::operator delete(q, std::nothrow);
  }
  for (size_t n : kImpossible) {
    CHECK(::operator new(opaque(n), std::nothrow) == nullptr);
    CHECK(::operator new[](opaque(n), std::nothrow) == nullptr);
    if (!aligned_overflow_checked(n)) continue;
    CHECK(::operator new(opaque(n), std::align_val_t{64}, std::nothrow) == nullptr);
    CHECK(::operator new[](opaque(n), std::align_val_t{4096}, std::nothrow) == nullptr);
  }
}

template <class F>
bool throws_bad_alloc(F f) {
  try {
    f();
  } catch (const std::bad_alloc &) {
    return true;
  }
  return false;
}

void impossible_size_throws() {
  for (size_t n : kImpossible) {
    CHECK_MSG(throws_bad_alloc([n] { ::operator delete(::operator new(opaque(n))); }),
              "operator new(%zu) did not throw bad_alloc", n);
    CHECK(throws_bad_alloc([n] { ::operator delete[](::operator new[](opaque(n))); }));
    if (!aligned_overflow_checked(n)) continue;
    CHECK(throws_bad_alloc([n] {
      ::operator delete(::operator new(opaque(n), std::align_val_t{128}), std::align_val_t{128});
    }));
    CHECK(throws_bad_alloc([n] {
      ::operator delete[](::operator new[](opaque(n), std::align_val_t{8192}),
                          std::align_val_t{8192});
    }));
  }
}

std::atomic<int> handler_calls;

void handler_that_gives_up() {
  handler_calls++;
  std::set_new_handler(nullptr);
}

// A handler that uninstalls itself: called once, then bad_alloc.  nothrow new
// calls it too, then returns nullptr.
void new_handler_then_bad_alloc() {
  handler_calls = 0;
  std::set_new_handler(handler_that_gives_up);
  CHECK(throws_bad_alloc([] { ::operator delete(::operator new(opaque(SIZE_MAX / 2))); }));
  CHECK_EQ(handler_calls.load(), 1);

  handler_calls = 0;
  std::set_new_handler(handler_that_gives_up);
  CHECK(::operator new(opaque(SIZE_MAX / 2), std::nothrow) == nullptr);
  CHECK_EQ(handler_calls.load(), 1);

  handler_calls = 0;
  std::set_new_handler(handler_that_gives_up);
  CHECK(throws_bad_alloc([] {
    ::operator delete[](::operator new[](opaque(SIZE_MAX / 2), std::align_val_t{64}),
                        std::align_val_t{64});
  }));
  CHECK_EQ(handler_calls.load(), 1);
  CHECK(std::get_new_handler() == nullptr);
}

// Above the largest shared huge region (126 MiB), so that it is a mapping of
// its own: the address space reserved at start-up is not subject to a limit
// set later.
constexpr size_t kReserve = size_t(192) << 20;
void *reserve;

void handler_that_frees_reserve() {
  handler_calls++;
  if (reserve) {
    ::operator delete(reserve);
    reserve = nullptr;
  } else {
    std::set_new_handler(nullptr);
  }
}

// In a child, under an address-space limit that leaves 32 MiB: a 192 MiB
// request fails until the handler frees a 192 MiB reserve, then succeeds.
void reserve_child(void *) {
  reserve = ::operator new(kReserve);
  memset(reserve, 1, 4096);
  rlimit lim;
  CHECK(getrlimit(RLIMIT_AS, &lim) == 0);
  lim.rlim_cur = proc_status_kib("VmSize") * 1024 + (size_t(32) << 20);
  CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
  handler_calls = 0;
  std::set_new_handler(handler_that_frees_reserve);
  auto *p = static_cast<unsigned char *>(::operator new(kReserve));
  CHECK(p != nullptr);
  CHECK_MSG(handler_calls.load() >= 1, "the allocation did not fail first: limit not effective");
  CHECK(reserve == nullptr);
  p[0] = p[kReserve - 1] = 1;
  ::operator delete(p);
}

void new_handler_frees_reserve() {
  child_result_t res;
  REQUIRE_AS_LIMIT();
  run_in_child(reserve_child, nullptr, 20, &res);
  if (res.err[0]) fprintf(stderr, "child's stderr:\n%s", res.err);
  CHECK_MSG(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "child %s",
            describe_status(res.status));
}

// STL containers: results are compared with values computed independently.
void stl_work(uint64_t seed) {
  rng_t rng{seed};
  std::vector<uint64_t> v;
  uint64_t sum = 0;
  for (int i = 0; i < 300000; i++) {
    uint64_t x = rng_next(&rng) % 1000;
    v.push_back(x);
    sum += x;
  }
  uint64_t check = 0;
  for (uint64_t x : v) check += x;
  CHECK_EQ(check, sum);

  std::map<int, std::string> m;
  for (int i = 0; i < 50000; i++) m[i] = std::to_string(i * 7);
  for (int i = 0; i < 50000; i += 2) m.erase(i);
  CHECK_EQ(m.size(), 25000);
  for (const auto &kv : m) CHECK(kv.second == std::to_string(kv.first * 7));

  std::unordered_map<std::string, std::vector<int>> u;
  for (int i = 0; i < 40000; i++) u["key" + std::to_string(i % 5000)].push_back(i);
  CHECK_EQ(u.size(), 5000);
  for (int k = 0; k < 5000; k++) {
    const auto &vec = u.at("key" + std::to_string(k));
    CHECK_EQ(vec.size(), 8);
    for (size_t j = 0; j < vec.size(); j++) CHECK_EQ(vec[j], k + 5000 * int(j));
  }

  std::string s;
  for (int i = 0; i < 100000; i++) s += char('a' + i % 26);
  for (int i = 0; i < 100000; i++) CHECK(s[size_t(i)] == char('a' + i % 26));
  std::vector<std::string> parts;
  for (size_t i = 0; i < s.size(); i += 37) parts.push_back(s.substr(i, 37));
  std::string joined;
  for (const auto &p : parts) joined += p;
  CHECK(joined == s);
}

void stl_containers_under_load() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) threads.emplace_back(stl_work, uint64_t(t) + 1);
  stl_work(100);
  for (auto &t : threads) t.join();
}

}  // namespace

int main() {
  test_init();
  if (expected_hakmem() == 1) {
    // (The nothrow forms of new are libstdc++'s, which call hakmem's.)
    static const char *const cxx[] = {"_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm",
                                      "_ZnwmSt11align_val_t", "_ZdlPvSt11align_val_t",
                                      "_ZdlPvRKSt9nothrow_t", nullptr};
    check_symbols_from_hakmem(cxx);
  }
  RUN(plain_new_delete);
  RUN(sized_delete);
  RUN(aligned_new_delete);
  RUN(nothrow_new);
  RUN(impossible_size_throws);
  RUN(new_handler_then_bad_alloc);
  RUN(new_handler_frees_reserve);
  RUN(stl_containers_under_load);
  return 0;
}
