// ordo-heat2d: 2-D 5-point heat equation (Jacobi) on a block-decomposed grid, written with the
// public API only.
//
// Graph, per block b (program order: every step task, then every export task):
//   step_b   writes u_b, reads the edges its neighbours exported. It updates u_b in place with
//            a rolling copy of the previous row, so each point is read and written once.
//   export_b reads u_b, writes its edge locations (first/last row, first/last column) that a
//            neighbour reads.
// On an edge location's FIFO the neighbour's step (read) comes before this block's export
// (write), so step_b of iteration k reads the edges of iteration k-1: exact Jacobi, with no
// global barrier and no second copy of the grid.
//
// Boundary (Dirichlet): the row above the grid is held at 1.0, every other side at 0.0.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "app_cli.hpp"
#include "kernels.hpp"

namespace {

using ordo::app::kHeatOther;
using ordo::app::kHeatTop;
constexpr double kTop = kHeatTop;
constexpr double kOther = kHeatOther;
constexpr auto point = ordo::app::heat2d_point;

// One row of the in-place sweep: out[j] from old row `cur`, the rows above/below and the two
// halo values at the row's ends.
inline void sweep_row(double* out, const double* cur, const double* up, const double* down,
                      double west, double east, std::size_t m) {
  if (m == 1) {
    out[0] = point(cur[0], up[0], down[0], west, east);
    return;
  }
  out[0] = point(cur[0], up[0], down[0], west, cur[1]);
  for (std::size_t j = 1; j + 1 < m; ++j)
    out[j] = point(cur[j], up[j], down[j], cur[j - 1], cur[j + 1]);
  out[m - 1] = point(cur[m - 1], up[m - 1], down[m - 1], cur[m - 2], east);
}

struct Problem {
  std::size_t n, m;    // grid rows, columns
  std::size_t br, bc;  // blocks per column, per row
  std::size_t bn() const { return n / br; }
  std::size_t bm() const { return m / bc; }
};

// Sequential reference: a plain double-buffered loop over the whole grid with a ghost ring.
std::vector<double> reference(const Problem& p, std::uint64_t iters) {
  const std::size_t w = p.m + 2;
  std::vector<double> u((p.n + 2) * w, kOther), v;
  for (std::size_t j = 0; j < w; ++j) u[j] = kTop;
  v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    for (std::size_t i = 1; i <= p.n; ++i)
      for (std::size_t j = 1; j <= p.m; ++j) {
        const double* r = &u[i * w + j];
        v[i * w + j] = point(r[0], r[-static_cast<std::ptrdiff_t>(w)], r[w], r[-1], r[1]);
      }
    std::swap(u, v);
  }
  std::vector<double> out(p.n * p.m);
  for (std::size_t i = 0; i < p.n; ++i)
    std::memcpy(&out[i * p.m], &u[(i + 1) * w + 1], p.m * sizeof(double));
  return out;
}

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

int run(int argc, char** argv) {
  CLI::App cli{"2-D 5-point heat equation (Jacobi) on a block-decomposed grid", "ordo-heat2d"};
  std::string size_text = "1024x1024", blocks_text = "4x4";
  std::uint64_t iters = 100;
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  bool verify = false;
  std::string trace_path;
  cli.add_option("--size", size_text, "grid size NxM (rows x columns)")->capture_default_str();
  cli.add_option("--blocks", blocks_text, "block grid BxC; must divide --size")
      ->capture_default_str();
  cli.add_option("--iters", iters, "time steps")->capture_default_str();
  cli.add_option("--workers", workers, "worker threads")->capture_default_str();
  cli.add_flag("--verify", verify, "compare bit for bit with a sequential loop");
  cli.add_option("--trace", trace_path, "record a trace to FILE (read it with ordo-trace)")
      ->type_name("FILE");
  if (int rc = ordo::app::parse_cli(cli, argc, argv); rc >= 0) return rc;

  auto size = ordo::app::parse_shape(size_text, 2, "--size");
  auto blocks = ordo::app::parse_shape(blocks_text, 2, "--blocks");
  if (iters == 0) throw ordo::Error("--iters 0: run at least one iteration");
  if (workers == 0) throw ordo::Error("--workers 0: use at least one worker");
  for (int d = 0; d < 2; ++d)
    if (size[d] % blocks[d] != 0)
      throw ordo::Error("--size " + size_text + " is not divisible by --blocks " + blocks_text +
                        ": each extent of the size must be a multiple of the block count in "
                        "that dimension");
  Problem p{size[0], size[1], blocks[0], blocks[1]};

  ordo::Graph g;
  auto blks = build(g, p);
  ordo::Runtime rt({.workers = workers, .trace_path = trace_path});
  ordo::RunStats stats = rt.run(g, iters);

  std::string verdict = "skipped";
  if (verify) {  // bytes, not operator==: bit-identical means signed zeros and NaNs too
    auto got = gather(g, p, blks);
    auto want = reference(p, iters);
    verdict = std::memcmp(got.data(), want.data(), got.size() * sizeof(double)) == 0 ? "ok"
                                                                                     : "fail";
  }
  double gst = static_cast<double>(p.n) * static_cast<double>(p.m) * static_cast<double>(iters) /
               stats.seconds / 1e9;
  fmt::print("app=heat2d size={} blocks={} iters={} workers={} seconds={:.6f} gstencils={:.4f} "
             "verify={}\n",
             ordo::app::join_shape(size), ordo::app::join_shape(blocks), iters, workers,
             stats.seconds, gst, verdict);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-heat2d", [&] { return run(argc, argv); });
}
