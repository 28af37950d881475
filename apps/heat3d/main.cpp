// ordo-heat3d: 3-D 7-point heat equation (Jacobi) on the stencil layer, in place
// (Traversal::jacobi_in_place: one grid, each point read and written back once).
// Boundary (Dirichlet): the plane before the first one along the slowest dimension (i = -1) is
// held at 1.0, every other face at 0.0 (apps/common/kernels.hpp, shared with the baselines).
// --verify compares with the sequential loop of apps/common/heat_reference.hpp.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "heat_reference.hpp"
#include "kernels.hpp"
#include "stencil_app.hpp"

namespace {

// One row, eight points at a time (ordo::app::V8): one load of the row per chunk, its k-1 and
// k+1 neighbours made by lane shifts with the chunks on either side, four loads of neighbour
// rows, one store. A plain loop makes three loads of the row per point, and one core is then
// bound by its load ports rather than by memory (docs/benchmarks.md). The arithmetic is
// heat3d_point's, lane by lane: the same bits.
using ordo::app::load8;
using ordo::app::store8;
using ordo::app::V8;
inline V8 point8(V8 c, V8 im, V8 ip, V8 jm, V8 jp, V8 km, V8 kp) {
  return c + 0.125 * (((im + ip) + (jm + jp)) + (km + kp) - 6.0 * c);
}

// `west` and `east`: the values left of the row's first point and right of its last.
// With Track, it also returns the row's largest change |new - old| (--tol), else 0.
template <bool Track = false>
double row(double* __restrict out, const double* __restrict u, const double* __restrict im,
           const double* __restrict ip, const double* __restrict jm, const double* __restrict jp,
           double west, double east, std::size_t c) {
  std::size_t k = 0;
  V8 big8{};
  double big = 0;
  if (c >= 16) {
    V8 prev = V8{} + west;  // lane 7: the value left of the chunk (the halo value at first)
    V8 old = load8(u);
    for (; k + 16 <= c; k += 8) {
      const V8 next = load8(u + k + 8);
      const V8 km = __builtin_shufflevector(prev, old, 7, 8, 9, 10, 11, 12, 13, 14);
      const V8 kp = __builtin_shufflevector(old, next, 1, 2, 3, 4, 5, 6, 7, 8);
      const V8 r = point8(old, load8(im + k), load8(ip + k), load8(jm + k), load8(jp + k), km, kp);
      store8(out + k, r);
      if constexpr (Track) big8 = ordo::app::max8(big8, ordo::app::abs8(r - old));
      prev = old;
      old = next;
    }
    if (k + 8 == c) {  // the last chunk: its right neighbour is the halo value
      const V8 km = __builtin_shufflevector(prev, old, 7, 8, 9, 10, 11, 12, 13, 14);
      const V8 kp = __builtin_shufflevector(old, V8{} + east, 1, 2, 3, 4, 5, 6, 7, 8);
      const V8 r = point8(old, load8(im + k), load8(ip + k), load8(jm + k), load8(jp + k), km, kp);
      store8(out + k, r);
      if constexpr (Track) big8 = ordo::app::max8(big8, ordo::app::abs8(r - old));
      return Track ? ordo::app::max_lane(big8, big) : 0;
    }
  }
  for (; k < c; ++k) {
    const double r = ordo::app::heat3d_point(
        u[k], im[k], ip[k], jm[k], jp[k], k == 0 ? west : u[k - 1], k + 1 == c ? east : u[k + 1]);
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
  app.name = "heat3d";
  app.summary = "3-D 7-point heat equation (Jacobi) on a block-decomposed grid";
  app.dims = 3;
  app.default_size = "128x128x128";
  app.default_blocks = "2x2x2";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.neighbourhood = st::von_neumann(3, 1);
    s.traversal = st::Traversal::jacobi_in_place;
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? kHeatTop : kHeatOther; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    // It reads a row's halo values through Row::before/after only, and writes each row it is
    // given in for_each_row's order: the layer may keep the halo beside the rows and pass a
    // plane's rows in one call.
    constexpr st::KernelTraits kTraits{.halo_through_row = true, .rows_in_order = true};
    return st::Kernel(
        [](const st::Block& b) {
          const std::ptrdiff_t si = b.stride[0], sj = b.stride[1];
          // --tol: the step's largest change too, without the prefetches (the same bits).
          if (b.contributes()) {
            double big = 0;
            st::for_each_row(b, [&](const st::Row& r) {
              const double* u = b.in[0] + r.at;
              const double d = row<true>(b.out + r.at, u, u - si, u + si, u - sj, u + sj,
                                         r.before()[-1], r.after()[0], r.len);
              big = big < d ? d : big;
            });
            b.contribute(0, big);
            return;
          }
          st::for_each_row(b, [&](const st::Row& r) {
            const double* u = b.in[0] + r.at;
            // The row two rows on (the sweep runs up the rows when it runs up the planes) in the
            // plane the sweep computes next, which it reads from memory soon: the hardware
            // prefetcher alone keeps too few lines in flight (docs/benchmarks.md). Nothing where
            // the input is in the cache already (temporal blocking).
            if (const st::Prefetch next = r.prefetch(2 * sj)) {
              for (std::size_t k = 0; k < r.len; k += 8)
                __builtin_prefetch(reinterpret_cast<const void*>(next.row + k * sizeof(double)), 0,
                                   2);
              // and the line before it where it holds the row's halo value on the left.
              if (next.before) __builtin_prefetch(reinterpret_cast<const void*>(next.before), 0, 2);
            }
            row(b.out + r.at, u, u - si, u + si, u - sj, u + sj, r.before()[-1], r.after()[0],
                r.len);
          });
        },
        kTraits);
  };
  app.initial = [](const ordo::app::AppParams&) -> st::PointValue {
    return [](st::Coord) { return kHeatOther; };
  };
  app.reference = [](const ordo::app::AppParams& p, const std::vector<double>& u0,
                     std::uint64_t iters) {
    return ordo::app::reference_heat3d(p.size[0], p.size[1], p.size[2], iters, u0);
  };
  app.reference_until = [](const ordo::app::AppParams& p, const std::vector<double>& u0,
                           std::uint64_t iters, ordo::app::StopTest& stop) {
    return ordo::app::reference_heat3d(p.size[0], p.size[1], p.size[2], iters, u0, &stop);
  };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat3d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
