// ordo-harris: Harris corner detection (papers/003 §3) on the stencil layer. Stages:
//   1. derivatives  gx, gy: 3x3 Sobel of the image
//   2. products     xx = gx*gx, yy = gy*gy, xy = gx*gy
//   3. smoothing    Sxx, Syy, Sxy: 3x3 box sums of the products
//   4. response     R = (Sxx*Syy - Sxy*Sxy) - 0.04 * (Sxx + Syy)^2
// The image is a coefficient grid of the layer (padded with a halo of 2, zero outside the
// image, loaded once); each block runs the four stages over its own scratch grids, stages 1-2
// on the block extended by 1 (the overlap recomputed, as temporal blocking does), so blocks
// need no exchange between stages. The output grid is R; each iteration recomputes it (a
// frame of a video stream). --input gives the image. --verify compares with a plain
// whole-image implementation of the four stages that shares only the point formulas.
#include "stencil_app.hpp"

namespace {

// Point formulas shared by the layer kernel and the reference; p points at the centre,
// s is the row stride.
inline double sobel_x(const double* p, std::ptrdiff_t s) {
  return ((p[-s + 1] + 2.0 * p[1]) + p[s + 1]) - ((p[-s - 1] + 2.0 * p[-1]) + p[s - 1]);
}
inline double sobel_y(const double* p, std::ptrdiff_t s) {
  return ((p[s - 1] + 2.0 * p[s]) + p[s + 1]) - ((p[-s - 1] + 2.0 * p[-s]) + p[-s + 1]);
}
inline double box3(const double* p, std::ptrdiff_t s) {
  return ((p[-s - 1] + p[-s]) + p[-s + 1]) + ((p[-1] + p[0]) + p[1]) +
         ((p[s - 1] + p[s]) + p[s + 1]);
}
inline double response(double sxx, double syy, double sxy) {
  const double tr = sxx + syy;
  return (sxx * syy - sxy * sxy) - 0.04 * (tr * tr);
}

// Stages 1-4 over a padded image: img points at image point (0,0), row stride s; rows
// [r0, r1) and columns [c0, c1) of R are computed into out (row stride so).
void harris_region(const double* img, std::ptrdiff_t s, std::ptrdiff_t r0, std::ptrdiff_t r1,
                   std::ptrdiff_t c0, std::ptrdiff_t c1, double* out, std::ptrdiff_t so) {
  const std::ptrdiff_t w = c1 - c0 + 2, h = r1 - r0 + 2;  // products on the range extended by 1
  thread_local std::vector<double> xx, yy, xy;
  xx.resize(static_cast<std::size_t>(w * h));
  yy.resize(xx.size());
  xy.resize(xx.size());
  for (std::ptrdiff_t i = 0; i < h; ++i)
    for (std::ptrdiff_t j = 0; j < w; ++j) {
      const double* p = img + (r0 - 1 + i) * s + (c0 - 1 + j);
      const double gx = sobel_x(p, s), gy = sobel_y(p, s);
      xx[static_cast<std::size_t>(i * w + j)] = gx * gx;
      yy[static_cast<std::size_t>(i * w + j)] = gy * gy;
      xy[static_cast<std::size_t>(i * w + j)] = gx * gy;
    }
  for (std::ptrdiff_t i = r0; i < r1; ++i)
    for (std::ptrdiff_t j = c0; j < c1; ++j) {
      const std::size_t k = static_cast<std::size_t>((i - r0 + 1) * w + (j - c0 + 1));
      out[i * so + j] = response(box3(&xx[k], w), box3(&yy[k], w), box3(&xy[k], w));
    }
}

std::vector<double> image(const ordo::app::AppParams& p) {
  // Bright rectangles on a dark background with a little noise: corners to find.
  std::vector<double> u(p.points());
  const std::size_t n = p.size[0], m = p.size[1];
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      const bool box = ((i / 16) % 3 == 1) && ((j / 16) % 3 == 1);
      u[i * m + j] = (box ? 1.0 : 0.0) + 0.05 * ordo::app::hash01(i * m + j);
    }
  return u;
}

}  // namespace

int main(int argc, char** argv) {
  namespace st = ordo::stencil;
  ordo::app::AppDesc app;
  app.name = "harris";
  app.summary = "Harris corner detection: Sobel derivatives, products, smoothing, response";
  app.dims = 2;
  app.default_size = "2048x2048";
  app.default_blocks = "4x4";
  app.spec = [](const ordo::app::AppParams&) {
    st::Spec s;
    // The kernel reads the image (coefficient grid 0) up to 2 points away; it does not read
    // the previous response, so the output grid itself needs no exchange: the neighbourhood
    // lists only the centre's axis neighbours the layer requires, with the halo of 2.
    s.neighbourhood = st::von_neumann(2, 1);
    s.halo = 2;
    s.aux_grids = 1;
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      harris_region(b.aux[0], b.stride[0], b.lo[0], b.hi[0], b.lo[1], b.hi[1], b.out,
                    b.stride[0]);
    };
  };
  app.init = [](const ordo::app::AppParams& p) { return std::vector<double>(p.points(), 0.0); };
  app.aux = [](const ordo::app::AppParams& p, std::size_t) { return image(p); };
  app.input_is_aux = true;
  app.reference = [](const ordo::app::AppParams& p, const std::vector<double>& src,
                     std::uint64_t) {
    const std::size_t n = p.size[0], m = p.size[1];
    const std::ptrdiff_t s = static_cast<std::ptrdiff_t>(m + 4);
    std::vector<double> img((n + 4) * (m + 4), 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) img[(i + 2) * (m + 4) + j + 2] = src[i * m + j];
    std::vector<double> r(n * m);
    harris_region(img.data() + 2 * s + 2, s, 0, static_cast<std::ptrdiff_t>(n), 0,
                  static_cast<std::ptrdiff_t>(m), r.data(), static_cast<std::ptrdiff_t>(m));
    return r;
  };
  app.bytes_per_point = 16;  // image read, response written
  return ordo::app::guarded_main("ordo-harris",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
