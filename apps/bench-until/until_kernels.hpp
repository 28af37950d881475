// The work of ordo-bench-until's cases, shared by ordo's graphs and the OpenMP and MPI
// references, so that every system computes the same bits.
#pragma once

#include <cmath>
#include <cstddef>

namespace ordo::bench::until {

// The small graph's tasks: each updates this many doubles and sums them.
constexpr std::size_t kSmallWidth = 64;

inline double small_step(double* x, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = x[i] * 0.999 + 1e-3;
    s += x[i];
  }
  return s;
}

// One row of a Jacobi sweep of the Laplace equation: out = the mean of the four neighbours,
// `up` / `down` null past the grid (the top boundary holds 1, the others 0). Returns the
// largest change of the row.
inline double jacobi_row(const double* up, const double* mid, const double* down, double* out,
                         std::size_t m) {
  double most = 0;
  for (std::size_t j = 0; j < m; ++j) {
    const double n = up ? up[j] : 1.0, s = down ? down[j] : 0.0;
    const double w = j > 0 ? mid[j - 1] : 0.0, e = j + 1 < m ? mid[j + 1] : 0.0;
    out[j] = 0.25 * (n + s + w + e);
    most = std::fmax(most, std::fabs(out[j] - mid[j]));
  }
  return most;
}

// The first row of block b of `blocks` over n rows (blocks differ by at most one row).
inline std::size_t block_row(std::size_t b, std::size_t n, std::size_t blocks) {
  return b * n / blocks;
}

}  // namespace ordo::bench::until
