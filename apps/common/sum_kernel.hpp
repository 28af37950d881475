// The "a*u + b*(sum of the neighbours)" point update of the Jacobi benchmarks of
// Saied 2018 Table 5.1 (27-point 3-D, 9-point 4-D, 11-point 5-D), for any offset list.
// The neighbours are summed left to right in the order of the list, so every version that
// uses this kernel gets the same bits.
#pragma once

#include <vector>

#include <ordo/stencil.hpp>

namespace ordo::app {

inline stencil::Kernel weighted_sum_kernel(std::vector<stencil::Offset> offsets, double a,
                                           double b) {
  return [offsets = std::move(offsets), a, b](const stencil::Block& blk) {
    // As many element distances as offsets (moore(5, 1) has 242), kept per thread so that a
    // block's step allocates nothing once warm.
    thread_local std::vector<std::ptrdiff_t> delta;
    const std::size_t k = offsets.size();
    delta.assign(k, 0);
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t d = 0; d < blk.dims; ++d) delta[j] += offsets[j][d] * blk.stride[d];
    if (blk.in[0] == blk.out) {  // Gauss-Seidel: point i reads point i-1's new value
      stencil::for_each_row(blk, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = blk.in[0] + at;
        double* v = blk.out + at;
        for (std::size_t i = 0; i < len; ++i) {
          double s = u[i + delta[0]];
          for (std::size_t j = 1; j < k; ++j) s += u[i + delta[j]];
          v[i] = a * u[i] + b * s;
        }
      });
      return;
    }
    // Jacobi: the same additions per point, one offset at a time along the row, so the
    // inner loops vectorise.
    thread_local std::vector<double> acc;
    stencil::for_each_row(blk, [&](std::ptrdiff_t at, std::size_t len) {
      const double* u = blk.in[0] + at;
      double* v = blk.out + at;
      if (acc.size() < len) acc.resize(len);
      double* s = acc.data();
      for (std::size_t i = 0; i < len; ++i) s[i] = u[i + delta[0]];
      for (std::size_t j = 1; j < k; ++j) {
        const double* w = u + delta[j];
        for (std::size_t i = 0; i < len; ++i) s[i] += w[i];
      }
      for (std::size_t i = 0; i < len; ++i) v[i] = a * u[i] + b * s[i];
    });
  };
}

}  // namespace ordo::app
