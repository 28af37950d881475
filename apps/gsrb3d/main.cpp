// ordo-gsrb3d: 3-D red-black Gauss-Seidel with a 25-point stencil (Saied 2018 Table 5.1:
// 25 points, 24 additions; we read the 25 points as the star of radius 4, 1 + 6*4, the one
// 3-D neighbourhood of that size). Points are red when the sum of their global coordinates is
// even. One iteration is two layer steps (Jacobi traversal, as in the table): the red
// half-sweep updates red points from the previous values, the black half-sweep updates black
// points from the new red and old black values; the other colour is copied.
//   u = 0.5 * u + (0.5 / 24) * (sum of the 24 neighbours)
// Boundary: the plane before index 0 along the slowest dimension is 1.0, other faces 0.
// --tb counts half-sweeps.
#include "stencil_app.hpp"

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "gsrb3d";
  app.summary = "3-D red-black Gauss-Seidel, 25-point star";
  app.dims = 3;
  app.default_size = "128x128x128";
  app.default_blocks = "2x2x2";
  app.steps_per_iter = 2;
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::von_neumann(3, 4);
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? 1.0 : 0.0; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const auto nb = st::von_neumann(3, 4);
      std::array<std::ptrdiff_t, 24> delta{};
      for (std::size_t j = 0; j < 24; ++j)
        for (std::size_t d = 0; d < 3; ++d) delta[j] += nb[j][d] * b.stride[d];
      const std::int64_t colour = static_cast<std::int64_t>(b.step % 2);  // 0 red, 1 black
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len,
                              const std::array<std::ptrdiff_t, st::kMaxDims>& x) {
        const double* u = b.in[0] + at;
        double* v = b.out + at;
        std::int64_t parity = (b.origin[0] + x[0] + b.origin[1] + x[1] + b.origin[2] + x[2]) & 1;
        for (std::size_t k = 0; k < len; ++k, parity ^= 1) {
          if (parity != colour) {
            v[k] = u[k];
            continue;
          }
          double s = u[k + delta[0]];
          for (std::size_t j = 1; j < 24; ++j) s += u[k + delta[j]];
          v[k] = 0.5 * u[k] + (0.5 / 24.0) * s;
        }
      });
    };
  };
  app.initial = [](const ordo::app::AppParams& p) { return ordo::app::hashed_values(p); };
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-gsrb3d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
