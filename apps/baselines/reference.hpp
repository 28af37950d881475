// Sequential references of the heat baselines: the plainest possible double-buffered loops,
// written independently of the OpenMP and MPI code (index arithmetic on the whole grid with a
// ghost ring, no row helpers), so a baseline's --verify checks its decomposition, halo
// exchange and loop bounds against something that shares none of them. Both evaluate the
// shared point functions of kernels.hpp, so results must agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels.hpp"

namespace ordo::baseline {

// heat2d on n x m (rows x columns); returns the interior, row-major.
inline std::vector<double> reference_heat2d(std::size_t n, std::size_t m, std::uint64_t iters) {
  const std::size_t w = m + 2;
  std::vector<double> u((n + 2) * w, app::kHeatOther);
  for (std::size_t j = 0; j < w; ++j) u[j] = app::kHeatTop;  // row -1
  std::vector<double> v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    for (std::size_t i = 1; i <= n; ++i)
      for (std::size_t j = 1; j <= m; ++j) {
        const std::size_t x = i * w + j;
        v[x] = app::heat2d_point(u[x], u[x - w], u[x + w], u[x - 1], u[x + 1]);
      }
    std::swap(u, v);
  }
  std::vector<double> out;
  out.reserve(n * m);
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) out.push_back(u[i * w + j]);
  return out;
}

// heat3d on a x b x c (i slowest, k fastest); returns the interior, row-major.
inline std::vector<double> reference_heat3d(std::size_t a, std::size_t b, std::size_t c,
                                            std::uint64_t iters) {
  const std::size_t sk = 1, sj = c + 2, si = (b + 2) * (c + 2);
  std::vector<double> u((a + 2) * si, app::kHeatOther);
  for (std::size_t x = 0; x < si; ++x) u[x] = app::kHeatTop;  // plane i = -1
  std::vector<double> v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    for (std::size_t i = 1; i <= a; ++i)
      for (std::size_t j = 1; j <= b; ++j)
        for (std::size_t k = 1; k <= c; ++k) {
          const std::size_t x = i * si + j * sj + k * sk;
          v[x] = app::heat3d_point(u[x], u[x - si], u[x + si], u[x - sj], u[x + sj], u[x - sk],
                                   u[x + sk]);
        }
    std::swap(u, v);
  }
  std::vector<double> out;
  out.reserve(a * b * c);
  for (std::size_t i = 1; i <= a; ++i)
    for (std::size_t j = 1; j <= b; ++j)
      for (std::size_t k = 1; k <= c; ++k) out.push_back(u[i * si + j * sj + k * sk]);
  return out;
}

}  // namespace ordo::baseline
