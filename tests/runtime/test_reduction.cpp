// Reductions in the runtime (runtime/reduction.hpp), across simulated ranks over LoopbackNet:
// every rank's copy of the reduced value has the bits of one rank with one worker, for 1-3
// ranks x 1, 2, 4 workers, locations copied or shared, and tasks reading the value later in
// the iteration compute the same; placement leaves the user's locations where they were and
// puts contributions with the data they come from.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <future>
#include <stdexcept>
#include <vector>

#include "loopback_net.hpp"
#include "runtime/engine.hpp"
#include "runtime/graph.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"

using namespace ordo;
using namespace ordo::test;

namespace {

constexpr std::uint32_t kBlocks = 11;  // two levels of combining (8 + 3)

double& at(const rt::Graph& g, std::uint32_t l) {
  return *reinterpret_cast<double*>(g.data(l));
}

// Per block b: x[b] (user location b), then the reduction (partials, result), then y[b].
// Iteration k: block b sets x[b] from its iteration and y[b], contributes x[b]^2 / 3 (values
// whose sum depends on the order of addition); after the combine, block b adds the value to
// y[b]. Returns the reduction's index.
std::uint32_t build(rt::Graph& g) {
  for (std::uint32_t b = 0; b < kBlocks; ++b) g.add_location("x" + std::to_string(b), 8, 1, typeid(double));
  const std::uint32_t r = g.add_reduction(
      "sum", kBlocks, 8, typeid(double), [](const std::byte* a, const std::byte* b, std::byte* out) {
        double x, y;
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        const double z = x + y;
        std::memcpy(out, &z, 8);
      });
  const std::uint32_t first_y = static_cast<std::uint32_t>(g.locations().size());
  for (std::uint32_t b = 0; b < kBlocks; ++b) g.add_location("y" + std::to_string(b), 8, 1, typeid(double));
  const rt::Reduction red = g.reductions()[r];
  g.begin_family("contribute", [red, first_y](const rt::Instance& in) {
    const std::uint32_t b = in.index;
    double& x = at(*in.graph, b);
    x = std::sin(1.0 + b + 0.37 * static_cast<double>(in.iteration)) * std::ldexp(1.0, static_cast<int>(b % 5) * 9) +
        at(*in.graph, first_y + b) * 1e-3;
    at(*in.graph, red.first_partial + b) = x * x / 3;
  });
  for (std::uint32_t b = 0; b < kBlocks; ++b) {
    g.add_access({b, rt::Mode::write});
    g.add_access({red.first_partial + b, rt::Mode::write});
    g.add_access({first_y + b, rt::Mode::read});
    g.end_member();
    g.set_contributor(r, b, g.task_count() - 1, b);
  }
  g.end_family();
  g.add_combine(r);
  g.begin_family("use", [red, first_y](const rt::Instance& in) {
    at(*in.graph, first_y + in.index) += at(*in.graph, red.result) / (1.0 + in.index);
  });
  for (std::uint32_t b = 0; b < kBlocks; ++b) {
    g.add_access({first_y + b, rt::Mode::write});
    g.add_access({red.result, rt::Mode::read});
    g.end_member();
  }
  g.end_family();
  return r;
}

struct Outcome {
  std::vector<double> copies;  // each rank's copy (one rank: the result)
  std::vector<double> y;       // from their homes
};

Outcome run(unsigned ranks, unsigned workers, bool shared, std::uint64_t iterations) {
  struct Rank {
    rt::Graph graph{false};
    std::unique_ptr<sched::Pool> pool;
    std::unique_ptr<rt::Engine> engine;
  };
  LoopbackHub hub(ranks, false, shared);
  std::vector<Rank> rs(ranks);
  if (shared)
    for (Rank& r : rs) r.graph = rt::Graph(true);
  std::vector<std::uint32_t> reduction(ranks);
  std::vector<std::future<std::uint64_t>> f;
  for (unsigned r = 0; r < ranks; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {  // no Catch2 outside main
      reduction[r] = build(rs[r].graph);
      if (ranks > 1) rs[r].graph.add_reduction_copies(ranks);
      auto c = rt::compile(rs[r].graph);
      if (!c.error.empty()) throw std::runtime_error(c.error);
      rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{workers});
      rs[r].engine = std::make_unique<rt::Engine>(rs[r].graph, std::move(c.plan),
                                                  ranks > 1 ? &hub.net(r) : nullptr, 3);
      return rs[r].engine->run(*rs[r].pool, iterations, {}, 0);
    }));
  for (auto& x : f) REQUIRE(x.get() == iterations);
  Outcome out;
  for (unsigned r = 0; r < ranks; ++r) {
    const rt::Reduction& red = rs[r].graph.reductions()[reduction[r]];
    out.copies.push_back(at(rs[r].graph, ranks > 1 ? red.first_copy + r : red.result));
  }
  const std::uint32_t first_y = rs[0].graph.reductions()[0].result + 1;
  for (std::uint32_t b = 0; b < kBlocks; ++b)
    out.y.push_back(at(rs[rs[0].engine->home(first_y + b)].graph, first_y + b));
  return out;
}

}  // namespace

TEST_CASE("every rank's copy of a reduced value has the bits of one rank", "[reduction]") {
  const Outcome one = run(1, 1, false, 6);
  REQUIRE(one.copies.size() == 1);
  CHECK(one.copies[0] != 0);
  for (unsigned ranks = 1; ranks <= 3; ++ranks)
    for (unsigned workers : {1u, 2u, 4u})
      for (bool shared : {false, true}) {
        if (ranks == 1 && shared) continue;
        INFO("ranks " << ranks << " workers " << workers << " shared " << shared);
        const Outcome o = run(ranks, workers, shared, 6);
        for (double v : o.copies) CHECK(std::memcmp(&v, &one.copies[0], 8) == 0);
        CHECK(std::memcmp(o.y.data(), one.y.data(), 8 * kBlocks) == 0);
      }
}

TEST_CASE("a reduction's locations follow the data, the user's stay where they were",
          "[reduction]") {
  rt::Graph plain(false), with(false);
  for (std::uint32_t b = 0; b < kBlocks; ++b) plain.add_location("x" + std::to_string(b), 8, 1, typeid(double));
  for (std::uint32_t b = 0; b < kBlocks; ++b) plain.add_location("y" + std::to_string(b), 8, 1, typeid(double));
  const std::uint32_t r = build(with);
  for (unsigned ranks : {2u, 3u, 5u}) {
    INFO("ranks " << ranks);
    const auto want = plain.rank_homes(ranks);
    const auto got = with.rank_homes(ranks);
    const rt::Reduction& red = with.reductions()[r];
    const std::uint32_t first_y = red.result + 1;
    for (std::uint32_t b = 0; b < kBlocks; ++b) {
      CHECK(got[b] == want[b]);                         // x[b]
      CHECK(got[first_y + b] == want[kBlocks + b]);     // y[b]
      CHECK(got[red.first_partial + b] == got[b]);      // partial b with x[b]
    }
    // Node j of level 1 follows partial 8 j; the result the first node.
    const auto node0 = static_cast<std::uint32_t>(first_y + kBlocks);
    CHECK(got[node0] == got[red.first_partial]);
    CHECK(got[node0 + 1] == got[red.first_partial + 8]);
    CHECK(got[red.result] == got[node0]);
  }
  // The same on NUMA nodes.
  const auto nodes = with.homes(2);
  CHECK(nodes[with.reductions()[r].first_partial + 7] == nodes[7]);
}

TEST_CASE("the combining tree has the documented shape", "[reduction]") {
  CHECK(rt::combine_levels(1) == std::vector<std::uint32_t>{1});
  CHECK(rt::combine_levels(8) == std::vector<std::uint32_t>{1});
  CHECK(rt::combine_levels(9) == std::vector<std::uint32_t>{2, 1});
  CHECK(rt::combine_levels(64) == std::vector<std::uint32_t>{8, 1});
  CHECK(rt::combine_levels(65) == std::vector<std::uint32_t>{9, 2, 1});
}
