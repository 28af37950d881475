// Deadlock check: cyclic explicit orders are refused with the cycle named; acyclic ones run and
// give the result of a sequential run in an order the explicit positions allow.
#include <catch2/catch.hpp>

#include "random_graph.hpp"

using namespace ordo;
using namespace ordo::test;

TEST_CASE("ring orders of every length are refused, naming every task on the ring",
          "[deadlock]") {
  for (std::uint32_t n = 2; n <= 7; ++n) {
    // Location i is shared by task i (position 1) and task i+1 (position 0): task i waits for
    // task i+1 on location i, around the ring.
    GraphSpec spec;
    spec.sizes.assign(n, 1);
    spec.tasks.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      spec.tasks[i].accesses.push_back({i, true, 1});
      spec.tasks[(i + 1) % n].accesses.push_back({i, true, 0});
    }
    Graph g;
    build(g, spec);
    INFO("ring of " << n);
    try {
      g.validate();
      FAIL("a cyclic order was accepted");
    } catch (const Error& e) {
      std::string msg = e.what();
      CHECK_THAT(msg, Catch::Contains("cyclic lock order"));
      for (std::uint32_t i = 0; i < n; ++i)
        CHECK_THAT(msg, Catch::Contains("'T" + std::to_string(i) + "'"));
    }
    Runtime rt({.workers = 2});
    CHECK_THROWS_AS(rt.run(g, 1), Error);  // run refuses it too, without hanging
  }
}

namespace {

// The test's own model of the overlay: per location, requests sorted by position (ties by
// declaration), phases of one write or consecutive reads, edges between adjacent phases.
// Returns nullopt when there is a cycle, else a topological order (smallest index first).
std::optional<std::vector<std::uint32_t>> brute_force_order(const GraphSpec& spec) {
  const std::size_t n = spec.tasks.size();
  std::vector<std::vector<bool>> edge(n, std::vector<bool>(n, false));
  for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
    std::vector<std::pair<std::int64_t, std::pair<std::uint32_t, bool>>> reqs;
    for (std::uint32_t t = 0; t < n; ++t)
      for (const auto& a : spec.tasks[t].accesses)
        if (a.location == l) reqs.push_back({*a.position, {t, a.write}});
    std::stable_sort(reqs.begin(), reqs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    bool any_write = false;
    for (auto& r : reqs) any_write = any_write || r.second.second;
    if (!any_write) continue;
    for (std::size_t i = 0; i < reqs.size(); ++i)
      for (std::size_t j = i + 1; j < reqs.size(); ++j)
        if (reqs[i].second.second || reqs[j].second.second)
          edge[reqs[i].second.first][reqs[j].second.first] = true;  // j after i, conflicting
  }
  std::vector<std::uint32_t> order;
  std::vector<bool> done(n, false);
  for (std::size_t step = 0; step < n; ++step) {
    std::int64_t pick = -1;
    for (std::uint32_t v = 0; v < n && pick < 0; ++v) {
      if (done[v]) continue;
      bool free = true;
      for (std::uint32_t u = 0; u < n; ++u)
        if (!done[u] && edge[u][v]) free = false;
      if (free) pick = v;
    }
    if (pick < 0) return std::nullopt;
    done[pick] = true;
    order.push_back(static_cast<std::uint32_t>(pick));
  }
  return order;
}

bool write_shares_position(const GraphSpec& spec) {
  for (std::uint32_t l = 0; l < spec.sizes.size(); ++l)
    for (std::uint32_t a = 0; a < spec.tasks.size(); ++a)
      for (std::uint32_t b = a + 1; b < spec.tasks.size(); ++b)
        for (const auto& x : spec.tasks[a].accesses)
          for (const auto& y : spec.tasks[b].accesses)
            if (x.location == l && y.location == l && *x.position == *y.position &&
                (x.write || y.write))
              return true;
  return false;
}

}  // namespace

TEST_CASE("random explicit orders: refused exactly when cyclic, else run correctly",
          "[deadlock]") {
  int cyclic = 0, acyclic = 0;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    GraphSpec spec = random_spec(seed * 7919, 4, 6);
    SplitMix rng{seed};
    for (auto& t : spec.tasks)
      for (auto& a : t.accesses) a.position = static_cast<std::int64_t>(rng.below(12));
    if (write_shares_position(spec)) continue;  // refused for another reason (tested elsewhere)
    auto order = brute_force_order(spec);
    Graph g;
    auto locs = build(g, spec);
    INFO("seed " << seed);
    if (!order) {
      ++cyclic;
      CHECK_THROWS_WITH(g.validate(), Catch::Contains("cyclic lock order"));
      continue;
    }
    ++acyclic;
    Runtime rt({.workers = 2});
    rt.run(g, 3);
    CHECK(contents(g, locs) == interpret(spec, *order, 3));
  }
  // The corpus must exercise both sides.
  CHECK(cyclic > 20);
  CHECK(acyclic > 20);
}
