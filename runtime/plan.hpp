// Compiles the declared graph into lock plans: for each location, the cyclic sequence of
// *phases* its FIFO goes through in every iteration.
//
// Why phases are enough (Saied 2018 §2.1, orwl_handle2): every handle re-requests iteration
// k+1 at the FIFO tail before releasing k. By induction on the releases, the FIFO is always a
// suffix of iteration k's initial order followed by a prefix of iteration k+1's, and releases
// only permute reads inside one granted read group. So the FIFO state reduces to "which phase
// is granted and how many of its holders have not released yet". A phase is one write, or a
// maximal run of consecutive reads (a read group).
//
// Wrap-around: when the last and the first phase are both read groups, ORWL grants the reads of
// iteration k+1 together with those of iteration k (they sit next to each other in the FIFO).
// The plan merges the two into one phase; initially only the first group (iteration 0) holds.
// A location that is only ever read has no writer to order against and gets no lock at all.
//
// Deadlock: an instance of iteration k waits only on instances of iteration k (earlier phases)
// and of iteration k-1 (the wrap). Wrap edges go forward in iterations, so the overlay is
// deadlock-free iff the per-iteration delay digraph is acyclic (Saied 2018 §2.2.3). Program
// order makes every edge go from an earlier to a later declared task, hence no cycle.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/graph.hpp"

namespace ordo::rt {

struct Phase {
  std::uint32_t begin = 0;  // members [begin, end) in LockPlan::members
  std::uint32_t end = 0;
  Mode mode = Mode::read;
};

struct LockPlan {
  bool locked = false;  // false: read-only location, never contended
  std::vector<Phase> phases;
  std::vector<std::uint32_t> members;  // task indices, phase after phase
  // The phase granted before the first iteration, and the members granted then (a subset of
  // that phase when the wrap-around read group was merged).
  std::uint32_t initial_phase = 0;
  std::uint32_t initial_begin = 0;
  std::uint32_t initial_end = 0;
};

struct Plan {
  std::vector<LockPlan> locks;  // one per location
  std::uint32_t tasks = 0;      // number of tasks
  // Per task, the locked locations it requests (one request each), sorted by location, in one
  // flat array (CSR): task t's are task_locks[task_lock_offsets[t], task_lock_offsets[t + 1]).
  // The offsets stop after the last task that has a lock (none: empty), so that a graph of
  // millions of access-free tasks stores nothing per task.
  std::vector<std::uint32_t> task_lock_offsets;
  std::vector<std::uint32_t> task_locks;

  std::span<const std::uint32_t> task_locks_of(std::uint32_t t) const {
    if (std::size_t{t} + 1 >= task_lock_offsets.size()) return {};
    return {task_locks.data() + task_lock_offsets[t], task_locks.data() + task_lock_offsets[t + 1]};
  }
};

struct CompileResult {
  Plan plan;
  std::string error;  // empty on success; otherwise what is wrong and what to do
};

CompileResult compile(const Graph& graph);

// The order in which one iteration's tasks would run sequentially: declaration order for
// program order, otherwise a topological order of the delay digraph (ties by declaration).
// Only valid for a graph that compiled without error.
std::vector<std::uint32_t> sequential_order(const Graph& graph);

}  // namespace ordo::rt
