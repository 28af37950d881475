// ordo-omp-lbm: OpenMP parallel-for baseline of ordo-lbm (apps/common/lbm.hpp), written as the
// heat baselines are (omp_heat.hpp): two sets of nine population arrays swapped by pointer
// after each step, one parallel region for the whole run and one `omp for schedule(static)`
// over the rows per step, the interior of each row through the same vectorisable lbm::row as
// ordo's kernel, the rows and columns beside a wall point by point. --tol: every second step's
// largest change through `reduction(max:)`, three slots in turn (omp_heat.hpp says why).
#include <omp.h>

#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "baseline_common.hpp"
#include "lbm_cli.hpp"

namespace {

namespace lbm = ordo::app::lbm;
using lbm::kQ;

// One step of row r from f into g; returns the row's largest change when track.
double step_row(const lbm::Problem& p, double* const (&f)[kQ], double* const (&g)[kQ],
                std::ptrdiff_t r, bool track) {
  const std::ptrdiff_t nx = p.nx;
  auto at = [&](int i, std::ptrdiff_t rr, std::ptrdiff_t cc) { return f[i][rr * nx + cc]; };
  double big = 0;
  auto point = [&](std::ptrdiff_t c) {
    double fs[kQ], out[kQ], ux, uy;
    lbm::pull(at, p.ny, p.nx, r, c, p.lid, fs);
    lbm::collide(fs, p.omega, out, ux, uy);
    for (int i = 0; i < kQ; ++i) g[i][r * nx + c] = out[i];
    if (track) {
      double here[kQ];
      for (int i = 0; i < kQ; ++i) here[i] = f[i][r * nx + c];
      const double ch = lbm::change(here, ux, uy);
      big = big < ch ? ch : big;
    }
  };
  if (r == 0 || r == p.ny - 1 || nx < 3) {
    for (std::ptrdiff_t c = 0; c < nx; ++c) point(c);
    return big;
  }
  point(0);
  const double* in[kQ];
  double* out[kQ];
  for (int i = 0; i < kQ; ++i) {
    in[i] = f[i] + r * nx + 1;
    out[i] = g[i] + r * nx + 1;
  }
  const auto n = static_cast<std::size_t>(nx - 2);
  const double m =
      track ? lbm::row<true>(in, out, nx, n, p.omega) : lbm::row<false>(in, out, nx, n, p.omega);
  big = big < m ? m : big;
  point(nx - 1);
  return big;
}

int run(int argc, char** argv) {
  CLI::App cli{"OpenMP parallel-for baseline of ordo-lbm (same kernel, same result line)",
               "ordo-omp-lbm"};
  std::string size_text = "256x256";
  std::uint64_t iters = 1000;
  unsigned workers = 0;
  bool verify = false;
  lbm::Problem pb;
  cli.add_option("--size", size_text, "grid size NxM (rows x columns)")->capture_default_str();
  CLI::Option* tol_opt = lbm::add_model_flags(cli, pb, iters);
  cli.add_option("--workers", workers, "OpenMP threads (default: OMP_NUM_THREADS, else all cores)")
      ->check(ordo::cli::Integer(0, ordo::app::max_workers));
  cli.add_flag("--verify", verify, "compare bit for bit with a sequential loop");
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  lbm::finish_model_flags(pb, iters, tol_opt);
  const bool until = pb.tol >= 0;
  const std::vector<std::size_t> size = ordo::app::parse_shape(size_text, 2, "--size");
  ordo::app::check_grid_fits(size, verify ? 36 : 18, "--size " + size_text);
  pb.ny = static_cast<std::ptrdiff_t>(size[0]);
  pb.nx = static_cast<std::ptrdiff_t>(size[1]);
  const int threads = workers ? static_cast<int>(workers) : omp_get_max_threads();
  omp_set_dynamic(0);

  const std::size_t n = size[0] * size[1];
  std::unique_ptr<double[]> buf;
  try {
    buf.reset(new double[2 * kQ * n]);
  } catch (const std::bad_alloc&) {
    throw ordo::Error("--size " + size_text + " needs 18 grids of " +
                      std::to_string(n * sizeof(double) >> 20) +
                      " MiB each, which this machine could not allocate; use a smaller --size");
  }
  double* fa[kQ];
  double* ga[kQ];
  for (int i = 0; i < kQ; ++i) {
    fa[i] = buf.get() + static_cast<std::size_t>(i) * n;
    ga[i] = buf.get() + static_cast<std::size_t>(kQ + i) * n;
  }
  // First touch by the same static partition of the rows as the steps.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::ptrdiff_t r = 0; r < pb.ny; ++r)
    for (int i = 0; i < kQ; ++i) {
      std::fill(fa[i] + r * pb.nx, fa[i] + (r + 1) * pb.nx, lbm::initial(i));
      std::fill(ga[i] + r * pb.nx, ga[i] + (r + 1) * pb.nx, 0.0);
    }

  double change[3] = {0, 0, 0};
  std::uint64_t ran = iters;
  const double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  {
    double* f[kQ];
    double* g[kQ];
    std::copy_n(fa, kQ, f);
    std::copy_n(ga, kQ, g);
    for (std::uint64_t it = 0; it < iters; ++it) {
      const bool track = until && it % 2 == 1;
      if (track) {
        const std::size_t k = it % 3;
#pragma omp for schedule(static) reduction(max : change [k:1])
        for (std::ptrdiff_t r = 0; r < pb.ny; ++r)
          change[k] = std::max(change[k], step_row(pb, f, g, r, true));
      } else {
#pragma omp for schedule(static)
        for (std::ptrdiff_t r = 0; r < pb.ny; ++r) step_row(pb, f, g, r, false);
      }
      std::swap(f, g);
      if (!track) continue;
#pragma omp master
      change[(it + 2) % 3] = 0;
      if (change[it % 3] <= pb.tol) {
#pragma omp master
        ran = it + 1;
        break;
      }
    }
  }
  const double seconds = omp_get_wtime() - start;
  double* const* result = ran % 2 == 0 ? fa : ga;

  std::string verdict = "skipped";
  if (verify) {
    const lbm::Result want = lbm::reference(pb);
    bool same = want.steps == ran;
    for (int i = 0; i < kQ && same; ++i)
      same = std::memcmp(want.f[static_cast<std::size_t>(i)].data(), result[i],
                         n * sizeof(double)) == 0;
    verdict = same ? "ok" : "fail";
  }
  ordo::baseline::print_result("lbm", size, {static_cast<std::size_t>(threads), 1}, ran,
                               static_cast<unsigned>(threads), seconds, verdict, "openmp",
                               {ordo::app::peak_rss_bytes()});
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-omp-lbm", [&] { return run(argc, argv); });
}
