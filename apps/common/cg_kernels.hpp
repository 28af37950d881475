// Conjugate gradient on the 2-D Poisson problem, the arithmetic that ordo-cg, its sequential
// reference and the OpenMP baseline (ordo-omp-cg) share, so that all three compute the same
// bits: A is the 5-point Laplacian (4 on the diagonal, -1 for each of the four neighbours,
// zero Dirichlet values around an N x M grid), b a pseudo-random right-hand side, x0 = 0.
//
// One iteration (r = b - A x, p the search direction, rr = r.r):
//   q = A p                          pq = p.q      (matvec_row)
//   alpha = rr / pq;  x += alpha p;  r -= alpha q;  rr' = r.r  (update_row)
//   beta = rr' / rr;  p = r + beta p;               rr = rr'   (direction_row)
// ordo-cg runs the same arithmetic in two sweeps (direction_pq_row, update_ap_row).
// A dot product is summed per block of a block grid (each row in a fixed lane pattern, the
// rows in order from 0.0), then over the blocks in ordo::combine_in_order's order: so the
// bits depend on the block grid, never on workers, threads or ranks (docs/api.md, Reductions).
// The stop: rr <= tol^2 rr0 (a relative residual of tol), checked after every iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include <ordo/ordo.hpp>

#include "stencil_app.hpp"

namespace ordo::cg {

// The right-hand side at global point (i, j) of an N x M grid: in [0, 1).
inline double rhs(std::size_t i, std::size_t j, std::size_t m) { return app::hash01(i * m + j); }

// p with its ring of halo (or of zeros), h x w inside: each row starts its interior on a cache
// line (the west halo is the point before), rows a whole number of lines apart. Then the
// sweeps' loads of a point and of its north and south neighbours never straddle two lines,
// which slows a sweep of a grid in the cache (docs/journal/cg.md says by how much). ordo-cg's
// blocks and the OpenMP baseline's grid both use it; the layout changes no bit.
struct Padded {
  static constexpr std::size_t kLead = 8;  // doubles per cache line
  std::size_t h, w;
  std::size_t stride() const { return (kLead + w + 1 + kLead - 1) / kLead * kLead; }
  std::size_t size() const { return (h + 2) * stride(); }
  // Interior point (i, j); -1 and h (w) are the halo.
  std::size_t at(std::ptrdiff_t i, std::ptrdiff_t j) const {
    return static_cast<std::size_t>((i + 1) * static_cast<std::ptrdiff_t>(stride()) +
                                    static_cast<std::ptrdiff_t>(kLead) + j);
  }
};

// Four consecutive doubles as one value (the GCC and Clang vector extension): a row's four
// lanes of a sum (lanes_sum) are then one vector register. The compiler's own vectorisation
// of four scalar sums used 8-wide vectors and shuffles between them, at twice the time per
// point, which made the sweeps compute-bound instead of memory-bound. Lanes never pass by
// value between functions (GCC warns that AVX changes how they would).
using Lanes = double __attribute__((vector_size(4 * sizeof(double))));

// One point (double) or four consecutive points (Lanes) from p, or to it; unaligned.
template <class T>
inline void load(T& v, const double* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class T>
inline void store(double* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}

// Sums the terms of points j < len in four lanes (j mod 4), then (l0 + l1) + (l2 + l3): one
// fixed order, with four independent additions in flight instead of one chain. f(j, sum) adds
// to `sum` the term of point j (sum a double) or those of points j..j+3 (sum Lanes): each
// kernel is written once for both, so a row's last points get the arithmetic of the others.
// GCC without AVX emulates Lanes at twice the cost of four scalar sums: those are kept there.
template <class F>
inline double lanes_sum(std::size_t len, F&& f) {
  std::size_t j = 0;
#if defined(__AVX__) || defined(__clang__)
  Lanes acc = {0.0, 0.0, 0.0, 0.0};
  for (; j + 4 <= len; j += 4) f(j, acc);
  double lane[4] = {acc[0], acc[1], acc[2], acc[3]};
#else
  double lane[4] = {0.0, 0.0, 0.0, 0.0};
  for (; j + 4 <= len; j += 4)
    for (std::size_t l = 0; l < 4; ++l) f(j + l, lane[l]);
#endif
  for (std::size_t l = 0; j + l < len; ++l) f(j + l, lane[l]);
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

inline double dot_row(const double* __restrict a, const double* __restrict b, std::size_t len) {
  return lanes_sum(len, [&](std::size_t j, auto& sum) {
    std::remove_reference_t<decltype(sum)> u, v;
    load(u, a + j);
    load(v, b + j);
    sum += u * v;
  });
}

// (A p) at one point (double) or four (Lanes) from p there and at its four neighbours: the one
// formula of every kernel below, so that all agree bit for bit.
template <class T>
inline T laplacian(const T& c, const T& north, const T& south, const T& west, const T& east) {
  return 4.0 * c - ((north + south) + (west + east));
}

// Loads p's four neighbours of the point(s) at `at`, whose rows are `stride` apart.
template <class T>
inline void load_neighbours(T (&nb)[4], const double* at, std::ptrdiff_t stride) {
  load(nb[0], at - stride);
  load(nb[1], at + stride);
  load(nb[2], at - 1);
  load(nb[3], at + 1);
}

// q = A p along one row of `len` points; p points at the row's first point in an array whose
// rows are `stride` apart, with the neighbours (or zeros past the grid) around it. Returns the
// row's p.q.
inline double matvec_row(const double* __restrict p, std::ptrdiff_t stride, double* __restrict q,
                         std::size_t len) {
  return lanes_sum(len, [&](std::size_t j, auto& sum) {
    std::remove_reference_t<decltype(sum)> c, nb[4];
    load(c, p + j);
    load_neighbours(nb, p + j, stride);
    const auto v = laplacian(c, nb[0], nb[1], nb[2], nb[3]);
    store(q + j, v);
    sum += c * v;
  });
}

// x += alpha p, r -= alpha q along one row; returns the row's new r.r.
inline double update_row(double* __restrict x, double* __restrict r, const double* __restrict p,
                         const double* __restrict q, double alpha, std::size_t len) {
  return lanes_sum(len, [&](std::size_t j, auto& sum) {
    std::remove_reference_t<decltype(sum)> xj, rj, pj, qj;
    load(xj, x + j);
    load(rj, r + j);
    load(pj, p + j);
    load(qj, q + j);
    store(x + j, xj + alpha * pj);
    const auto v = rj - alpha * qj;
    store(r + j, v);
    sum += v * v;
  });
}

// ordo-cg's two sweeps, which leave q out: it is A p, recomputed where update_row would read
// it, from p's rows (the same formula, so the same bits as matvec_row and update_row). The
// first sweep holds p = r + beta p too (p's row below is only read at the column being
// computed, so each step makes it, stores it and uses it from a register). An iteration then
// moves 64 bytes per point instead of 80, and 88 for the three sweeps: that bounds a grid
// beyond the cache; in the cache the recomputation costs what writing and reading q did
// (docs/journal/cg.md, which also gives what it would bring the OpenMP baseline, which keeps
// the textbook q).

// p = r + beta p along the row below p (whose rows are `stride` apart; r_below is r's row
// there), then this row's p.(A p); p's row above and this row, with its two ends, are already
// the new p.
inline double direction_pq_row(double* __restrict p, std::ptrdiff_t stride,
                               const double* __restrict r_below, double beta, std::size_t len) {
  double* const below = p + stride;
  return lanes_sum(len, [&](std::size_t j, auto& sum) {
    std::remove_reference_t<decltype(sum)> c, north, south, west, east, rb;
    load(south, below + j);
    load(rb, r_below + j);
    south = rb + beta * south;  // direction_point
    store(below + j, south);
    load(c, p + j);
    load(north, p + j - stride);
    load(west, p + j - 1);
    load(east, p + j + 1);
    sum += c * laplacian(c, north, south, west, east);
  });
}

// This row's p.(A p), for a row whose row below needs no new p (the first iteration's, or the
// last row's, whose row below is the halo).
inline double pq_row(const double* __restrict p, std::ptrdiff_t stride, std::size_t len) {
  return lanes_sum(len, [&](std::size_t j, auto& sum) {
    std::remove_reference_t<decltype(sum)> c, nb[4];
    load(c, p + j);
    load_neighbours(nb, p + j, stride);
    sum += c * laplacian(c, nb[0], nb[1], nb[2], nb[3]);
  });
}

// x += alpha p, r -= alpha (A p) along one row of p (rows `stride` apart, its neighbours new);
// returns the row's new r.r.
inline double update_ap_row(double* __restrict x, double* __restrict r, const double* __restrict p,
                            std::ptrdiff_t stride, double alpha, std::size_t len) {
  return lanes_sum(len, [&](std::size_t j, auto& sum) {
    std::remove_reference_t<decltype(sum)> xj, rj, c, nb[4];
    load(xj, x + j);
    load(rj, r + j);
    load(c, p + j);
    load_neighbours(nb, p + j, stride);
    store(x + j, xj + alpha * c);
    const auto v = rj - alpha * laplacian(c, nb[0], nb[1], nb[2], nb[3]);
    store(r + j, v);
    sum += v * v;
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

// Whether CG stops after an iteration that left r.r = `rr`: at the tolerance when tol > 0, and
// always at an exact solution (r.r = 0), where the next alpha and beta would be 0/0.
inline bool stops(double rr, double rr0, double tol) {
  return rr == 0 || (tol > 0 && converged(rr, rr0, tol));
}

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
// or after the first that stops() (the tolerance when tol > 0, an exact solution always).
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
    if (stops(rr, out.rr0, tol)) break;
  }
  out.rr = rr;
  out.x = std::move(x);
  return out;
}

}  // namespace ordo::cg
