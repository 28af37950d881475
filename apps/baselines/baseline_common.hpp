// Shared pieces of the heat baselines (OpenMP and MPI): the command line, the ghosted grid,
// the row kernels the compiler vectorises, and the result line. Each baseline is one template
// on the dimension count D (2 = heat2d, 3 = heat3d) instantiated by a two-line main.
//
// Grid layout: a local grid of extents L[0..D-1] (dimension 0 slowest) is stored with one ghost
// layer on every side, row-major, so a point's neighbours are at +-stride[d] and every inner
// row is contiguous. Ghost layers hold the Dirichlet boundary (kHeatTop before index 0 of
// dimension 0 at the global boundary, kHeatOther elsewhere) or, in the MPI version, a
// neighbour's halo. Two such buffers are swapped by pointer after every step (Jacobi).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "app_cli.hpp"
#include "kernels.hpp"
#include "peak_rss.hpp"

namespace ordo::baseline {

template <int D>
constexpr const char* app_name() {
  return D == 2 ? "heat2d" : "heat3d";
}

struct Options {
  std::vector<std::size_t> size;
  std::vector<std::size_t> blocks;  // empty: the baseline's default decomposition
  std::uint64_t iters = 100;
  unsigned workers = 0;  // 0: not given
  bool verify = false;
};

// Declares the flags every baseline shares. `blocks_help` empty: no --blocks flag.
struct Flags {
  std::string size_text, blocks_text;
};

template <int D>
void add_flags(CLI::App& cli, Options& o, Flags& f, const std::string& workers_help,
               const std::string& blocks_help) {
  f.size_text = D == 2 ? "1024x1024" : "128x128x128";
  cli.add_option("--size", f.size_text,
                 D == 2 ? "grid size NxM (rows x columns)"
                        : "grid size NxMxK (planes x rows x columns)")
      ->capture_default_str();
  cli.add_option("--iters", o.iters, "time steps")->check(ordo::cli::Integer(0, app::max_iters))->capture_default_str();
  cli.add_option("--workers", o.workers, workers_help)->check(ordo::cli::Integer(0, app::max_workers));
  if (!blocks_help.empty()) cli.add_option("--blocks", f.blocks_text, blocks_help);
  cli.add_flag("--verify", o.verify, "compare bit for bit with a sequential loop");
}

// Turns the parsed text into extents; throws ordo::Error on bad input.
template <int D>
void finish_flags(Options& o, const Flags& f) {
  o.size = app::parse_shape(f.size_text, D, "--size");
  if (!f.blocks_text.empty()) o.blocks = app::parse_shape(f.blocks_text, D, "--blocks");
  if (o.iters == 0) throw Error("--iters 0: run at least one iteration");
}

// Refuses a grid this process cannot hold (ordo::Error), before anything is allocated. A
// verdict of this process alone: its limits may not be another's.
template <int D>
void check_grids_fit(const Options& o, const Flags& f) {
  // Two ghosted grids (the baselines' double buffer), plus the reference's two with --verify.
  std::vector<std::size_t> ghosted;
  for (std::size_t e : o.size) ghosted.push_back(e + 2);
  app::check_grid_fits(ghosted, o.verify ? 4 : 2, "--size " + f.size_text);
}

template <int D>
struct Grid {
  std::array<std::size_t, D> ext{};     // interior extents
  std::array<std::size_t, D> stride{};  // of the ghosted layout
  std::size_t total = 1;                // ghosted element count

  explicit Grid(const std::array<std::size_t, D>& e) : ext(e) {
    for (int d = D - 1; d >= 0; --d) {
      stride[static_cast<std::size_t>(d)] = total;
      total *= ext[static_cast<std::size_t>(d)] + 2;
    }
  }
  std::size_t points() const {
    std::size_t p = 1;
    for (std::size_t e : ext) p *= e;
    return p;
  }
};

// Sets every ghost and interior value of a fresh buffer: kHeatOther everywhere, and the ghost
// layer before index 0 of dimension 0 to kHeatTop when `top` (this grid touches the global
// top boundary).
template <int D>
void init_boundary(const Grid<D>& g, double* u, bool top) {
  std::fill(u, u + g.total, app::kHeatOther);
  if (top) std::fill(u, u + g.stride[0], app::kHeatTop);
}

// One contiguous row of `n` points: out[j] from the old values around cur[j]. cur[-1] and
// cur[n] are read (a ghost or a neighbour point), so callers pass rows inside the ghosted grid.
inline void row2d(double* __restrict out, const double* __restrict cur,
                  const double* __restrict up, const double* __restrict down, std::ptrdiff_t n) {
  for (std::ptrdiff_t j = 0; j < n; ++j)
    out[j] = app::heat2d_point(cur[j], up[j], down[j], cur[j - 1], cur[j + 1]);
}

inline void row3d(double* __restrict out, const double* __restrict cur,
                  const double* __restrict im, const double* __restrict ip,
                  const double* __restrict jm, const double* __restrict jp, std::ptrdiff_t n) {
  for (std::ptrdiff_t k = 0; k < n; ++k)
    out[k] = app::heat3d_point(cur[k], im[k], ip[k], jm[k], jp[k], cur[k - 1], cur[k + 1]);
}

// Updates the contiguous run of the last dimension from `lo` to `hi` (ghosted indices,
// inclusive) at the row whose first ghosted element is `row` (offset into the buffers).
template <int D>
inline void update_run(const Grid<D>& g, const double* u, double* v, std::size_t row,
                       std::size_t lo, std::size_t hi) {
  const std::size_t x = row + lo;
  const auto n = static_cast<std::ptrdiff_t>(hi - lo + 1);
  if constexpr (D == 2) {
    row2d(v + x, u + x, u + x - g.stride[0], u + x + g.stride[0], n);
  } else {
    row3d(v + x, u + x, u + x - g.stride[0], u + x + g.stride[0], u + x - g.stride[1],
          u + x + g.stride[1], n);
  }
}

// update_run, returning the run's largest change |new - old| (--tol).
template <int D>
inline double update_run_change(const Grid<D>& g, const double* u, double* v, std::size_t row,
                                std::size_t lo, std::size_t hi) {
  update_run<D>(g, u, v, row, lo, hi);
  double big = 0;
  for (std::size_t x = row + lo; x <= row + hi; ++x) {
    const double c = std::fabs(v[x] - u[x]);
    big = big < c ? c : big;
  }
  return big;
}

// Copies the interior of a ghosted buffer out, row-major.
template <int D>
std::vector<double> interior(const Grid<D>& g, const double* u) {
  std::vector<double> out;
  out.reserve(g.points());
  if constexpr (D == 2) {
    for (std::size_t i = 1; i <= g.ext[0]; ++i)
      out.insert(out.end(), u + i * g.stride[0] + 1, u + i * g.stride[0] + 1 + g.ext[1]);
  } else {
    for (std::size_t i = 1; i <= g.ext[0]; ++i)
      for (std::size_t j = 1; j <= g.ext[1]; ++j) {
        const double* r = u + i * g.stride[0] + j * g.stride[1] + 1;
        out.insert(out.end(), r, r + g.ext[2]);
      }
  }
  return out;
}

// Prints the result line in ordo's app format with the system appended, and `peak_rss` (the
// processes' peak resident bytes, peak_rss.hpp) when given.
inline void print_result(const char* app, const std::vector<std::size_t>& size,
                         const std::vector<std::size_t>& blocks, std::uint64_t iters,
                         unsigned workers, double seconds, const std::string& verdict,
                         const char* system, const std::vector<std::uint64_t>& peak_rss = {}) {
  double points = 1;
  for (std::size_t e : size) points *= static_cast<double>(e);
  const double gst = points * static_cast<double>(iters) / seconds / 1e9;
  fmt::print("app={} size={} blocks={} iters={} workers={} seconds={:.6f} gstencils={:.4f} "
             "verify={} system={}{}\n",
             app, app::join_shape(size), app::join_shape(blocks), iters, workers, seconds, gst,
             verdict, system, peak_rss.empty() ? "" : " " + app::peak_rss_field(peak_rss));
  std::fflush(stdout);
}

}  // namespace ordo::baseline
