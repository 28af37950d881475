// ordo-seidel2d: 2-D 5-point Gauss-Seidel sweep (Saied 2018 Table 5.1): u = 0.2 * u + 0.2 * (sum of
// the von Neumann neighbours), updated in place in lexicographic order. The layer orders each block
// after the blocks before it (their values of this sweep) and before the blocks after it (previous
// sweep), so the block-decomposed sweep equals the global lexicographic one bit for bit; blocks run
// as a wavefront. Boundary: the plane before index 0 along the slowest dimension is 1.0, others 0.
// Temporal blocking does not apply (--tb 1 only).
#include "stencil_app.hpp"
#include "sum_kernel.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "seidel2d";
  app.summary = "2-D 5-point Gauss-Seidel sweep";
  app.dims = 2;
  app.default_size = "1024x1024";
  app.default_blocks = "4x4";
  app.supports_tb = false;
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.neighbourhood = st::von_neumann(2, 1);
    s.traversal = st::Traversal::gauss_seidel;
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? 1.0 : 0.0; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) {
    return ordo::app::weighted_sum_kernel(st::von_neumann(2, 1), 0.2, 0.2);
  };
  app.initial = [](const ordo::app::AppParams& p) { return ordo::app::hashed_values(p); };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-seidel2d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
