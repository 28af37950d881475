// ordo-wave3d: 3-D wave equation of order k in space, k in {2,4,6,8,10,12} (--order), second
// order in time (Saied 2018 Table 5.1: a (3k+1)-point star of radius k/2):
//   u^{t+1} = 2 u^t - u^{t-1} + c * (3 w0 u^t + sum_{r=1}^{k/2} w_r (sum of the 6 points at r)),
// with w the central-difference weights of order k for the second derivative and c = 0.05.
// Boundary: 0 outside the grid. Start at rest: u^{-1} = u^0.
#include <cmath>

#include "stencil_app.hpp"

namespace {

// Central second-derivative weights w_0..w_{k/2} of order k.
std::vector<double> weights(int order) {
  switch (order) {
    case 2: return {-2.0, 1.0};
    case 4: return {-5.0 / 2, 4.0 / 3, -1.0 / 12};
    case 6: return {-49.0 / 18, 3.0 / 2, -3.0 / 20, 1.0 / 90};
    case 8: return {-205.0 / 72, 8.0 / 5, -1.0 / 5, 8.0 / 315, -1.0 / 560};
    case 10: return {-5269.0 / 1800, 5.0 / 3, -5.0 / 21, 5.0 / 126, -5.0 / 1008, 1.0 / 3150};
    default:
      return {-5369.0 / 1800, 12.0 / 7, -15.0 / 56, 10.0 / 189, -1.0 / 112, 2.0 / 1925,
              -1.0 / 16632};
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "wave3d";
  app.summary = "3-D wave equation of order k (--order), (3k+1)-point star, two time levels";
  app.dims = 3;
  app.default_size = "128x128x128";
  app.default_blocks = "2x2x2";
  app.has_order = true;
  app.spec = [](const ordo::app::AppParams& p) {
    st::Spec s;
    s.traversal = st::Traversal::jacobi_in_place;  // one grid per time level
    s.neighbourhood = st::von_neumann(3, p.order / 2);
    s.time_levels = 2;
    return s;
  };
  app.kernel = [](const ordo::app::AppParams& p) -> st::Kernel {
    const std::vector<double> w = weights(p.order);
    const int R = p.order / 2;
    return [w, R](const st::Block& b) {
      const std::ptrdiff_t si = b.stride[0], sj = b.stride[1];
      const double c0 = 3.0 * w[0];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        const double* um = b.in[1] + at;
        double* v = b.out + at;
        for (std::size_t k = 0; k < len; ++k) {
          double lap = c0 * u[k];
          for (int r = 1; r <= R; ++r)
            lap += w[static_cast<std::size_t>(r)] *
                   (((u[k - r * si] + u[k + r * si]) + (u[k - r * sj] + u[k + r * sj])) +
                    (u[k - r] + u[k + r]));
          v[k] = 2.0 * u[k] - um[k] + 0.05 * lap;
        }
      });
    };
  };
  app.initial = [](const ordo::app::AppParams& p) -> ordo::stencil::PointValue {
    const double w = 0.05 * static_cast<double>(p.size[0] * p.size[1]) + 1.0;
    return [p, w](ordo::stencil::Coord c) {
      const double di = static_cast<double>(c[0]) - 0.5 * static_cast<double>(p.size[0]);
      const double dj = static_cast<double>(c[1]) - 0.5 * static_cast<double>(p.size[1]);
      const double dk = static_cast<double>(c[2]) - 0.5 * static_cast<double>(p.size[2]);
      return std::exp(-(di * di + dj * dj + dk * dk) / w);
    };
  };
  app.bytes_per_point = 24;
  return ordo::app::guarded_main("ordo-wave3d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
