// ordo-jacobi1d: 1-D 3-point Jacobi, u'[i] = (u[i-1] + u[i] + u[i+1]) / 3, on the stencil
// layer. Boundary: the point before index 0 is held at 1.0, the point after the end at 0.0.
#include "stencil_app.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "jacobi1d";
  app.summary = "1-D 3-point Jacobi on a block-decomposed line";
  app.dims = 1;
  app.default_size = "1048576";
  app.default_blocks = "8";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::von_neumann(1, 1);
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? 1.0 : 0.0; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        double* v = b.out + at;
        for (std::size_t i = 0; i < len; ++i) v[i] = (1.0 / 3.0) * ((u[i - 1] + u[i]) + u[i + 1]);
      });
    };
  };
  app.initial = [](const ordo::app::AppParams& p) { return ordo::app::hashed_values(p); };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-jacobi1d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
