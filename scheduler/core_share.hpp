// Which processing units one process may use when several processes of one job run on the same
// machine (ranks started by ordorun, mpirun or srun on one host). A pure function of the
// topology and of (local rank, local size), so that it can be checked on machines this one is
// not; the pool applies it (pool.cpp) and docs/scheduler.md describes the policy.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "scheduler/topology.hpp"

namespace ordo::sched {

struct CoreShare {
  std::vector<std::size_t> pus;  // indices into the topology's pus(), in logical order
  std::size_t cores = 0;         // distinct cores among them
  bool whole_nodes = false;      // the share is made of whole NUMA nodes
  // More processes than cores: no disjoint share exists; every process gets every unit, and
  // nothing should be bound (the OS balances oversubscribed threads better than a fixed map).
  bool oversubscribed = false;
};

// The share of process `local_rank` of `local_size` on a machine with units `pus` (hwloc's
// logical order, siblings next to each other) spread over `nodes` NUMA nodes:
//   - one process (or local_rank out of range): every unit;
//   - the processes divide the nodes (nodes % local_size == 0, every node has a core): whole
//     nodes, nodes/local_size each, in order;
//   - otherwise contiguous runs of whole cores, local_size near-equal runs in logical order;
//   - more processes than cores: every unit, oversubscribed.
// The shares of local ranks 0..local_size-1 are disjoint and cover the machine unless it is
// oversubscribed.
CoreShare share_of_cores(const std::vector<ProcessingUnit>& pus, unsigned nodes,
                         unsigned local_rank, unsigned local_size);

// "cores 2-3 (node 1)", for the start-up report. `pus` as given to share_of_cores.
std::string describe_share(const CoreShare& share, const std::vector<ProcessingUnit>& pus);

}  // namespace ordo::sched
