// ordo-jacobi5d: 5-D 11-point Jacobi (Saied 2018 Table 5.1), periodic boundaries, on the stencil
// layer: u' = 0.5 * u + 0.05 * (sum of the neighbours), the neighbours summed in a fixed order.
#include "stencil_app.hpp"
#include "sum_kernel.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "jacobi5d";
  app.summary = "5-D 11-point Jacobi, periodic";
  app.dims = 5;
  app.default_size = "16x16x16x16x16";
  app.default_blocks = "2x2x2x2x1";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::von_neumann(5, 1);
    s.boundary = st::Boundary::periodic;
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) {
    return ordo::app::weighted_sum_kernel(st::von_neumann(5, 1), 0.5, 0.05);
  };
  app.initial = [](const ordo::app::AppParams& p) { return ordo::app::hashed_values(p); };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-jacobi5d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
