// D2Q9 Lattice-Boltzmann (BGK) for the lid-driven cavity, shared by ordo-lbm, its sequential
// loop (--verify) and the OpenMP baseline, so that every version evaluates the same expressions
// in the same order and their results agree bit for bit.
//
// The grid is ny x nx points (rows slowest), all fluid; walls lie half a point beyond every
// edge (halfway bounce-back) and the lid, beyond row 0 (the row above row -1 is never read),
// moves along +columns at `lid`. A step pulls each population from the neighbour it streams
// from (from the point itself, reflected, where that neighbour is behind a wall; plus the lid's
// momentum 6 w_i (c_i . u_lid) behind the lid), then relaxes towards equilibrium at rate omega.
// The populations kept between steps are the post-collision ones. A step's change at a point is
// the largest of |ux - ux'| and |uy - uy'|, ux' and uy' the velocity of the populations the step
// started from at that point (a collision keeps the density and momentum, so that is the
// previous step's velocity there).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ordo::app::lbm {

inline constexpr int kQ = 9;
// Direction i moves by (dr[i], dc[i]) rows and columns per step.
inline constexpr int dr[kQ] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
inline constexpr int dc[kQ] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
inline constexpr int opp[kQ] = {0, 3, 4, 1, 2, 7, 8, 5, 6};
inline constexpr double w[kQ] = {4.0 / 9,  1.0 / 9,  1.0 / 9,  1.0 / 9, 1.0 / 9,
                                 1.0 / 36, 1.0 / 36, 1.0 / 36, 1.0 / 36};

// Density and velocity of nine populations.
inline void moments(const double (&f)[kQ], double& rho, double& ux, double& uy) {
  rho = ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7])) + f[8];
  ux = (((f[1] + f[5]) + f[8]) - ((f[3] + f[6]) + f[7])) / rho;
  uy = (((f[2] + f[5]) + f[6]) - ((f[4] + f[7]) + f[8])) / rho;
}

// BGK collision of the pulled populations fs into out; returns the velocity through ux, uy.
inline void collide(const double (&fs)[kQ], double omega, double (&out)[kQ], double& ux,
                    double& uy) {
  double rho;
  moments(fs, rho, ux, uy);
  const double usq = 1.5 * (ux * ux + uy * uy);
  for (int i = 0; i < kQ; ++i) {
    const double cu = 3.0 * (dc[i] * ux + dr[i] * uy);
    const double eq = w[i] * rho * (1.0 + cu + 0.5 * cu * cu - usq);
    out[i] = fs[i] - omega * (fs[i] - eq);
  }
}

// The lid's momentum for direction i (pulled from behind the lid).
inline double lid_term(int i, double lid) { return 6.0 * w[i] * dc[i] * lid; }

// The largest velocity change of a point: pulled populations' velocity (ux, uy) against the
// velocity of `here`, the populations at the point before the step.
inline double change(const double (&here)[kQ], double ux, double uy) {
  double rho0, ux0, uy0;
  moments(here, rho0, ux0, uy0);
  const double a = std::fabs(ux - ux0), b = std::fabs(uy - uy0);
  return a < b ? b : a;
}

// The pulled populations of point (r, c) of an ny x nx grid; at(i, r', c') is population i
// at point (r', c'), which lies inside the grid.
template <class At>
inline void pull(const At& at, std::ptrdiff_t ny, std::ptrdiff_t nx, std::ptrdiff_t r,
                 std::ptrdiff_t c, double lid, double (&fs)[kQ]) {
  for (int i = 0; i < kQ; ++i) {
    const std::ptrdiff_t sr = r - dr[i], sc = c - dc[i];
    if (sr >= 0 && sr < ny && sc >= 0 && sc < nx)
      fs[i] = at(i, sr, sc);
    else if (sr < 0)
      fs[i] = at(opp[i], r, c) + lid_term(i, lid);
    else
      fs[i] = at(opp[i], r, c);
  }
}

// One row's interior points [0, n) away from every wall: in[i] points at population i of the
// row's first point, rows `rs` elements apart; out[i] likewise. With Track, returns the row's
// largest change (else 0). Pulls from the neighbours without a test, so the compiler
// vectorises the loop; the arithmetic is collide()'s and change()'s, point by point.
template <bool Track>
inline double row(const double* const (&in)[kQ], double* const (&out)[kQ], std::ptrdiff_t rs,
                  std::size_t n, double omega) {
  const double* __restrict s[kQ];
  for (int i = 0; i < kQ; ++i) s[i] = in[i] - (dr[i] * rs + dc[i]);
  double* __restrict o[kQ];
  for (int i = 0; i < kQ; ++i) o[i] = out[i];
  double big = 0;
  for (std::size_t j = 0; j < n; ++j) {
    double fs[kQ], r[kQ];
    for (int i = 0; i < kQ; ++i) fs[i] = s[i][j];
    double ux, uy;
    collide(fs, omega, r, ux, uy);
    for (int i = 0; i < kQ; ++i) o[i][j] = r[i];
    if constexpr (Track) {
      double here[kQ];
      for (int i = 0; i < kQ; ++i) here[i] = in[i][j];
      const double ch = change(here, ux, uy);
      big = big < ch ? ch : big;
    }
  }
  return big;
}

// Initial populations: at rest, density 1.
inline double initial(int i) { return w[i]; }

struct Problem {
  std::ptrdiff_t ny = 0, nx = 0;
  double omega = 1.0, lid = 0.1, tol = -1;
  std::uint64_t max_steps = 0;
};

struct Result {
  std::vector<std::vector<double>> f;  // kQ grids, row-major
  std::uint64_t steps = 0;
};

// The sequential loop: plain arrays over the whole grid, a bounds test per neighbour.
inline Result reference(const Problem& p) {
  const auto n = static_cast<std::size_t>(p.ny * p.nx);
  Result res;
  res.f.assign(kQ, std::vector<double>(n));
  for (int i = 0; i < kQ; ++i) res.f[static_cast<std::size_t>(i)].assign(n, initial(i));
  std::vector<std::vector<double>> g = res.f;
  for (std::uint64_t step = 0; step < p.max_steps; ++step) {
    const auto& f = res.f;
    auto at = [&](int i, std::ptrdiff_t r, std::ptrdiff_t c) {
      return f[static_cast<std::size_t>(i)][static_cast<std::size_t>(r * p.nx + c)];
    };
    const bool track = p.tol >= 0 && step % 2 == 1;
    double big = 0;
    for (std::ptrdiff_t r = 0; r < p.ny; ++r)
      for (std::ptrdiff_t c = 0; c < p.nx; ++c) {
        double fs[kQ], out[kQ], ux, uy;
        pull(at, p.ny, p.nx, r, c, p.lid, fs);
        collide(fs, p.omega, out, ux, uy);
        const auto x = static_cast<std::size_t>(r * p.nx + c);
        for (int i = 0; i < kQ; ++i) g[static_cast<std::size_t>(i)][x] = out[i];
        if (track) {
          double here[kQ];
          for (int i = 0; i < kQ; ++i) here[i] = f[static_cast<std::size_t>(i)][x];
          const double ch = change(here, ux, uy);
          big = big < ch ? ch : big;
        }
      }
    std::swap(res.f, g);
    res.steps = step + 1;
    if (track && big <= p.tol) break;
  }
  return res;
}

}  // namespace ordo::app::lbm
