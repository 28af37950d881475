// Jacobi to a tolerance on the stencil layer: the worked example of docs/stencil.md ("A worked
// example"), which tests/stencil/example_test.py checks is quoted there as it is here, and
// whose output it compares with a plain loop of its own.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <ordo/stencil.hpp>

namespace st = ordo::stencil;

int main() {
  st::Spec s;
  s.size = {32, 24};
  s.blocks = {2, 2};
  s.neighbourhood = st::von_neumann(2, 1);
  s.fixed_value = [](st::Coord x) { return x[0] < 0 ? 1.0 : 0.0; };  // u = 1 above row 0
  s.reductions = {{"change", st::Reduce::max}};                      // each step's largest change
  ordo::Graph g;
  st::Stencil jacobi(g, s, [](const st::Block& b) {
    const std::ptrdiff_t n = b.stride[0];
    double change = 0;
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      const double* u = b.in[0] + at;
      for (std::ptrdiff_t j = 0; j < static_cast<std::ptrdiff_t>(len); ++j) {
        const double next = 0.25 * ((u[j - n] + u[j + n]) + (u[j - 1] + u[j + 1]));
        change = std::max(change, std::fabs(next - u[j]));
        b.out[at + j] = next;
      }
    });
    b.contribute(0, change);  // this block's part; the layer combines the blocks'
  });
  ordo::Runtime rt({.workers = 2});
  jacobi.set([](st::Coord) { return 0.0; });
  const ordo::RunStats run = jacobi.run_until(
      rt, [](const st::Values& v) { return v["change"] <= 1e-3; }, 5000);
  std::printf("steps=%llu change=%.17g u=%.17g\n", static_cast<unsigned long long>(run.iterations),
              jacobi.values()["change"], jacobi.get()[16 * 24 + 12]);
}
