// ordo-bench-until's OpenMP references (compiled with OpenMP alone, as the bench-tasks peers
// are): a parallel for reduction plus the test, the way an OpenMP program checks.
#include "omp.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "until_kernels.hpp"

namespace ordo::bench::until {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

OmpResult omp_small(unsigned threads, std::uint64_t iterations) {
  std::vector<std::vector<double>> x(threads, std::vector<double>(kSmallWidth, 0.0));
  OmpResult r;
  const auto t0 = std::chrono::steady_clock::now();
  const int n = static_cast<int>(threads);
  for (std::uint64_t k = 0; k < iterations; ++k) {
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) num_threads(n) schedule(static)
    for (int t = 0; t < n; ++t)
      sum += small_step(x[static_cast<std::size_t>(t)].data(), kSmallWidth);
    r.iterations = k + 1;
    r.value = sum;
    if (sum < 0) break;  // the test (never true), as ordo's condition
  }
  r.seconds = seconds_since(t0);
  return r;
}

OmpResult omp_jacobi(unsigned threads, std::size_t n, std::size_t m, double tol,
                     std::uint64_t max_iterations) {
  std::vector<double> u(n * m, 0.0), v(n * m, 0.0);
  OmpResult r;
  const auto t0 = std::chrono::steady_clock::now();
  const int nt = static_cast<int>(threads), rows = static_cast<int>(n);
  for (std::uint64_t k = 0; k < max_iterations; ++k) {
    double most = 0;
#pragma omp parallel for reduction(max : most) num_threads(nt) schedule(static)
    for (int i = 0; i < rows; ++i) {
      const std::size_t at = static_cast<std::size_t>(i) * m;
      most = std::max(most, jacobi_row(i > 0 ? &u[at - m] : nullptr, &u[at],
                                       i + 1 < rows ? &u[at + m] : nullptr, &v[at], m));
    }
    std::swap(u, v);
    r.iterations = k + 1;
    r.value = most;
    if (most <= tol) break;
  }
  r.seconds = seconds_since(t0);
  r.checksum = 0;
  for (double x : u) r.checksum += x;
  return r;
}

}  // namespace ordo::bench::until
