// ordo-wave2d: 2-D wave equation, second order in time and space (Saied 2018 Table 5.1):
//   u^{t+1} = 2 u^t - u^{t-1} + c * ((n + s) + (w + e) - 4 u^t),  c = 0.25,
// on the stencil layer with two time levels. Boundary: 0 outside the grid (fixed).
// Start at rest: u^{-1} = u^0 (the --input grid, or a Gaussian bump).
#include <cmath>

#include "stencil_app.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "wave2d";
  app.summary = "2-D wave equation, 5-point, two time levels";
  app.dims = 2;
  app.default_size = "1024x1024";
  app.default_blocks = "4x4";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::von_neumann(2, 1);
    s.time_levels = 2;
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t n = b.stride[0];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        const double* um = b.in[1] + at;
        double* v = b.out + at;
        for (std::ptrdiff_t j = 0; j < static_cast<std::ptrdiff_t>(len); ++j)  // signed: j - n
          v[j] = 2.0 * u[j] - um[j] + 0.25 * ((u[j - n] + u[j + n]) + (u[j - 1] + u[j + 1]) -
                                              4.0 * u[j]);
      });
    };
  };
  app.initial = [](const ordo::app::AppParams& p) -> ordo::stencil::PointValue {
    const double ci = 0.5 * static_cast<double>(p.size[0]), cj = 0.5 * static_cast<double>(p.size[1]);
    const double w = 0.01 * static_cast<double>(p.size[0] * p.size[1]) + 1.0;
    return [ci, cj, w](ordo::stencil::Coord c) {
      const double di = static_cast<double>(c[0]) - ci, dj = static_cast<double>(c[1]) - cj;
      return std::exp(-(di * di + dj * dj) / w);
    };
  };
  app.bytes_per_point = 24;
  return ordo::app::guarded_main("ordo-wave2d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
