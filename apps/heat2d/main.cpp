// ordo-heat2d: 2-D 5-point heat equation (Jacobi) on a block-decomposed grid.
//
// Two graphs, same bits:
// * --tb 1 (default): the hand-written ORWL graph below, kept because it moves fewer bytes
//   than the layer's double buffer (docs/stencil.md). Per block b (program order: every step
//   task, then every export task):
//     step_b   writes u_b, reads the edges its neighbours exported. It updates u_b in place
//              with a rolling copy of the previous row, so each point is read and written once.
//     export_b reads u_b, writes its edge locations (first/last row, first/last column) that
//              a neighbour reads.
//   On an edge location's FIFO the neighbour's step (read) comes before this block's export
//   (write), so step_b of iteration k reads the edges of iteration k-1: exact Jacobi, with no
//   global barrier and no second copy of the grid.
// * --tb D > 1: the stencil layer (<ordo/stencil.hpp>) with temporal blocking.
//
// Boundary (Dirichlet): the row above the grid is held at 1.0, every other side at 0.0
// (apps/common/kernels.hpp, shared with the OpenMP and MPI baselines).
// --verify compares with a plain double-buffered loop over the whole grid.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "kernels.hpp"
#include "stencil_app.hpp"

namespace {

using ordo::app::kHeatOther;
using ordo::app::kHeatTop;
constexpr double kTop = kHeatTop;
constexpr double kOther = kHeatOther;
constexpr auto point = ordo::app::heat2d_point;

// Sequential reference: a double-buffered loop over the grid with a ghost ring.
std::vector<double> reference(const ordo::app::AppParams& p, const std::vector<double>& u0,
                              std::uint64_t iters) {
  const std::size_t n = p.size[0], m = p.size[1], w = m + 2;
  std::vector<double> u((n + 2) * w, kHeatOther), v;
  for (std::size_t j = 0; j < w; ++j) u[j] = kHeatTop;
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&u[(i + 1) * w + 1], &u0[i * m], m * 8);
  v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    for (std::size_t i = 1; i <= n; ++i)
      for (std::size_t j = 1; j <= m; ++j) {
        const double* r = &u[i * w + j];
        v[i * w + j] = point(r[0], r[-static_cast<std::ptrdiff_t>(w)], r[w], r[-1], r[1]);
      }
    std::swap(u, v);
  }
  std::vector<double> out(n * m);
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&out[i * m], &u[(i + 1) * w + 1], m * 8);
  return out;
}

// One row of the in-place sweep: out[j] from old row `cur`, the rows above/below and the two
// halo values at the row's ends.
inline void sweep_row(double* out, const double* cur, const double* up, const double* down,
                      double west, double east, std::size_t m) {
  if (m == 1) {
    out[0] = point(cur[0], up[0], down[0], west, east);
    return;
  }
  out[0] = point(cur[0], up[0], down[0], west, cur[1]);
  // The row below is the sweep's only stream from memory (and, contiguous after it, the rows
  // after that): its lines are asked for 8 KiB ahead, into L2, one per 8 points. The hardware
  // prefetcher alone kept too few lines in flight for one core to stream: 8192^2 on one worker
  // went from 0.9 to 1.4-1.5 Gstencils/s, on two from 1.7 to 2.4-2.7 (docs/benchmarks.md;
  // 2-8 KiB ahead were alike, 2 KiB less; for write, or into L1, slower). Integer arithmetic:
  // the address may lie past the buffer, which a prefetch never faults on.
  constexpr std::size_t kAhead = 8192, kChunk = 64;
  const auto below = reinterpret_cast<std::uintptr_t>(down) + kAhead;
  for (std::size_t j0 = 1; j0 + 1 < m; j0 += kChunk) {
    const std::size_t j1 = std::min(j0 + kChunk, m - 1);
    for (std::size_t j = j0; j < j1; j += 8)
      __builtin_prefetch(reinterpret_cast<const void*>(below + j * sizeof(double)), 0, 2);
    for (std::size_t j = j0; j < j1; ++j)
      out[j] = point(cur[j], up[j], down[j], cur[j - 1], cur[j + 1]);
  }
  out[m - 1] = point(cur[m - 1], up[m - 1], down[m - 1], cur[m - 2], east);
}

struct Problem {
  std::size_t n, m;    // grid rows, columns
  std::size_t br, bc;  // blocks per column, per row
  std::size_t bn() const { return n / br; }
  std::size_t bm() const { return m / bc; }
};

struct Block {
  ordo::Location<double> u;
  // Exported edges; only those a neighbour reads exist (has_* tells).
  ordo::Location<double> north, south, west, east;
  bool has_north = false, has_south = false, has_west = false, has_east = false;
};

void export_edges(std::span<const double> u, std::size_t bn, std::size_t bm, const Block& blk,
                  const std::function<std::span<double>(ordo::Location<double>)>& out) {
  if (blk.has_north) std::copy_n(u.data(), bm, out(blk.north).data());
  if (blk.has_south) std::copy_n(u.data() + (bn - 1) * bm, bm, out(blk.south).data());
  if (blk.has_west) {
    auto w = out(blk.west);
    for (std::size_t i = 0; i < bn; ++i) w[i] = u[i * bm];
  }
  if (blk.has_east) {
    auto e = out(blk.east);
    for (std::size_t i = 0; i < bn; ++i) e[i] = u[i * bm + bm - 1];
  }
}

// Builds the graph; returns the blocks in row-major block order.
std::vector<Block> build(ordo::Graph& g, const Problem& p) {
  const std::size_t bn = p.bn(), bm = p.bm();
  std::vector<Block> blocks(p.br * p.bc);
  auto id = [&](std::size_t r, std::size_t c) { return r * p.bc + c; };
  for (std::size_t r = 0; r < p.br; ++r)
    for (std::size_t c = 0; c < p.bc; ++c) {
      Block& b = blocks[id(r, c)];
      std::string tag = std::to_string(r) + "," + std::to_string(c);
      b.u = g.location<double>("u[" + tag + "]", bn * bm);
      b.has_north = r > 0;
      b.has_south = r + 1 < p.br;
      b.has_west = c > 0;
      b.has_east = c + 1 < p.bc;
      if (b.has_north) b.north = g.location<double>("north[" + tag + "]", bm);
      if (b.has_south) b.south = g.location<double>("south[" + tag + "]", bm);
      if (b.has_west) b.west = g.location<double>("west[" + tag + "]", bn);
      if (b.has_east) b.east = g.location<double>("east[" + tag + "]", bn);
    }

  for (std::size_t r = 0; r < p.br; ++r)
    for (std::size_t c = 0; c < p.bc; ++c) {
      const Block& b = blocks[id(r, c)];
      std::vector<ordo::Access> acc{ordo::write(b.u)};
      // Halo sources: the neighbour's edge facing us, or nothing (the domain boundary).
      const Block* up = r > 0 ? &blocks[id(r - 1, c)] : nullptr;
      const Block* down = r + 1 < p.br ? &blocks[id(r + 1, c)] : nullptr;
      const Block* left = c > 0 ? &blocks[id(r, c - 1)] : nullptr;
      const Block* right = c + 1 < p.bc ? &blocks[id(r, c + 1)] : nullptr;
      if (up) acc.push_back(ordo::read(up->south));
      if (down) acc.push_back(ordo::read(down->north));
      if (left) acc.push_back(ordo::read(left->east));
      if (right) acc.push_back(ordo::read(right->west));

      struct Halo {
        ordo::Location<double> loc;
        bool present;
        double boundary;
      };
      Halo hn{up ? up->south : ordo::Location<double>{}, up != nullptr, kTop};
      Halo hs{down ? down->north : ordo::Location<double>{}, down != nullptr, kOther};
      Halo hw{left ? left->east : ordo::Location<double>{}, left != nullptr, kOther};
      Halo he{right ? right->west : ordo::Location<double>{}, right != nullptr, kOther};
      // Private scratch of this task: its instances never run concurrently.
      auto scratch = std::make_shared<std::vector<double>>(2 * bm + 2 * bm + 2 * bn);
      ordo::Location<double> uloc = b.u;
      g.task("step[" + std::to_string(r) + "," + std::to_string(c) + "]", std::move(acc),
             [=](ordo::Context& ctx) {
               std::span<double> u = ctx.write(uloc);
               double* prev = scratch->data();
               double* cur = prev + bm;
               double* const_row = cur + bm;  // boundary rows (bm values)
               double* const_col = const_row + bm;
               auto row_halo = [&](const Halo& h) -> const double* {
                 if (h.present) return ctx.read(h.loc).data();
                 std::fill_n(const_row, bm, h.boundary);
                 return const_row;
               };
               auto col_halo = [&](const Halo& h, double* fill) -> const double* {
                 if (h.present) return ctx.read(h.loc).data();
                 std::fill_n(fill, bn, h.boundary);
                 return fill;
               };
               const double* west = col_halo(hw, const_col);
               const double* east = col_halo(he, const_col + bn);
               const double* south = hs.present ? ctx.read(hs.loc).data() : nullptr;
               const double* north = row_halo(hn);
               std::copy_n(north, bm, prev);  // "previous old row" of row 0 is the halo
               for (std::size_t i = 0; i < bn; ++i) {
                 double* row = u.data() + i * bm;
                 std::copy_n(row, bm, cur);
                 const double* down_row;
                 if (i + 1 < bn) {
                   down_row = row + bm;
                 } else if (south) {
                   down_row = south;
                 } else {
                   std::fill_n(const_row, bm, hs.boundary);
                   down_row = const_row;
                 }
                 sweep_row(row, cur, prev, down_row, west[i], east[i], bm);
                 std::swap(prev, cur);
               }
             });
    }

  for (std::size_t r = 0; r < p.br; ++r)
    for (std::size_t c = 0; c < p.bc; ++c) {
      const Block& b = blocks[id(r, c)];
      std::vector<ordo::Access> acc{ordo::read(b.u)};
      if (b.has_north) acc.push_back(ordo::write(b.north));
      if (b.has_south) acc.push_back(ordo::write(b.south));
      if (b.has_west) acc.push_back(ordo::write(b.west));
      if (b.has_east) acc.push_back(ordo::write(b.east));
      g.task("export[" + std::to_string(r) + "," + std::to_string(c) + "]", std::move(acc),
             [=](ordo::Context& ctx) {
               export_edges(ctx.read(b.u), bn, bm, b,
                            [&](ordo::Location<double> l) { return ctx.write(l); });
             });
    }
  return blocks;
}

std::vector<double> gather(ordo::Graph& g, const Problem& p, const std::vector<Block>& blocks) {
  const std::size_t bn = p.bn(), bm = p.bm();
  std::vector<double> out(p.n * p.m);
  for (std::size_t r = 0; r < p.br; ++r)
    for (std::size_t c = 0; c < p.bc; ++c) {
      auto u = g.data(blocks[r * p.bc + c].u);
      for (std::size_t i = 0; i < bn; ++i)
        std::memcpy(&out[(r * bn + i) * p.m + c * bm], &u[i * bm], bm * sizeof(double));
    }
  return out;
}


// The hand-written graph: loads u0, runs, gathers. Across ranks block b and its edge
// locations live on the stencil layer's rank for it (b * ranks / blocks), so a block's
// step and export run on one rank and only the edges travel; the gathered grid holds the
// final values on this rank's blocks only (the result's block_home field says which).
ordo::app::AppDesc::FastResult run_handwritten(
    const ordo::app::AppParams& ap, const std::vector<double>& u0, ordo::Runtime& rt,
    std::uint64_t steps, const std::function<void(std::uint64_t)>& progress) {
  Problem p{ap.size[0], ap.size[1], ap.blocks[0], ap.blocks[1]};
  const std::size_t bn = p.bn(), bm = p.bm();
  ordo::Graph g;
  auto blocks = build(g, p);
  const std::size_t nb = blocks.size();
  for (std::size_t i = 0; i < nb && rt.ranks() > 1; ++i) {
    const auto r = static_cast<unsigned>(i * rt.ranks() / nb);  // as the layer places
    const Block& b = blocks[i];
    g.set_home_rank(b.u, r);
    if (b.has_north) g.set_home_rank(b.north, r);
    if (b.has_south) g.set_home_rank(b.south, r);
    if (b.has_west) g.set_home_rank(b.west, r);
    if (b.has_east) g.set_home_rank(b.east, r);
  }
  for (std::size_t r = 0; r < p.br; ++r)
    for (std::size_t c = 0; c < p.bc; ++c) {
      const Block& b = blocks[r * p.bc + c];
      auto u = g.data(b.u);
      for (std::size_t i = 0; i < bn; ++i)
        std::memcpy(&u[i * bm], &u0[(r * bn + i) * p.m + c * bm], bm * sizeof(double));
      export_edges(g.data(b.u), bn, bm, b, [&](ordo::Location<double> l) { return g.data(l); });
    }
  ordo::app::AppDesc::FastResult out;
  out.seconds = ordo::app::run_in_pieces(
      steps, 1, [&](std::uint64_t n) { return rt.run(g, n).seconds; }, progress);
  out.grid = gather(g, p, blocks);
  for (const Block& b : blocks) out.block_home.push_back(g.home_rank(b.u));
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "heat2d";
  app.summary = "2-D 5-point heat equation (Jacobi) on a block-decomposed grid";
  app.dims = 2;
  app.default_size = "1024x1024";
  app.default_blocks = "4x4";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.neighbourhood = st::von_neumann(2, 1);
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? kHeatTop : kHeatOther; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t n = b.stride[0];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        double* v = b.out + at;
        for (std::size_t j = 0; j < len; ++j)
          v[j] = point(u[j], u[j - n], u[j + n], u[j - 1], u[j + 1]);
      });
    };
  };
  app.init = [](const ordo::app::AppParams& p) { return std::vector<double>(p.points(), kHeatOther); };
  app.reference = reference;
  app.fast_path = run_handwritten;
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat2d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
