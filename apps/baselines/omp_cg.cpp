// ordo-omp-cg: OpenMP baseline of ordo-cg, the conjugate gradient a careful OpenMP programmer
// writes, on the row kernels of apps/common/cg_kernels.hpp (so the same bits as ordo-cg on
// --blocks THREADSx1 and as the sequential CG):
//  - the arrays on transparent huge pages (as ordo's large locations), first touched by the
//    slabs that use them;
//  - one parallel region for the whole solve; each thread owns a static slab of rows
//    (block_low, as ordo's blocks), first-touches it and works only on it;
//  - per iteration the three fused sweeps (q = A p with p.q; x, r and r.r; p = r + beta p) and
//    three barriers: one after each dot product's partial sums, one before the next q = A p
//    reads the neighbouring slabs' new p;
//  - each dot product is every thread's partial sum in a shared array, combined by every
//    thread in the same order (ordo::combine_in_order) instead of `reduction(+:)`, whose order
//    OpenMP leaves open: the same cost, and a verifiable result.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "cg_kernels.hpp"
#include "stream.hpp"

namespace {

int run(int argc, char** argv) {
  CLI::App cli{"OpenMP baseline of ordo-cg (same kernels, same result line)", "ordo-omp-cg"};
  std::string size_text = "1024x1024";
  std::uint64_t iters = 100;
  double tol = 0;
  unsigned workers = 0;
  bool verify = false;
  cli.add_option("--size", size_text, "grid size NxM (unknowns)")->capture_default_str();
  cli.add_option("--iters", iters, "iterations (with --tol: the most)")
      ->check(ordo::cli::Integer(1, ordo::app::max_iters))
      ->capture_default_str();
  cli.add_option("--tol", tol, "stop at this relative residual norm (0: run --iters)")
      ->check(ordo::cli::Real(0, 1))
      ->capture_default_str();
  cli.add_option("--workers", workers, "OpenMP threads (default: OMP_NUM_THREADS, else all cores)")
      ->check(ordo::cli::Integer(1, ordo::app::max_workers));
  cli.add_flag("--verify", verify,
               "compare x, the iteration count and r.r bit for bit with the sequential CG");
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  const std::vector<std::size_t> size = ordo::app::parse_shape(size_text, 2, "--size");
  ordo::app::check_grid_fits(size, verify ? 8 : 4, "--size " + size_text);
  const std::size_t n = size[0], m = size[1];
  const ordo::cg::Padded pad{n, m};  // p's layout, as ordo-cg's blocks
  const std::size_t pm = pad.stride();
  // A thread without a row would change the block grid the sums follow: at most n threads.
  const int threads = static_cast<int>(
      std::min<std::size_t>(workers ? workers : static_cast<unsigned>(omp_get_max_threads()), n));
  omp_set_dynamic(0);

  using Array = decltype(ordo::app::detail::huge_array(0));
  Array xb, rb, qb, pb;
  try {
    xb = ordo::app::detail::huge_array(n * m);
    rb = ordo::app::detail::huge_array(n * m);
    qb = ordo::app::detail::huge_array(n * m);
    pb = ordo::app::detail::huge_array(pad.size());
  } catch (const std::bad_alloc&) {
    throw ordo::Error("--size " + size_text + " needs four grids of " +
                      std::to_string(n * m * sizeof(double) >> 20) +
                      " MiB each, which this machine could not allocate; use a smaller --size");
  }
  double* x = xb.get();
  double* r = rb.get();
  double* q = qb.get();
  double* p = pb.get();
  std::vector<double> part_pq(static_cast<std::size_t>(threads)),
      part_rr(static_cast<std::size_t>(threads));
  double rr0 = 0, rr = 0;
  std::uint64_t done = 0;
  auto slab = [&](int t, std::size_t& lo, std::size_t& hi) {
    lo = ordo::stencil::block_low(static_cast<std::size_t>(t), n, static_cast<std::size_t>(threads));
    hi = ordo::stencil::block_low(static_cast<std::size_t>(t) + 1, n, static_cast<std::size_t>(threads));
  };

  // First touch and b.b by the slabs that will work on them.
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    std::size_t lo, hi;
    slab(t, lo, hi);
    if (t == 0) std::fill(p, p + pm, 0.0);
    if (t == threads - 1) std::fill(p + (n + 1) * pm, p + (n + 2) * pm, 0.0);
    double s = 0.0;
    for (std::size_t i = lo; i < hi; ++i) {
      double* pr = p + pad.at(static_cast<std::ptrdiff_t>(i), 0);
      std::fill(pr - ordo::cg::Padded::kLead, pr - ordo::cg::Padded::kLead + pm, 0.0);
      for (std::size_t j = 0; j < m; ++j) {
        x[i * m + j] = 0.0;
        q[i * m + j] = 0.0;
        r[i * m + j] = pr[j] = ordo::cg::rhs(i, j, m);
      }
      s += ordo::cg::dot_row(&r[i * m], &r[i * m], m);
    }
    part_rr[static_cast<std::size_t>(t)] = s;
#pragma omp barrier
#pragma omp single
    rr0 = ordo::combine_in_order<double>(part_rr);
  }

  const double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const auto ti = static_cast<std::size_t>(t);
    std::size_t lo, hi;
    slab(t, lo, hi);
    double rr_now = rr0;  // every thread holds the same value
    std::uint64_t k = 0;
    while (k < iters) {
      double s = 0.0;
      for (std::size_t i = lo; i < hi; ++i)
        s += ordo::cg::matvec_row(p + pad.at(static_cast<std::ptrdiff_t>(i), 0),
                                  static_cast<std::ptrdiff_t>(pm), q + i * m, m);
      part_pq[ti] = s;
#pragma omp barrier
      const double alpha = rr_now / ordo::combine_in_order<double>(part_pq);
      s = 0.0;
      for (std::size_t i = lo; i < hi; ++i)
        s += ordo::cg::update_row(x + i * m, r + i * m,
                                  p + pad.at(static_cast<std::ptrdiff_t>(i), 0), q + i * m, alpha,
                                  m);
      part_rr[ti] = s;
#pragma omp barrier
      const double next = ordo::combine_in_order<double>(part_rr);
      const double beta = next / rr_now;
      rr_now = next;
      for (std::size_t i = lo; i < hi; ++i)
        ordo::cg::direction_row(p + pad.at(static_cast<std::ptrdiff_t>(i), 0), r + i * m, beta, m);
      ++k;
      if (ordo::cg::stops(rr_now, rr0, tol)) break;
        // The next q = A p reads the neighbouring slabs' rows of the new p.
#pragma omp barrier
    }
#pragma omp single
    {
      rr = rr_now;
      done = k;
    }
  }
  const double seconds = omp_get_wtime() - start;

  std::string verdict = "skipped";
  if (verify) {
    const ordo::cg::Result want =
        ordo::cg::reference(n, m, static_cast<std::size_t>(threads), 1, tol, iters);
    const bool same = want.iterations == done && std::memcmp(&want.rr, &rr, sizeof rr) == 0 &&
                      std::memcmp(want.x.data(), x, n * m * sizeof(double)) == 0 &&
                      std::isfinite(rr) &&
                      ordo::app::is_finite_result(std::span<const double>(x, n * m));
    verdict = same ? "ok" : "fail";
  }
  fmt::print("app=cg size={} blocks={}x1 iters={} workers={} seconds={:.6f} gstencils={:.4f} "
             "residual={:.6e} verify={} system=openmp\n",
             ordo::app::join_shape(size), threads, done, threads, seconds,
             static_cast<double>(n * m) * static_cast<double>(done) / seconds / 1e9,
             std::sqrt(rr / rr0), verdict);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-omp-cg", [&] { return run(argc, argv); });
}
