// Conjugate gradient on the 2-D Poisson problem, the arithmetic that ordo-cg, its sequential
// reference and the OpenMP baseline (ordo-omp-cg) share, so that all three compute the same
// bits: A is the 5-point Laplacian (4 on the diagonal, -1 for each of the four neighbours,
// zero Dirichlet values around an N x M grid), b a pseudo-random right-hand side, x0 = 0.
//
// One iteration (r = b - A x, p the search direction, rr = r.r):
//   q = A p                          pq = p.q      (matvec_row)
//   alpha = rr / pq;  x += alpha p;  r -= alpha q;  rr' = r.r  (update_row)
//   beta = rr' / rr;  p = r + beta p;               rr = rr'   (direction_row)
// A dot product is summed per block of a block grid (each row in a fixed lane pattern, the
// rows in order from 0.0), then over the blocks in ordo::combine_in_order's order: so the
// bits depend on the block grid, never on workers, threads or ranks (docs/api.md, Reductions).
// The stop: rr <= tol^2 rr0 (a relative residual of tol), checked after every iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <ordo/ordo.hpp>

#include "stencil_app.hpp"

namespace ordo::cg {

// The right-hand side at global point (i, j) of an N x M grid: in [0, 1).
inline double rhs(std::size_t i, std::size_t j, std::size_t m) { return app::hash01(i * m + j); }

// Sums f(j) for j < len in four lanes (j mod 4), then (l0 + l1) + (l2 + l3): one fixed order,
// with four independent additions in flight instead of one chain.
template <class F>
inline double lanes_sum(std::size_t len, F&& f) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    s0 += f(j);
    s1 += f(j + 1);
    s2 += f(j + 2);
    s3 += f(j + 3);
  }
  if (j < len) s0 += f(j);
  if (j + 1 < len) s1 += f(j + 1);
  if (j + 2 < len) s2 += f(j + 2);
  return (s0 + s1) + (s2 + s3);
}

inline double dot_row(const double* __restrict a, const double* __restrict b, std::size_t len) {
  return lanes_sum(len, [&](std::size_t j) { return a[j] * b[j]; });
}

// q = A p along one row of `len` points; p points at the row's first point in an array whose
// rows are `stride` apart, with the neighbours (or zeros past the grid) around it. Returns the
// row's p.q.
inline double matvec_row(const double* __restrict p, std::ptrdiff_t stride, double* __restrict q,
                         std::size_t len) {
  return lanes_sum(len, [&](std::size_t j) {
    const double c = p[j];
    const double v = 4.0 * c - ((p[j - stride] + p[j + stride]) + (p[j - 1] + p[j + 1]));
    q[j] = v;
    return c * v;
  });
}

// x += alpha p, r -= alpha q along one row; returns the row's new r.r.
inline double update_row(double* __restrict x, double* __restrict r, const double* __restrict p,
                         const double* __restrict q, double alpha, std::size_t len) {
  return lanes_sum(len, [&](std::size_t j) {
    x[j] += alpha * p[j];
    const double v = r[j] - alpha * q[j];
    r[j] = v;
    return v * v;
  });
}

// p = r + beta p at one point: ordo-cg also computes its halo's new p, which the neighbour
// computes in its own rows, and the two must agree bit for bit.
inline double direction_point(double r, double beta, double p) { return r + beta * p; }

// p = r + beta p along one row.
inline void direction_row(double* __restrict p, const double* __restrict r, double beta,
                          std::size_t len) {
  for (std::size_t j = 0; j < len; ++j) p[j] = direction_point(r[j], beta, p[j]);
}

inline bool converged(double rr, double rr0, double tol) { return rr <= tol * tol * rr0; }

// Rows [r0, r1) and columns [c0, c1) of block (bi, bj) of an N x M grid on a BI x BJ block grid.
struct BlockRange {
  std::size_t r0, r1, c0, c1;
  std::size_t rows() const { return r1 - r0; }
  std::size_t cols() const { return c1 - c0; }
};
inline BlockRange block_range(std::size_t b, std::size_t n, std::size_t m, std::size_t bi,
                              std::size_t bj) {
  const std::size_t i = b / bj, j = b % bj;
  return {stencil::block_low(i, n, bi), stencil::block_low(i + 1, n, bi),
          stencil::block_low(j, m, bj), stencil::block_low(j + 1, m, bj)};
}

struct Result {
  std::vector<double> x;  // N x M, row-major
  std::uint64_t iterations = 0;
  double rr = 0;   // r.r after the last iteration
  double rr0 = 0;  // b.b
};

// The plainest sequential CG: global arrays (p with a ring of zeros), one loop per step, the
// dot products summed block by block in the order above. Stops after `max_iters` iterations,
// or after the first whose rr meets the tolerance when tol > 0.
inline Result reference(std::size_t n, std::size_t m, std::size_t bi, std::size_t bj, double tol,
                        std::uint64_t max_iters) {
  const std::size_t pm = m + 2;  // padded row
  std::vector<double> x(n * m, 0.0), r(n * m), q(n * m), p((n + 2) * pm, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j) r[i * m + j] = p[(i + 1) * pm + j + 1] = rhs(i, j, m);
  const std::size_t blocks = bi * bj;
  std::vector<double> parts(blocks);
  // Sums row(block range, row) over every block's rows, then over blocks.
  auto reduce = [&](auto&& row) {
    for (std::size_t b = 0; b < blocks; ++b) {
      const BlockRange br = block_range(b, n, m, bi, bj);
      double s = 0.0;
      for (std::size_t i = br.r0; i < br.r1; ++i) s += row(br, i);
      parts[b] = s;
    }
    return combine_in_order<double>(parts);
  };
  Result out;
  out.rr0 = reduce([&](const BlockRange& br, std::size_t i) {
    return dot_row(&r[i * m + br.c0], &r[i * m + br.c0], br.cols());
  });
  double rr = out.rr0;
  for (std::uint64_t k = 0; k < max_iters; ++k) {
    const double pq = reduce([&](const BlockRange& br, std::size_t i) {
      return matvec_row(&p[(i + 1) * pm + br.c0 + 1], static_cast<std::ptrdiff_t>(pm),
                        &q[i * m + br.c0], br.cols());
    });
    const double alpha = rr / pq;
    const double next = reduce([&](const BlockRange& br, std::size_t i) {
      const std::size_t at = i * m + br.c0;
      return update_row(&x[at], &r[at], &p[(i + 1) * pm + br.c0 + 1], &q[at], alpha, br.cols());
    });
    const double beta = next / rr;
    rr = next;
    for (std::size_t i = 0; i < n; ++i) direction_row(&p[(i + 1) * pm + 1], &r[i * m], beta, m);
    out.iterations = k + 1;
    if (tol > 0 && converged(rr, out.rr0, tol)) break;
  }
  out.rr = rr;
  out.x = std::move(x);
  return out;
}

}  // namespace ordo::cg
