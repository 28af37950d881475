// ordo-bench-tasks --metg: the sweep, the peak, the MPI run, and the METG of every system
// (metg.hpp defines the graph and the measure; docs/benchmarks.md how to read the output).
#include "metg_driver.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <map>
#include <thread>

#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "metg.hpp"
#include "metg_systems.hpp"
#include "result_fields.hpp"

namespace ordo::bench::metg {

namespace {

using Clock = std::chrono::steady_clock;

// FLOP/s of the kernel alone: `threads` threads each run `steps` kernels of `iterations`, with
// nothing between them. The best of the sweep's measurements is the peak.
double kernel_flops(unsigned threads, std::uint64_t steps, std::uint64_t iterations) {
  std::vector<std::thread> pool;
  std::vector<std::uint64_t> sink(threads);
  const auto t0 = Clock::now();
  for (unsigned k = 0; k < threads; ++k)
    pool.emplace_back([&, k] {
      std::uint64_t x = k;
      for (std::uint64_t t = 0; t < steps; ++t) x = task(0, x, 0, iterations);
      sink[k] = x;
    });
  for (auto& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return kFlopsPerIteration * static_cast<double>(iterations) * static_cast<double>(steps) *
         threads / seconds;
}

struct SystemRuns {
  std::string name;
  std::string skip_reason;                              // set: not measured
  std::map<std::uint64_t, std::vector<double>> seconds;  // by iterations
};

std::string join(const std::vector<std::uint64_t>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

}  // namespace

int run_metg(const MetgOptions& o) {
  const unsigned width = o.width;
  const std::uint64_t tasks = std::uint64_t{width} * o.steps;
  fmt::print("# ordo-bench-tasks --metg: stencil_1d width={} steps={} ({} tasks per run), kernel "
             "{} FLOP per iteration, iterations {} .. {}, {} repetition(s) (median), load "
             "average {} at start\n",
             width, o.steps, tasks, kFlopsPerIteration, o.iterations.front(), o.iterations.back(),
             o.reps, ordo::bench::load_average());
  std::map<std::uint64_t, std::vector<std::uint64_t>> expected;
  auto reference_for = [&](std::uint64_t iterations) -> const std::vector<std::uint64_t>& {
    auto& e = expected[iterations];
    if (e.empty()) e = reference(width, o.steps, iterations);
    return e;
  };

  std::vector<SystemRuns> systems;
  for (const std::string& name : o.systems) systems.push_back({name, {}, {}});
  auto find = [&](const std::string& name) -> SystemRuns* {
    for (auto& s : systems)
      if (s.name == name) return &s;
    return nullptr;
  };
  using Factory = std::unique_ptr<StencilSystem> (*)(unsigned);
  std::vector<std::pair<std::string, Factory>> local = {{"ordo", make_ordo_stencil}};
#if ORDO_BENCH_HAVE_OMP
  local.push_back({"omp", make_omp_stencil});
#else
  if (auto* s = find("omp")) s->skip_reason = "built without OpenMP";
#endif

  // MPI: mpirun -n width ordo-bench-metg-mpi, one sweep per repetition.
  std::vector<std::string> mpi_argv;
  if (auto* s = find("mpi")) {
    const auto bin = ordo::bench::find_binary("ordo-bench-metg-mpi", o.bin_dir);
    const auto launcher = ordo::bench::find_in_path(o.mpirun);
    if (!bin)
      s->skip_reason = "ordo-bench-metg-mpi not built (no MPI: install libopenmpi-dev)";
    else if (!launcher)
      s->skip_reason = o.mpirun + " not found";
    else {
      // Busy-polling ranks, Open MPI's own choice on a dedicated node: the latency of a step's
      // exchange is what METG measures, and yielding ranks add a system call to each wait.
      setenv("OMPI_MCA_mpi_yield_when_idle", "0", 0);
      ordo::bench::set_mpi_environment();
      mpi_argv = {launcher->string(), "-n", std::to_string(width), bin->string(), "--steps",
                  std::to_string(o.steps), "--iterations", join(o.iterations)};
    }
  }

  double peak = 0;
  bool failed = false;
  for (unsigned r = 0; r < o.reps; ++r) {
    if (!o.verify) peak = std::max(peak, kernel_flops(width, o.steps, o.iterations.front()));
    // One system at a time, so that no two systems' threads compete (OpenMP's spin).
    for (const auto& [name, make] : local) {
      SystemRuns* s = find(name);
      if (!s || !s->skip_reason.empty()) continue;
      std::unique_ptr<StencilSystem> sys = make(width);
      for (std::uint64_t iterations : o.iterations) {
        std::vector<std::uint64_t> tiles;
        const double seconds = sys->run(width, o.steps, iterations, tiles);
        if (tiles != reference_for(iterations)) {
          fmt::print(stderr, "ordo-bench-tasks: system {} computed a wrong result ({} steps of "
                     "{} iterations): a dependency was missed\n", name, o.steps, iterations);
          return 1;
        }
        s->seconds[iterations].push_back(seconds);
      }
    }
    if (!mpi_argv.empty()) {
      SystemRuns* s = find("mpi");
      ordo::bench::CommandOutput out = ordo::bench::run_command(mpi_argv, o.timeout_s);
      std::size_t found = 0;
      ordo::bench::for_each_line(out.text, [&](std::string_view line) {
        auto f = ordo::bench::parse_fields(line);
        if (f["bench"] != "metg" || f["system"] != "mpi") return;
        auto it = ordo::bench::parse_number(f["iterations"]);
        auto sec = ordo::bench::parse_number(f["seconds"]);
        if (it && sec) s->seconds[static_cast<std::uint64_t>(*it)].push_back(*sec), ++found;
      });
      if (out.status != 0 || found != o.iterations.size()) {
        fmt::print(stderr, "ordo-bench-tasks: the MPI version failed (exit {}); its last "
                   "output:\n{}\n", out.status, ordo::bench::last_lines(out.text, 8));
        s->skip_reason = "failed";
        failed = true;
        mpi_argv.clear();
      }
    }
  }
  for (const auto& s : systems)
    if (!s.skip_reason.empty())
      fmt::print("# skip system={}: {}\n", s.name, s.skip_reason);
  if (o.verify) {
    for (const auto& s : systems)
      if (s.skip_reason.empty())
        fmt::print("verified system={} width={} steps={} iterations={}\n", s.name, width, o.steps,
                   join(o.iterations));
    return failed ? 1 : 0;
  }

  fmt::print("# peak: the kernel alone on {} threads, best of {}: {:.3f} GFLOP/s\n", width,
             o.reps, peak / 1e9);
  std::map<std::string, std::optional<Metg>> result;
  for (const auto& s : systems) {
    if (!s.skip_reason.empty()) continue;
    std::vector<Point> points;
    for (std::uint64_t iterations : o.iterations) {
      auto it = s.seconds.find(iterations);
      if (it == s.seconds.end() || it->second.empty()) continue;
      const Point p = point(iterations, ordo::bench::median(it->second), tasks, width, peak);
      points.push_back(p);
      fmt::print("# bench=metg system={} iterations={} task_us={:.3f} efficiency={:.3f}\n",
                 s.name, iterations, p.task_seconds * 1e6, p.efficiency);
    }
    const auto m = metg(points);
    result[s.name] = m;
    if (m)
      fmt::print("bench=metg system={} metg_us={:.3f}{}\n", s.name, m->seconds * 1e6,
                 m->below_all ? " (at most: even the shortest tasks reached 50%)" : "");
    else
      fmt::print("bench=metg system={} metg_us=nan (no duration reached 50% efficiency)\n",
                 s.name);
  }
  auto metg_of = [&](const char* name) {
    auto it = result.find(name);
    return it != result.end() && it->second ? it->second->seconds : 0.0;
  };
  const double ordo = metg_of("ordo"), mpi = metg_of("mpi"), omp = metg_of("omp");
  fmt::print("bench=metg ordo_vs_mpi={}\n",
             ordo > 0 && mpi > 0 ? fmt::format("{:.3f}", ordo / mpi) : std::string("nan"));
  fmt::print("bench=metg ordo_vs_omp={}\n",
             ordo > 0 && omp > 0 ? fmt::format("{:.3f}", ordo / omp) : std::string("nan"));
  return failed ? 1 : 0;
}

}  // namespace ordo::bench::metg
