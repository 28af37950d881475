// Placement on machines this one is not: hwloc synthetic descriptions and an XML export
// (tests/scheduler/data), loaded through hwloc itself. Checks the worker -> core map, the
// node numbering, the steal order (near before far), that hinted items run on their node, and
// that nothing is bound on a topology that is not this system. Plus the flat fallback and real
// memory binding on this machine.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include "skip.hpp"
#include "test_support.hpp"

#include "scheduler/pool.hpp"

using namespace ordo::sched;

namespace {

// 2 packages x 2 NUMA nodes x 2 L3 caches x 2 cores: 16 cores, PU P#i on core i.
const std::string kFourNodes = "synthetic:pack:2 numa:2 l3:2 core:2 pu:1";

std::string xml_path() {
  const char* dir = std::getenv("ORDO_TEST_DATA");
  return std::string(dir ? dir : "tests/scheduler/data") + "/two-nodes-smt.xml";
}

// Leaves the test case as skipped (the program exits 77: meson's SKIP) without hwloc.
#define REQUIRE_HWLOC()                                                                      \
  do {                                                                                       \
    if (!Topology::hwloc_available()) ORDO_SKIP("built without hwloc: no topology to load"); \
  } while (0)

// Records which worker ran each item; items may carry children to push with a node hint.
class Recorder final : public Executor {
 public:
  Recorder(Pool& pool, std::uint64_t n) : pool_(pool), n_(n), worker_(n) {
    for (auto& w : worker_) w.store(-1);
  }
  // Item encoding: low 32 bits the item id, high 32 bits the node hint + 1 (0: none).
  static Item make(std::uint64_t id, int node) {
    return id | (static_cast<std::uint64_t>(node + 1) << 32);
  }
  void execute(Item item, unsigned worker) override {
    const std::uint64_t id = item & 0xffffffffu;
    worker_[id].store(static_cast<int>(worker));
    // Item 0 fans out the rest from a worker, so pushes from inside the pool are tested too.
    if (id == 0)
      for (std::uint64_t c = n_ / 2; c < n_; ++c)
        pool_.push(make(c, static_cast<int>(c % pool_.nodes())), static_cast<int>(c % pool_.nodes()));
    countdown_.count_one();
  }
  void wait() { countdown_.wait(); }
  int worker(std::uint64_t id) const { return worker_[id].load(); }

 private:
  Pool& pool_;
  std::uint64_t n_;
  std::vector<std::atomic<int>> worker_;
  ordo::test::Countdown countdown_{n_};
};

std::vector<unsigned> pus_of(const Pool& p) {
  std::vector<unsigned> v;
  for (unsigned w = 0; w < p.size(); ++w) v.push_back(p.pu_of(w));
  return v;
}
std::vector<unsigned> nodes_of(const Pool& p) {
  std::vector<unsigned> v;
  for (unsigned w = 0; w < p.size(); ++w) v.push_back(p.node_of(w));
  return v;
}

}  // namespace

TEST_CASE("one worker per core of a synthetic 4-node machine, in core order", "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  Pool pool(cfg);
  REQUIRE(pool.size() == 16);
  CHECK(pool.numa_mode());
  CHECK(pool.nodes() == 4);
  CHECK_FALSE(pool.binds_threads());  // not this system: decisions only
  CHECK_FALSE(pool.topology().is_this_system());
  for (unsigned w = 0; w < 16; ++w) {
    CHECK(pool.pu_of(w) == w);
    CHECK(pool.node_of(w) == w / 4);
  }
  CHECK_THAT(pool.describe(), Catch::Contains("mode=numa"));
}

TEST_CASE("the one-node topology (placement off) counts this machine's units on one node",
          "[placement]") {
  REQUIRE_HWLOC();
  // hwloc reads "this machine" from HWLOC_SYNTHETIC when it is set: 4 nodes, unbound.
  const char* before = std::getenv("HWLOC_SYNTHETIC");
  const std::string saved = before ? before : "";
  ::setenv("HWLOC_SYNTHETIC", kFourNodes.substr(10).c_str(), 1);
  PoolConfig numa, flat;
  flat.topology = "one-node";
  Pool with(numa), without(flat);
  if (before)
    ::setenv("HWLOC_SYNTHETIC", saved.c_str(), 1);
  else
    ::unsetenv("HWLOC_SYNTHETIC");
  REQUIRE(with.size() == 16);
  REQUIRE(without.size() == 16);
  CHECK(with.nodes() == 4);
  CHECK(without.nodes() == 1);
  CHECK_FALSE(without.numa_mode());
  for (unsigned w = 0; w < 16; ++w) {
    CHECK(without.pu_of(w) == with.pu_of(w));  // the same cores as with placement
    CHECK(without.node_of(w) == 0);
  }
  CHECK_THAT(without.describe(), Catch::Contains("mode=flat"));
}

TEST_CASE("fewer workers spread over the cores, explicit units are obeyed", "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  cfg.workers = 4;
  Pool four(cfg);
  CHECK(pus_of(four) == std::vector<unsigned>{0, 4, 8, 12});
  CHECK(nodes_of(four) == std::vector<unsigned>{0, 1, 2, 3});

  cfg.workers = 2;
  Pool two(cfg);
  CHECK(pus_of(two) == std::vector<unsigned>{0, 8});
  CHECK(two.nodes() == 2);  // only the nodes that have a worker are numbered
  CHECK(nodes_of(two) == std::vector<unsigned>{0, 1});

  cfg.workers = 0;
  cfg.pus = {13, 1, 2};
  Pool picked(cfg);
  CHECK(pus_of(picked) == std::vector<unsigned>{13, 1, 2});
  CHECK(nodes_of(picked) == std::vector<unsigned>{1, 0, 0});
}

TEST_CASE("the ranks on one machine take disjoint shares of its cores", "[placement]") {
  REQUIRE_HWLOC();
  // 1-4 processes, each with the default worker count and with 1, 3 and 20 workers (20: more
  // than the whole machine has units): the units each process's workers may run on never meet
  // another process's, and each worker's own unit lies in its process's units.
  for (const std::string& topology : {kFourNodes, std::string("synthetic:core:6 pu:2"),
                                      std::string("synthetic:numa:3 core:2 pu:1")}) {
    for (unsigned k = 1; k <= 4; ++k)
      for (unsigned workers : {0u, 1u, 3u, 20u}) {
        INFO(topology << ": " << k << " processes of " << workers << " workers");
        std::set<unsigned> taken;
        for (unsigned j = 0; j < k; ++j) {
          PoolConfig cfg;
          cfg.topology = topology;
          cfg.workers = workers;
          cfg.share_count = k;
          cfg.share_index = j;
          Pool pool(cfg);
          std::set<unsigned> mine;
          for (unsigned w = 0; w < pool.size(); ++w) {
            const auto allowed = pool.allowed_pus(w);
            mine.insert(allowed.begin(), allowed.end());
          }
          for (unsigned w = 0; w < pool.size(); ++w) CHECK(mine.count(pool.pu_of(w)) == 1);
          for (unsigned u : mine) CHECK(taken.insert(u).second);  // nobody else's
        }
      }
  }
}

TEST_CASE("shares: whole nodes, contiguous cores, and the default of one worker per core",
          "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  cfg.share_count = 2;
  cfg.share_index = 1;
  Pool second(cfg);  // whole nodes 2 and 3: one worker per core
  REQUIRE(second.size() == 8);
  for (unsigned w = 0; w < 8; ++w) CHECK(second.pu_of(w) == 8 + w);
  CHECK(second.nodes() == 2);
  CHECK_THAT(second.describe(), Catch::Contains("local rank 1 of 2") &&
                                    Catch::Contains("whole nodes"));
  cfg.workers = 2;
  cfg.share_index = 0;
  Pool first(cfg);  // spread over the share
  CHECK(pus_of(first) == std::vector<unsigned>{0, 4});
  cfg.share_count = 3;  // 3 processes do not divide 4 nodes: 5, 5 and 6 cores
  cfg.share_index = 1;
  cfg.workers = 0;
  Pool middle(cfg);
  CHECK(pus_of(middle) == std::vector<unsigned>{5, 6, 7, 8, 9});
  // More workers than the share has units: each may run anywhere in the share.
  cfg.workers = 9;
  Pool crowded(cfg);
  CHECK(crowded.is_oversubscribed());
  CHECK(crowded.allowed_pus(8) == std::vector<unsigned>{5, 6, 7, 8, 9});
  CHECK_THAT(crowded.describe(), Catch::Contains("oversubscribed: 9 workers on 5"));
}

namespace {

// The CPUs the kernel lets the pool's workers run on (sched_getaffinity inside each item).
class AffinityRecorder final : public Executor {
 public:
  void execute(Item, unsigned) override {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      std::lock_guard lock(mu_);
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus_.insert(c);
    }
    countdown_.count_one();
  }
  std::set<int> run(Pool& pool) {
    pool.attach(*this);
    for (std::uint64_t i = 0; i < kItems; ++i) pool.push(i);
    countdown_.wait();
    pool.detach();
    return cpus_;
  }

 private:
  std::mutex mu_;
  std::set<int> cpus_;
  static constexpr std::uint64_t kItems = 64;
  ordo::test::Countdown countdown_{kItems};
};

}  // namespace

TEST_CASE("this machine: two processes' workers run on disjoint CPUs, by the kernel's account",
          "[placement]") {
  REQUIRE_HWLOC();
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  if (Topology().cores() < 2 || CPU_COUNT(&mine) < 2)
    ORDO_SKIP("needs 2 cores this process may use");
  // One worker each (the default) and two each (more workers than the share's one core).
  for (unsigned workers : {0u, 2u}) {
    INFO(workers << " workers per process");
    std::set<int> seen[2];
    for (unsigned j = 0; j < 2; ++j) {
      PoolConfig cfg;
      cfg.workers = workers;
      cfg.share_count = 2;
      cfg.share_index = j;
      Pool pool(cfg);
      INFO(pool.describe());
      REQUIRE(pool.binds_threads());
      AffinityRecorder rec;
      seen[j] = rec.run(pool);
      CHECK_FALSE(seen[j].empty());
    }
    for (int c : seen[0]) CHECK(seen[1].count(c) == 0);
  }
}

TEST_CASE("more processes than cores: every process may use every core, unbound", "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = "synthetic:core:2 pu:1";
  cfg.share_count = 3;
  cfg.share_index = 2;
  Pool third(cfg);
  CHECK(third.size() == 1);  // the default: one worker per process
  CHECK(third.is_oversubscribed());
  CHECK(third.allowed_pus(0) == std::vector<unsigned>{0, 1});
  CHECK_THAT(third.describe(), Catch::Contains("oversubscribed: 3 processes on this machine's 2"));
  // The same count on this machine: not bound, and says so.
  PoolConfig here;
  here.share_count = 64;
  Pool crowd(here);
  CHECK(crowd.is_oversubscribed());
  CHECK_FALSE(crowd.binds_threads());
  CHECK_THAT(crowd.describe(), Catch::Contains("oversubscribed: 64 processes"));
}

TEST_CASE("thieves look in their cache, then their node, then their package, then beyond",
          "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  Pool pool(cfg);
  auto as_set = [](const std::vector<unsigned>& v, std::size_t a, std::size_t b) {
    return std::set<unsigned>(v.begin() + static_cast<long>(a), v.begin() + static_cast<long>(b));
  };
  // Worker 5: L3 {4,5}, node {4..7}, package {0..7}.
  auto order = pool.steal_order(5);
  REQUIRE(order.size() == 15);
  CHECK(order[0] == 4);
  CHECK(as_set(order, 1, 3) == std::set<unsigned>{6, 7});
  CHECK(as_set(order, 3, 7) == std::set<unsigned>{0, 1, 2, 3});
  CHECK(as_set(order, 7, 15) == std::set<unsigned>{8, 9, 10, 11, 12, 13, 14, 15});
  // Every worker: distances never decrease along its order.
  for (unsigned w = 0; w < pool.size(); ++w) {
    auto o = pool.steal_order(w);
    auto level = [&](unsigned v) {
      if (v / 2 == w / 2) return 0;  // same L3
      if (v / 4 == w / 4) return 1;  // same node
      if (v / 8 == w / 8) return 2;  // same package
      return 3;
    };
    for (std::size_t i = 1; i < o.size(); ++i) CHECK(level(o[i - 1]) <= level(o[i]));
  }

  PoolConfig near_only = cfg;
  near_only.steal_far = false;
  Pool strict(near_only);
  CHECK(strict.steal_order(5) == std::vector<unsigned>{4, 6, 7});
}

TEST_CASE("hinted items run on a worker of their node", "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  cfg.workers = 8;  // two per node
  cfg.steal_far = false;  // no stealing across nodes: every item must stay where it was put
  Pool pool(cfg);
  REQUIRE(pool.nodes() == 4);
  const std::uint64_t n = 4000;
  Recorder rec(pool, n);
  pool.attach(rec);
  // The first half from outside (injection queues), item 0 pushes the second half from inside.
  pool.push(Recorder::make(0, 0), 0);
  for (std::uint64_t i = 1; i < n / 2; ++i)
    pool.push(Recorder::make(i, static_cast<int>(i % 4)), static_cast<int>(i % 4));
  rec.wait();
  pool.detach();
  for (std::uint64_t i = 0; i < n; ++i) {
    INFO("item " << i);
    REQUIRE(rec.worker(i) >= 0);
    CHECK(pool.node_of(static_cast<unsigned>(rec.worker(i))) == i % 4);
  }
}

TEST_CASE("without far stealing, an item wakes one parked worker of its node and no other",
          "[placement]") {
  // Every worker parked, then one item hinted to a node from outside: only that node's two
  // workers can reach it, and one of them is enough. Waking every parked worker (what
  // notify() did with steal_far off) has the seven others leave their sleep for nothing.
  REQUIRE_HWLOC();
  constexpr unsigned kWorkers = 8;  // two per node
  class Observed final : public Observer {
   public:
    void on_park(unsigned w) override { parks[w].fetch_add(1); }
    void on_unpark(unsigned w) override { unparks[w].fetch_add(1); }
    void on_steal(unsigned, unsigned) override {}
    std::atomic<std::uint64_t> parks[kWorkers]{}, unparks[kWorkers]{};
  } obs;
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  cfg.workers = kWorkers;
  cfg.steal_far = false;
  cfg.idle_spin = std::chrono::nanoseconds{0};  // parking within a few yields
  Pool pool(cfg);
  REQUIRE(pool.nodes() == 4);
  pool.set_observer(&obs);
  class Runs final : public Executor {
   public:
    void execute(Item item, unsigned worker) override {
      if (item >= kWorkers) {  // the round's item
        by.store(static_cast<int>(worker));
        ran.fetch_add(1);
      }
    }
    std::atomic<int> by{-1};
    std::atomic<std::uint64_t> ran{0};
  } exec;
  pool.attach(exec);
  // A worker that parked before the observer came would not be seen leaving its sleep: one
  // pinned item each wakes them all once, so that each parks again observed.
  for (unsigned w = 0; w < kWorkers; ++w) pool.push_to(w, w);
  const auto asleep = [&] {
    std::uint64_t n = 0;
    for (unsigned w = 0; w < kWorkers; ++w) n += obs.parks[w].load() - obs.unparks[w].load();
    return n;
  };
  std::uint64_t others_woken = 0;
  for (unsigned r = 0; r < 12; ++r) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (asleep() < kWorkers && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    REQUIRE(asleep() == kWorkers);
    std::uint64_t unparks[kWorkers];
    for (unsigned w = 0; w < kWorkers; ++w) unparks[w] = obs.unparks[w].load();
    const unsigned node = r % 4;
    pool.push(kWorkers + r, static_cast<int>(node));
    while (exec.ran.load() == r && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    REQUIRE(exec.ran.load() == r + 1);  // not lost
    const auto by = static_cast<unsigned>(exec.by.load());
    CHECK(pool.node_of(by) == node);
    // Once all are parked again, a worker woken with it has long left its sleep.
    while (asleep() < kWorkers && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    for (unsigned w = 0; w < kWorkers; ++w)
      if (w != by) others_woken += obs.unparks[w].load() - unparks[w];
  }
  pool.detach();
  CHECK(others_woken == 0);
}

TEST_CASE("an XML topology loads through hwloc and maps cores, units and nodes",
          "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = "xml:" + xml_path();
  Pool cores(cfg);  // 2 packages x 1 node x 2 cores x 2 PUs: one worker per core
  CHECK(pus_of(cores) == std::vector<unsigned>{0, 2, 4, 6});
  CHECK(nodes_of(cores) == std::vector<unsigned>{0, 0, 1, 1});
  CHECK(cores.steal_order(0) == std::vector<unsigned>{1, 2, 3});
  cfg.workers = 8;  // more workers than cores: every processing unit
  Pool units(cfg);
  CHECK(pus_of(units) == std::vector<unsigned>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(units.steal_order(0)[0] == 1);  // the SMT sibling first
  std::vector<char> buf(1 << 16);
  CHECK(units.bind_memory(buf.data(), buf.size(), 1) == Binding::not_this_system);
  PoolConfig missing;
  missing.topology = "xml:/nonexistent/topology.xml";
  CHECK_THROWS_AS(Pool(missing), std::invalid_argument);
}

TEST_CASE("this machine: flat when one node, memory binds where asked", "[placement]") {
  Pool pool(PoolConfig{2});
  INFO(pool.describe());
  if (pool.topology().nodes() == 1) {
    CHECK_FALSE(pool.numa_mode());
    CHECK_THAT(pool.describe(), Catch::Contains("mode=flat"));
  }
  if (!Topology::hwloc_available()) ORDO_SKIP("built without hwloc: nothing to bind");
  const std::size_t bytes = std::size_t{1} << 20;
  void* p = std::aligned_alloc(4096, bytes);
  REQUIRE(p != nullptr);
  std::fill_n(static_cast<char*>(p), bytes, 1);  // touch the pages so they exist
  const unsigned node = pool.nodes() - 1;
  Binding b = pool.bind_memory(p, bytes, node);
  if (b == Binding::failed) {
    std::free(p);
    ORDO_SKIP("the kernel refuses NUMA binding here (no mbind support in this container)");
  }
  CHECK(b == Binding::bound);
  const int where = pool.memory_node(p, bytes);
  if (where >= 0) CHECK(where == static_cast<int>(node));
  CHECK(pool.bind_memory(static_cast<char*>(p) + 8, 100, node) == Binding::too_small);
  std::free(p);
}

TEST_CASE("picked processing units are used in order; taskset syntax parses", "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  cfg.pus = parse_unit_list("9,0-2");
  Pool listed(cfg);
  CHECK(pus_of(listed) == std::vector<unsigned>{9, 0, 1, 2});
  cfg.workers = 6;  // more workers than listed units: cycle, and bind nothing
  Pool cycled(cfg);
  CHECK(pus_of(cycled) == std::vector<unsigned>{9, 0, 1, 2, 9, 0});
  CHECK(parse_unit_list("7") == std::vector<unsigned>{7});
  CHECK(parse_unit_list("1-3,5") == std::vector<unsigned>{1, 2, 3, 5});
  CHECK_THROWS_WITH(parse_unit_list("3-1"), Catch::Contains("is not a list of processing units"));
  CHECK_THROWS_AS(parse_unit_list("0,,1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_unit_list(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_unit_list("1-"), std::invalid_argument);
  cfg.pus = {99};  // not in the topology
  CHECK_THROWS_AS(Pool(cfg), std::invalid_argument);
}
