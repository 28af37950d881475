// The one sequential reference of each heat kernel: the plainest double-buffered loop over the
// whole grid with a ghost layer holding the Dirichlet boundary, written independently of the
// stencil layer and of the OpenMP and MPI baselines (index arithmetic on the whole grid, no row
// helpers, no blocks). ordo-heat2d/3d's --verify and the baselines' --verify all compare with
// it; every version evaluates the point functions of kernels.hpp, so results agree bit for bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels.hpp"
#include "stop_test.hpp"

namespace ordo::app {

// heat2d on n x m (rows x columns) from u0 (row-major; empty: every point kHeatOther) after
// `iters` steps; returns the interior, row-major.
inline std::vector<double> reference_heat2d(std::size_t n, std::size_t m, std::uint64_t iters,
                                            const std::vector<double>& u0 = {},
                                            StopTest* stop = nullptr) {
  const std::size_t w = m + 2;
  std::vector<double> u((n + 2) * w, kHeatOther);
  for (std::size_t j = 0; j < w; ++j) u[j] = kHeatTop;  // row -1
  if (!u0.empty())
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) u[(i + 1) * w + j + 1] = u0[i * m + j];
  std::vector<double> v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    double change = 0;
    for (std::size_t i = 1; i <= n; ++i)
      for (std::size_t j = 1; j <= m; ++j) {
        const std::size_t x = i * w + j;
        v[x] = heat2d_point(u[x], u[x - w], u[x + w], u[x - 1], u[x + 1]);
        const double c = std::fabs(v[x] - u[x]);
        change = change < c ? c : change;
      }
    std::swap(u, v);
    if (stop) stop->steps = it + 1;
    if (stop && stop->tested(it + 1, iters) && change <= stop->tol) break;
  }
  std::vector<double> out;
  out.reserve(n * m);
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) out.push_back(u[i * w + j]);
  return out;
}

// heat3d on a x b x c (i slowest, k fastest) from u0 (empty: every point kHeatOther) after
// `iters` steps; returns the interior, row-major.
inline std::vector<double> reference_heat3d(std::size_t a, std::size_t b, std::size_t c,
                                            std::uint64_t iters, const std::vector<double>& u0 = {},
                                            StopTest* stop = nullptr) {
  const std::size_t sk = 1, sj = c + 2, si = (b + 2) * (c + 2);
  std::vector<double> u((a + 2) * si, kHeatOther);
  for (std::size_t x = 0; x < si; ++x) u[x] = kHeatTop;  // plane i = -1
  if (!u0.empty())
    for (std::size_t i = 0; i < a; ++i)
      for (std::size_t j = 0; j < b; ++j)
        for (std::size_t k = 0; k < c; ++k)
          u[(i + 1) * si + (j + 1) * sj + (k + 1) * sk] = u0[(i * b + j) * c + k];
  std::vector<double> v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    double change = 0;
    for (std::size_t i = 1; i <= a; ++i)
      for (std::size_t j = 1; j <= b; ++j)
        for (std::size_t k = 1; k <= c; ++k) {
          const std::size_t x = i * si + j * sj + k * sk;
          v[x] = heat3d_point(u[x], u[x - si], u[x + si], u[x - sj], u[x + sj], u[x - sk],
                              u[x + sk]);
          const double d = std::fabs(v[x] - u[x]);
          change = change < d ? d : change;
        }
    std::swap(u, v);
    if (stop) stop->steps = it + 1;
    if (stop && stop->tested(it + 1, iters) && change <= stop->tol) break;
  }
  std::vector<double> out;
  out.reserve(a * b * c);
  for (std::size_t i = 1; i <= a; ++i)
    for (std::size_t j = 1; j <= b; ++j)
      for (std::size_t k = 1; k <= c; ++k) out.push_back(u[i * si + j * sj + k * sk]);
  return out;
}

}  // namespace ordo::app
