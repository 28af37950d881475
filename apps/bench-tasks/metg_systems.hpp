// The systems of ordo-bench-tasks --metg that run inside the benchmark's process (ordo and
// OpenMP; MPI runs as its own executable, metg_mpi.cpp). Each runs the stencil of metg.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace ordo::bench::metg {

class StencilSystem {
 public:
  virtual ~StencilSystem() = default;
  // Runs `steps` (even) steps of the width-`width` stencil from initial_tiles(width), each task
  // with a kernel of `iterations`; leaves the final tiles in `tiles`; returns the seconds the
  // steps took.
  virtual double run(unsigned width, std::uint64_t steps, std::uint64_t iterations,
                     std::vector<std::uint64_t>& tiles) = 0;

 protected:
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

// `workers` threads each; created before the measurements (thread pools are not timed).
std::unique_ptr<StencilSystem> make_ordo_stencil(unsigned workers);
std::unique_ptr<StencilSystem> make_omp_stencil(unsigned threads);  // only with OpenMP

}  // namespace ordo::bench::metg
