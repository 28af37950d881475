// ordo-bench-tasks: per-task overhead of ordo against peer task runtimes, measured side by
// side in one run (docs/benchmarks.md explains the patterns and how to read the output).
//
// For each thread count, each system is started (untimed), runs every pattern `reps` times
// after one untimed warm-up run, and is shut down before the next system starts, so that no
// two systems' threads compete. A measurement is the median over the repetitions. Output, one
// line per measurement and one summary line per pattern:
//   bench=tasks system=S pattern=P threads=T tasks=N ns_per_task=X
//   bench=tasks pattern=P ordo_vs_best_peer=R
// R is ordo's ns/task divided by the best peer's, taken at the thread count where that ratio
// is worst (R < 1: ordo is faster than every peer at every thread count). Lines starting with
// '#' are comments for humans: skipped systems, reduced repetitions, the CPU time per task
// under each measurement (what load on the machine does not inflate), the ratios per
// thread count, on wall and on CPU time, and the measurements of system ordo-pertask (ordo
// with one Graph::task call per task instead of one Graph::task_family call; not a peer, so
// outside the ratios).
// Exit status: 0 ok, 1 a system computed a wrong result, 2 bad command line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "bench.hpp"
#include "metg_driver.hpp"

namespace ordo::bench {
namespace {

struct SystemEntry {
  const char* name;
  std::unique_ptr<System> (*make)(unsigned threads);
  const char* missing;  // why there is no factory, or nullptr
  bool comment = false;  // an alternative form of ordo: printed as '#' lines, never a peer
};

const std::vector<SystemEntry>& all_systems() {
  static const std::vector<SystemEntry> systems = {
      {"ordo", make_ordo, nullptr},
      {"ordo-pertask", make_ordo_pertask, nullptr, true},
#if ORDO_BENCH_HAVE_OMP
      {"omp", make_omp, nullptr},
#else
      {"omp", nullptr, "built without OpenMP: meson found no OpenMP support in the compiler"},
#endif
#if ORDO_BENCH_HAVE_TBB
      {"tbb", make_tbb, nullptr},
#else
      {"tbb", nullptr, "built without oneTBB: install libtbb-dev and reconfigure (meson setup "
                       "--reconfigure build)"},
#endif
#if ORDO_BENCH_HAVE_STARPU
      {"starpu", make_starpu, nullptr},
#else
      {"starpu", nullptr, "built without StarPU: install libstarpu-dev (pkg-config starpu-1.3) "
                          "and reconfigure (meson setup --reconfigure build)"},
#endif
  };
  return systems;
}

const char* kFooter = R"(What is timed, for every system: creating the pattern's tasks (and data), executing them,
and freeing what they used, from the first task's creation until everything is done. For
ordo that is building the ordo::Graph (locations and tasks) plus Runtime::run plus destroying
the Graph; the Runtime (worker threads) is created once per thread count and not timed, as
are OpenMP's thread team, the TBB arena and starpu_init.

Patterns (the same tasks and dependencies in every system; results are checked against a
sequential run, and a wrong result fails the benchmark with exit status 1):
  independent  10^6 tasks without dependencies (each increments its own counter)
  chain        10^5 tasks that each write the same location, in order
  stencil1d    64 tiles x 1000 iterations; task i reads tiles i-1, i, i+1, writes tile i

Output: bench=tasks system=S pattern=P threads=T tasks=N ns_per_task=X per measurement
(median of --reps runs), then bench=tasks pattern=P ordo_vs_best_peer=R per pattern, where R is
ordo's ns/task over the best peer's at the worst thread count (R < 1: ordo is fastest).
--busy instead measures how much of two workers' time ordo spends inside ~100 us task bodies.)";

int run(int argc, char** argv) {
  CLI::App cli("ordo-bench-tasks: task overhead of ordo, OpenMP tasks, oneTBB flow graph and "
               "StarPU, measured in the same run",
               "ordo-bench-tasks");
  cli.footer(kFooter);
  bool quick = false, busy = false, verify = false;
  std::optional<unsigned> reps_opt;
  std::vector<unsigned> threads = {1, 2};
  std::vector<std::string> pattern_names = {"independent", "chain", "stencil1d"};
  std::vector<std::string> system_names = {"ordo", "ordo-pertask", "omp", "tbb", "starpu"};
  double busy_us = 100;
  double budget = 20;
  std::uint32_t busy_iterations = 0;
  cli.add_flag("--quick", quick, "reduced sizes and 3 repetitions: the whole run takes < 30 s");
  cli.add_option("--reps", reps_opt, "repetitions per measurement, median reported (default 5, "
                                     "3 with --quick)")
      ->check(cli::Integer(1, 1000));
  cli.add_option("--budget", budget,
                 "seconds of repetitions per measurement: fewer repetitions (at least one, "
                 "the warm-up run if it alone took longer) when runs are slow")
      ->check(cli::Real(0, 1e6))
      ->capture_default_str();
  cli.add_option("--threads", threads, "thread counts to measure")
      ->delimiter(',')
      ->check(cli::Integer(1, 1024))
      ->capture_default_str();
  cli.add_option("--patterns", pattern_names, "patterns to measure")
      ->delimiter(',')
      ->check(CLI::IsMember({"independent", "chain", "stencil1d"}))
      ->capture_default_str();
  cli.add_option("--systems", system_names, "systems to measure (ordo is needed for ratios)")
      ->delimiter(',')
      ->check(CLI::IsMember({"ordo", "ordo-pertask", "omp", "tbb", "starpu"}))
      ->capture_default_str();
  cli.add_flag("--verify", verify,
               "check only: run every pattern once per system and thread count on small "
               "sizes, compare with the sequential result, print no timings (a test)");
  cli.add_flag("--busy", busy,
               "measure instead the fraction of time 2 ordo workers spend in task bodies of "
               "--busy-us on a stencil graph");
  cli.add_option("--busy-us", busy_us, "task duration in microseconds for --busy")
      ->check(cli::Real(1, 1e6))
      ->capture_default_str();
  cli.add_option("--busy-iterations", busy_iterations,
                 "stencil iterations for --busy (default 300, 60 with --quick)")
      ->check(cli::Integer(0, 1'000'000));
  bool metg = false;
  metg::MetgOptions mo;
  mo.width = std::max(1u, std::thread::hardware_concurrency());
  std::string metg_iterations;
  std::vector<std::string> metg_systems = {"ordo", "mpi", "omp"};
  std::optional<std::uint64_t> metg_steps;
  cli.add_flag("--metg", metg,
               "measure instead the minimum effective task granularity (Task Bench's METG) "
               "of ordo, non-blocking MPI and OpenMP tasks on a 1-D stencil "
               "(docs/benchmarks.md)");
  cli.add_option("--metg-width", mo.width,
                 "--metg: stencil width = ordo workers = MPI ranks = OpenMP threads (default: "
                 "hardware threads)")
      ->check(cli::Integer(1, 1024));
  cli.add_option("--metg-steps", metg_steps,
                 "--metg: time steps, even (default 1000; 200 with --quick, 20 with --verify)")
      ->check(cli::Integer(2, std::uint64_t{1} << 30));
  cli.add_option("--metg-iterations", metg_iterations,
                 "--metg: kernel iterations per task, comma-separated, longest first "
                 "(default 65536,32768,...,1; with --verify 4096,64,1)");
  cli.add_option("--metg-systems", metg_systems, "--metg: systems to measure")
      ->delimiter(',')
      ->check(CLI::IsMember({"ordo", "mpi", "omp"}))
      ->capture_default_str();
  cli.add_option("--bin-dir", mo.bin_dir,
                 "--metg: folder of ordo-bench-metg-mpi (default: found from this executable)");
  cli.add_option("--mpirun", mo.mpirun, "--metg: MPI launcher")->capture_default_str();
  if (int rc = cli::parse(cli, argc, argv); rc >= 0) return rc;

  if (metg) {
    mo.verify = verify;
    mo.steps = metg_steps ? *metg_steps : verify ? 20 : quick ? 200 : 1000;
    if (mo.steps % 2 != 0)
      throw ordo::Error("--metg-steps " + std::to_string(mo.steps) +
                        ": give an even number (the graph holds two steps)");
    if (metg_iterations.empty()) {
      if (verify) metg_iterations = "4096,64,1";
      for (std::uint64_t n = std::uint64_t{1} << 16; !verify && n >= 1; n /= 2)
        metg_iterations += (metg_iterations.empty() ? "" : ",") + std::to_string(n);
    }
    for (std::size_t n : parse_size_list(metg_iterations, "--metg-iterations",
                                                      {1, std::uint64_t{1} << 30, 1}))
      mo.iterations.push_back(n);
    std::sort(mo.iterations.rbegin(), mo.iterations.rend());
    mo.systems = metg_systems;
    mo.reps = reps_opt ? *reps_opt : verify ? 1 : 3;
    return metg::run_metg(mo);
  }

  if (busy) {
    const std::uint32_t iters = busy_iterations ? busy_iterations : quick ? 60 : 300;
    const unsigned workers = 2;
    BusyResult r = measure_busy(workers, busy_us, 64, iters);
    // Preemption (other processes on the cores) inflates the bodies' own steady-clock time
    // and so the busy fraction; the nominal fraction (tasks x task duration over workers x
    // wall) is deflated by it instead. On an unloaded machine the two agree.
    const double nominal =
        static_cast<double>(r.tasks) * busy_us * 1e-6 / (workers * r.seconds);
    fmt::print("# busy: {} tasks of >= {} us on {} workers, 64 tiles x {} iterations, run took "
               "{:.3f} s; nominal fraction (tasks x {} us / workers x wall) {:.4f}\n",
               r.tasks, busy_us, workers, iters, r.seconds, busy_us, nominal);
    fmt::print("# busy: share of the process's CPU time spent in task bodies {:.4f}, load "
               "average {}\n",
               r.cpu_fraction, load_average());
    fmt::print("bench=tasks pattern=busy threads={} busy_fraction={:.4f}\n", workers,
               r.fraction);
    return 0;
  }

  Sizes sizes;
  if (quick) {
    sizes.independent = 100'000;
    sizes.chain = 10'000;
    sizes.iterations = 100;
  }
  if (verify) {
    sizes.independent = 20'000;
    sizes.chain = 5'000;
    sizes.tiles = 16;
    sizes.iterations = 50;
  }
  const unsigned reps = reps_opt ? *reps_opt : quick ? 3 : 5;
  const Expected expected = expected_values(sizes);

  std::vector<Pattern> patterns;
  for (Pattern p : {Pattern::independent, Pattern::chain, Pattern::stencil1d})
    if (std::find(pattern_names.begin(), pattern_names.end(), pattern_name(p)) !=
        pattern_names.end())
      patterns.push_back(p);

  fmt::print("# ordo-bench-tasks: {} hardware threads, load average {} at start, {} "
             "repetitions (median), sizes: independent {}, chain {}, stencil1d {}x{}\n",
             std::thread::hardware_concurrency(), load_average(), reps, sizes.independent,
             sizes.chain, sizes.tiles, sizes.iterations);
  // ns/task by (pattern, threads, system)
  std::map<std::tuple<Pattern, unsigned, std::string>, double> ns, cpu_ns;
  for (const SystemEntry& sys : all_systems()) {
    if (std::find(system_names.begin(), system_names.end(), sys.name) == system_names.end())
      continue;
    if (!sys.make) fmt::print("# skip system={}: {}\n", sys.name, sys.missing);
  }
  for (unsigned t : threads) {
    for (const SystemEntry& sys : all_systems()) {
      if (!sys.make ||
          std::find(system_names.begin(), system_names.end(), sys.name) == system_names.end())
        continue;
      std::unique_ptr<System> s;
      try {
        s = sys.make(t);
      } catch (const std::runtime_error& e) {
        fmt::print("# skip system={} threads={}: {}\n", sys.name, t, e.what());
        continue;
      }
      for (Pattern p : patterns) {
        // stencil1d declares 64 tasks per graph: ordo-pertask would repeat ordo.
        if (sys.comment && p == Pattern::stencil1d) continue;
        if (verify) {
          s->run(p, sizes, expected);  // throws VerifyError on a wrong result
          fmt::print("verified system={} pattern={} threads={} tasks={}\n", sys.name,
                     pattern_name(p), t, sizes.tasks(p));
          continue;
        }
        // Warm-up (allocator pools, first-touch pages, caches), then the repetitions while
        // the budget lasts. A system whose single run exceeds the budget (libgomp's
        // dependence tracking grows with the number of pending tasks: stencil1d takes about
        // a minute) is measured by that one run, said so in a comment.
        double cpu0 = process_cpu_seconds();
        const double warm = s->run(p, sizes, expected);
        std::vector<double> secs, cpu;
        double spent = 0;
        if (warm > budget) {
          secs.push_back(warm);
          cpu.push_back(process_cpu_seconds() - cpu0);
          spent = warm;
        }
        while (secs.size() < reps && (secs.empty() || spent < budget)) {
          cpu0 = process_cpu_seconds();
          secs.push_back(s->run(p, sizes, expected));
          cpu.push_back(process_cpu_seconds() - cpu0);
          spent += secs.back();
        }
        if (secs.size() < reps)
          fmt::print("# system={} pattern={} threads={}: {} of {} repetitions (one run takes "
                     "{:.1f} s, budget {} s)\n",
                     sys.name, pattern_name(p), t, secs.size(), reps, warm, budget);
        const std::uint64_t n = sizes.tasks(p);
        const double x = median(secs) * 1e9 / static_cast<double>(n);
        const char* prefix = sys.comment ? "# " : "";
        if (!sys.comment) ns[{p, t, sys.name}] = x;
        fmt::print("{}bench=tasks system={} pattern={} threads={} tasks={} ns_per_task={:.1f}\n",
                   prefix, sys.name, pattern_name(p), t, n, x);
        // CPU time of every thread of the process (spinning included; the untimed result
        // check too, a few ns/task): on a loaded machine, the cost that waiting for a core
        // does not inflate.
        const double cpu_x = median(cpu) * 1e9 / static_cast<double>(n);
        if (!sys.comment) cpu_ns[{p, t, sys.name}] = cpu_x;
        fmt::print("#   cpu_ns_per_task={:.1f} load={}\n", cpu_x, load_average());
        std::fflush(stdout);
      }
    }
  }

  if (verify) return 0;
  // Worst ratio over the thread counts of ordo's figure to the best peer's, for one pattern
  // and one table (wall or CPU ns/task); -1 when there is nothing to compare. Prints the
  // ratio of each thread count as a comment.
  auto worst_ratio = [&](Pattern p, const decltype(ns)& table, const char* what) {
    double worst = -1;
    for (unsigned t : threads) {
      auto own = table.find({p, t, "ordo"});
      if (own == table.end()) continue;
      std::string best_name;
      double best = 0;
      for (const auto& [key, x] : table) {
        const auto& [kp, kt, kname] = key;
        if (kp != p || kt != t || kname == "ordo") continue;
        if (best_name.empty() || x < best) best = x, best_name = kname;
      }
      if (best_name.empty()) continue;
      const double ratio = own->second / best;
      fmt::print("# pattern={} threads={} {}: ordo={:.1f} ns best_peer={} {:.1f} ns "
                 "ratio={:.3f}\n",
                 pattern_name(p), t, what, own->second, best_name, best, ratio);
      worst = std::max(worst, ratio);
    }
    return worst;
  };
  for (Pattern p : patterns) {
    const double cpu_worst = worst_ratio(p, cpu_ns, "cpu");
    if (cpu_worst >= 0)
      fmt::print("# pattern={} cpu: ordo_vs_best_peer={:.3f}\n", pattern_name(p),
                 cpu_worst);
    const double worst = worst_ratio(p, ns, "wall");
    if (worst < 0)
      fmt::print("# pattern={}: no ratio (ordo or every peer was not measured)\n",
                 pattern_name(p));
    else
      fmt::print("bench=tasks pattern={} ordo_vs_best_peer={:.3f}\n", pattern_name(p),
                 worst);
  }
  return 0;
}

}  // namespace
}  // namespace ordo::bench

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-tasks", [&] { return ordo::bench::run(argc, argv); });
}
