// ordo-bench-until's OpenMP references (omp.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ordo::bench::until {

struct OmpResult {
  double seconds = 0;
  std::uint64_t iterations = 0;
  double value = 0;     // the last reduced value
  double checksum = 0;  // Jacobi: the sum of the grid after the run
};

// `iterations` of the small case: `threads` chunks of kSmallWidth doubles, a parallel for with
// a sum reduction, and the test.
OmpResult omp_small(unsigned threads, std::uint64_t iterations);
// Jacobi on n x m until the largest change is at most tol (or max_iterations), checked after
// every sweep.
OmpResult omp_jacobi(unsigned threads, std::size_t n, std::size_t m, double tol,
                     std::uint64_t max_iterations);

}  // namespace ordo::bench::until
