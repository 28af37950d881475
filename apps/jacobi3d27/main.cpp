// ordo-jacobi3d27: 3-D 27-point Jacobi (Saied 2018 Table 5.1), periodic boundaries, on the stencil
// layer: u' = 0.5 * u + 0.5 / 26.0 * (sum of the neighbours), the neighbours summed in a fixed
// order.
#include "stencil_app.hpp"
#include "sum_kernel.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "jacobi3d27";
  app.summary = "3-D 27-point Jacobi, periodic";
  app.dims = 3;
  app.default_size = "128x128x128";
  app.default_blocks = "2x2x2";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::moore(3, 1);
    s.boundary = st::Boundary::periodic;
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) {
    return ordo::app::weighted_sum_kernel(st::moore(3, 1), 0.5, 0.5 / 26.0);
  };
  app.initial = [](const ordo::app::AppParams& p) { return ordo::app::hashed_values(p); };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-jacobi3d27",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
