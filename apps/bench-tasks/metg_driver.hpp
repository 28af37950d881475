// ordo-bench-tasks --metg (metg.cpp): the options main.cpp parses and the run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ordo::bench::metg {

struct MetgOptions {
  unsigned width = 2;                   // points per step = workers = MPI ranks = threads
  std::uint64_t steps = 1000;           // even
  std::vector<std::uint64_t> iterations;  // the sweep, longest first
  std::vector<std::string> systems;     // ordo, mpi, omp
  unsigned reps = 3;
  bool verify = false;                  // check results only, print no timings
  std::string bin_dir, mpirun = "mpirun";
  unsigned timeout_s = 600;             // for one MPI sweep
};

// Prints the sweep's points and each system's METG; returns the exit status (1: a system
// computed a wrong result or failed).
int run_metg(const MetgOptions& o);

}  // namespace ordo::bench::metg
