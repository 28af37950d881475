// ordo-livermore23: Livermore loop 23 (2-D implicit hydrodynamics fragment) with its five
// coefficient grids zr, zb, zu, zv, zz, as a Jacobi sweep (Saied 2018 Table 5.1):
//   qa = za[i+1][j]*zr + za[i-1][j]*zb + za[i][j+1]*zu + za[i][j-1]*zv + zz
//   za' = za + 0.175 * (qa - za)
// The coefficient grids are constant auxiliary grids of the stencil layer (loaded once, with
// their halos; never exchanged). Boundary: za is 0 outside the grid.
#include "stencil_app.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "livermore23";
  app.summary = "Livermore kernel 23 with five coefficient grids";
  app.dims = 2;
  app.default_size = "1024x1024";
  app.default_blocks = "4x4";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::von_neumann(2, 1);
    s.aux_grids = 5;
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t n = b.stride[0];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* za = b.in[0] + at;
        const double *zr = b.aux[0] + at, *zb = b.aux[1] + at, *zu = b.aux[2] + at,
                     *zv = b.aux[3] + at, *zz = b.aux[4] + at;
        double* out = b.out + at;
        for (std::ptrdiff_t j = 0; j < static_cast<std::ptrdiff_t>(len); ++j) {  // signed: j - n
          const double qa = za[j + n] * zr[j] + za[j - n] * zb[j] + za[j + 1] * zu[j] +
                            za[j - 1] * zv[j] + zz[j];
          out[j] = za[j] + 0.175 * (qa - za[j]);
        }
      });
    };
  };
  app.initial = [](const ordo::app::AppParams& p) { return ordo::app::hashed_values(p); };
  // Coefficients in [0, 0.25): the four neighbour weights sum below 1, so za stays bounded.
  app.aux = [](const ordo::app::AppParams& p, std::size_t g) -> ordo::stencil::PointValue {
    auto h = ordo::app::hashed_values(p, 7, g + 1000003u * (g + 1));
    return [h](ordo::stencil::Coord c) { return 0.25 * h(c); };
  };
  app.bytes_per_point = 8.0 * 7;  // za and five coefficients read, za' written
  return ordo::app::guarded_main("ordo-livermore23",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
