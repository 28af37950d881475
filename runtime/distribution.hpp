// Where a graph's work lives across ranks: each location's home rank (its master copy and its
// phase machine), the rank each task runs on, and per phase of each location the members that
// run on this rank and the other ranks involved. Every rank computes the same from the same
// graph and plan (SPMD, DESIGN.md §3); nothing of it is sent. Written once, while the engine is
// built, and read-only afterwards, so every thread may read it without synchronisation.
#pragma once

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
};

}  // namespace ordo::rt
