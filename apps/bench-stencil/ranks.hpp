// ordo-bench-stencil --ranks: processes against threads (heat2d or heat3d as 1 rank x 2
// workers, 2 ranks x 1 worker under ordorun and the MPI baseline on 2 ranks), then ordo's halo
// throughput between two ranks (ordo-bench-halo) against ucx_perftest's tag bandwidth
// (docs/benchmarks.md). main.cpp parses the flags and calls run_ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ordo::bench {

struct RanksOptions {
  std::string app, size, bin_dir, mpirun, halo_bytes;
  std::uint64_t iters;
  unsigned reps, timeout_s, halo_window;
  double halo_mib;
  bool quick;
};

// Halo message sizes (--halo-bytes): whole doubles, at most 1 GiB (ordo-bench-halo's --bytes).
// Throws ordo::Error naming the item that is not.
std::vector<std::size_t> halo_sizes(const std::string& text);

// heat2d (or heat3d) as 1 rank x 2 workers, 2 ranks x 1 worker and MPI on 2 ranks, round-robin
// (in reverse every other round: round_order), median of the repetitions; then the halo
// throughput of ordo and ucx_perftest, round-robin too (ucx_perftest first every other round).
int run_ranks(const RanksOptions& o);

}  // namespace ordo::bench
