// ordo-bench-until: what a convergence check costs (docs/convergence.md), against what the
// same check costs in OpenMP and MPI, measured in one run and printed as ratios
// (docs/benchmarks.md, "Convergence checks"). Four cases (--case, default all):
//   small   one process, --workers (2): a graph of one task per worker, each updating 64
//           doubles and contributing their sum to one reduction, checked every iteration in the
//           dataflow (Until::reads), between iterations (no reads) and not at all, against an
//           OpenMP `parallel for reduction(+)` over the same work plus the test;
//   ranks   2 local ranks under ordorun (1 worker each, one task per rank): ordo's checked and
//           plain iterations, the check's cost (their difference), against MPI_Allreduce of
//           8 bytes on 2 ranks under mpirun (ordo-bench-until-mpi);
//   jacobi  Jacobi on 96x64 to a tolerance, checked every iteration, on the Graph API (one row
//           block per worker; the docs/convergence.md example's graph) against OpenMP;
//   cg      ordo-cg --tol against ordo-omp-cg on 256^2 and 4096^2 (--cg-sizes).
// The systems of a case alternate (in reverse every other round: round_order), --reps rounds,
// medians. Output, key=value lines:
//   bench=until what=small system=S workers=W iterations=N us_per_iteration=X
//   bench=until what=small checked_vs_openmp=R between_vs_openmp=R plain_vs_openmp=R
//   bench=until what=ranks ranks=2 us_plain=X us_checked=X us_per_check=X
//   bench=until what=ranks mpi_allreduce_us=X per_check_vs_allreduce=R checked_vs_allreduce=R
//   bench=until what=jacobi system=S size=96x64 iterations=N seconds=X
//   bench=until what=jacobi ordo_vs_openmp=R (time over time: below 1 is faster)
//   bench=until what=cg size=N system=S iterations=N seconds=X
//   bench=until what=cg size=N ordo_speed_vs_openmp=R (OpenMP's time over ordo's)
// With --child ranks it is one rank of the ranks case (run under ordorun by the parent).
// Exit status: 0 ok, 1 a system computed other bits or failed, 2 bad command line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <ordo/ordo.hpp>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "omp.hpp"
#include "until_kernels.hpp"

namespace {

namespace ub = ordo::bench::until;
using ordo::bench::format_ratio;
using ordo::bench::median;
using ordo::bench::round_order;

// The small graph: one task per contribution, each updating its own 64 doubles.
struct Small {
  ordo::Graph g;
  std::vector<ordo::Location<double>> x;
  ordo::Reduction<double> sum;
  Small(std::uint32_t tasks, unsigned ranks) {
    x = g.location_family<double>("x", tasks, ub::kSmallWidth);
    if (ranks > 1)
      for (std::uint32_t t = 0; t < tasks; ++t) g.set_home_rank(x[t], t % ranks);
    sum = g.reduction<double>("sum", tasks);
    g.task_family(
        "step", tasks,
        [&](std::uint32_t t, ordo::AccessList& acc) {
          acc.add(ordo::write(x[t]));
          acc.add(ordo::contribute(sum, t));
        },
        [x = x, sum = sum](ordo::Context& ctx, std::uint32_t t) {
          ctx.contribute(sum, t, ub::small_step(ctx.write(x[t]).data(), ub::kSmallWidth));
        });
    g.combine(sum);
  }
};

enum class Check { dataflow, between, none };
const char* name_of(Check c) {
  return c == Check::dataflow  ? "ordo-checked"
         : c == Check::between ? "ordo-between"
                               : "ordo-plain";
}

// Seconds of `iterations` iterations of `s` checked as `c` (the condition never holds).
double run_small(ordo::Runtime& rt, Small& s, Check c, std::uint64_t iterations) {
  if (c == Check::none) return rt.run(s.g, iterations).seconds;
  ordo::Until until;
  until.done = [sum = s.sum](const ordo::Graph& g) { return g.value(sum) < 0; };
  until.max_iterations = iterations;
  if (c == Check::dataflow) until.reads = {ordo::read(s.sum)};
  const ordo::RunStats st = rt.run_until(s.g, until);
  if (st.iterations != iterations) throw ordo::Error("the small graph stopped early");
  return st.seconds;
}

int case_small(unsigned workers, std::uint64_t iters, unsigned reps) {
  ordo::Runtime rt({.workers = workers});
  Small s(workers, 1);
  run_small(rt, s, Check::dataflow, iters / 10 + 1);  // warm-up: storage, placement, pages
  const std::vector<Check> ordo_checks{Check::dataflow, Check::between, Check::none};
  std::vector<std::vector<double>> us(4);  // the three ordo forms, then OpenMP
  for (unsigned r = 0; r < reps; ++r)
    for (std::size_t i : round_order(4, r)) {
      const double seconds =
          i < 3 ? run_small(rt, s, ordo_checks[i], iters) : ub::omp_small(workers, iters).seconds;
      us[i].push_back(seconds / static_cast<double>(iters) * 1e6);
    }
  for (std::size_t i = 0; i < 4; ++i)
    fmt::print(
        "bench=until what=small system={} workers={} iterations={} us_per_iteration={:.4f}\n",
        i < 3 ? name_of(ordo_checks[i]) : "openmp", workers, iters, median(us[i]));
  const double omp = median(us[3]);
  fmt::print(
      "bench=until what=small checked_vs_openmp={} between_vs_openmp={} plain_vs_openmp={}\n",
      format_ratio(median(us[0]), omp), format_ratio(median(us[1]), omp),
      format_ratio(median(us[2]), omp));
  return 0;
}

// One rank of the ranks case: prints rank 0's medians.
int child_ranks(std::uint64_t iters, unsigned reps) {
  ordo::Runtime rt({.workers = 1});
  Small s(rt.ranks(), rt.ranks());
  run_small(rt, s, Check::dataflow, iters / 10 + 1);
  const std::vector<Check> forms{Check::dataflow, Check::none, Check::between};
  std::vector<std::vector<double>> us(3);
  for (unsigned r = 0; r < reps; ++r)
    for (std::size_t i : round_order(3, r))
      us[i].push_back(run_small(rt, s, forms[i], iters) / static_cast<double>(iters) * 1e6);
  if (rt.rank() == 0)
    fmt::print("child us_checked={:.4f} us_plain={:.4f} us_between={:.4f}\n", median(us[0]),
               median(us[1]), median(us[2]));
  return 0;
}

std::optional<double> field(const std::string& text, const std::string& key) {
  const std::regex re(key + "=([0-9.eE+-]+)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return std::stod(m[1]);
}

int case_ranks(const std::string& bin_dir, const std::string& mpirun, std::uint64_t iters,
               unsigned reps) {
  const auto ordorun = ordo::bench::find_ordorun(bin_dir);
  const auto mpi_bin = ordo::bench::find_binary("ordo-bench-until-mpi", bin_dir);
  const auto launcher = ordo::bench::find_in_path(mpirun);
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::vector<double> checked, plain, between, allreduce;
  int status = 0;
  ordo::bench::set_mpi_environment();
  for (unsigned r = 0; r < reps; ++r)
    for (std::size_t i : round_order(2, r)) {
      if (i == 0 && ordorun) {
        const auto out = ordo::bench::run_command(
            {ordorun->string(), "--timeout", "300", "-n", "2", self, "--child", "ranks", "--iters",
             std::to_string(iters), "--reps", "1"},
            330);
        const auto c = field(out.text, "us_checked"), p = field(out.text, "us_plain"),
                   b = field(out.text, "us_between");
        if (out.status != 0 || !c || !p || !b) {
          fmt::print("# bench=until what=ranks: ordo failed: {}\n",
                     ordo::bench::last_lines(out.text, 5));
          status = 1;
          continue;
        }
        checked.push_back(*c);
        plain.push_back(*p);
        between.push_back(*b);
      }
      if (i == 1 && mpi_bin && launcher) {
        const auto out = ordo::bench::run_command(
            {launcher->string(), "-n", "2", mpi_bin->string(), std::to_string(iters * 10)}, 300);
        if (const auto us = field(out.text, "us_per_call"); out.status == 0 && us)
          allreduce.push_back(*us);
      }
    }
  if (!ordorun) fmt::print("# bench=until what=ranks: ordorun not found, ordo skipped\n");
  if (!mpi_bin || !launcher)
    fmt::print("# bench=until what=ranks: ordo-bench-until-mpi or {} not found, MPI skipped\n",
               mpirun);
  const double c = median(checked), p = median(plain), a = median(allreduce);
  fmt::print(
      "bench=until what=ranks ranks=2 us_plain={:.4f} us_checked={:.4f} us_per_check={:.4f} "
      "us_between={:.4f}\n",
      p, c, c - p, median(between));
  fmt::print(
      "bench=until what=ranks mpi_allreduce_us={:.4f} per_check_vs_allreduce={} "
      "checked_vs_allreduce={} between_vs_allreduce={}\n",
      a, format_ratio(c - p, a), format_ratio(c, a), format_ratio(median(between) - p, a));
  return status;
}

// Jacobi on the Graph API: the docs/convergence.md example's graph, one row block per worker.
// A block's sweep reads its neighbours' edge rows, which their export tasks, later in program
// order, write from the new rows: the sweep sees the previous iteration's, as Jacobi needs.
struct Jacobi {
  ordo::Graph g;
  std::vector<ordo::Location<double>> u, edge;  // edge[b]: block b's first row, then its last
  ordo::Reduction<double> change;
  Jacobi(std::size_t n, std::size_t m, std::uint32_t blocks) {
    auto rows = [=](std::uint32_t b) {
      return ub::block_row(b + 1, n, blocks) - ub::block_row(b, n, blocks);
    };
    u = g.location_family<double>("u", blocks, [=](std::uint32_t b) { return rows(b) * m; });
    edge = g.location_family<double>("edge", blocks, 2 * m);
    change = g.reduction<double>("change", blocks, ordo::Max{});
    g.task_family(
        "sweep", blocks,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(u[b]));
          if (b > 0) acc.add(ordo::read(edge[b - 1]));
          if (b + 1 < blocks) acc.add(ordo::read(edge[b + 1]));
          acc.add(ordo::contribute(change, b));
        },
        [u = u, edge = edge, change = change, m, blocks, rows](ordo::Context& ctx,
                                                               std::uint32_t b) {
          const std::size_t h = rows(b);
          const auto mine = ctx.write(u[b]);
          const double* above = b > 0 ? &ctx.read(edge[b - 1])[m] : nullptr;
          const double* below = b + 1 < blocks ? ctx.read(edge[b + 1]).data() : nullptr;
          thread_local std::vector<double> old;
          old.assign(mine.begin(), mine.end());
          double most = 0;
          for (std::size_t i = 0; i < h; ++i)
            most = std::fmax(
                most, ub::jacobi_row(i > 0 ? &old[(i - 1) * m] : above, &old[i * m],
                                     i + 1 < h ? &old[(i + 1) * m] : below, &mine[i * m], m));
          ctx.contribute(change, b, most);
        });
    g.combine(change);
    g.task_family(
        "export", blocks,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(edge[b]));
          acc.add(ordo::read(u[b]));
        },
        [u = u, edge = edge, m, rows](ordo::Context& ctx, std::uint32_t b) {
          const auto in = ctx.read(u[b]);
          const auto out = ctx.write(edge[b]);
          std::copy_n(in.begin(), m, out.begin());
          std::copy_n(in.begin() + static_cast<std::ptrdiff_t>((rows(b) - 1) * m), m,
                      out.begin() + static_cast<std::ptrdiff_t>(m));
        });
  }
};

int case_jacobi(unsigned workers, std::size_t n, std::size_t m, double tol, unsigned reps) {
  ordo::Runtime rt({.workers = workers});
  std::vector<double> ordo_s, omp_s;
  std::uint64_t ordo_iters = 0, omp_iters = 0;
  double ordo_sum = 0, omp_sum = 0;
  for (unsigned r = 0; r < reps; ++r)
    for (std::size_t i : round_order(2, r)) {
      if (i == 0) {
        Jacobi j(n, m, workers);
        ordo::Until until{.done = [&](const ordo::Graph& g) { return g.value(j.change) <= tol; },
                          .max_iterations = 1000000,
                          .reads = {ordo::read(j.change)}};
        const ordo::RunStats st = rt.run_until(j.g, until);
        ordo_s.push_back(st.seconds);
        ordo_iters = st.iterations;
        ordo_sum = 0;
        for (auto loc : j.u)
          for (double x : j.g.data(loc)) ordo_sum += x;
      } else {
        const ub::OmpResult o = ub::omp_jacobi(workers, n, m, tol, 1000000);
        omp_s.push_back(o.seconds);
        omp_iters = o.iterations;
        omp_sum = o.checksum;
      }
    }
  const std::string size = std::to_string(n) + "x" + std::to_string(m);
  fmt::print(
      "bench=until what=jacobi system=ordo size={} workers={} iterations={} seconds={:.6f}\n", size,
      workers, ordo_iters, median(ordo_s));
  fmt::print(
      "bench=until what=jacobi system=openmp size={} workers={} iterations={} seconds={:.6f}\n",
      size, workers, omp_iters, median(omp_s));
  // The largest change is the same whatever the order, so the runs stop alike; the sums are
  // of the same grid (summed in another order: close, not equal bits).
  const bool same =
      ordo_iters == omp_iters && std::fabs(ordo_sum - omp_sum) <= 1e-9 * std::fabs(omp_sum);
  fmt::print("bench=until what=jacobi ordo_vs_openmp={} same_result={}\n",
             format_ratio(median(ordo_s), median(omp_s)), same ? "yes" : "no");
  return same ? 0 : 1;
}

int case_cg(const std::string& bin_dir, unsigned workers, const std::vector<std::size_t>& sizes,
            unsigned reps, bool quick) {
  const auto cg = ordo::bench::find_binary("ordo-cg", bin_dir);
  const auto omp = ordo::bench::find_binary("ordo-omp-cg", bin_dir);
  if (!cg || !omp) {
    fmt::print("# bench=until what=cg: ordo-cg or ordo-omp-cg not found, skipped\n");
    return 0;
  }
  int status = 0;
  for (std::size_t size : sizes) {
    const std::string s = std::to_string(size) + "x" + std::to_string(size);
    // A tolerance reached within the iterations at the small size; at the large one the cap.
    const std::string iters = size <= 1024 ? "2000" : (quick ? "5" : "20");
    const std::vector<std::string> common{"--size",  s,     "--tol",     "1e-8",
                                          "--iters", iters, "--workers", std::to_string(workers)};
    std::vector<std::string> ordo_argv{cg->string(), "--blocks", std::to_string(workers) + "x1"};
    ordo_argv.insert(ordo_argv.end(), common.begin(), common.end());
    std::vector<std::string> omp_argv{omp->string()};
    omp_argv.insert(omp_argv.end(), common.begin(), common.end());
    std::vector<double> t[2];
    std::optional<double> it[2];
    for (unsigned r = 0; r < reps; ++r)
      for (std::size_t i : round_order(2, r)) {
        const auto out = ordo::bench::run_command(i == 0 ? ordo_argv : omp_argv, 600);
        const auto sec = field(out.text, "seconds"), n = field(out.text, "iters");
        if (out.status != 0 || !sec || !n) {
          fmt::print("# bench=until what=cg size={}: {} failed: {}\n", s,
                     i == 0 ? "ordo" : "openmp", ordo::bench::last_lines(out.text, 3));
          status = 1;
          continue;
        }
        t[i].push_back(*sec);
        it[i] = *n;
      }
    for (std::size_t i = 0; i < 2; ++i)
      fmt::print(
          "bench=until what=cg size={} system={} workers={} iterations={:.0f} seconds={:.6f}\n", s,
          i == 0 ? "ordo" : "openmp", workers, it[i].value_or(0), median(t[i]));
    // The same slabs (workers x 1 blocks), so the same dot products and iteration count.
    if (it[0] != it[1]) status = 1;
    fmt::print("bench=until what=cg size={} ordo_speed_vs_openmp={} same_iterations={}\n", s,
               format_ratio(median(t[1]), median(t[0])), it[0] == it[1] ? "yes" : "no");
  }
  return status;
}

int run(int argc, char** argv) {
  CLI::App cli{"What a convergence check costs: ordo against OpenMP and MPI", "ordo-bench-until"};
  std::string which = "all", child, bin_dir, mpirun = "mpirun", cg_sizes = "256,4096";
  unsigned workers = 2, reps = 5;
  std::uint64_t iters = 20000;
  bool quick = false;
  double tol = 1e-5;
  cli.add_option("--case", which, "small, ranks, jacobi, cg or all")
      ->check(CLI::IsMember({"small", "ranks", "jacobi", "cg", "all"}))
      ->capture_default_str();
  cli.add_option("--workers", workers, "workers (threads) of the one-process cases")
      ->check(ordo::cli::Integer(1, 256))
      ->capture_default_str();
  cli.add_option("--reps", reps, "rounds; the systems alternate in each")
      ->check(ordo::cli::Integer(1, 1000))
      ->capture_default_str();
  cli.add_option("--iters", iters, "iterations of the small and ranks cases")
      ->check(ordo::cli::Integer(10, 100000000))
      ->capture_default_str();
  cli.add_option("--tol", tol, "the Jacobi case's tolerance on the largest change")
      ->check(ordo::cli::Real(1e-15, 1))
      ->capture_default_str();
  cli.add_option("--cg-sizes", cg_sizes, "grid sides of the cg case")->capture_default_str();
  cli.add_option("--bin-dir", bin_dir, "where ordorun, ordo-cg and the baselines are");
  cli.add_option("--mpirun", mpirun, "the MPI launcher")->capture_default_str();
  cli.add_flag("--quick", quick, "a short run (fewer iterations and rounds)");
  cli.add_option("--child", child, "internal: one rank of the ranks case")
      ->check(CLI::IsMember({"ranks"}));
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  if (!child.empty()) return child_ranks(iters, reps);
  if (quick) {
    iters = std::min<std::uint64_t>(iters, 2000);
    reps = std::min(reps, 2u);
    if (cg_sizes == "256,4096") cg_sizes = "256,1024";
  }
  const std::vector<std::size_t> sizes =
      ordo::bench::parse_size_list(cg_sizes, "--cg-sizes", {.min = 2, .max = 65536});
  fmt::print("bench=until load_average={}\n", ordo::bench::load_average());
  int status = 0;
  if (which == "small" || which == "all") status |= case_small(workers, iters, reps);
  if (which == "ranks" || which == "all") status |= case_ranks(bin_dir, mpirun, iters / 4, reps);
  if (which == "jacobi" || which == "all") status |= case_jacobi(workers, 96, 64, tol, reps);
  if (which == "cg" || which == "all") status |= case_cg(bin_dir, workers, sizes, reps, quick);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-until", [&] { return run(argc, argv); });
}
