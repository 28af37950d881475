// NUMA placement as the engine does it, on a synthetic 4-node machine loaded through hwloc:
// locations get their home node by the documented policy (or Graph::set_home_node), every instance
// runs on a worker of the node of the location it writes, and the results stay bit-identical
// to a one-worker run.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/engine.hpp"
#include "runtime/graph.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"
#include "skip.hpp"

using namespace ordo::rt;

namespace {

constexpr std::uint32_t kBlocks = 8;
constexpr std::size_t kCells = 1024;  // 8 KiB per block: whole pages, bindable

// A 1-D ring of blocks: task i reads blocks i-1 and i+1 (old values, via the FIFO order) and
// writes block i. Records the node of the worker that ran each instance.
struct Ring {
  Graph g;
  std::vector<std::uint32_t> blocks;
  std::vector<std::atomic<int>> wrong_node = std::vector<std::atomic<int>>(kBlocks);
  const ordo::sched::Pool* pool = nullptr;
  const Engine* engine = nullptr;

  Ring() {
    for (std::uint32_t i = 0; i < kBlocks; ++i)
      blocks.push_back(g.add_location("b" + std::to_string(i), sizeof(double), kCells, typeid(double)));
    for (std::uint32_t i = 0; i < kBlocks; ++i) {
      const std::uint32_t l = blocks[(i + kBlocks - 1) % kBlocks], r = blocks[(i + 1) % kBlocks];
      g.add_task({"t" + std::to_string(i),
                  {{blocks[i], Mode::write}, {l, Mode::read}, {r, Mode::read}},
                  [this, i, l, r](const Instance& in) {
                    auto* out = reinterpret_cast<double*>(g.data(blocks[i]));
                    auto* a = reinterpret_cast<const double*>(g.data(l));
                    auto* b = reinterpret_cast<const double*>(g.data(r));
                    for (std::size_t c = 0; c < kCells; ++c)
                      out[c] = 0.5 * out[c] + 0.25 * (a[(c + 1) % kCells] + b[c]) + 1e-3 * static_cast<double>(c);
                    if (pool && pool->node_of(in.worker) != engine->home_node(blocks[i]))
                      wrong_node[i].fetch_add(1);
                  }});
    }
  }
};

std::vector<double> contents(Ring& r) {
  std::vector<double> v;
  for (auto b : r.blocks) {
    auto* p = reinterpret_cast<const double*>(r.g.data(b));
    v.insert(v.end(), p, p + kCells);
  }
  return v;
}

std::unique_ptr<Engine> make_engine(Graph& graph) {
  CompileResult c = compile(graph);
  REQUIRE(c.error.empty());
  return std::make_unique<Engine>(graph, std::move(c.plan));
}

}  // namespace

TEST_CASE("homes: contiguous chunks in declaration order, place() overrides, wraps", "[placement]") {
  Graph g;
  for (int i = 0; i < 8; ++i) g.add_location("l" + std::to_string(i), 8, 1, typeid(double));
  CHECK(g.homes(4) == std::vector<unsigned>{0, 0, 1, 1, 2, 2, 3, 3});
  CHECK(g.homes(3) == std::vector<unsigned>{0, 0, 0, 1, 1, 1, 2, 2});
  CHECK(g.homes(1) == std::vector<unsigned>(8, 0));
  g.place(0, 3);
  g.place(7, 5);  // wraps modulo the node count
  CHECK(g.homes(4) == std::vector<unsigned>{3, 0, 1, 1, 2, 2, 3, 1});
}

TEST_CASE("instances run on their written location's node, results bit-identical",
          "[placement]") {
  if (!ordo::sched::Topology::hwloc_available())
    ORDO_SKIP("built without hwloc: no synthetic topology");
  Ring seq;
  {
    auto e = make_engine(seq.g);
    ordo::sched::Pool one(ordo::sched::PoolConfig{1});
    e->run(one, 20, {}, 0);
  }
  const bool steal_far = GENERATE(false, true);
  Ring numa;
  ordo::sched::PoolConfig cfg;
  cfg.topology = "synthetic:pack:2 numa:2 core:2 pu:1";  // 4 nodes, 2 cores each
  cfg.steal_far = steal_far;
  ordo::sched::Pool pool(cfg);
  REQUIRE(pool.nodes() == 4);
  auto e = make_engine(numa.g);
  numa.engine = e.get();
  numa.pool = steal_far ? nullptr : &pool;  // with stealing across nodes, only results count
  e->run(pool, 20, {}, 0);
  for (std::uint32_t i = 0; i < kBlocks; ++i) {
    CHECK(e->home_node(numa.blocks[i]) == i / 2);
    CHECK(numa.wrong_node[i].load() == 0);
  }
  auto a = contents(seq), b = contents(numa);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}
