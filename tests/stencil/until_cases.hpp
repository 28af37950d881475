// The stencil layer's stop on a residual against a brute-force global loop: a 2-D Jacobi-type
// kernel contributes each step's largest change (max) and sum of squared changes (sum) per
// block; Stencil::run_until stops after the first step whose largest change is at most a
// tolerance. The brute force sweeps one global array, takes each block's partial over its
// points in row order, combines the blocks' partials with ordo::combine_in_order and tests
// after every step (every D steps with temporal blocking, and after the last): the stop step,
// every point's bits and the values' bits must be equal. Shared by the in-process test
// (test_until.cpp) and the one across ranks (dist_until.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <ordo/stencil.hpp>

namespace ordo::test::until {

namespace st = ordo::stencil;

struct Case {
  std::size_t rows = 0, cols = 0, brows = 1, bcols = 1, tb = 1;
  st::Traversal traversal = st::Traversal::jacobi;
  std::uint64_t max_steps = 0;
  double tol = 0;
  std::string describe() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + " blocks " + std::to_string(brows) +
           "x" + std::to_string(bcols) + " tb " + std::to_string(tb) + " traversal " +
           std::to_string(static_cast<int>(traversal)) + " tol " + std::to_string(tol) + " max " +
           std::to_string(max_steps);
  }
};

inline double fixed(st::Coord x) { return x[0] < 0 ? 1.0 : (x[1] < 0 ? 0.5 : 0.0); }
inline double point(double c, double n, double s, double w, double e) {
  return c + 0.2 * ((n + s) + (w + e) - 4.0 * c);
}
inline double initial(std::size_t i, std::size_t j) {
  return static_cast<double>((i * 37 + j * 11) % 17) / 17.0;
}

// The kernel: each call's largest change and sum of squared changes over its range, in row
// order, contributed as reductions 0 and 1.
inline st::Kernel kernel() {
  return [](const st::Block& b) {
    const std::ptrdiff_t n = b.stride[0];
    double big = 0, sq = 0;
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      const double* u = b.in[0] + at;
      double* v = b.out + at;
      for (std::ptrdiff_t j = 0; j < static_cast<std::ptrdiff_t>(len); ++j) {
        const double next = point(u[j], u[j - n], u[j + n], u[j - 1], u[j + 1]);
        const double c = std::fabs(next - u[j]);
        big = big < c ? c : big;
        sq = sq + c * c;
        v[j] = next;
      }
    });
    b.contribute(0, big);
    b.contribute(1, sq);
  };
}

inline st::Spec spec(const Case& c) {
  st::Spec s;
  s.size = {c.rows, c.cols};
  s.blocks = {c.brows, c.bcols};
  s.neighbourhood = st::von_neumann(2, 1);
  s.traversal = c.traversal;
  s.tb_depth = c.tb;
  s.fixed_value = fixed;
  s.reductions = {{"change", st::Reduce::max}, {"squares", st::Reduce::sum}};
  return s;
}

struct Outcome {
  std::uint64_t steps = 0;
  double change = 0, squares = 0;
  std::vector<double> grid;
};

// The brute force over one global array with a ghost layer.
inline Outcome brute_force(const Case& c) {
  const std::size_t R = c.rows, C = c.cols, w = C + 2;
  std::vector<double> u((R + 2) * w);
  for (std::size_t i = 0; i < R + 2; ++i)
    for (std::size_t j = 0; j < w; ++j) {
      const std::int64_t x[2] = {static_cast<std::int64_t>(i) - 1,
                                 static_cast<std::int64_t>(j) - 1};
      const bool inside = i >= 1 && i <= R && j >= 1 && j <= C;
      u[i * w + j] = inside ? initial(i - 1, j - 1) : fixed(st::Coord(x, 2));
    }
  std::vector<double> v = u;
  const bool in_place = c.traversal == st::Traversal::gauss_seidel;
  Outcome out;
  for (std::uint64_t step = 0; step < c.max_steps; ++step) {
    std::vector<double> big(c.brows * c.bcols), sq(c.brows * c.bcols);
    std::vector<double>& dst = in_place ? u : v;
    // Point by point in global row order: every block's points come in its own row order, so
    // each block's partial folds as its kernel call does (one call per block and step).
    std::vector<bool> first(big.size(), true);
    for (std::size_t i = 1; i <= R; ++i)
      for (std::size_t j = 1; j <= C; ++j) {
        const std::size_t x = i * w + j;
        const double old = u[x];
        const double next = point(u[x], u[x - w], u[x + w], u[x - 1], u[x + 1]);
        dst[x] = next;
        std::size_t bi = 0, bj = 0;
        while (st::block_low(bi + 1, R, c.brows) <= i - 1) ++bi;
        while (st::block_low(bj + 1, C, c.bcols) <= j - 1) ++bj;
        const std::size_t b = bi * c.bcols + bj;
        const double ch = std::fabs(next - old);
        if (first[b]) {
          big[b] = ch;
          sq[b] = ch * ch;
          first[b] = false;
        } else {
          big[b] = big[b] < ch ? ch : big[b];
          sq[b] = sq[b] + ch * ch;
        }
      }
    if (!in_place) std::swap(u, v);
    out.steps = step + 1;
    const bool tested = out.steps % c.tb == 0 || out.steps == c.max_steps;
    if (!tested) continue;
    out.change = ordo::combine_in_order<double>(big, ordo::Max{});
    out.squares = ordo::combine_in_order<double>(sq);
    if (out.change <= c.tol) break;
  }
  for (std::size_t i = 1; i <= R; ++i)
    for (std::size_t j = 1; j <= C; ++j) out.grid.push_back(u[i * w + j]);
  return out;
}

// A tolerance the brute force meets after some 5 to 40 steps: the largest change of a step
// drawn there (the stop may come earlier where a change was smaller before).
inline Case random_case(std::mt19937& rng, std::size_t ranks) {
  auto pick = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  Case c;
  const int kind = static_cast<int>(pick(0, 4));
  c.traversal = kind == 4   ? st::Traversal::gauss_seidel
                : kind >= 2 ? st::Traversal::jacobi_in_place
                            : st::Traversal::jacobi;
  c.tb = c.traversal == st::Traversal::gauss_seidel ? 1 : pick(1, 3);
  c.rows = pick(6, 24);
  c.cols = pick(6, 24);
  do {
    c.brows = pick(1, 4);
    c.bcols = pick(1, 4);
  } while (c.brows * c.bcols < ranks);
  // Blocks of at least tb points (the halo of temporal blocking).
  while (c.rows / c.brows < c.tb) --c.tb;
  while (c.cols / c.bcols < c.tb) --c.tb;
  if (c.tb == 0) c.tb = 1;
  Case probe = c;
  probe.max_steps = pick(5, 40);
  probe.tol = -1;  // never met: the changes of every step
  probe.tb = 1;
  c.tol = brute_force(probe).change;
  c.max_steps = pick(0, 1) ? 60 : probe.max_steps + pick(0, 3);
  return c;
}

// Runs c on the stencil layer (this rank's blocks) and compares with the brute force; returns
// what differs, empty when nothing does.
inline std::string check(const Case& c, ordo::Runtime& rt) {
  const Outcome want = brute_force(c);
  ordo::Graph g;
  st::Stencil s(g, spec(c), kernel());
  s.place(rt);
  s.set([](st::Coord x) {
    return initial(static_cast<std::size_t>(x[0]), static_cast<std::size_t>(x[1]));
  });
  const double tol = c.tol;
  const ordo::RunStats r = s.run_until(
      rt, [tol](const st::Values& v) { return v["change"] <= tol; }, c.max_steps);
  std::string bad;
  if (r.iterations != want.steps || s.steps_done() != want.steps)
    bad += " steps " + std::to_string(r.iterations) + " want " + std::to_string(want.steps);
  const double change = s.values()["change"], squares = s.values()[1];
  if (std::memcmp(&change, &want.change, sizeof change) != 0) bad += " change differs";
  // A sum folds in the order of the kernel's calls: one per block and step where the layer
  // neither sweeps in place nor cuts the step.
  if (c.traversal != st::Traversal::jacobi_in_place && c.tb == 1 &&
      std::memcmp(&squares, &want.squares, sizeof squares) != 0)
    bad += " squares differ";
  s.get_blocks([&](const st::ConstBox& b) {
    st::for_each_box_row(b, [&](const double* row, st::Coord x, std::size_t len) {
      const std::size_t at =
          static_cast<std::size_t>(x[0]) * c.cols + static_cast<std::size_t>(x[1]);
      if (std::memcmp(row, &want.grid[at], len * sizeof(double)) != 0) bad += " grid differs";
    });
  });
  return bad;
}

}  // namespace ordo::test::until
