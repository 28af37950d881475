// ordo-harris: Harris corner detection (Nicolet 2015 §3) as a multi-stage graph over several
// grids, on the stencil layer's pipelines (ordo::stencil::Pipeline):
//   derivatives  img -> Ix, Iy           3x3 Sobel (Moore neighbourhood, halo 1 of img)
//   products     Ix, Iy -> Ixx, Iyy, Ixy  pointwise (no halo)
//   smoothing    Ixx, Iyy, Ixy -> Sxx, Syy, Sxy   3x3 box sums (halo 1 of each product)
//   response     Sxx, Syy, Sxy -> R      R = (Sxx*Syy - Sxy^2) - 0.04 * (Sxx + Syy)^2
// Every grid is 0 outside the image. Each block of each stage is a task; the products are
// exchanged between neighbouring blocks before the smoothing (the image's halo is loaded once,
// it never changes); the derivatives and the sums are read pointwise and never exchanged. A
// block of a later stage starts as soon as the blocks it reads are done.
// Each iteration runs the whole pipeline on the same image (a frame of a video stream of
// identical frames) and rewrites R; the pipeline does not feed back. --input is the image,
// --output writes R. --verify compares with plain loops over whole-image arrays written here,
// independently of the layer. Temporal blocking (--tb) has no meaning for a pipeline that
// recomputes the same frame: it is refused.
#include "stencil_app.hpp"

namespace {

namespace st = ordo::stencil;

constexpr double kHarrisK = 0.04;

// The stage kernels. p points at the centre, s is the row stride of every grid.
void derivatives(const st::StageBlock& b) {
  const std::ptrdiff_t s = b.stride[0];
  st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
    const double* img = b.in[0] + at;
    double* ix = b.out[0] + at;
    double* iy = b.out[1] + at;
    for (std::size_t j = 0; j < len; ++j) {
      const double* p = img + j;
      ix[j] = ((p[-s + 1] + 2.0 * p[1]) + p[s + 1]) - ((p[-s - 1] + 2.0 * p[-1]) + p[s - 1]);
      iy[j] = ((p[s - 1] + 2.0 * p[s]) + p[s + 1]) - ((p[-s - 1] + 2.0 * p[-s]) + p[-s + 1]);
    }
  });
}

void products(const st::StageBlock& b) {
  st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
    const double* ix = b.in[0] + at;
    const double* iy = b.in[1] + at;
    double* xx = b.out[0] + at;
    double* yy = b.out[1] + at;
    double* xy = b.out[2] + at;
    for (std::size_t j = 0; j < len; ++j) {
      xx[j] = ix[j] * ix[j];
      yy[j] = iy[j] * iy[j];
      xy[j] = ix[j] * iy[j];
    }
  });
}

void smoothing(const st::StageBlock& b) {
  const std::ptrdiff_t s = b.stride[0];
  st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
    for (std::size_t g = 0; g < 3; ++g) {
      const double* in = b.in[g] + at;
      double* out = b.out[g] + at;
      for (std::size_t j = 0; j < len; ++j) {
        const double* p = in + j;
        out[j] = ((p[-s - 1] + p[-s]) + p[-s + 1]) + ((p[-1] + p[0]) + p[1]) +
                 ((p[s - 1] + p[s]) + p[s + 1]);
      }
    }
  });
}

void response(const st::StageBlock& b) {
  st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
    const double* sxx = b.in[0] + at;
    const double* syy = b.in[1] + at;
    const double* sxy = b.in[2] + at;
    double* r = b.out[0] + at;
    for (std::size_t j = 0; j < len; ++j) {
      const double tr = sxx[j] + syy[j];
      r[j] = (sxx[j] * syy[j] - sxy[j] * sxy[j]) - kHarrisK * (tr * tr);
    }
  });
}

st::PipelineSpec harris_pipeline(const ordo::app::AppParams& p) {
  st::PipelineSpec s;
  s.name = "harris";
  s.size = p.size;
  s.blocks = p.blocks;
  s.inputs = {"img"};
  s.stages = {
      {"derivatives", {"img"}, {"Ix", "Iy"}, st::moore(2, 1), derivatives},
      {"products", {"Ix", "Iy"}, {"Ixx", "Iyy", "Ixy"}, {}, products},
      {"smoothing", {"Ixx", "Iyy", "Ixy"}, {"Sxx", "Syy", "Sxy"}, st::moore(2, 1), smoothing},
      {"response", {"Sxx", "Syy", "Sxy"}, {"R"}, {}, response},
  };
  return s;
}

// The graph: the pipeline placed, the image loaded into this rank's blocks, `steps`
// iterations; the result keeps the graph for the driver to read R's blocks from.
ordo::app::AppDesc::FastResult run_pipeline(const ordo::app::AppParams& p, const st::BoxFill& img,
                                            ordo::Runtime& rt, std::uint64_t steps,
                                            const std::function<void(std::uint64_t)>& progress) {
  struct Held {
    ordo::Graph graph;
    std::optional<st::Pipeline> pipe;
  };
  auto held = std::make_shared<Held>();
  st::Pipeline& pipe = held->pipe.emplace(held->graph, harris_pipeline(p));
  pipe.place(rt);
  pipe.set("img", img);
  ordo::app::AppDesc::FastResult out;
  out.seconds = ordo::app::run_in_pieces(
      steps, 1, [&](std::uint64_t n) { return pipe.run(rt, n).seconds; }, progress);
  out.visit_blocks = [held](const st::BoxVisit& visit) { held->pipe->get_blocks("R", visit); };
  return out;
}

// The sequential reference: the four stages as plain loops over whole-image arrays, a point
// outside the image read as 0 by an explicit bounds test. Written without the layer; only the
// order of the floating-point operations is the same as the kernels' (bit-identical results).
std::vector<double> reference(const ordo::app::AppParams& p, const std::vector<double>& img,
                              std::uint64_t) {
  const auto n = static_cast<std::ptrdiff_t>(p.size[0]), m = static_cast<std::ptrdiff_t>(p.size[1]);
  using Grid = std::vector<double>;
  auto at = [&](const Grid& g, std::ptrdiff_t i, std::ptrdiff_t j) {
    return i < 0 || i >= n || j < 0 || j >= m ? 0.0 : g[static_cast<std::size_t>(i * m + j)];
  };
  const auto count = static_cast<std::size_t>(n * m);
  Grid ix(count), iy(count), xx(count), yy(count), xy(count), sxx(count), syy(count),
      sxy(count), r(count);
  for (std::ptrdiff_t i = 0; i < n; ++i)
    for (std::ptrdiff_t j = 0; j < m; ++j) {
      const auto k = static_cast<std::size_t>(i * m + j);
      ix[k] = ((at(img, i - 1, j + 1) + 2.0 * at(img, i, j + 1)) + at(img, i + 1, j + 1)) -
              ((at(img, i - 1, j - 1) + 2.0 * at(img, i, j - 1)) + at(img, i + 1, j - 1));
      iy[k] = ((at(img, i + 1, j - 1) + 2.0 * at(img, i + 1, j)) + at(img, i + 1, j + 1)) -
              ((at(img, i - 1, j - 1) + 2.0 * at(img, i - 1, j)) + at(img, i - 1, j + 1));
    }
  for (std::size_t k = 0; k < count; ++k) {
    xx[k] = ix[k] * ix[k];
    yy[k] = iy[k] * iy[k];
    xy[k] = ix[k] * iy[k];
  }
  auto box = [&](const Grid& g, std::ptrdiff_t i, std::ptrdiff_t j) {
    double rows[3];
    for (std::ptrdiff_t di = -1; di <= 1; ++di)
      rows[di + 1] = (at(g, i + di, j - 1) + at(g, i + di, j)) + at(g, i + di, j + 1);
    return rows[0] + rows[1] + rows[2];
  };
  for (std::ptrdiff_t i = 0; i < n; ++i)
    for (std::ptrdiff_t j = 0; j < m; ++j) {
      const auto k = static_cast<std::size_t>(i * m + j);
      sxx[k] = box(xx, i, j);
      syy[k] = box(yy, i, j);
      sxy[k] = box(xy, i, j);
    }
  for (std::size_t k = 0; k < count; ++k) {
    const double det = sxx[k] * syy[k] - sxy[k] * sxy[k];
    const double tr = sxx[k] + syy[k];
    r[k] = det - kHarrisK * (tr * tr);
  }
  return r;
}

st::PointValue image(const ordo::app::AppParams& p) {
  // Bright rectangles on a dark background with a little noise: corners to find.
  const std::size_t m = p.size[1];
  return [m](st::Coord c) {
    const auto i = static_cast<std::size_t>(c[0]), j = static_cast<std::size_t>(c[1]);
    const bool box = ((i / 16) % 3 == 1) && ((j / 16) % 3 == 1);
    return (box ? 1.0 : 0.0) + 0.05 * ordo::app::hash01(i * m + j);
  };
}

}  // namespace

int main(int argc, char** argv) {
  ordo::app::AppDesc app;
  app.name = "harris";
  app.summary =
      "Harris corner detection as a pipeline: Sobel derivatives, products, smoothing, response";
  app.dims = 2;
  app.default_size = "2048x2048";
  app.default_blocks = "4x4";
  app.supports_tb = false;
  app.layer_tuning = false;  // no --stores / --tile-bytes: the pipeline has its own buffers
  app.no_tb_reason =
      "is a multi-stage pipeline that recomputes the same frame every iteration; temporal "
      "blocking applies to single-stage stencils only";
  // The run goes through fast_path (the pipeline); the driver reads this spec only for its
  // time levels (1: R is written as one grid) and for its cache test (--bandwidth prints
  // bandwidth_fraction when two grids exceed the last-level cache; the pipeline holds ten).
  app.spec = [](const ordo::app::AppParams&) { return st::Spec{}; };
  app.kernel = [](const ordo::app::AppParams&) { return st::Kernel{}; };
  app.initial = image;  // --input replaces it
  app.reference = reference;
  app.fast_path = run_pipeline;
  // Every grid but the image written once and read once from memory: 9 writes + 9 reads.
  app.bytes_per_point = 18 * 8;
  return ordo::app::guarded_main("ordo-harris",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
