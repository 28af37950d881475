// ordo-heat3d: 3-D 7-point heat equation (Jacobi) on a block-decomposed grid.
//
// Two graphs, same bits:
// * --tb 1 (default): the hand-written ORWL graph below, heat2d's design in 3-D
//   (docs/stencil.md, "In-place Jacobi"). Per block b (program order: every step task, then
//   every export task):
//     step_b   writes u_b, reads the faces its neighbours exported. It updates u_b in place,
//              keeping copies of the old rows it still needs (a rolling set of rows, below), so
//              each point is read from memory and written back once: 16 bytes per point
//              instead of the double buffer's 24 (16 plus the write-allocate of the output).
//     export_b reads u_b, writes its face locations (first/last plane, row, column) that a
//              neighbour reads.
//   On a face location's FIFO the neighbour's step (read) comes before this block's export
//   (write), so step_b of iteration k reads the faces of iteration k-1: exact Jacobi, with no
//   global barrier and no second copy of the grid.
// * --tb D > 1: the stencil layer (<ordo/stencil.hpp>) with temporal blocking.
//
// The in-place sweep of one block (extents a x b x c, i slowest) runs in slabs of J rows along
// j so that what it touches between two visits of a row stays in the L2 cache: for each slab,
// for i = 0..a-1, for j in the slab, row (i, j) is overwritten with its new values while its
// old ones go to a spare row slot (one pass: sweep_row_inplace), computed from
//   its old values (centre, k-1, k+1), the slot holding old row (i-1, j) (im), row (i+1, j)
//   still old in u (ip), the slot holding old row (i, j-1) (jm), row (i, j+1) still old in u
//   (jp).
// The slot of (i-1, j) is then free and becomes the next spare: J + 1 slots in all. Across a
// slab boundary, row (i, j0-1) was overwritten by the previous slab, which therefore saves its
// old last row of every plane in `edge` (a x c values) for the next slab. Halo rows come from
// the neighbours' faces, or are the Dirichlet boundary (constant rows).
//
// Boundary (Dirichlet): the plane before the first one along the slowest dimension (i = -1) is
// held at 1.0, every other face at 0.0 (apps/common/kernels.hpp, shared with the baselines).
// --verify compares with a plain double-buffered loop over the whole grid.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "kernels.hpp"
#include "stencil_app.hpp"

namespace {

using ordo::app::kHeatOther;
using ordo::app::kHeatTop;
constexpr auto point = ordo::app::heat3d_point;

// Sequential reference: a double-buffered loop over the grid with a ghost layer.
std::vector<double> reference(const ordo::app::AppParams& p, const std::vector<double>& u0,
                              std::uint64_t iters) {
  const std::size_t a = p.size[0], b = p.size[1], c = p.size[2];
  const std::size_t sj = c + 2, si = (b + 2) * sj;
  std::vector<double> u((a + 2) * si, kHeatOther), v;
  std::fill_n(u.begin(), si, kHeatTop);  // plane i = -1
  for (std::size_t i = 0; i < a; ++i)
    for (std::size_t j = 0; j < b; ++j)
      std::memcpy(&u[(i + 1) * si + (j + 1) * sj + 1], &u0[(i * b + j) * c], c * 8);
  v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    for (std::size_t i = 1; i <= a; ++i)
      for (std::size_t j = 1; j <= b; ++j)
        for (std::size_t k = 1; k <= c; ++k) {
          const std::size_t x = i * si + j * sj + k;
          v[x] = point(u[x], u[x - si], u[x + si], u[x - sj], u[x + sj], u[x - 1], u[x + 1]);
        }
    std::swap(u, v);
  }
  std::vector<double> out(a * b * c);
  for (std::size_t i = 0; i < a; ++i)
    for (std::size_t j = 0; j < b; ++j)
      std::memcpy(&out[(i * b + j) * c], &u[(i + 1) * si + (j + 1) * sj + 1], c * 8);
  return out;
}

// One row of the in-place sweep, eight points at a time: `row` holds the old row and gets the
// new one, computed from the old rows around it and the two halo values at the row's ends
// (same expression and operand order as the reference); its old values go to `save` on the way (the rolling set of rows needs
// them). Fusing the copy into the sweep reads the row once: per eight points one load of the
// row (its k-1 and k+1 neighbours are lane shifts of it and of the loads on either side), four
// of the neighbour rows and two stores, against eight loads and two stores for a copy followed
// by a plain loop. The arithmetic is point's, lane by lane, so the bits are the same.
using V8 = double __attribute__((vector_size(64)));
inline V8 load8(const double* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(double* p, V8 v) { std::memcpy(p, &v, sizeof v); }
inline V8 point8(V8 c, V8 im, V8 ip, V8 jm, V8 jp, V8 km, V8 kp) {
  return c + 0.125 * (((im + ip) + (jm + jp)) + (km + kp) - 6.0 * c);
}

inline void sweep_row_inplace(double* __restrict row, double* __restrict save,
                              const double* __restrict im, const double* __restrict ip,
                              const double* __restrict jm, const double* __restrict jp,
                              double west, double east, std::size_t c) {
  std::size_t k = 0;
  if (c >= 16) {
    V8 prev = V8{} + west;  // lane 7: the old value left of the chunk
    V8 old = load8(row);
    for (; k + 16 <= c; k += 8) {
      const V8 next = load8(row + k + 8);
      const V8 km = __builtin_shufflevector(prev, old, 7, 8, 9, 10, 11, 12, 13, 14);
      const V8 kp = __builtin_shufflevector(old, next, 1, 2, 3, 4, 5, 6, 7, 8);
      store8(save + k, old);
      store8(row + k, point8(old, load8(im + k), load8(ip + k), load8(jm + k), load8(jp + k), km, kp));
      prev = old;
      old = next;
    }
    if (k + 8 == c) {  // the last chunk: its right neighbour is the halo value
      const V8 km = __builtin_shufflevector(prev, old, 7, 8, 9, 10, 11, 12, 13, 14);
      const V8 kp = __builtin_shufflevector(old, V8{} + east, 1, 2, 3, 4, 5, 6, 7, 8);
      store8(save + k, old);
      store8(row + k, point8(old, load8(im + k), load8(ip + k), load8(jm + k), load8(jp + k), km, kp));
      return;
    }
  }
  // The rest (fewer than 16 points, or a short row): save the old values first, then compute
  // from the saved copy (save[k - 1] holds the old value left of k).
  std::memcpy(save + k, row + k, (c - k) * sizeof(double));
  for (std::size_t x = k; x < c; ++x)
    row[x] = point(save[x], im[x], ip[x], jm[x], jp[x], x == 0 ? west : save[x - 1],
                   x + 1 < c ? save[x + 1] : east);
}

struct Problem {
  std::array<std::size_t, 3> n;  // grid extents (i slowest)
  std::array<std::size_t, 3> B;  // blocks per dimension
  std::array<std::size_t, 3> ext() const { return {n[0] / B[0], n[1] / B[1], n[2] / B[2]}; }
  std::size_t blocks() const { return B[0] * B[1] * B[2]; }
};

// Face f = 2*d + s of a block: its first (s = 0) or last (s = 1) layer along dimension d, as
// the row-major array over the other two dimensions: d = 0: b x c, d = 1: a x c, d = 2: a x b.
std::size_t face_size(const std::array<std::size_t, 3>& e, std::size_t d) {
  return d == 0 ? e[1] * e[2] : d == 1 ? e[0] * e[2] : e[0] * e[1];
}

struct Block {
  std::array<std::size_t, 3> at;  // block coordinates
  ordo::Location<double> u;
  // Exported faces; only those a neighbour reads exist (has tells).
  std::array<ordo::Location<double>, 6> face;
  std::array<bool, 6> has{};
  // Column faces (d = 2) gathered by the step while the rows are in cache, copied out by the
  // export: gathering them from u afterwards would read one cache line per value. Guarded by
  // u's lock: step_b (write u) and export_b (read u) of one block never overlap.
  std::shared_ptr<std::vector<double>> col_stage;  // [low: a*b][high: a*b]
};

// Writes the faces of block u (extents e) through out(location).
template <class Out>
void export_faces(const double* u, const std::array<std::size_t, 3>& e, const Block& blk,
                  const double* col_stage, Out&& out) {
  const std::size_t a = e[0], b = e[1], c = e[2];
  if (blk.has[0]) std::copy_n(u, b * c, out(blk.face[0]));
  if (blk.has[1]) std::copy_n(u + (a - 1) * b * c, b * c, out(blk.face[1]));
  for (std::size_t s = 0; s < 2; ++s) {
    if (!blk.has[2 + s]) continue;
    double* f = out(blk.face[2 + s]);
    const std::size_t j = s == 0 ? 0 : b - 1;
    for (std::size_t i = 0; i < a; ++i) std::copy_n(u + (i * b + j) * c, c, f + i * c);
  }
  for (std::size_t s = 0; s < 2; ++s) {
    if (!blk.has[4 + s]) continue;
    double* f = out(blk.face[4 + s]);
    if (col_stage) {
      std::copy_n(col_stage + s * a * b, a * b, f);
    } else {
      const std::size_t k = s == 0 ? 0 : c - 1;
      for (std::size_t r = 0; r < a * b; ++r) f[r] = u[r * c + k];
    }
  }
}

// Rows of one slab: J rows of c doubles, about three of them per row in flight (the slot,
// the row in place, the row below it) within half of a 1 MiB L2.
std::size_t slab_rows(std::size_t b, std::size_t c) {
  constexpr std::size_t kBudget = 512 * 1024;
  return std::clamp<std::size_t>(kBudget / (3 * 8 * c), 1, b);
}

// Rows of the next plane fetched ahead of the sweep. The hardware prefetcher alone left one
// core at about 1.5 ns per point out of cache; reading 2 rows ahead (software prefetch, into
// L2) brought it to about 1.05 (256^3 block, one core, best of 12, interleaved; distance 1:
// 1.12, 4: 1.05; fetching for write instead was slower, 1.5).
constexpr std::size_t kPrefetchRows = 2;

// A halo source: the neighbour's face (rows of `stride` values) or a constant boundary.
struct Halo {
  const double* base;
  std::size_t stride;  // 0: every row (or value) is base[0..]
  const double* row(std::size_t r) const { return base + r * stride; }
};

// The step of one block: the in-place sweep described at the top.
struct Sweep {
  std::array<std::size_t, 3> e;
  std::size_t J;
  std::vector<double> slots, edge, top_row, other_row;

  explicit Sweep(const std::array<std::size_t, 3>& ext)
      : e(ext), J(slab_rows(ext[1], ext[2])), slots((J + 1) * ext[2]),
        edge(ext[1] > J ? ext[0] * ext[2] : 0), top_row(ext[2], kHeatTop),
        other_row(ext[2], kHeatOther) {}

  // h[f]: halo of face f = 2*d + s (what lies before index 0 / after the last along d).
  void run(double* u, const std::array<Halo, 6>& h, double* col_stage) {
    const std::size_t a = e[0], b = e[1], c = e[2], plane = b * c;
    std::vector<const double*> prev(J);  // prev[j - j0]: old row (i-1, j), then (i, j)
    for (std::size_t j0 = 0; j0 < b; j0 += J) {
      const std::size_t j1 = std::min(b, j0 + J);
      double* spare = slots.data() + J * c;
      for (std::size_t j = j0; j < j1; ++j) prev[j - j0] = h[0].row(j);
      for (std::size_t i = 0; i < a; ++i) {
        double* const p = u + i * plane;
        for (std::size_t j = j0; j < j1; ++j) {
          double* const row = p + j * c;
          {  // the row that row (i, j) will read as ip kPrefetchRows rows from now
            std::size_t jj = j + kPrefetchRows, ii = i + 1;
            while (jj >= j1) jj -= j1 - j0, ++ii;
            if (ii < a) {
              const double* q = u + ii * plane + jj * c;
              for (std::size_t k = 0; k < c; k += 8) __builtin_prefetch(q + k, 0, 2);
            }
          }
          double* const cur = i == 0 ? slots.data() + (j - j0) * c : spare;
          const double* jm = j > j0 ? prev[j - j0 - 1] : j0 == 0 ? h[2].row(i) : &edge[i * c];
          const double* jp = j + 1 < b ? row + c : h[3].row(i);
          const double* ip = i + 1 < a ? row + plane : h[1].row(j);
          const std::size_t r = i * b + j;
          sweep_row_inplace(row, cur, prev[j - j0], ip, jm, jp, h[4].base[r * h[4].stride],
                            h[5].base[r * h[5].stride], c);
          if (col_stage) {
            col_stage[r] = row[0];
            col_stage[a * b + r] = row[c - 1];
          }
          if (i > 0) spare = const_cast<double*>(prev[j - j0]);
          prev[j - j0] = cur;
          if (j + 1 == j1 && j1 < b) std::memcpy(&edge[i * c], cur, c * sizeof(double));
        }
      }
    }
  }
};

// Builds the graph; returns the blocks in row-major block order.
std::vector<Block> build(ordo::Graph& g, const Problem& p) {
  const auto e = p.ext();
  std::vector<Block> blocks(p.blocks());
  auto id = [&](const std::array<std::size_t, 3>& x) {
    return (x[0] * p.B[1] + x[1]) * p.B[2] + x[2];
  };
  for (std::size_t x = 0; x < p.B[0]; ++x)
    for (std::size_t y = 0; y < p.B[1]; ++y)
      for (std::size_t z = 0; z < p.B[2]; ++z) {
        Block& b = blocks[id({x, y, z})];
        b.at = {x, y, z};
        const std::string tag =
            std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z);
        b.u = g.location<double>("u[" + tag + "]", e[0] * e[1] * e[2]);
        static const char* const names[6] = {"ilo", "ihi", "jlo", "jhi", "klo", "khi"};
        for (std::size_t d = 0; d < 3; ++d) {
          b.has[2 * d] = b.at[d] > 0;
          b.has[2 * d + 1] = b.at[d] + 1 < p.B[d];
          for (std::size_t s = 0; s < 2; ++s)
            if (b.has[2 * d + s])
              b.face[2 * d + s] =
                  g.location<double>(std::string(names[2 * d + s]) + "[" + tag + "]",
                                     face_size(e, d));
        }
        if (b.has[4] || b.has[5])
          b.col_stage = std::make_shared<std::vector<double>>(2 * e[0] * e[1]);
      }

  for (const Block& b : blocks) {
    std::vector<ordo::Access> acc{ordo::write(b.u)};
    // Halo sources: the neighbour's face towards us, or nothing (the domain boundary).
    std::array<ordo::Location<double>, 6> src;
    std::array<bool, 6> present{};
    for (std::size_t d = 0; d < 3; ++d)
      for (std::size_t s = 0; s < 2; ++s) {
        if (!b.has[2 * d + s]) continue;
        auto n = b.at;
        n[d] = s == 0 ? n[d] - 1 : n[d] + 1;
        src[2 * d + s] = blocks[id(n)].face[2 * d + (1 - s)];  // its face that touches us
        present[2 * d + s] = true;
        acc.push_back(ordo::read(src[2 * d + s]));
      }
    // Private scratch of this task: its instances never run concurrently.
    auto sweep = std::make_shared<Sweep>(e);
    const ordo::Location<double> uloc = b.u;
    const auto stage = b.col_stage;
    g.task("step[" + std::to_string(b.at[0]) + "," + std::to_string(b.at[1]) + "," +
               std::to_string(b.at[2]) + "]",
           std::move(acc), [=](ordo::Context& ctx) {
             std::array<Halo, 6> h;
             for (std::size_t f = 0; f < 6; ++f) {
               const std::size_t d = f / 2;
               const std::size_t row_len = d == 2 ? 1 : e[2];
               if (present[f]) {
                 h[f] = {ctx.read(src[f]).data(), row_len};
               } else {
                 const double* row =
                     f == 0 ? sweep->top_row.data() : sweep->other_row.data();
                 h[f] = {row, 0};
               }
             }
             sweep->run(ctx.write(uloc).data(), h, stage ? stage->data() : nullptr);
           });
  }

  for (const Block& b : blocks) {
    std::vector<ordo::Access> acc{ordo::read(b.u)};
    for (std::size_t f = 0; f < 6; ++f)
      if (b.has[f]) acc.push_back(ordo::write(b.face[f]));
    g.task("export[" + std::to_string(b.at[0]) + "," + std::to_string(b.at[1]) + "," +
               std::to_string(b.at[2]) + "]",
           std::move(acc), [=](ordo::Context& ctx) {
             export_faces(ctx.read(b.u).data(), e, b, b.col_stage ? b.col_stage->data() : nullptr,
                          [&](ordo::Location<double> l) { return ctx.write(l).data(); });
           });
  }
  return blocks;
}

// Copies between the global grid (row-major) and block b's array: to_block or back.
void copy_block(const Problem& p, const Block& b, double* block, std::vector<double>& grid,
                bool to_block) {
  const auto e = p.ext();
  for (std::size_t i = 0; i < e[0]; ++i)
    for (std::size_t j = 0; j < e[1]; ++j) {
      double* g = &grid[((b.at[0] * e[0] + i) * p.n[1] + b.at[1] * e[1] + j) * p.n[2] +
                        b.at[2] * e[2]];
      double* x = block + (i * e[1] + j) * e[2];
      if (to_block)
        std::memcpy(x, g, e[2] * sizeof(double));
      else
        std::memcpy(g, x, e[2] * sizeof(double));
    }
}

// The hand-written graph: loads u0, runs, gathers. Across ranks block b and its face
// locations live on the stencil layer's rank for it (b * ranks / blocks), so a block's
// step and export run on one rank and only the faces travel; the gathered grid holds the final
// values on this rank's blocks only (the result's block_home field says which).
ordo::app::AppDesc::FastResult run_handwritten(
    const ordo::app::AppParams& ap, const std::vector<double>& u0, ordo::Runtime& rt,
    std::uint64_t steps, const std::function<void(std::uint64_t)>& progress) {
  Problem p{{ap.size[0], ap.size[1], ap.size[2]}, {ap.blocks[0], ap.blocks[1], ap.blocks[2]}};
  const auto e = p.ext();
  ordo::Graph g;
  auto blocks = build(g, p);
  const std::size_t nb = blocks.size();
  for (std::size_t i = 0; i < nb && rt.ranks() > 1; ++i) {
    const auto r = static_cast<unsigned>(i * rt.ranks() / nb);  // as the layer places
    const Block& b = blocks[i];
    g.set_home_rank(b.u, r);
    for (std::size_t f = 0; f < 6; ++f)
      if (b.has[f]) g.set_home_rank(b.face[f], r);
  }
  std::vector<double> grid = u0;
  for (const Block& b : blocks) {
    double* u = g.data(b.u).data();
    copy_block(p, b, u, grid, true);
    // The faces of the initial grid (the column stage is filled by each step).
    export_faces(u, e, b, nullptr, [&](ordo::Location<double> l) { return g.data(l).data(); });
  }
  ordo::app::AppDesc::FastResult out;
  out.seconds = ordo::app::run_in_pieces(
      steps, 1, [&](std::uint64_t n) { return rt.run(g, n).seconds; }, progress);
  for (const Block& b : blocks) {
    copy_block(p, b, g.data(b.u).data(), grid, false);
    out.block_home.push_back(g.home_rank(b.u));
  }
  out.grid = std::move(grid);
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "heat3d";
  app.summary = "3-D 7-point heat equation (Jacobi) on a block-decomposed grid";
  app.dims = 3;
  app.default_size = "128x128x128";
  app.default_blocks = "2x2x2";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.neighbourhood = st::von_neumann(3, 1);
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? kHeatTop : kHeatOther; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t si = b.stride[0], sj = b.stride[1];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        double* v = b.out + at;
        for (std::size_t k = 0; k < len; ++k)
          v[k] = point(u[k], u[k - si], u[k + si], u[k - sj], u[k + sj], u[k - 1], u[k + 1]);
      });
    };
  };
  app.init = [](const ordo::app::AppParams& p) {
    return std::vector<double>(p.points(), kHeatOther);
  };
  app.reference = reference;
  app.fast_path = run_handwritten;
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat3d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
