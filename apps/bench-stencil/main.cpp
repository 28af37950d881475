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
// alike), and the best run counts. A later issue adds --ranks (ordo on 2 ranks x 1 worker vs
// 1 rank x 2 workers vs MPI) as one more system in the same list.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app_cli.hpp"
#include "result_line.hpp"
#include "stream.hpp"

namespace {

namespace fs = std::filesystem;
using ordo::bench::AppResult;

constexpr double kBytesPerPoint = 16;  // one read and one write of a double per grid point

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Output {
  int status = -1;  // exit status, or -1 if it did not exit normally
  std::string text;  // stdout and stderr together
};

// Runs `argv` through the shell (arguments quoted) under coreutils `timeout` when present, so a
// hung app cannot hang the benchmark.
Output run_command(const std::vector<std::string>& argv, unsigned timeout_s) {
  std::string cmd;
  static const bool have_timeout = std::system("command -v timeout >/dev/null 2>&1") == 0;
  if (have_timeout && timeout_s > 0)
    cmd = "timeout --kill-after=5 " + std::to_string(timeout_s) + " ";
  for (const auto& a : argv) cmd += quote(a) + " ";
  cmd += "2>&1 </dev/null";
  Output out;
  std::fflush(stdout);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.text.append(buf, n);
  int st = pclose(pipe);
  out.status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// Where the app binaries are: --bin-dir when given; otherwise this executable's folder and its
// sibling folders (the build tree keeps apps/<name>/ordo-<name> beside apps/bench-stencil/; an
// install puts them all in one bin/).
std::optional<fs::path> find_binary(const std::string& name, const std::string& bin_dir) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  if (!bin_dir.empty()) {
    dirs.emplace_back(bin_dir);
  } else {
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      dirs.push_back(self.parent_path());
      for (const auto& e : fs::directory_iterator(self.parent_path().parent_path(), ec))
        if (e.is_directory(ec) && e.path() != self.parent_path()) dirs.push_back(e.path());
    }
  }
  for (const auto& d : dirs) {
    fs::path p = d / name;
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

std::optional<fs::path> find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return fs::path(name);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  std::size_t pos = 0;
  while (pos <= p.size()) {
    std::size_t c = p.find(':', pos);
    if (c == std::string::npos) c = p.size();
    fs::path cand = fs::path(p.substr(pos, c - pos)) / name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    pos = c + 1;
  }
  return std::nullopt;
}

// Open MPI settings for a benchmark on one host: shared memory (vader) between ranks, the
// runtime's own wire on loopback, running as root allowed (containers), more ranks than cores
// allowed, no core binding (the other systems do not bind either), and ranks that yield the
// core while they wait for a halo instead of busy-polling: Open MPI does that by itself when it
// sees more ranks than cores, but on a machine shared with other work it does not see that,
// and a polling rank then loses its partner's time slices (measured here: heat3d 256^3 on a
// loaded 2-core machine ran 2-3x slower polling). A value the user exported already wins.
void set_mpi_environment() {
  const char* vars[][2] = {
      {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
      {"OMPI_MCA_pml", "ob1"},
      {"OMPI_MCA_btl", "self,vader"},
      {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
      {"OMPI_MCA_oob_tcp_if_include", "lo"},
      {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
      {"OMPI_MCA_hwloc_base_binding_policy", "none"},
      {"OMPI_MCA_mpi_yield_when_idle", "1"},
  };
  for (auto& v : vars) setenv(v[0], v[1], 0);
}

struct System {
  std::string name;                // ordo, ordo-tb, openmp, mpi
  std::vector<std::string> argv;   // empty: skipped
  std::string skip_reason;
  std::optional<AppResult> best;
  std::string failure;             // set when a run failed
};

std::string last_lines(const std::string& text, std::size_t count) {
  std::size_t pos = text.size();
  for (std::size_t i = 0; i <= count && pos > 0; ++i) pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

std::string fmt_ratio(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "nan";
  return fmt::format("{:.3f}", num / den);
}

int run(int argc, char** argv) {
  CLI::App cli{"Runs a stencil app under ordo (with and without temporal blocking), the OpenMP "
               "and MPI baselines and a STREAM triad in one invocation; prints gstencils per "
               "system and the ratios",
               "ordo-bench-stencil"};
  std::string app = "heat2d", size, bin_dir, ordo_blocks, mpirun = "mpirun";
  std::uint64_t iters = 0;
  unsigned workers = 2, tb = 4, reps = 0, timeout_s = 600;
  bool quick = false;
  cli.add_option("--app", app, "heat2d or heat3d")->capture_default_str();
  cli.add_option("--size", size,
                 "grid size (default heat2d 8192x8192, heat3d 512x512x512; --quick: "
                 "3072x3072, 192x192x192)");
  cli.add_option("--iters", iters, "time steps (default 20 for heat2d, 10 for heat3d)");
  cli.add_option("--workers", workers, "threads for ordo and OpenMP, ranks for MPI, threads "
                 "for the triad")->capture_default_str();
  cli.add_option("--tb", tb, "temporal-blocking depth of the ordo-tb run")
      ->capture_default_str();
  cli.add_option("--reps", reps, "runs per system, best counts (default 3; --quick: 1)");
  cli.add_flag("--quick", quick, "small grid and one run per system (well under 40 s)");
  cli.add_option("--bin-dir", bin_dir,
                 "folder holding the app binaries (default: found from this executable)");
  cli.add_option("--ordo-blocks", ordo_blocks, "--blocks passed to the ordo app (default: "
                 "the app's own)");
  cli.add_option("--mpirun", mpirun, "MPI launcher")->capture_default_str();
  cli.add_option("--timeout", timeout_s, "seconds after which one run is killed")
      ->capture_default_str();
  if (int rc = ordo::app::parse_cli(cli, argc, argv); rc >= 0) return rc;

  if (app != "heat2d" && app != "heat3d")
    throw ordo::Error("--app " + app + ": expected heat2d or heat3d");
  const std::size_t dims = app == "heat2d" ? 2 : 3;
  if (size.empty())
    size = dims == 2 ? (quick ? "3072x3072" : "8192x8192")
                     : (quick ? "192x192x192" : "512x512x512");
  ordo::app::parse_shape(size, dims, "--size");  // validates; the apps parse it again
  if (iters == 0) iters = quick ? 10 : (dims == 2 ? 20 : 10);
  if (reps == 0) reps = quick ? 1 : 3;
  if (workers == 0) throw ordo::Error("--workers 0: use at least one worker");
  if (tb == 0) throw ordo::Error("--tb 0: the depth is at least 1 (1 = no temporal blocking)");
  if (!bin_dir.empty() && !fs::is_directory(bin_dir))
    throw ordo::Error("--bin-dir " + bin_dir + " is not a folder");

  const std::string w = std::to_string(workers);
  const std::vector<std::string> common{"--size", size, "--iters", std::to_string(iters),
                                        "--workers", w};
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
      Output help = run_command({bin->string(), "--help"}, 30);
      if (ordo::bench::help_lists_flag(help.text, "--tb"))
        tb_sys.argv = with(a, {"--tb", std::to_string(tb)});
      else
        tb_sys.skip_reason = "ordo-" + app + "_has_no_--tb_flag";
    } else {
      ordo_sys.skip_reason = tb_sys.skip_reason = "ordo-" + app + "_not_built";
    }
    systems.push_back(ordo_sys);
    systems.push_back(tb_sys);
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
    if (!bin) {
      s.skip_reason = "ordo-mpi-" + app + "_not_built_(no_MPI?)";
    } else if (!launcher) {
      s.skip_reason = mpirun + "_not_found";
    } else {
      set_mpi_environment();
      s.argv = with({launcher->string(), "-n", w, bin->string()}, common);
    }
    systems.push_back(s);
  }

  for (unsigned r = 0; r < reps; ++r)
    for (System& s : systems) {
      if (s.argv.empty() || !s.failure.empty()) continue;
      Output out = run_command(s.argv, timeout_s);
      auto res = ordo::bench::find_result(out.text, app);
      if (out.status != 0 || !res) {
        s.failure = out.status != 0 ? "rc=" + std::to_string(out.status) : "no_result_line";
        std::fprintf(stderr, "ordo-bench-stencil: %s failed (%s); its last output:\n%s\n",
                     s.name.c_str(), s.failure.c_str(), last_lines(out.text, 8).c_str());
        continue;
      }
      if (!s.best || res->gstencils > s.best->gstencils) s.best = res;
    }

  // The triad, with as many threads as the systems had workers, over 3 arrays of 4 x the
  // last-level cache each (stream.hpp).
  const auto triad =
      ordo::app::stream_triad(ordo::app::triad_default_elements(), workers, quick ? 5 : 10);
  const double bound_gst = triad.bytes_per_second / kBytesPerPoint / 1e9;

  bool failed = false;
  auto gst = [&](const std::string& name) -> double {
    for (const System& s : systems)
      if (s.name == name && s.best) return s.best->gstencils;
    return 0;
  };
  const std::string head = "bench=stencil app=" + app;
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
  fmt::print("{} system=triad threads={} array_mib={} gbytes_per_s={:.3f} bytes_per_point={} "
             "bound_gstencils={:.4f}\n",
             head, triad.threads, triad.elements * sizeof(double) >> 20,
             triad.bytes_per_second / 1e9, kBytesPerPoint, bound_gst);
  const double ordo = gst("ordo"), omp = gst("openmp"), mpi = gst("mpi");
  fmt::print("{} ordo_vs_openmp={}\n", head, fmt_ratio(ordo, omp));
  fmt::print("{} ordo_vs_mpi={}\n", head, fmt_ratio(ordo, mpi));
  fmt::print("{} ordo_vs_best_baseline={}\n", head, fmt_ratio(ordo, std::max(omp, mpi)));
  fmt::print("{} bandwidth_fraction={}\n", head, fmt_ratio(ordo, bound_gst));
  for (const System& s : systems) {
    if (s.name != "ordo-tb") continue;
    if (s.best) {
      fmt::print("{} system=ordo-tb tb={} size={} iters={} workers={} seconds={} gstencils={} "
                 "ordo_vs_openmp={}\n",
                 head, tb, s.best->fields.count("size") ? s.best->fields.at("size") : "?", iters,
                 workers, s.best->fields.count("seconds") ? s.best->fields.at("seconds") : "?",
                 s.best->fields.at("gstencils"), fmt_ratio(s.best->gstencils, omp));
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

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-stencil", [&] { return run(argc, argv); });
}
