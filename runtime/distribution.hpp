// Where a graph's work lives across ranks: each location's home rank (its master copy and its
// phase machine), the rank each task runs on, and per phase of each location the members that
// run on this rank and the other ranks involved. Every rank computes the same from the same
// graph and plan (SPMD: docs/distributed.md); nothing of it is sent. Written once, while the engine
// is built, and read-only afterwards, so every thread may read it without synchronisation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/graph.hpp"
#include "runtime/plan.hpp"

namespace ordo::rt {

struct PhaseRanks {
  std::vector<std::uint32_t> local;   // member tasks that run on this rank
  std::vector<std::uint32_t> remote;  // other ranks with members (at the home only)
};

struct Distribution {
  unsigned rank = 0, ranks = 1;
  std::vector<std::uint32_t> home;       // per location
  std::vector<std::uint32_t> task_rank;  // per task
  // Per location, per phase: filled for the locked locations this rank is involved in (home,
  // or with a member here), empty otherwise.
  std::vector<std::vector<PhaseRanks>> phases;
  std::vector<PhaseRanks> initial;  // per location: the initial grant
  std::uint64_t local_tasks = 0;    // tasks that run on this rank
  // The ranks the remote-lock protocol talks to from here, in increasing order: the homes of
  // the locked locations this rank has members of, and the ranks with members of its own.
  // Symmetric (q is p's neighbour iff p is q's), so both ends of a pair know it.
  std::vector<unsigned> neighbours;

  // Default placement: contiguous chunks of locations in declaration order (a decomposition
  // that declares each block's locations together gets one slab of blocks per rank), unless
  // the graph gives a home. Owner computes: a task runs where the first location it writes
  // lives (else its first access; a task without accesses is spread by index).
  static Distribution compute(const Graph& graph, const Plan& plan, unsigned rank,
                              unsigned ranks);

  bool is_home(std::uint32_t location) const { return home[location] == rank; }

  // Per location, the ranks this rank exchanges its GRANTs and RELEASEs with: at the home the
  // other ranks with members, at a rank with members the home; none elsewhere. Per-peer
  // protocol state lives in one slot per such pair (slot()), so a rank's state grows with its
  // protocol neighbours, not with locations x ranks.
  std::vector<std::uint32_t> slot_begin;  // per location, and one past the last
  std::vector<unsigned> slot_peer;        // per slot, increasing within a location
  static constexpr std::size_t kNoSlot = ~std::size_t{0};
  std::size_t slots() const { return slot_peer.size(); }
  // The slot of (location, peer), or kNoSlot when `peer` takes no part with this rank in it.
  std::size_t slot(std::uint32_t location, unsigned peer) const {
    const auto first = slot_peer.begin() + slot_begin[location];
    const auto last = slot_peer.begin() + slot_begin[location + 1];
    const auto it = std::lower_bound(first, last, peer);
    return it != last && *it == peer ? static_cast<std::size_t>(it - slot_peer.begin()) : kNoSlot;
  }
};

}  // namespace ordo::rt
