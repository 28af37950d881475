// Placement on machines this one is not: hwloc synthetic descriptions and an XML export
// (tests/scheduler/data), loaded through hwloc itself. Checks the worker -> core map, the
// node numbering, the steal order (near before far), that hinted items run on their node, and
// that nothing is bound on a topology that is not this system. Plus the flat fallback and real
// memory binding on this machine.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>

#include "test_support.hpp"
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "scheduler/pool.hpp"

using namespace ordo::sched;

namespace {

// 2 packages x 2 NUMA nodes x 2 L3 caches x 2 cores: 16 cores, PU P#i on core i.
const std::string kFourNodes = "synthetic:pack:2 numa:2 l3:2 core:2 pu:1";

std::string xml_path() {
  const char* dir = std::getenv("ORDO_TEST_DATA");
  return std::string(dir ? dir : "tests/scheduler/data") + "/two-nodes-smt.xml";
}

// Catch2 v2 has no SKIP: warn with the reason and leave the test case.
#define REQUIRE_HWLOC()                                    \
  do {                                                     \
    if (!Topology::hwloc_available()) {                    \
      WARN("SKIP: built without hwloc: no topology to load"); \
      return;                                              \
    }                                                      \
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
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  cfg.share_count = 2;
  cfg.share_index = 1;
  Pool second(cfg);  // one worker per core of the second half
  REQUIRE(second.size() == 8);
  for (unsigned w = 0; w < 8; ++w) CHECK(second.pu_of(w) == 8 + w);
  cfg.workers = 2;
  cfg.share_index = 0;
  Pool first(cfg);
  CHECK(pus_of(first) == std::vector<unsigned>{0, 4});
  cfg.share_count = 4;
  cfg.share_index = 3;
  Pool fourth(cfg);
  CHECK(pus_of(fourth) == std::vector<unsigned>{12, 14});
  // More processes than cores (32 on 16): a share holds one core or none; a process with
  // none still runs its workers (spread over all cores, unbound on a real machine).
  cfg.workers = 1;
  cfg.share_count = 32;
  cfg.share_index = 5;
  Pool one_core(cfg);
  CHECK(pus_of(one_core) == std::vector<unsigned>{2});
  cfg.share_index = 4;
  Pool no_core(cfg);
  CHECK(no_core.size() == 1);
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
  if (!Topology::hwloc_available()) { WARN("SKIP: built without hwloc: nothing to bind"); return; };
  const std::size_t bytes = std::size_t{1} << 20;
  void* p = std::aligned_alloc(4096, bytes);
  REQUIRE(p != nullptr);
  std::fill_n(static_cast<char*>(p), bytes, 1);  // touch the pages so they exist
  const unsigned node = pool.nodes() - 1;
  Binding b = pool.bind_memory(p, bytes, node);
  if (b == Binding::failed) {
    std::free(p);
    { WARN("SKIP: the kernel refuses NUMA binding here (no mbind support in this container)"); return; };
  }
  CHECK(b == Binding::bound);
  const int where = pool.memory_node(p, bytes);
  if (where >= 0) CHECK(where == static_cast<int>(node));
  CHECK(pool.bind_memory(static_cast<char*>(p) + 8, 100, node) == Binding::too_small);
  std::free(p);
}

TEST_CASE("ORDO_PUS picks the processing units, in order, taskset syntax", "[placement]") {
  REQUIRE_HWLOC();
  PoolConfig cfg;
  cfg.topology = kFourNodes;
  ::setenv("ORDO_PUS", "9,0-2", 1);
  Pool listed(cfg);
  CHECK(pus_of(listed) == std::vector<unsigned>{9, 0, 1, 2});
  cfg.workers = 6;  // more workers than listed units: cycle, and bind nothing
  Pool cycled(cfg);
  CHECK(pus_of(cycled) == std::vector<unsigned>{9, 0, 1, 2, 9, 0});
  ::setenv("ORDO_PUS", "3-1", 1);
  CHECK_THROWS_WITH(Pool(cfg), Catch::Contains("ORDO_PUS"));
  ::setenv("ORDO_PUS", "0,,1", 1);
  CHECK_THROWS_AS(Pool(cfg), std::invalid_argument);
  ::unsetenv("ORDO_PUS");
}
