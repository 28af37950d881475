// The share of a machine's cores each of several processes on it takes (core_share.hpp), on
// machines described unit by unit: flat, SMT, NUMA nodes of equal and unequal sizes, nodes
// without cores, a single core. For 1-4 processes: the shares are disjoint and cover the
// machine, keep SMT siblings together, are contiguous in core order and balanced, and are
// whole NUMA nodes exactly when the processes divide the nodes; with more processes than
// cores every process gets every unit and is told it is oversubscribed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "scheduler/core_share.hpp"

using namespace ordo::sched;

namespace {

struct Machine {
  std::string name;
  std::vector<ProcessingUnit> pus;
  unsigned nodes;
};

// `cores_per_node[n]` cores on node n, `smt` units per core, OS indices in order.
Machine machine(const std::string& name, const std::vector<unsigned>& cores_per_node,
                unsigned smt) {
  Machine m{name, {}, static_cast<unsigned>(cores_per_node.size())};
  unsigned core = 0;
  for (unsigned n = 0; n < cores_per_node.size(); ++n)
    for (unsigned c = 0; c < cores_per_node[n]; ++c, ++core)
      for (unsigned t = 0; t < smt; ++t)
        m.pus.push_back({static_cast<unsigned>(m.pus.size()), core, n});
  return m;
}

std::set<unsigned> cores_in(const Machine& m, const CoreShare& s) {
  std::set<unsigned> out;
  for (std::size_t u : s.pus) out.insert(m.pus[u].core);
  return out;
}

}  // namespace

TEST_CASE("shares of 1-4 processes are disjoint, contiguous, balanced and cover the machine",
          "[share]") {
  const std::vector<Machine> machines = {
      machine("2 cores", {2}, 1),
      machine("2 cores x 2 threads", {2}, 2),
      machine("4 nodes x 4 cores", {4, 4, 4, 4}, 1),
      machine("2 nodes x 6 cores x 2 threads", {6, 6}, 2),
      machine("3 nodes x 4 cores", {4, 4, 4}, 1),
      machine("4 unequal nodes", {2, 2, 1, 1}, 1),
      machine("a node without cores", {4, 0, 4}, 1),
      machine("1 core", {1}, 1),
      machine("3 cores", {3}, 1),
  };
  for (const Machine& m : machines) {
    std::set<unsigned> all_cores;
    for (const auto& u : m.pus) all_cores.insert(u.core);
    for (unsigned k = 1; k <= 4; ++k) {
      INFO(m.name << ", " << k << " process(es)");
      std::vector<CoreShare> shares;
      for (unsigned j = 0; j < k; ++j) shares.push_back(share_of_cores(m.pus, m.nodes, j, k));
      if (k > all_cores.size()) {
        for (const CoreShare& s : shares) {
          CHECK(s.oversubscribed);
          CHECK(s.pus.size() == m.pus.size());
        }
        continue;
      }
      std::vector<std::size_t> seen;
      std::size_t fewest = m.pus.size(), most = 0;
      for (unsigned j = 0; j < k; ++j) {
        const CoreShare& s = shares[j];
        CHECK_FALSE(s.oversubscribed);
        REQUIRE_FALSE(s.pus.empty());
        const std::set<unsigned> cores = cores_in(m, s);
        CHECK(s.cores == cores.size());
        // Every unit of each of its cores (SMT siblings stay together).
        for (std::size_t u = 0; u < m.pus.size(); ++u)
          if (cores.count(m.pus[u].core))
            CHECK(std::count(s.pus.begin(), s.pus.end(), u) == 1);
        // In core order: all of share j's cores come before share j+1's.
        if (j + 1 < k) CHECK(*cores.rbegin() < *cores_in(m, shares[j + 1]).begin());
        seen.insert(seen.end(), s.pus.begin(), s.pus.end());
        fewest = std::min(fewest, cores.size());
        most = std::max(most, cores.size());
      }
      std::sort(seen.begin(), seen.end());
      CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // disjoint
      CHECK(seen.size() == m.pus.size());                                  // and covering
      // Whole nodes exactly when the processes divide the nodes (and each node has a core).
      bool every_node_has_cores = m.nodes > 1;
      for (unsigned n = 0; n < m.nodes; ++n)
        every_node_has_cores = every_node_has_cores &&
                               std::any_of(m.pus.begin(), m.pus.end(),
                                           [&](const ProcessingUnit& u) { return u.node == n; });
      const bool whole = k > 1 && every_node_has_cores && m.nodes % k == 0;
      for (unsigned j = 0; j < k; ++j) {
        CHECK(shares[j].whole_nodes == whole);
        if (!whole) continue;
        std::set<unsigned> nodes;
        for (std::size_t u : shares[j].pus) nodes.insert(m.pus[u].node);
        CHECK(nodes.size() == m.nodes / k);
        for (const auto& u : m.pus)
          if (nodes.count(u.node))
            CHECK(std::count_if(shares[j].pus.begin(), shares[j].pus.end(), [&](std::size_t x) {
                    return m.pus[x].os_index == u.os_index;
                  }) == 1);
      }
      if (!whole) CHECK(most - fewest <= 1);  // contiguous runs of near-equal length
    }
  }
}

TEST_CASE("one process, or a local rank out of range, gets the whole machine", "[share]") {
  const Machine m = machine("2 nodes", {2, 2}, 2);
  for (auto [j, k] : {std::pair{0u, 1u}, std::pair{0u, 0u}, std::pair{3u, 2u}}) {
    const CoreShare s = share_of_cores(m.pus, m.nodes, j, k);
    CHECK(s.pus.size() == m.pus.size());
    CHECK(s.cores == 4);
    CHECK_FALSE(s.oversubscribed);
  }
}

TEST_CASE("the share is described by cores, units and nodes", "[share]") {
  const Machine m = machine("4 nodes x 4 cores", {4, 4, 4, 4}, 1);
  CHECK(describe_share(share_of_cores(m.pus, m.nodes, 1, 2), m.pus) ==
        "cores 8-15 (pu 8-15, node 2-3, whole nodes)");
  const Machine flat = machine("3 cores", {3}, 1);
  CHECK(describe_share(share_of_cores(flat.pus, flat.nodes, 1, 2), flat.pus) ==
        "cores 1-2 (pu 1-2, node 0)");
}
