// The Chase-Lev deque: order at each end, growth and wrap-around from tiny capacities, and
// owner/thief races with many thieves where no element may be lost or taken twice.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "scheduler/deque.hpp"

using ordo::sched::Deque;
using Q = Deque<std::uint64_t>;

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr std::uint64_t kScale = 10;  // ThreadSanitizer is ~10x slower: fewer elements
#else
constexpr std::uint64_t kScale = 1;
#endif

// Counts how often each element was taken, from any thread.
struct Tally {
  explicit Tally(std::size_t n) : seen(new std::atomic<std::uint32_t>[n]), size(n) {
    for (std::size_t i = 0; i < n; ++i) seen[i].store(0);
  }
  void take(std::uint64_t v) { seen[v].fetch_add(1, std::memory_order_relaxed); }
  // Elements taken other than exactly once.
  std::size_t wrong() const {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < size; ++i) bad += seen[i].load() != 1;
    return bad;
  }
  std::unique_ptr<std::atomic<std::uint32_t>[]> seen;
  std::size_t size;
};

}  // namespace

TEST_CASE("owner pops newest first, thieves steal oldest first", "[deque]") {
  Q q(4);
  auto own = q.owner();
  auto thief = q.stealer();
  for (std::uint64_t i = 0; i < 4; ++i) own.push(i);
  CHECK(*own.pop() == 3);
  auto s = thief.steal();
  REQUIRE(s.status == Q::Steal::success);
  CHECK(s.value == 0);
  CHECK(*own.pop() == 2);
  CHECK(*own.pop() == 1);
  CHECK_FALSE(own.pop().has_value());
  CHECK(thief.steal().status == Q::Steal::empty);
  CHECK(thief.empty());
}

TEST_CASE("a deque of capacity 2 grows and keeps every element in order", "[deque]") {
  Q q(2);
  auto own = q.owner();
  auto thief = q.stealer();
  CHECK(q.capacity() == 2);
  for (std::uint64_t i = 0; i < 1000; ++i) own.push(i);
  CHECK(q.capacity() >= 1000);
  for (std::uint64_t i = 0; i < 500; ++i) {
    auto s = thief.steal();
    REQUIRE(s.status == Q::Steal::success);
    CHECK(s.value == i);
  }
  for (std::uint64_t i = 1000; i-- > 500;) CHECK(*own.pop() == i);
  CHECK_FALSE(own.pop().has_value());
}

TEST_CASE("indices wrap around a small array many times without growing", "[deque]") {
  Q q(4);
  auto own = q.owner();
  auto thief = q.stealer();
  std::uint64_t next = 0, expect_steal = 0;
  for (int round = 0; round < 1000; ++round) {
    // Three in, one stolen from the top, two popped from the bottom: the live range moves
    // forward by three slots per round, so it wraps the 4-slot array every few rounds.
    for (int k = 0; k < 3; ++k) own.push(next++);
    auto s = thief.steal();
    REQUIRE(s.status == Q::Steal::success);
    CHECK(s.value == expect_steal);
    CHECK(*own.pop() == next - 1);
    CHECK(*own.pop() == next - 2);
    expect_steal = next;
  }
  CHECK(q.capacity() == 4);
}

TEST_CASE("many thieves and the owner race: every element taken exactly once", "[deque][stress]") {
  const unsigned thieves = GENERATE(1u, 3u, 8u);
  const std::size_t capacity = GENERATE(std::size_t{2}, std::size_t{64});
  const std::uint64_t n = 200000 / kScale;
  Q q(capacity);
  Tally tally(n);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> stolen{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < thieves; ++t)
    ts.emplace_back([&, s = q.stealer()] {
      for (;;) {
        bool finished = done.load(std::memory_order_acquire);  // pairs with the release below
        auto r = s.steal();
        if (r.status == Q::Steal::success) {
          tally.take(r.value);
          stolen.fetch_add(1, std::memory_order_relaxed);
        } else if (r.status == Q::Steal::empty && finished) {
          return;
        }
      }
    });
  {
    auto own = q.owner();
    // Pushes in bursts and pops some back, so the owner often races for the last element.
    std::uint64_t next = 0;
    while (next < n) {
      const std::uint64_t burst = 1 + next % 7;
      for (std::uint64_t k = 0; k < burst && next < n; ++k) own.push(next++);
      for (std::uint64_t k = 0; k < burst / 2; ++k)
        if (auto v = own.pop()) tally.take(*v);
    }
    while (auto v = own.pop()) tally.take(*v);
  }
  done.store(true, std::memory_order_release);  // pairs with the thieves' acquire load
  for (auto& t : ts) t.join();
  CHECK(tally.wrong() == 0);
  INFO("stolen " << stolen.load() << " of " << n);
}

TEST_CASE("owner and thieves fight over single elements", "[deque][stress]") {
  // The deque holds at most one element: every pop is the last-element CAS race.
  const std::uint64_t n = 100000 / kScale;
  Q q(2);
  Tally tally(n);
  std::atomic<bool> done{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < 4; ++t)
    ts.emplace_back([&, s = q.stealer()] {
      while (!done.load(std::memory_order_acquire)) {  // pairs with the release below
        auto r = s.steal();
        if (r.status == Q::Steal::success) tally.take(r.value);
      }
      for (;;) {
        auto r = s.steal();
        if (r.status == Q::Steal::empty) return;
        if (r.status == Q::Steal::success) tally.take(r.value);
      }
    });
  auto own = q.owner();
  for (std::uint64_t i = 0; i < n; ++i) {
    own.push(i);
    if (auto v = own.pop()) tally.take(*v);
  }
  done.store(true, std::memory_order_release);  // pairs with the thieves' acquire load
  for (auto& t : ts) t.join();
  CHECK(tally.wrong() == 0);
}
