// ordo-heat2d: 2-D 5-point heat equation (Jacobi) on the stencil layer, in place
// (Traversal::jacobi_in_place: one grid, each point read and written back once).
// Boundary (Dirichlet): the row above the grid is held at 1.0, every other side at 0.0
// (apps/common/kernels.hpp, shared with the OpenMP and MPI baselines). --verify compares with
// the sequential loop of apps/common/heat_reference.hpp.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "heat_reference.hpp"
#include "kernels.hpp"
#include "stencil_app.hpp"

namespace {

// One row, eight points at a time (ordo::app::V8, as heat3d's): one load of the row per
// chunk, its left and right neighbours made by lane shifts with the chunks on either side, two
// loads of neighbour rows, one store. The plain loop loads the row three times per point,
// which bounds a core by its load ports once the rows are in the cache (temporal blocking);
// streaming from memory (depth 1) the plain loop with its prefetches ran faster.
// The arithmetic is heat2d_point's, lane by lane: the same bits.
using ordo::app::load8;
using ordo::app::store8;
using ordo::app::V8;
inline V8 point8(V8 c, V8 n, V8 s, V8 w, V8 e) { return c + 0.2 * ((n + s) + (w + e) - 4.0 * c); }

// With Track, it also returns the row's largest change |new - old| (--tol), else 0.
template <bool Track = false>
double row(double* __restrict out, const double* __restrict u, const double* __restrict up,
           const double* __restrict down, std::size_t c) {
  std::size_t k = 0;
  V8 big8{};
  double big = 0;
  if (c >= 8) {
    V8 prev = V8{} + u[-1];  // lane 7: the value left of the chunk
    V8 old = load8(u);
    auto chunk = [&](V8 next) {
      const V8 w = __builtin_shufflevector(prev, old, 7, 8, 9, 10, 11, 12, 13, 14);
      const V8 e = __builtin_shufflevector(old, next, 1, 2, 3, 4, 5, 6, 7, 8);
      const V8 r = point8(old, load8(up + k), load8(down + k), w, e);
      store8(out + k, r);
      if constexpr (Track) big8 = ordo::app::max8(big8, ordo::app::abs8(r - old));
      prev = old;
      old = next;
    };
    for (; k + 16 <= c; k += 8) chunk(load8(u + k + 8));
    // The last whole chunk needs one value past it (u[k + 8], the row's east neighbour at
    // the end), not eight: on a row of 64 points no point is left to the scalar loop.
    if (k + 8 <= c) {
      chunk(V8{} + u[k + 8]);
      k += 8;
    }
  }
  for (; k < c; ++k) {
    const double r = ordo::app::heat2d_point(u[k], up[k], down[k], u[k - 1], u[k + 1]);
    out[k] = r;
    if constexpr (Track) {
      const double d = std::fabs(r - u[k]);
      big = big < d ? d : big;
    }
  }
  return Track ? ordo::app::max_lane(big8, big) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  using ordo::app::kHeatOther;
  using ordo::app::kHeatTop;
  ordo::app::AppDesc app;
  app.name = "heat2d";
  app.summary = "2-D 5-point heat equation (Jacobi) on a block-decomposed grid";
  app.dims = 2;
  app.default_size = "1024x1024";
  app.default_blocks = "4x4";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.neighbourhood = st::von_neumann(2, 1);
    s.traversal = st::Traversal::jacobi_in_place;
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? kHeatTop : kHeatOther; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t n = b.stride[0];
      // --tol: the step's largest change, the rows eight points at a time (the same bits).
      if (b.contributes()) {
        double big = 0;
        st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
          const double* u = b.in[0] + at;
          const double r = row<true>(b.out + at, u, u - n, u + n, len);
          big = big < r ? r : big;
        });
        b.contribute(0, big);
        return;
      }
      st::for_each_row(b, [&](const st::Row& r) {
        const double* u = b.in[0] + r.at;
        double* v = b.out + r.at;
        const std::size_t len = r.len;
        // 8 KiB on along the next row, in the direction the sweep runs; where the sweep's input
        // is in the cache already (nothing to prefetch: temporal blocking), the row eight
        // points at a time.
        const st::Prefetch next = r.prefetch(1024);
        if (!next) {
          row(v, u, u - n, u + n, len);
          return;
        }
        const std::uintptr_t below = next.row;
        // Signed indices: u[j - 1] and u[j - n] with an unsigned j wrap the pointer.
        const auto m = static_cast<std::ptrdiff_t>(len);
        for (std::ptrdiff_t j0 = 0; j0 < m; j0 += 64) {
          const std::ptrdiff_t j1 = std::min<std::ptrdiff_t>(j0 + 64, m);
          for (std::ptrdiff_t j = j0; j < j1; j += 8)
            __builtin_prefetch(reinterpret_cast<const void*>(below + j * sizeof(double)), 0, 2);
          for (std::ptrdiff_t j = j0; j < j1; ++j)
            v[j] = ordo::app::heat2d_point(u[j], u[j - n], u[j + n], u[j - 1], u[j + 1]);
        }
      });
    };
  };
  app.initial = [](const ordo::app::AppParams&) -> st::PointValue {
    return [](st::Coord) { return kHeatOther; };
  };
  app.reference = [](const ordo::app::AppParams& p, const std::vector<double>& u0,
                     std::uint64_t iters) {
    return ordo::app::reference_heat2d(p.size[0], p.size[1], iters, u0);
  };
  app.reference_until = [](const ordo::app::AppParams& p, const std::vector<double>& u0,
                           std::uint64_t iters, ordo::app::StopTest& stop) {
    return ordo::app::reference_heat2d(p.size[0], p.size[1], iters, u0, &stop);
  };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat2d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
