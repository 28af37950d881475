// weighted_sum_kernel with any number of offsets: moore(5, 1) has 242 (the kernel once kept them
// in a fixed array of 128). Checked point by point against a sum written out here, in the
// kernel's order (left to right over the list), on a hand-built 5-D block: Jacobi and
// Gauss-Seidel.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "sum_kernel.hpp"

using namespace ordo;

namespace {

// A block of 5^D points (one ghost layer around 3^D computed ones) in a D-dimensional array.
struct Grid {
  std::size_t dims;
  std::vector<double> u, v;
  stencil::Block blk;
  explicit Grid(std::size_t d) : dims(d) {
    std::size_t n = 1;
    for (std::size_t i = 0; i < d; ++i) n *= 5;
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> dist(-1, 1);
    u.resize(n);
    for (double& x : u) x = dist(rng);
    v.assign(n, 0);
    blk.dims = d;
    std::ptrdiff_t s = 1;
    for (std::size_t i = d; i-- > 0;) {
      blk.stride[i] = s;
      s *= 5;
      blk.lo[i] = 1;
      blk.hi[i] = 4;
    }
  }
};

// a*u + b*(sum of u at the offsets, in list order) at every computed point of g, reading
// `from` (Jacobi: into a copy of g.v) or, in place, the values updated so far (Gauss-Seidel,
// points in increasing order as the kernel's rows go).
std::vector<double> expected(const Grid& g, const std::vector<stencil::Offset>& offsets, double a, double b,
                             bool in_place) {
  const std::vector<double>& from_u = g.u;
  std::vector<double> want = in_place ? g.u : g.v;
  const std::vector<double>& from = in_place ? want : from_u;
  const std::size_t n = from.size();
  for (std::size_t p = 0; p < n; ++p) {
    std::ptrdiff_t rest = std::ptrdiff_t(p);
    bool inner = true;
    for (std::size_t i = 0; i < g.dims; ++i) {
      const std::ptrdiff_t x = rest / g.blk.stride[i];
      rest %= g.blk.stride[i];
      inner = inner && x >= 1 && x <= 3;
    }
    if (!inner) continue;
    double s = 0;
    for (std::size_t j = 0; j < offsets.size(); ++j) {
      std::ptrdiff_t q = std::ptrdiff_t(p);
      for (std::size_t i = 0; i < g.dims; ++i) q += offsets[j][i] * g.blk.stride[i];
      s = j == 0 ? from[std::size_t(q)] : s + from[std::size_t(q)];
    }
    const double next = a * from[p] + b * s;
    want[p] = next;
  }
  return want;
}

}  // namespace

TEST_CASE("weighted_sum_kernel takes every offset of moore(5, 1), 242 of them") {
  const auto offsets = stencil::moore(5, 1);
  REQUIRE(offsets.size() == 242);
  const double a = 0.25, b = 0.75 / 242;
  auto kernel = app::weighted_sum_kernel(offsets, a, b);
  {
    INFO("Jacobi");
    Grid g(5);
    g.blk.in[0] = g.u.data();
    g.blk.out = g.v.data();
    const auto want = expected(g, offsets, a, b, false);
    kernel(g.blk);
    CHECK(std::memcmp(want.data(), g.v.data(), want.size() * sizeof(double)) == 0);
  }
  {
    INFO("Gauss-Seidel (in place)");
    Grid g(5);
    const auto want = expected(g, offsets, a, b, true);
    g.blk.in[0] = g.u.data();
    g.blk.out = g.u.data();
    kernel(g.blk);
    CHECK(std::memcmp(want.data(), g.u.data(), want.size() * sizeof(double)) == 0);
  }
}
