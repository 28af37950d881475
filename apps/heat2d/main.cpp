// ordo-heat2d: 2-D 5-point heat equation (Jacobi) on a block-decomposed grid, written on the
// stencil layer (<ordo/stencil.hpp>): the app gives the spec and the point update; the layer
// builds the CompUp graph (main block with overlapped halo, exported edges, no barrier).
//
// Boundary (Dirichlet): the row above the grid is held at 1.0, every other side at 0.0
// (apps/common/kernels.hpp, shared with the OpenMP and MPI baselines).
// --verify compares with a plain double-buffered loop over the whole grid (below), which
// shares only the point update with the layer version.
#include <cstring>

#include "kernels.hpp"
#include "stencil_app.hpp"

namespace {

using ordo::app::kHeatOther;
using ordo::app::kHeatTop;
constexpr auto point = ordo::app::heat2d_point;

// Sequential reference: a double-buffered loop over the grid with a ghost ring.
std::vector<double> reference(const ordo::app::AppParams& p, const std::vector<double>& u0,
                              std::uint64_t iters) {
  const std::size_t n = p.size[0], m = p.size[1], w = m + 2;
  std::vector<double> u((n + 2) * w, kHeatOther), v;
  for (std::size_t j = 0; j < w; ++j) u[j] = kHeatTop;
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&u[(i + 1) * w + 1], &u0[i * m], m * 8);
  v = u;
  for (std::uint64_t it = 0; it < iters; ++it) {
    for (std::size_t i = 1; i <= n; ++i)
      for (std::size_t j = 1; j <= m; ++j) {
        const double* r = &u[i * w + j];
        v[i * w + j] = point(r[0], r[-static_cast<std::ptrdiff_t>(w)], r[w], r[-1], r[1]);
      }
    std::swap(u, v);
  }
  std::vector<double> out(n * m);
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&out[i * m], &u[(i + 1) * w + 1], m * 8);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "heat2d";
  app.summary = "2-D 5-point heat equation (Jacobi) on a block-decomposed grid";
  app.dims = 2;
  app.default_size = "1024x1024";
  app.default_blocks = "4x4";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    s.neighbourhood = st::von_neumann(2, 1);
    s.fixed_value = [](st::Coord c) { return c[0] < 0 ? kHeatTop : kHeatOther; };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t n = b.stride[0];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* u = b.in[0] + at;
        double* v = b.out + at;
        for (std::size_t j = 0; j < len; ++j)
          v[j] = point(u[j], u[j - n], u[j + n], u[j - 1], u[j + 1]);
      });
    };
  };
  app.init = [](const ordo::app::AppParams& p) { return std::vector<double>(p.points(), kHeatOther); };
  app.reference = reference;
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat2d",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
