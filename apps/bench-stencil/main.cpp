// ordo-bench-stencil: runs one stencil app under every system side by side in one invocation and
// prints gstencils per system and the ratios between them (docs/baselines.md).
//
// Systems, each a separate process so that none shares a heap, thread pool or cache warm-up
// with another (the apps print one result line, parsed by result_line.hpp):
//   ordo     ordo-<app> --workers W               (no temporal blocking)
//   ordo-tb  ordo-<app> --workers W --tb D        (skipped with a reason if the app lacks --tb)
//   openmp   ordo-omp-<app> --workers W
//   mpi      mpirun -n W ordo-mpi-<app>           (this host only: shared memory and loopback)
// and, in this process, a STREAM triad with W threads (stream.hpp), which gives the bandwidth
// bound: a Jacobi sweep must read and write every point once, 16 bytes per point by STREAM's
// counting, so bound_gstencils = triad bytes/s / 16 / 1e9 and bandwidth_fraction = ordo's
// gstencils / bound_gstencils.
//
// With --reps R every system runs R times, round-robin (so background load hits all systems
// alike), and the best run counts. Rounds 1, 3, ... run the systems in the order listed here,
// rounds 2, 4, ... in reverse, so that a load drifting during the invocation favours none (ordo
// ran first in every round before); --dry-run prints each round's order and runs nothing. The
// triad runs in every round too, right after ordo: the memory bandwidth a shared host gives
// moves within seconds (docs/benchmarks.md), so each round's ordo run is held against the
// triad measured next to it, and bandwidth_fraction is the median of those per-round ratios
// (the triad line shows the median triad).
//
// --app lbm runs ordo-lbm (D2Q9 Lattice-Boltzmann, a pipeline stage per step) against
// ordo-omp-lbm: no ordo-tb or MPI system (skipped with the reason); the bound counts the 144
// bytes a step streams per point (nine populations read and written).
// --tol T passes --tol T to ordo and OpenMP (both stop after the same step: the ratios compare
// time per step of runs that check their convergence every step); the MPI baselines take no
// --tol and are skipped then. The new user's case: --app heat2d --size 96x64 --tol 1e-5.
//
// --app cg runs ordo-cg (conjugate gradient, two reductions per iteration) against ordo-omp-cg
// the same way: no ordo-tb or MPI system there (skipped with the reason), and the bound counts
// the 64 bytes per point an iteration of ordo-cg streams (kBytesPerPoint's counting, per sweep:
// p = r + beta p fused with p.(A p) reads r and p and writes p, 24; x += alpha p,
// r -= alpha A p reads x, r and p and writes x and r, 40). OpenMP's three sweeps stream 88:
// q = A p reads p and writes q (16), x += alpha p, r -= alpha q reads four and writes two (48),
// p = r + beta p reads two and writes one (24).
// Two more systems on request, for comparisons across versions and sizes in the same run:
//   --also NAME=BIN   another build of ordo-<app> (an older version, say) with ordo's flags;
//                     prints NAME_vs_openmp and ordo_vs_NAME; when BIN takes --tb, also as
//                     NAME-tb with ordo-tb's depth, printing NAME-tb_vs_openmp and
//                     ordo-tb_vs_NAME-tb
//   --divisible       ordo on the nearest size that --ordo-blocks divides (each extent rounded
//                     to the nearest multiple); prints uneven_vs_divisible, the ratio of
//                     Gstencils/s, i.e. per point
//
// --ranks compares processes with threads instead (ranks.hpp): heat2d as 1 rank x 2 workers,
// 2 ranks x 1 worker under ordorun, and the MPI baseline on 2 ranks; then ordo's halo
// throughput between two ranks (ordo-bench-halo) against ucx_perftest's tag bandwidth.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "ranks.hpp"
#include "result_line.hpp"
#include "stream.hpp"

// In ordo::bench, beside the helpers it uses (bench_process.hpp, bench_numbers.hpp,
// result_line.hpp), which it therefore names unqualified.
namespace ordo::bench {
namespace {

namespace fs = std::filesystem;

constexpr double kBytesPerPoint = 16;  // one read and one write of a double per grid point
constexpr double kCgBytesPerPoint = 64;    // per iteration of ordo-cg (see the top of this file)
constexpr double kLbmBytesPerPoint = 144;  // per step of ordo-lbm: 9 populations in and out

struct System {
  std::string name;                // ordo, ordo-tb, openmp, mpi
  std::vector<std::string> argv;   // empty: skipped
  std::string skip_reason;
  std::optional<AppResult> best;
  std::string failure;             // set when a run failed
};

int run(int argc, char** argv) {
  CLI::App cli{"Runs a stencil app under ordo (with and without temporal blocking), the OpenMP "
               "and MPI baselines and a STREAM triad in one invocation; prints gstencils per "
               "system and the ratios",
               "ordo-bench-stencil"};
  std::string app = "heat2d", size, bin_dir, ordo_blocks, mpirun = "mpirun";
  std::uint64_t iters = 0;
  unsigned workers = 2, tb = 4, reps = 0, timeout_s = 600;
  bool quick = false, ranks = false, divisible = false, dry_run = false;
  std::vector<std::string> also;
  std::string halo_bytes, tol;
  unsigned halo_window = 8;
  double halo_mib = 0;
  cli.add_flag("--ranks", ranks, "compare 2 ranks x 1 worker with 1 rank x 2 workers and MPI "
               "on 2 ranks, then ordo's halo throughput with ucx_perftest (docs/benchmarks.md)");
  cli.add_option("--halo-bytes", halo_bytes, "--ranks: halo message sizes (default "
                 "8192,16384,65536,262144,1048576,4194304; --quick: 8192,65536,1048576)");
  cli.add_option("--halo-window", halo_window, "--ranks: halos in flight in ordo's measurement")
      ->check(ordo::cli::Integer(1, 1024))
      ->capture_default_str();
  cli.add_option("--halo-mib", halo_mib, "--ranks: MiB moved per size and run (default 256; "
                 "--quick: 8)")
      ->check(ordo::cli::Real(0, 1e6));
  cli.add_option("--app", app, "heat2d, heat3d, cg or lbm")->capture_default_str();
  cli.add_option("--tol", tol,
                 "pass --tol T to ordo and OpenMP: they stop on convergence, "
                 "checked every step (--iters is then the most)")
      ->check(ordo::cli::Real(0, 1e300));
  cli.add_option("--size", size,
                 "grid size (default heat2d 8192x8192, heat3d 512x512x512, cg 4096x4096; "
                 "--quick: 3072x3072, 192x192x192, 1024x1024)");
  cli.add_option("--iters", iters, "time steps (default 20 for heat2d and cg, 10 for heat3d, "
                 "rounded up to a multiple of --tb for the heat apps)")
      ->check(ordo::cli::Integer(0, ordo::app::max_iters));
  cli.add_option("--workers", workers, "threads for ordo and OpenMP, ranks for MPI, threads "
                 "for the triad")
      ->check(ordo::cli::Integer(1, ordo::app::max_workers))
      ->capture_default_str();
  cli.add_option("--tb", tb, "temporal-blocking depth of the ordo-tb run")
      ->check(ordo::cli::Integer(1, 1u << 20))
      ->capture_default_str();
  cli.add_option("--reps", reps, "runs per system, best counts (default 3; --quick: 1); "
                 "--ranks: the median counts (default 3, --quick too)")
      ->check(ordo::cli::Integer(0, 1000));
  cli.add_flag("--quick", quick, "small grid and one run per system (well under 40 s)");
  cli.add_option("--bin-dir", bin_dir,
                 "folder holding the app binaries (default: found from this executable)");
  cli.add_option("--ordo-blocks", ordo_blocks, "--blocks passed to the ordo app (default: "
                 "the app's own)");
  cli.add_option("--mpirun", mpirun, "MPI launcher")->capture_default_str();
  cli.add_option("--also", also, "NAME=BIN: run another build of ordo-<app> (an older version) "
                 "as system NAME with ordo's flags; prints NAME_vs_openmp and ordo_vs_NAME")
      ->type_name("NAME=BIN");
  cli.add_flag("--divisible", divisible, "also run ordo on the nearest size that --ordo-blocks "
               "divides; prints uneven_vs_divisible (Gstencils/s, i.e. per point)");
  cli.add_flag("--dry-run", dry_run, "print each round's order of runs (round=R order=...) and "
               "run nothing");
  cli.add_option("--timeout", timeout_s, "seconds after which one run is killed")
      ->check(ordo::cli::Integer(1, 1u << 24))
      ->capture_default_str();
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;

  if (app != "heat2d" && app != "heat3d" && app != "cg" && app != "lbm")
    throw ordo::Error("--app " + app + ": expected heat2d, heat3d, cg or lbm");
  const std::size_t dims = app == "heat3d" ? 3 : 2;
  const bool cg = app == "cg", lbm = app == "lbm";
  if (size.empty())
    size = lbm         ? (quick ? "512x512" : "1024x1024")
           : cg        ? (quick ? "1024x1024" : "4096x4096")
           : dims == 2 ? (quick ? "3072x3072" : "8192x8192")
                       : (quick ? "192x192x192" : "512x512x512");
  ordo::app::parse_shape(size, dims, "--size");  // validates; the apps parse it again
  // Default steps rounded up to whole temporal-blocking groups: a last group of 2 steps at
  // depth 8 moves a whole group's bytes for a quarter of its work, which would charge the
  // ordo-tb run for the choice of step count (heat3d x 10 at D=8: 1.8x OpenMP; x 16: 2.5x).
  if (iters == 0) {
    iters = quick ? 10 : (dims == 2 ? 20 : 10);
    if (!cg && !lbm) iters = (iters + tb - 1) / tb * tb;
  }
  if (lbm && iters % 2 != 0) ++iters;  // ordo-lbm runs its steps in pairs
  if (reps == 0) reps = quick && !ranks ? 1 : 3;
  if (!bin_dir.empty() && !fs::is_directory(bin_dir))
    throw ordo::Error("--bin-dir " + bin_dir + " is not a folder");
  if (ranks) {
    if (dry_run) throw ordo::Error("--dry-run lists the runs of the stencil comparison; not with --ranks");
    if (halo_mib == 0) halo_mib = quick ? 8 : 256;
    if (halo_bytes.empty())
      halo_bytes = quick ? "8192,65536,1048576" : "8192,16384,65536,262144,1048576,4194304";
    halo_sizes(halo_bytes);  // validates
    return run_ranks(RanksOptions{app, size, bin_dir, mpirun, halo_bytes, iters, reps,
                                  timeout_s, halo_window, halo_mib, quick});
  }

  const double bytes_per_point = cg ? kCgBytesPerPoint : lbm ? kLbmBytesPerPoint : kBytesPerPoint;
  // --divisible: each extent rounded to the nearest multiple of its block count (up on a tie).
  std::string divisible_size;
  if (divisible) {
    if (ordo_blocks.empty())
      throw ordo::Error("--divisible needs --ordo-blocks (the block grid whose multiples to use)");
    const auto ext = ordo::app::parse_shape(size, dims, "--size");
    const auto blk = ordo::app::parse_shape(ordo_blocks, dims, "--ordo-blocks");
    std::vector<std::size_t> near(dims);
    for (std::size_t d = 0; d < dims; ++d) {
      const std::size_t down = ext[d] / blk[d] * blk[d];
      near[d] = down == 0 || ext[d] - down >= down + blk[d] - ext[d] ? down + blk[d] : down;
    }
    divisible_size = ordo::app::join_shape(near);
  }
  std::vector<std::pair<std::string, std::string>> also_bins;  // name, binary
  for (const std::string& a : also) {
    const auto eq = a.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == a.size())
      throw ordo::Error("--also " + a + ": give NAME=BIN (a name for the system and the binary "
                        "of ordo-" + app + " to run)");
    const std::string name = a.substr(0, eq), bin = a.substr(eq + 1);
    if (name == "ordo" || name == "ordo-tb" || name == "openmp" || name == "mpi" ||
        name == "ordo-divisible" || name.find_first_of(" =") != std::string::npos)
      throw ordo::Error("--also " + a + ": the name " + name + " is taken or has a space or '='; "
                        "choose another");
    if (access(bin.c_str(), X_OK) != 0)
      throw ordo::Error("--also " + a + ": " + bin + " is not an executable file");
    also_bins.emplace_back(name, bin);
  }

  const std::string w = std::to_string(workers);
  std::vector<std::string> common{"--size", size, "--iters", std::to_string(iters), "--workers", w};
  if (!tol.empty()) common.insert(common.end(), {"--tol", tol});
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<System> systems;
  {
    System ordo_sys{"ordo", {}, {}, {}, {}}, tb_sys{"ordo-tb", {}, {}, {}, {}};
    if (auto bin = find_binary("ordo-" + app, bin_dir)) {
      std::vector<std::string> a = with({bin->string()}, common);
      if (!ordo_blocks.empty()) a = with(a, {"--blocks", ordo_blocks});
      ordo_sys.argv = a;
      CommandOutput help = run_command({bin->string(), "--help"}, 30);
      if (help_lists_flag(help.text, "--tb"))
        tb_sys.argv = with(a, {"--tb", std::to_string(tb)});
      else
        tb_sys.skip_reason = "ordo-" + app + "_has_no_--tb_flag";
    } else {
      ordo_sys.skip_reason = tb_sys.skip_reason = "ordo-" + app + "_not_built";
    }
    systems.push_back(ordo_sys);
    systems.push_back(tb_sys);
    if (divisible) {
      System div{"ordo-divisible", {}, ordo_sys.skip_reason, {}, {}};
      if (!ordo_sys.argv.empty()) {
        div.argv = ordo_sys.argv;
        div.argv[2] = divisible_size;  // after the binary: --size SIZE
      }
      systems.push_back(div);
    }
    for (const auto& [name, bin] : also_bins) {
      std::vector<std::string> a = with({bin}, common);
      if (!ordo_blocks.empty()) a = with(a, {"--blocks", ordo_blocks});
      systems.push_back(System{name, a, {}, {}, {}});
      if (!tb_sys.argv.empty() && help_lists_flag(run_command({bin, "--help"}, 30).text, "--tb"))
        systems.push_back(System{name + "-tb", with(a, {"--tb", std::to_string(tb)}), {}, {}, {}});
    }
  }
  {
    System s{"openmp", {}, {}, {}, {}};
    if (auto bin = find_binary("ordo-omp-" + app, bin_dir))
      s.argv = with({bin->string()}, common);
    else
      s.skip_reason = "ordo-omp-" + app + "_not_built_(no_OpenMP?)";
    systems.push_back(s);
  }
  {
    System s{"mpi", {}, {}, {}, {}};
    auto bin = find_binary("ordo-mpi-" + app, bin_dir);
    auto launcher = find_in_path(mpirun);
    if (!tol.empty()) {
      s.skip_reason = "ordo-mpi-" + app + "_takes_no_--tol";
    } else if (!bin) {
      s.skip_reason = "ordo-mpi-" + app + "_not_built_(no_MPI?)";
    } else if (!launcher) {
      s.skip_reason = mpirun + "_not_found";
    } else {
      set_mpi_environment();
      s.argv = with({launcher->string(), "-n", w, bin->string()}, common);
    }
    systems.push_back(s);
  }

  // The triad, with as many threads as the systems had workers, over 3 arrays of 4 x the
  // last-level cache each (stream.hpp); one per round, paired with that round's ordo run.
  auto measure_triad = [&] {
    return ordo::app::stream_triad(ordo::app::triad_default_elements(), workers, quick ? 5 : 10);
  };
  ordo::app::TriadResult triad;
  std::vector<double> triads, fractions;  // per round
  const std::string head = "bench=stencil app=" + app;
  // The systems take turns, in reverse order every other round (round_order).
  for (unsigned r = 0; r < reps; ++r) {
    std::string order;  // this round's runs, for --dry-run
    for (std::size_t i : round_order(systems.size(), r)) {
      System& s = systems[i];
      if (s.argv.empty() || !s.failure.empty()) continue;
      order += (order.empty() ? "" : ",") + s.name + (s.name == "ordo" ? ",triad" : "");
      if (dry_run) continue;
      CommandOutput out = run_command(s.argv, timeout_s);
      auto res = find_result(out.text, app);
      if (out.status != 0 || !res) {
        s.failure = out.status != 0 ? "rc=" + std::to_string(out.status) : "no_result_line";
        std::fprintf(stderr, "ordo-bench-stencil: %s failed (%s); its last output:\n%s\n",
                     s.name.c_str(), s.failure.c_str(), last_lines(out.text, 8).c_str());
        continue;
      }
      if (!s.best || res->gstencils > s.best->gstencils) s.best = res;
      if (s.name == "ordo") {
        triad = measure_triad();
        triads.push_back(triad.bytes_per_second);
        fractions.push_back(res->gstencils / (triad.bytes_per_second / bytes_per_point / 1e9));
      }
    }
    if (dry_run) fmt::print("{} round={} order={}\n", head, r + 1, order);
  }
  if (dry_run) return 0;
  if (triads.empty()) {  // no ordo run to pair with: the triad alone
    triad = measure_triad();
    triads.push_back(triad.bytes_per_second);
  }
  triad.bytes_per_second = median(triads);
  const double bound_gst = triad.bytes_per_second / bytes_per_point / 1e9;

  bool failed = false;
  auto gst = [&](const std::string& name) -> double {
    for (const System& s : systems)
      if (s.name == name && s.best) return s.best->gstencils;
    return 0;
  };
  for (const System& s : systems) {
    if (s.name == "ordo-tb") continue;  // printed last, with its own ratio
    if (s.best) {
      const auto& f = s.best->fields;
      auto field = [&](const char* k) { return f.count(k) ? f.at(k) : std::string("?"); };
      fmt::print("{} system={} size={} blocks={} iters={} workers={} seconds={} gstencils={}\n",
                 head, s.name, field("size"), field("blocks"), field("iters"), field("workers"),
                 field("seconds"), field("gstencils"));
    } else if (!s.failure.empty()) {
      failed = true;
      fmt::print("{} system={} failed {}\n", head, s.name, s.failure);
    } else {
      fmt::print("{} system={} skipped reason={}\n", head, s.name, s.skip_reason);
    }
  }
  fmt::print("{} system=triad threads={} array_mib={} reps={} gbytes_per_s={:.3f} "
             "bytes_per_point={} bound_gstencils={:.4f}\n",
             head, triad.threads, triad.elements * sizeof(double) >> 20, triads.size(),
             triad.bytes_per_second / 1e9, bytes_per_point, bound_gst);
  const double ordo = gst("ordo"), omp = gst("openmp"), mpi = gst("mpi");
  fmt::print("{} ordo_vs_openmp={}\n", head, format_ratio(ordo, omp));
  fmt::print("{} ordo_vs_mpi={}\n", head, format_ratio(ordo, mpi));
  fmt::print("{} ordo_vs_best_baseline={}\n", head, format_ratio(ordo, std::max(omp, mpi)));
  for (const auto& [name, bin] : also_bins) {
    fmt::print("{} {}_vs_openmp={}\n", head, name, format_ratio(gst(name), omp));
    fmt::print("{} ordo_vs_{}={}\n", head, name, format_ratio(ordo, gst(name)));
    if (gst(name + "-tb") > 0)
      fmt::print("{} tb={} {}-tb_vs_openmp={} ordo-tb_vs_{}-tb={}\n", head, tb, name,
                 format_ratio(gst(name + "-tb"), omp), name,
                 format_ratio(gst("ordo-tb"), gst(name + "-tb")));
  }
  if (divisible)
    fmt::print("{} uneven_vs_divisible={} uneven_size={} divisible_size={} blocks={}\n", head,
               format_ratio(ordo, gst("ordo-divisible")), size, divisible_size, ordo_blocks);
  // Median of the per-round ratios (each ordo run against the triad next to it).
  fmt::print("{} bandwidth_fraction={}\n", head,
             fractions.empty() ? format_ratio(0, bound_gst) : fmt::format("{:.3f}", median(fractions)));
  for (const System& s : systems) {
    if (s.name != "ordo-tb") continue;
    if (s.best) {
      // The app's own counts: under --tol it stops before --iters.
      const auto& f = s.best->fields;
      auto field = [&](const char* k) { return f.count(k) ? f.at(k) : std::string("?"); };
      fmt::print(
          "{} system=ordo-tb tb={} size={} iters={} workers={} seconds={} gstencils={} "
          "ordo_vs_openmp={}\n",
          head, tb, field("size"), field("iters"), field("workers"), field("seconds"),
          field("gstencils"), format_ratio(s.best->gstencils, omp));
    } else if (!s.failure.empty()) {
      failed = true;
      fmt::print("{} system=ordo-tb failed {}\n", head, s.failure);
    } else {
      fmt::print("{} system=ordo-tb skipped reason={}\n", head, s.skip_reason);
    }
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace ordo::bench

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-stencil",
                                 [&] { return ordo::bench::run(argc, argv); });
}
