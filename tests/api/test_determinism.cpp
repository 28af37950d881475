// Determinism property test: random graphs give bit-identical location contents with 1 worker
// and with several, equal to a sequential interpreter of program order (or of the explicit
// order), whatever the number of runs the iterations are split into.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <numeric>

#include "random_graph.hpp"

using namespace ordo;
using namespace ordo::test;

namespace {

std::uint64_t seed_count() {
  const char* env = std::getenv("ORDO_TEST_SEEDS");
  return env ? std::strtoull(env, nullptr, 10) : 150;
}

std::vector<std::vector<std::uint64_t>> run_spec(const GraphSpec& spec, unsigned workers,
                                                 std::uint64_t first, std::uint64_t second) {
  Graph g;
  auto locs = build(g, spec);
  Runtime rt({.workers = workers});
  REQUIRE(rt.run(g, first).iterations == first);
  if (second) REQUIRE(rt.run(g, second).iterations == second);
  REQUIRE(g.iterations_done() == first + second);
  return contents(g, locs);
}

}  // namespace

TEST_CASE("random graphs in program order equal the sequential interpreter", "[determinism]") {
  const std::uint64_t seeds = seed_count();
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    GraphSpec spec = random_spec(seed, 6, 12);
    const std::uint64_t first = 1 + seed % 4, second = seed % 3;
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, first + second);
    for (unsigned workers : {1u, 2u, 4u}) {
      INFO("seed " << seed << " workers " << workers);
      CHECK(run_spec(spec, workers, first, second) == want);
    }
  }
}

TEST_CASE("random graphs with explicit positions follow those positions", "[determinism]") {
  const std::uint64_t seeds = seed_count();
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    GraphSpec spec = random_spec(seed ^ 0xabcdef, 6, 12);
    // A random permutation gives each task one rank used on every location: consistent
    // across locations, hence acyclic, and the interpreter's order is that permutation.
    SplitMix rng{seed};
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<std::int64_t> rank(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) rank[order[i]] = static_cast<std::int64_t>(i);
    for (std::uint32_t t = 0; t < spec.tasks.size(); ++t)
      for (auto& a : spec.tasks[t].accesses) a.position = 10 * rank[t] - 5;
    auto want = interpret(spec, order, 3);
    for (unsigned workers : {1u, 2u, 4u}) {
      INFO("seed " << seed << " workers " << workers);
      CHECK(run_spec(spec, workers, 2, 1) == want);
    }
  }
}

TEST_CASE("run_until stops at the first checked iteration where the condition holds",
          "[determinism]") {
  GraphSpec spec = random_spec(42, 5, 10);
  std::vector<std::uint32_t> order(spec.tasks.size());
  std::iota(order.begin(), order.end(), 0u);
  for (unsigned workers : {1u, 2u, 4u}) {
    Graph g;
    auto locs = build(g, spec);
    auto counter = g.location<std::uint64_t>("counter", 1);
    g.task("count", {write(counter)}, [=](Context& ctx) { ctx.write(counter)[0] += 1; });
    Runtime rt({.workers = workers});
    Until until;
    until.check_every = 5;
    until.max_iterations = 1000;
    until.done = [=](const Graph& graph) { return graph.data(counter)[0] >= 37; };
    RunStats s = rt.run_until(g, until);
    CHECK(s.iterations == 40);
    CHECK(g.data(counter)[0] == 40);
    CHECK(contents(g, locs) == interpret(spec, order, 40));
  }
}

TEST_CASE("run_until stops at max_iterations when the condition never holds", "[determinism]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  g.task("inc", {write(x)}, [=](Context& ctx) { ctx.write(x)[0] += 1; });
  Runtime rt({.workers = 2});
  RunStats s = rt.run_until(g, Until{[](const Graph&) { return false; }, 3, 10});
  CHECK(s.iterations == 10);
  CHECK(g.data(x)[0] == 10);
}
