/* SPDX-License-Identifier: MIT */
// Part of the cxx_churn app test: a C++ program heavy on new and delete.
// Producer threads build batches -- vectors of strings, a std::map of
// vectors, an unordered_map of shared_ptr'd strings, a list -- from a seeded
// generator, and note a checksum of what they put in, computed from the
// generator alone.  Consumer threads take the batches from a queue of
// shared_ptr, recompute the checksum from the containers (it must match),
// copy, sort, erase, splice and rebuild them, throw and catch exceptions
// carrying strings, and drop the batches, which the last owner deletes, in
// whichever thread that is.  Each batch's result goes in a table by
// producer and round; the program prints the table's digest, which depends
// on the seed alone, and whether hakmem is in the process.
//
//   cxx_churn THREADS ROUNDS
#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

uint64_t hash_string(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = mix(h, c);
  return h;
}

struct Batch {
  int producer, round;
  std::vector<std::string> words;
  std::map<std::string, std::vector<int>> index;
  std::unordered_map<int, std::shared_ptr<const std::string>> shared;
  std::list<std::vector<uint32_t>> chunks;
  uint64_t expected = 0;  // from the generator, while building
};

std::shared_ptr<Batch> build(int producer, int round) {
  auto b = std::make_shared<Batch>();
  Rng rng{static_cast<uint64_t>(producer) * 1000003u + static_cast<uint64_t>(round)};
  uint64_t h = 0;
  b->producer = producer;
  b->round = round;
  size_t words = 200 + rng.below(800);
  for (size_t i = 0; i < words; i++) {
    std::string w(1 + rng.below(rng.below(8) == 0 ? 2000 : 40), static_cast<char>('a' + rng.below(26)));
    w += std::to_string(i);
    h = mix(h, hash_string(w));
    int value = static_cast<int>(rng.below(1000000));
    b->index[w].push_back(value);
    h = mix(h, static_cast<uint64_t>(value));
    b->words.push_back(std::move(w));
  }
  for (int k = 0; k < 64; k++) {
    auto s = std::make_shared<const std::string>(b->words[rng.below(b->words.size())]);
    b->shared[k] = s;
    h = mix(h, hash_string(*s) + static_cast<uint64_t>(k));
  }
  for (int c = 0; c < 16; c++) {
    std::vector<uint32_t> v(rng.below(4096) + 1);
    for (auto &x : v) {
      x = static_cast<uint32_t>(rng.next());
      h = mix(h, x);
    }
    b->chunks.push_back(std::move(v));
  }
  b->expected = h;
  return b;
}

// The same checksum, from the containers.  std::map iterates in key order,
// so the words are hashed again in the order they were made (their values
// are appended per word).
uint64_t checksum(const Batch &b) {
  uint64_t h = 0;
  std::map<std::string, size_t> seen;
  for (const auto &w : b.words) {
    h = mix(h, hash_string(w));
    h = mix(h, static_cast<uint64_t>(b.index.at(w).at(seen[w]++)));
  }
  for (int k = 0; k < 64; k++) h = mix(h, hash_string(*b.shared.at(k)) + static_cast<uint64_t>(k));
  for (const auto &v : b.chunks)
    for (uint32_t x : v) h = mix(h, x);
  return h;
}

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Works the batch over; its result depends on the batch's contents alone.
uint64_t consume(Batch &b) {
  if (checksum(b) != b.expected)
    throw Failure("batch " + std::to_string(b.producer) + "/" + std::to_string(b.round) +
                  ": contents changed");
  std::vector<std::string> sorted(b.words);
  std::sort(sorted.begin(), sorted.end());
  uint64_t h = 0;
  for (size_t i = 0; i < sorted.size(); i += 7) h = mix(h, hash_string(sorted[i]));
  for (auto it = b.index.begin(); it != b.index.end();) it = it->first.size() % 2 ? b.index.erase(it) : ++it;
  for (auto &kv : b.index) {
    kv.second.insert(kv.second.end(), kv.second.begin(), kv.second.end());
    h = mix(h, kv.second.size());
  }
  std::list<std::vector<uint32_t>> other;
  other.splice(other.end(), b.chunks, b.chunks.begin(), std::next(b.chunks.begin(), 8));
  for (auto &v : other) {
    v.resize(v.size() * 2 + 1, 7);
    h = mix(h, v.size());
  }
  std::function<uint64_t(int)> deep = [&](int depth) -> uint64_t {
    if (depth == 0) throw std::out_of_range(std::string(100 + h % 100, 'e'));
    std::string local = sorted[static_cast<size_t>(depth) % sorted.size()] + "!";
    return deep(depth - 1) + local.size();
  };
  try {
    h = mix(h, deep(20));
  } catch (const std::out_of_range &e) {
    h = mix(h, std::string(e.what()).size());
  }
  b.shared.clear();
  return h;
}

template <typename T>
class Queue {
 public:
  void push(T item) {
    std::lock_guard<std::mutex> g(lock_);
    items_.push_back(std::move(item));
    ready_.notify_one();
  }
  // An item, or an empty one once the queue is closed and empty.
  T pop() {
    std::unique_lock<std::mutex> g(lock_);
    ready_.wait(g, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return T();
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }
  void close() {
    std::lock_guard<std::mutex> g(lock_);
    closed_ = true;
    ready_.notify_all();
  }

 private:
  std::mutex lock_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s THREADS ROUNDS\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]), rounds = std::atoi(argv[2]);
  if (threads < 1 || rounds < 1) return 2;
  Queue<std::shared_ptr<Batch>> queue;
  std::vector<uint64_t> results(static_cast<size_t>(threads) * static_cast<size_t>(rounds));
  std::mutex failed_lock;
  std::vector<std::string> failures;

  std::vector<std::thread> consumers, producers;
  for (int c = 0; c < threads; c++)
    consumers.emplace_back([&] {
      while (auto b = queue.pop()) {
        try {
          results[static_cast<size_t>(b->producer) * static_cast<size_t>(rounds) +
                  static_cast<size_t>(b->round)] = consume(*b);
        } catch (const Failure &f) {
          std::lock_guard<std::mutex> g(failed_lock);
          failures.push_back(f.what());
        }
      }
    });
  for (int p = 0; p < threads; p++)
    producers.emplace_back([&, p] {
      for (int r = 0; r < rounds; r++) {
        std::shared_ptr<Batch> b = build(p, r);
        std::weak_ptr<Batch> watch = b;
        queue.push(std::move(b));
        if (r % 16 == 0) std::this_thread::yield();
        (void)watch.lock();
      }
    });
  for (auto &t : producers) t.join();
  queue.close();
  for (auto &t : consumers) t.join();

  for (const auto &f : failures) std::printf("FAILED: %s\n", f.c_str());
  uint64_t digest = 0;
  for (uint64_t r : results) digest = mix(digest, r);
  std::printf("%d threads, %d rounds: %zu batches, digest %016llx\n", threads, rounds, results.size(),
              static_cast<unsigned long long>(digest));
  std::printf("%s\n", dlsym(RTLD_DEFAULT, "hak_version") ? "hakmem" : "no hakmem");
  return failures.empty() ? 0 : 1;
}
