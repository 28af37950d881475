// ordo-heat3d-polybench: PolyBench/C 4.2's heat-3d on the stencil layer.
//
// PolyBench's kernel keeps two N^3 arrays A and B and, per time step t = 1..TSTEPS, sweeps
// A -> B and then B -> A over the interior points 1..N-2 of each dimension; the boundary
// planes keep their initial values in both arrays and are never written. So a time step is two
// Jacobi steps of one kernel over the (N-2)^3 interior with fixed boundary values, which is
// what this app gives the layer (in place: the layer's one buffer computes the same values as
// the two arrays). --size is that interior (a cube), --iters TSTEPS, and --dataset picks
// PolyBench's sizes. --verify compares bit for bit with PolyBench's two-array loop, written
// out below without the layer.
#include <cstdint>
#include <string>
#include <vector>

#include "stencil_app.hpp"

namespace {

namespace st = ordo::stencil;

// PolyBench's initial value of A[i][j][k] (and B's) in its n^3 array, boundary included.
double initial_value(std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t n) {
  return static_cast<double>(i + j + (n - k)) * 10 / static_cast<double>(n);
}

// The app's grid is the interior; PolyBench's index is the grid's coordinate + 1.
std::int64_t polybench_n(const ordo::app::AppParams& p) {
  return static_cast<std::int64_t>(p.size[0]) + 2;
}

// heat-3d as PolyBench writes it: two arrays, A -> B then B -> A per time step, the interior
// of the n^3 arrays only. u0 (the interior, row-major; empty: PolyBench's initialisation)
// replaces A's interior. Returns A's interior after tsteps steps.
std::vector<double> polybench_heat3d(std::size_t n, std::uint64_t tsteps,
                                     const std::vector<double>& u0) {
  std::vector<double> A(n * n * n), B(n * n * n);
  auto at = [n](std::size_t i, std::size_t j, std::size_t k) { return (i * n + j) * n + k; };
  const auto sn = static_cast<std::int64_t>(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t k = 0; k < n; ++k)
        A[at(i, j, k)] = B[at(i, j, k)] = initial_value(static_cast<std::int64_t>(i),
                                                        static_cast<std::int64_t>(j),
                                                        static_cast<std::int64_t>(k), sn);
  const std::size_t m = n - 2;
  if (!u0.empty())
    for (std::size_t i = 1; i < n - 1; ++i)
      for (std::size_t j = 1; j < n - 1; ++j)
        for (std::size_t k = 1; k < n - 1; ++k)
          A[at(i, j, k)] = u0[((i - 1) * m + (j - 1)) * m + (k - 1)];
  // One of PolyBench's two sweeps: dst = the kernel over src's interior.
  auto sweep = [&](const std::vector<double>& src, std::vector<double>& dst) {
    for (std::size_t i = 1; i < n - 1; ++i)
      for (std::size_t j = 1; j < n - 1; ++j)
        for (std::size_t k = 1; k < n - 1; ++k)
          dst[at(i, j, k)] =
              0.125 * (src[at(i + 1, j, k)] - 2.0 * src[at(i, j, k)] + src[at(i - 1, j, k)]) +
              0.125 * (src[at(i, j + 1, k)] - 2.0 * src[at(i, j, k)] + src[at(i, j - 1, k)]) +
              0.125 * (src[at(i, j, k + 1)] - 2.0 * src[at(i, j, k)] + src[at(i, j, k - 1)]) +
              src[at(i, j, k)];
  };
  for (std::uint64_t t = 1; t <= tsteps; ++t) {
    sweep(A, B);
    sweep(B, A);
  }
  std::vector<double> out;
  out.reserve(m * m * m);
  for (std::size_t i = 1; i < n - 1; ++i)
    for (std::size_t j = 1; j < n - 1; ++j)
      for (std::size_t k = 1; k < n - 1; ++k) out.push_back(A[at(i, j, k)]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ordo::app::AppDesc app;
  app.name = "heat3d-polybench";
  app.summary = "PolyBench/C 4.2 heat-3d (A -> B, B -> A per time step) on a block-decomposed "
                "grid: --size is the (N-2)^3 interior PolyBench updates, --iters its TSTEPS";
  app.dims = 3;
  // PolyBench/C 4.2's heat-3d.h: N and TSTEPS per dataset; the grid is N-2 points a side.
  app.datasets = {{"mini", "8x8x8", 20},
                  {"small", "18x18x18", 40},
                  {"medium", "38x38x38", 100},
                  {"large", "118x118x118", 500},
                  {"extralarge", "198x198x198", 1000}};
  app.default_size = "38x38x38";  // medium
  app.default_iters = 100;
  app.default_blocks = "2x2x2";
  app.spec = [](const ordo::app::AppParams& p) {
    if (p.size[1] != p.size[0] || p.size[2] != p.size[0])
      throw ordo::Error("--size " + ordo::app::join_shape(p.size) +
                        ": PolyBench's heat-3d is a cube; give NxNxN (N-2 of PolyBench's N) "
                        "or a --dataset");
    st::Spec s;
    s.neighbourhood = st::von_neumann(3, 1);
    s.traversal = st::Traversal::jacobi_in_place;
    const std::int64_t n = polybench_n(p);
    s.fixed_value = [n](st::Coord c) { return initial_value(c[0] + 1, c[1] + 1, c[2] + 1, n); };
    return s;
  };
  app.kernel = [](const ordo::app::AppParams&) -> st::Kernel {
    return [](const st::Block& b) {
      const std::ptrdiff_t si = b.stride[0], sj = b.stride[1];
      st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
        const double* a = b.in[0] + at;
        double* out = b.out + at;
        // PolyBench's expression, term for term, so the bits are its own.
        for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(len); ++k)
          out[k] = 0.125 * (a[k + si] - 2.0 * a[k] + a[k - si]) +
                   0.125 * (a[k + sj] - 2.0 * a[k] + a[k - sj]) +
                   0.125 * (a[k + 1] - 2.0 * a[k] + a[k - 1]) + a[k];
      });
    };
  };
  app.initial = [](const ordo::app::AppParams& p) -> st::PointValue {
    const std::int64_t n = polybench_n(p);
    return [n](st::Coord c) { return initial_value(c[0] + 1, c[1] + 1, c[2] + 1, n); };
  };
  app.reference = [](const ordo::app::AppParams& p, const std::vector<double>& u0,
                     std::uint64_t iters) {
    return polybench_heat3d(p.size[0] + 2, iters, u0);
  };
  app.steps_per_iter = 2;  // A -> B and B -> A
  app.bytes_per_point = 16;
  return ordo::app::guarded_main("ordo-heat3d-polybench",
                                 [&] { return ordo::app::run_stencil_app(app, argc, argv); });
}
