// ordo-heat3d: 3-D 7-point heat equation (Jacobi) on the stencil layer. Boundary (Dirichlet):
// the plane before the first one along the slowest dimension is held at 1.0, every other
// face at 0.0 (apps/common/kernels.hpp, shared with the baselines).
#include "kernels.hpp"
#include "stencil_app.hpp"

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
          v[k] = ordo::app::heat3d_point(u[k], u[k - si], u[k + si], u[k - sj], u[k + sj],
                                         u[k - 1], u[k + 1]);
      });
    };
  };
  app.init = [](const ordo::app::AppParams& p) {
    return std::vector<double>(p.points(), kHeatOther);
  };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat3d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
