// ordo-heat2d: 2-D 5-point heat equation (Jacobi) on the stencil layer, in place
// (Traversal::jacobi_in_place: one grid, each point read and written back once).
// Boundary (Dirichlet): the row above the grid is held at 1.0, every other side at 0.0
// (apps/common/kernels.hpp, shared with the OpenMP and MPI baselines). --verify compares with
// the sequential loop of apps/common/heat_reference.hpp.
#include <algorithm>
#include <cstdint>

#include "heat_reference.hpp"
#include "kernels.hpp"
#include "stencil_app.hpp"

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
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        double* v = b.out + at;
        // 8 KiB on along the next row, in the direction the sweep runs (backwards going up).
        const auto below = reinterpret_cast<std::uintptr_t>(u + b.ahead) + (b.ahead > 0 ? 8192 : -8192);
        for (std::size_t j0 = 0; j0 < len; j0 += 64) {
          const std::size_t j1 = std::min<std::size_t>(j0 + 64, len);
          for (std::size_t j = j0; j < j1; j += 8)
            __builtin_prefetch(reinterpret_cast<const void*>(below + j * sizeof(double)), 0, 2);
          for (std::size_t j = j0; j < j1; ++j)
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
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat2d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
