// The pool on this machine: every item runs exactly once whoever pushes it (workers into their
// own deques, outsiders into the injection queues), parked workers wake for new work, and the
// observer sees balanced park/unpark and real steals.
#include <atomic>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include "skip.hpp"
#include "test_support.hpp"

#include "scheduler/pool.hpp"

using namespace ordo::sched;

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr std::uint64_t kScale = 10;
#else
constexpr std::uint64_t kScale = 1;
#endif

// Items form a binary tree: item i pushes 2i+1 and 2i+2 while below `n`. Counts executions.
class TreeExecutor final : public Executor {
 public:
  TreeExecutor(Pool& pool, std::uint64_t n)
      : pool_(pool), n_(n), runs_(new std::atomic<std::uint32_t>[n]) {
    for (std::uint64_t i = 0; i < n; ++i) runs_[i].store(0);
  }
  void execute(Item item, unsigned worker) override {
    // Catch2 assertions are not thread-safe: count here, check on the test's thread.
    if (static_cast<int>(worker) != Pool::current_worker()) wrong_worker_.fetch_add(1);
    runs_[item].fetch_add(1, std::memory_order_relaxed);
    for (Item c : {2 * item + 1, 2 * item + 2})
      if (c < n_) pool_.push(c);
    // acq_rel: the last execution sees every other's counts, and publishes them via mu_.
    countdown_.count_one();
  }
  void wait() { countdown_.wait(); }
  std::uint64_t wrong() const {
    std::uint64_t bad = wrong_worker_.load();
    for (std::uint64_t i = 0; i < n_; ++i) bad += runs_[i].load() != 1;
    return bad;
  }

 private:
  Pool& pool_;
  std::uint64_t n_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> runs_;
  std::atomic<std::uint64_t> wrong_worker_{0};
  ordo::test::Countdown countdown_{n_};
};

// Item 0 pushes items 1..n-1 into its worker's own deque, then waits until another worker has
// run one of them: which that worker can only have done by stealing.
class StealExecutor final : public Executor {
 public:
  StealExecutor(Pool& pool, std::uint64_t n) : pool_(pool), n_(n) {}
  void execute(Item item, unsigned worker) override {
    if (item == 0) {
      first_worker_ = worker;
      for (Item c = 1; c < n_; ++c) pool_.push(c);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!other_ran_.load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    } else if (worker != first_worker_) {
      other_ran_.store(true);
    }
    countdown_.count_one();
  }
  void wait() { countdown_.wait(); }
  bool other_ran() const { return other_ran_.load(); }

 private:
  Pool& pool_;
  std::uint64_t n_;
  unsigned first_worker_ = 0;  // written before the pushes that publish it
  std::atomic<bool> other_ran_{false};
  ordo::test::Countdown countdown_{n_};
};

class CountingObserver final : public Observer {
 public:
  explicit CountingObserver(unsigned workers) : parks(workers), unparks(workers) {}
  void on_park(unsigned w) override { parks[w].fetch_add(1); }
  void on_unpark(unsigned w) override { unparks[w].fetch_add(1); }
  void on_steal(unsigned thief, unsigned victim) override {
    if (thief == victim) self_steals.fetch_add(1);
    steals.fetch_add(1);
  }
  std::vector<std::atomic<std::uint64_t>> parks, unparks;
  std::atomic<std::uint64_t> steals{0}, self_steals{0};
};

}  // namespace

TEST_CASE("every item of a task tree runs exactly once, for any worker count", "[pool]") {
  const unsigned workers = GENERATE(1u, 2u, 4u, 7u);
  const std::size_t capacity = GENERATE(std::size_t{2}, std::size_t{256});
  PoolConfig cfg;
  cfg.workers = workers;
  cfg.deque_capacity = capacity;
  Pool pool(cfg);
  REQUIRE(pool.size() == workers);
  TreeExecutor exec(pool, 100000 / kScale);
  pool.attach(exec);
  pool.push(0);
  exec.wait();
  pool.detach();
  CHECK(exec.wrong() == 0);
}

TEST_CASE("parked workers wake for each item pushed from outside", "[pool]") {
  // One item at a time, each after the previous finished: the workers are idle or parking at
  // every push, which is where a lost wake-up would hang this test. Without the idle spin they
  // reach parking within a few yields of each item; with it, only during the pauses below.
  PoolConfig cfg;
  cfg.workers = 3;
  cfg.idle_spin = GENERATE(std::chrono::nanoseconds{0}, PoolConfig{}.idle_spin);
  CAPTURE(cfg.idle_spin.count());
  auto pool = std::make_unique<Pool>(cfg);
  CountingObserver obs(pool->size());
  pool->set_observer(&obs);
  const int rounds = static_cast<int>(2000 / kScale);
  for (int r = 0; r < rounds; ++r) {
    TreeExecutor exec(*pool, 1 + static_cast<std::uint64_t>(r % 5));
    pool->attach(exec);
    pool->push(0);
    exec.wait();
    pool->detach();
    if (r % 100 == 0) {
      // Let them park: wait until one more has (at most a second; a fixed pause was too short
      // on a loaded machine, where each of a worker's yields before parking may take a time
      // slice).
      const auto parked = [&] {
        std::uint64_t n = 0;
        for (const auto& p : obs.parks) n += p.load();
        return n;
      };
      const std::uint64_t before = parked();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (parked() == before && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  pool.reset();  // joins the workers, so the counts below are final
  std::uint64_t parks = 0;
  for (unsigned w = 0; w < 3; ++w) {
    CHECK(obs.parks[w].load() == obs.unparks[w].load());
    parks += obs.parks[w].load();
  }
  CHECK(parks > 0);
}

TEST_CASE("idle workers steal from a busy one and the observer sees it", "[pool]") {
  CountingObserver obs(4);  // outlives the pool: workers may call it until they are joined
  PoolConfig cfg;
  cfg.workers = 4;
  cfg.idle_spin = std::chrono::nanoseconds{0};  // no spinning worker, so no mailbox is open
  Pool pool(cfg);
  pool.set_observer(&obs);
  StealExecutor exec(pool, 64);
  pool.attach(exec);
  pool.push(0);
  exec.wait();
  pool.detach();
  CHECK(exec.other_ran());
  // Only item 0 came from outside: the others reached other workers by stealing.
  CHECK(obs.steals.load() > 0);
  CHECK(obs.self_steals.load() == 0);
}

TEST_CASE("a push from a worker goes to a spinning worker's mailbox, not to a thief", "[pool]") {
  // Item 0 waits until the other worker spins (its mailbox open; it spins for the whole test),
  // pushes item 1 and waits until it has run: the push must have gone into the mailbox, since
  // nothing was stolen (the observer sees every steal from a deque).
  CountingObserver obs(2);
  PoolConfig cfg;
  cfg.workers = 2;
  cfg.idle_spin = std::chrono::seconds(60);
  Pool pool(cfg);
  if (pool.is_oversubscribed())
    ORDO_SKIP("threads share cores here: no worker spins, no mailbox opens");
  pool.set_observer(&obs);
  class PushingExecutor final : public Executor {
   public:
    explicit PushingExecutor(Pool& pool) : pool_(pool) {}
    void execute(Item item, unsigned worker) override {
      if (item == 0) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!pool_.has_open_mailbox(1 - worker) && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        pool_.push(1);
        while (!other_ran.load() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
      } else {
        other_ran.store(true);
      }
      countdown.count_one();
    }
    Pool& pool_;
    std::atomic<bool> other_ran{false};
    ordo::test::Countdown countdown{2};
  } exec(pool);
  pool.attach(exec);
  pool.push(0);
  exec.countdown.wait();
  pool.detach();
  CHECK(exec.other_ran.load());  // item 0's worker was busy until item 1 had run
  CHECK(obs.steals.load() == 0);
}

namespace {
// An item of the pinning test at or above this is one for a worker to pin (minus this).
constexpr Item kRelay = Item{1} << 40;
}  // namespace

TEST_CASE("a pinned item runs on its worker only, also when every worker is parked", "[pool]") {
  // Item = target worker + 4 x round. Rounds alternate: pinned from outside once every worker
  // has parked (the wake-up must reach the pinned worker, not any parked one, and no other:
  // the observer sees every worker that leaves its sleep), and pinned from a worker that then
  // keeps its core until the item has run elsewhere (a deque would let a thief take it).
  constexpr unsigned kWorkers = 4;
  CountingObserver obs(kWorkers);
  PoolConfig cfg;
  cfg.workers = kWorkers;
  cfg.idle_spin = std::chrono::nanoseconds{0};  // parking within a few yields
  Pool pool(cfg);
  pool.set_observer(&obs);
  class PinExecutor final : public Executor {
   public:
    explicit PinExecutor(Pool& pool) : pool_(pool) {}
    void execute(Item item, unsigned worker) override {
      if (item >= kRelay) {  // pin item - kRelay, then wait until it has run (elsewhere)
        const std::uint64_t before = ran.load();
        const auto target = static_cast<unsigned>((item - kRelay) % kWorkers);
        pool_.push_to(target, item - kRelay);
        if (target == worker) return;  // it runs next, here
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (ran.load() == before && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        return;
      }
      if (worker != item % kWorkers) wrong.fetch_add(1);
      ran.fetch_add(1);
    }
    Pool& pool_;
    std::atomic<std::uint64_t> ran{0}, wrong{0};
  } exec(pool);
  pool.attach(exec);
  const auto parked = [&] {
    std::uint64_t n = 0;
    for (unsigned w = 0; w < kWorkers; ++w) n += obs.parks[w].load() - obs.unparks[w].load();
    return n;
  };
  const std::uint64_t rounds = 200 / kScale;
  std::uint64_t expected = 0, others_woken = 0, parked_rounds = 0;
  for (std::uint64_t r = 0; r < rounds; ++r) {
    const Item item = (r * 7 + r / 3) % kWorkers + kWorkers * r;
    const auto target = static_cast<unsigned>(item % kWorkers);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::vector<std::uint64_t> unparks(kWorkers);
    std::uint64_t target_parks = 0;
    bool all_parked = false;
    if (r % 2 == 0) {
      while (parked() < kWorkers && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      all_parked = parked() == kWorkers;
      for (unsigned w = 0; w < kWorkers; ++w) unparks[w] = obs.unparks[w].load();
      target_parks = obs.parks[target].load();
      pool.push_to(target, item);
    } else {
      pool.push(kRelay + item);
    }
    ++expected;
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (exec.ran.load() < expected && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    INFO("round " << r);
    REQUIRE(exec.ran.load() == expected);  // not lost, nor left with a parked worker
    if (all_parked) {
      // Once the target has parked again (after its item and 16 yields), a worker woken with
      // it has long left its sleep. Nothing else wakes anyone meanwhile.
      while (obs.parks[target].load() == target_parks &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      ++parked_rounds;
      for (unsigned w = 0; w < kWorkers; ++w)
        if (w != target) others_woken += obs.unparks[w].load() - unparks[w];
    }
  }
  pool.detach();
  CHECK(exec.wrong.load() == 0);
  CHECK(parked_rounds > 0);
  CHECK(others_woken == 0);
  CHECK_THROWS_WITH(pool.push_to(kWorkers, 1), Catch::Contains("no worker 4"));
}

TEST_CASE("a second pin before its worker took the first is refused; the first runs", "[pool]") {
  // Worker 0 runs item 0 (pinned) until told to stop; meanwhile item 1 is pinned to it, then
  // item 2. Overwriting the slot would lose item 1 (a lost lane item is a hung run): the second
  // pin must be refused, and item 1 must run once worker 0 is free.
  PoolConfig cfg;
  cfg.workers = 2;
  Pool pool(cfg);
  class BlockingExecutor final : public Executor {
   public:
    void execute(Item item, unsigned worker) override {
      if (item == 0) {
        started.store(true);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!release.load() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
      }
      if (worker == 0) ran[item].fetch_add(1);
    }
    std::atomic<bool> started{false}, release{false};
    std::atomic<int> ran[3]{};
  } exec;
  pool.attach(exec);
  pool.push_to(0, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!exec.started.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  REQUIRE(exec.started.load());
  pool.push_to(0, 1);  // the slot is empty again: item 0 was taken
  CHECK_THROWS_WITH(pool.push_to(0, 2),
                    Catch::Contains("worker 0 has not taken its pinned item 1 yet") &&
                        Catch::Contains("at most one at a time"));
  exec.release.store(true);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (exec.ran[1].load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  pool.detach();
  CHECK(exec.ran[0].load() == 1);
  CHECK(exec.ran[1].load() == 1);  // kept, and run by its worker
  CHECK(exec.ran[2].load() == 0);  // refused, so never queued
}

TEST_CASE("bad processing units and topologies are refused with a message", "[pool]") {
  PoolConfig cfg;
  cfg.pus = {100000};
  CHECK_THROWS_WITH(Pool(cfg), Catch::Contains("processing unit 100000"));
  PoolConfig bad;
  bad.topology = "nonsense";
  CHECK_THROWS_AS(Pool(bad), std::invalid_argument);
}

TEST_CASE("items the pool keeps for its mailboxes are refused by push and push_to", "[pool]") {
  // kOpen and kClosed mark a mailbox's state: pushed as items, a spinning worker would take
  // one for an empty mailbox, or never see its item. kClosed also marks an empty pinned slot:
  // pinned, the item would never run.
  PoolConfig cfg;
  cfg.workers = 1;
  Pool pool(cfg);
  CHECK_THROWS_WITH(pool.push(Pool::kOpen), Catch::Contains("below Pool::kOpen"));
  CHECK_THROWS_WITH(pool.push(Pool::kClosed), Catch::Contains("below Pool::kOpen"));
  CHECK_THROWS_WITH(pool.push_to(0, Pool::kOpen), Catch::Contains("below Pool::kOpen"));
  CHECK_THROWS_WITH(pool.push_to(0, Pool::kClosed), Catch::Contains("below Pool::kOpen"));
}

TEST_CASE("absurd worker counts are refused at once; the limit itself starts", "[pool]") {
  if (!ordo::sched::Topology::hwloc_available())
    ORDO_SKIP("built without hwloc: no synthetic topology");
  // 8 units: the limit is max(256, 4 x 8) = 256. (20000 workers once spent minutes sorting
  // steal orders; 4294967295 ran out of memory.)
  for (unsigned n : {257u, 20000u, 4294967295u}) {
    PoolConfig cfg;
    cfg.topology = "synthetic:pack:2 core:2 pu:2";
    cfg.workers = n;
    cfg.bind = false;
    CHECK_THROWS_WITH(Pool(cfg), Catch::Contains(std::to_string(n) + " workers are more than 256"));
  }
  PoolConfig most;
  most.topology = "synthetic:pack:2 core:2 pu:2";
  most.workers = 256;
  most.bind = false;
  Pool pool(most);
  CHECK(pool.size() == 256);
  // Nearest first: worker 0's first 31 victims share its unit (workers wrap around the 8
  // units), in rotation order; the next 32 its core's other unit.
  const auto order = pool.steal_order(0);
  REQUIRE(order.size() == 255);
  for (std::size_t k = 0; k < 31; ++k) CHECK(order[k] == 8 * (k + 1));
  for (std::size_t k = 31; k < 63; ++k) CHECK(order[k] % 8 == 1);
}

namespace {

// Hands out `n` items, one per poll, as a network would deliver messages; one worker at a
// time may poll (the others are told the turn is taken). Counts executions and parkings.
class FeedPoller final : public Poller {
 public:
  explicit FeedPoller(std::uint64_t n) : left_(n) {}
  Result poll(unsigned) override {
    if (busy_.exchange(true)) return Result::taken;
    Result r = Result::idle;
    std::uint64_t n = left_.load();
    if (n > 0) {
      left_.store(n - 1);
      pool->push(n - 1);
      r = Result::work;
    }
    busy_.store(false);
    return r;
  }
  std::chrono::nanoseconds idle_spin() const override { return std::chrono::microseconds(50); }
  void parking(unsigned) override { parks.fetch_add(1); }

  Pool* pool = nullptr;
  std::atomic<std::uint64_t> parks{0};

 private:
  std::atomic<bool> busy_{false};
  std::atomic<std::uint64_t> left_;  // changed only with busy_ held
};

class CountExecutor final : public Executor {
 public:
  explicit CountExecutor(std::uint64_t n) : n_(n), runs_(new std::atomic<std::uint32_t>[n]) {
    for (std::uint64_t i = 0; i < n; ++i) runs_[i].store(0);
  }
  void execute(Item item, unsigned) override {
    runs_[item].fetch_add(1, std::memory_order_relaxed);
    countdown_.count_one();
  }
  void wait() { countdown_.wait(); }
  std::uint64_t wrong() const {
    std::uint64_t bad = 0;
    for (std::uint64_t i = 0; i < n_; ++i) bad += runs_[i].load() != 1;
    return bad;
  }

 private:
  std::uint64_t n_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> runs_;
  ordo::test::Countdown countdown_{n_};
};

}  // namespace

TEST_CASE("idle workers poll: what the poller brings runs exactly once, then they park",
          "[pool]") {
  const unsigned workers = GENERATE(1u, 3u);
  const std::uint64_t n = 20000 / kScale;
  FeedPoller poller(n - 1);  // outlives the pool: workers may poll until they are joined
  PoolConfig cfg;
  cfg.workers = workers;
  Pool pool(cfg);
  poller.pool = &pool;
  CountExecutor exec(n);
  pool.attach(exec);
  pool.set_poller(&poller);
  // Parked workers do not poll (whatever polls when none does must wake them: the runtime's
  // progress thread): one item from outside wakes one, and the poller brings the rest.
  pool.push(n - 1);
  exec.wait();
  CHECK(exec.wrong() == 0);
  // With nothing left to poll, the worker that polled gives up after idle_spin and parks.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (poller.parks.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(poller.parks.load() > 0);
  pool.set_poller(nullptr);
  pool.detach();
}
