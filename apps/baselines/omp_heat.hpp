// OpenMP baseline of the heat apps: the textbook `parallel for` Jacobi sweep, written to be a
// fair competitor rather than a strawman.
//  - two ghosted buffers swapped by pointer after each step (no copy-back);
//  - one parallel region for the whole run, one `omp for schedule(static)` per step (its
//    implicit barrier is the step boundary), so no fork/join per step and each thread sweeps
//    the same slab every step, which stays in its cache as far as it fits;
//  - heat2d splits the rows, heat3d the (plane, row) pairs (collapse(2)), so every thread gets
//    an equal share even when planes are few;
//  - the inner loop is a contiguous row on __restrict pointers, which GCC vectorises;
//  - the buffers are first touched by the same static partition (NUMA placement);
//  - --tol T: each step's largest change through `omp for reduction(max:)`, tested by every
//    thread after the loop's barrier (three slots in turn, so that one thread's reset of the
//    slot after next never races a read or a combine of another's: no extra barrier).
#pragma once

#include <omp.h>

#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "baseline_common.hpp"
#include "heat_reference.hpp"

namespace ordo::baseline {

template <int D>
int omp_heat_main(int argc, char** argv) {
  const std::string name = std::string("ordo-omp-") + app_name<D>();
  CLI::App cli{std::string("OpenMP parallel-for baseline of ordo-") + app_name<D>() +
                   " (same kernel, same result line)",
               name};
  Options o;
  Flags f;
  add_flags<D>(cli, o, f, "OpenMP threads (default: OMP_NUM_THREADS, else all cores)", "");
  double tol = -1;
  auto* tol_opt = cli.add_option("--tol", tol,
                                 "stop after the first step whose largest change "
                                 "is at most T (--iters is then the most steps)")
                      ->check(cli::Real(0, 1e300));
  if (int rc = cli::parse(cli, argc, argv); rc >= 0) return rc;
  finish_flags<D>(o, f);
  check_grids_fit<D>(o, f);
  const int threads = o.workers ? static_cast<int>(o.workers) : omp_get_max_threads();
  omp_set_dynamic(0);

  std::array<std::size_t, D> ext{};
  std::copy_n(o.size.begin(), D, ext.begin());
  const Grid<D> g(ext);
  std::unique_ptr<double[]> ubuf, vbuf;
  try {
    ubuf.reset(new double[g.total]);
    vbuf.reset(new double[g.total]);
  } catch (const std::bad_alloc&) {
    throw Error("--size " + app::join_shape(o.size) + " needs two grids of " +
                std::to_string(g.total * sizeof(double) >> 20) +
                " MiB each, which this machine could not allocate; use a smaller --size");
  }
  double* u = ubuf.get();
  double* v = vbuf.get();
  const std::size_t planes = ext[0] + 2, plane = g.stride[0];
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::size_t p = 0; p < planes; ++p) {
    const double value = p == 0 ? app::kHeatTop : app::kHeatOther;
    std::fill(u + p * plane, u + (p + 1) * plane, value);
    std::fill(v + p * plane, v + (p + 1) * plane, value);
  }

  const bool until = tol_opt->count() > 0;
  std::uint64_t iters = o.iters;
  double change[3] = {0, 0, 0};
  std::uint64_t ran = iters;
  const double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  {
    double* a = u;  // per-thread copies, swapped in step by every thread
    double* b = v;
    for (std::uint64_t it = 0; it < iters; ++it) {
      if (until) {
        const std::size_t k = it % 3;
        if constexpr (D == 2) {
#pragma omp for schedule(static) reduction(max : change [k:1])
          for (std::size_t i = 1; i <= ext[0]; ++i)
            change[k] =
                std::max(change[k], update_run_change<D>(g, a, b, i * g.stride[0], 1, ext[1]));
        } else {
#pragma omp for collapse(2) schedule(static) reduction(max : change [k:1])
          for (std::size_t i = 1; i <= ext[0]; ++i)
            for (std::size_t j = 1; j <= ext[1]; ++j)
              change[k] = std::max(
                  change[k],
                  update_run_change<D>(g, a, b, i * g.stride[0] + j * g.stride[1], 1, ext[2]));
        }
        std::swap(a, b);
        // Slot it+2 was last read before this step's barrier and is next combined after the
        // next one.
#pragma omp master
        change[(it + 2) % 3] = 0;
        if (change[k] <= tol) {
#pragma omp master
          ran = it + 1;
          break;
        }
        continue;
      }
      if constexpr (D == 2) {
#pragma omp for schedule(static)
        for (std::size_t i = 1; i <= ext[0]; ++i)
          update_run<D>(g, a, b, i * g.stride[0], 1, ext[1]);
      } else {
#pragma omp for collapse(2) schedule(static)
        for (std::size_t i = 1; i <= ext[0]; ++i)
          for (std::size_t j = 1; j <= ext[1]; ++j)
            update_run<D>(g, a, b, i * g.stride[0] + j * g.stride[1], 1, ext[2]);
      }
      // The implicit barrier of `omp for` ends the step: everyone has written b.
      std::swap(a, b);
    }
  }
  const double seconds = omp_get_wtime() - start;
  iters = ran;
  const double* result = iters % 2 == 0 ? u : v;

  std::string verdict = "skipped";
  if (o.verify) {
    std::vector<double> want;
    app::StopTest stop{until ? tol : -1, 1, 0};
    if constexpr (D == 2)
      want = app::reference_heat2d(ext[0], ext[1], o.iters, {}, &stop);
    else
      want = app::reference_heat3d(ext[0], ext[1], ext[2], o.iters, {}, &stop);
    std::vector<double> got = interior<D>(g, result);
    verdict = stop.steps == iters &&
                      std::memcmp(got.data(), want.data(), got.size() * sizeof(double)) == 0 &&
                      app::is_finite_result(got)
                  ? "ok"
                  : "fail";
  }
  std::vector<std::size_t> blocks(D, 1);
  blocks[0] = static_cast<std::size_t>(threads);  // static slabs along dimension 0
  print_result(app_name<D>(), o.size, blocks, iters, static_cast<unsigned>(threads), seconds,
               verdict, "openmp", {app::peak_rss_bytes()});
  return verdict == "fail" ? 1 : 0;
}

}  // namespace ordo::baseline
