// ordo-bench-memory: each rank's peak resident memory for heat2d and heat3d, against the same
// problem on one rank and against the OpenMP baseline, in one invocation.
//
// Runs, each a separate process (or job) so that nothing is shared:
//   openmp      ordo-omp-<app> --size S --iters I             (two grids, the textbook code)
//   ordo R      ordorun -n R ordo-<app> --size S --iters I    for R in --ranks (1: no ordorun)
//   ordo tb     ordo-<app> --size S --iters max(I, D) --tb D  (one rank; at least one group
//               of D steps, so that its wavefront holds the windows of all D steps)
// Every program reports its peak resident set (VmHWM, read by each rank in /proc/self/status)
// in its result line, rank 0 for every rank of its job (peak_rss=B0,B1,...), so the numbers
// come the same way under ordorun, srun or mpirun.
//
// Printed per app, besides each run's line, the ratios the issue sets targets for:
//   ordo_vs_openmp       RSS(ordo, 1 rank) / RSS(openmp)                    target <= 0.6
//   rank_vs_share        per R > 1: max over ranks of RSS / (RSS(1) / R + 64 MiB)  target <= 1
//   tb_vs_depth1         RSS(--tb D) / RSS(1 rank)                          target <= 1.1
// with met=yes|no. A target missed is a finding, not a failure: the exit status is 0 when
// every run gave its line, 1 when one failed, 2 for bad flags. Memory, not time: one run each.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "result_line.hpp"

// In ordo::bench, beside the helpers it uses (bench_process.hpp, bench_numbers.hpp,
// result_line.hpp), which it therefore names unqualified.
namespace ordo::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::uint64_t kRankAllowance = std::uint64_t{64} << 20;  // the target's + 64 MB

struct Options {
  std::vector<std::string> apps;
  std::string size2d, size3d, blocks2d, blocks3d;
  std::vector<std::size_t> ranks;
  std::uint64_t iters = 2, tb = 8;
  unsigned timeout_s = 600;
  std::string bin_dir;
};

// One program's run: each rank's peak resident bytes from its result line, or why none.
struct Measured {
  std::vector<std::uint64_t> peaks;
  std::string failure;
  std::uint64_t max() const { return peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end()); }
};

// "123,456" -> {123, 456}; empty on anything else.
std::vector<std::uint64_t> parse_peaks(const std::string& text) {
  std::vector<std::uint64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const auto v = parse_number(text.substr(pos, comma - pos));
    if (!v || *v < 1) return {};
    out.push_back(static_cast<std::uint64_t>(*v));
    pos = comma + 1;
  }
  return out;
}

Measured measure(const std::vector<std::string>& argv, const std::string& app, std::size_t ranks,
                 unsigned timeout_s) {
  Measured m;
  const CommandOutput out = run_command(argv, timeout_s);
  // Rank 0's line (ordorun prefixes "[0] "), which carries every rank's peak.
  const auto results = find_rank_results(out.text, app);
  const std::map<std::string, std::string>* fields =
      results.empty() ? nullptr : &results.front().fields;
  if (out.status != 0 || fields == nullptr) {
    m.failure = out.status != 0 ? "rc=" + std::to_string(out.status) : "no_result_line";
    std::fprintf(stderr, "ordo-bench-memory: %s failed (%s); its last output:\n%s\n",
                 argv.front().c_str(), m.failure.c_str(), last_lines(out.text, 8).c_str());
    return m;
  }
  auto it = fields->find("peak_rss");
  if (it != fields->end()) m.peaks = parse_peaks(it->second);
  if (m.peaks.size() != ranks) {
    m.failure = "no_peak_rss_for_" + std::to_string(ranks) + "_ranks";
    m.peaks.clear();
  }
  return m;
}

std::string mib_list(const std::vector<std::uint64_t>& peaks) {
  std::string s;
  for (std::size_t i = 0; i < peaks.size(); ++i)
    s += fmt::format("{}{:.1f}", i ? "," : "", static_cast<double>(peaks[i]) / kMiB);
  return s;
}

// "ratio=0.623 target=0.6 met=yes", or "ratio=n/a reason" when a side is missing.
std::string judged(const char* name, double num, double den, double target) {
  if (num <= 0 || den <= 0) return fmt::format("{}=n/a", name);
  const double r = num / den;
  return fmt::format("{}={:.3f} target={} met={}", name, r, target, r <= target ? "yes" : "no");
}

// One app: the runs, then the ratios. Returns whether every run gave its line.
bool bench_app(const Options& o, const std::string& app) {
  const bool is2d = app == "heat2d";
  const std::string size = is2d ? o.size2d : o.size3d;
  const std::string blocks = is2d ? o.blocks2d : o.blocks3d;
  const std::string head = fmt::format("bench=memory app={} size={} iters={}", app, size, o.iters);
  std::vector<std::string> common{"--size", size, "--iters", std::to_string(o.iters)};
  std::vector<std::string> ordo_common = common;
  if (!blocks.empty()) {
    ordo_common.push_back("--blocks");
    ordo_common.push_back(blocks);
  }
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  bool ok = true;
  auto report = [&](const std::string& what, const Measured& m) {
    if (!m.failure.empty()) {
      ok = false;
      fmt::print("{} {} failed {}\n", head, what, m.failure);
    } else {
      fmt::print("{} {} peak_rss_mib={:.1f} rank_peak_rss_mib={}\n", head, what,
                 static_cast<double>(m.max()) / kMiB, mib_list(m.peaks));
    }
    std::fflush(stdout);
  };

  Measured omp;
  if (auto bin = find_binary("ordo-omp-" + app, o.bin_dir)) {
    omp = measure(with({bin->string()}, common), app, 1, o.timeout_s);
    report("system=openmp ranks=1", omp);
  } else {
    fmt::print("{} system=openmp skipped reason=ordo-omp-{}_not_built_(no_OpenMP?)\n", head, app);
  }
  const auto app_bin = find_binary("ordo-" + app, o.bin_dir);
  if (!app_bin) {
    fmt::print("{} system=ordo skipped reason=ordo-{}_not_built\n", head, app);
    return false;
  }
  const auto ordorun = find_ordorun(o.bin_dir);
  std::vector<std::pair<std::size_t, Measured>> by_ranks;
  for (std::size_t r : o.ranks) {
    std::vector<std::string> argv{app_bin->string()};
    if (r > 1) {
      if (!ordorun) {
        fmt::print("{} system=ordo ranks={} skipped reason=ordorun_not_found\n", head, r);
        continue;
      }
      // The ranks fill their blocks before they connect: on a busy host the last may reach
      // the store long after the first (ordorun's default allows 30 s).
      argv = {ordorun->string(), "--timeout", std::to_string(o.timeout_s), "--timeout-startup",
              std::to_string(o.timeout_s), "-n", std::to_string(r), app_bin->string()};
    }
    by_ranks.emplace_back(r, measure(with(argv, ordo_common), app, r, o.timeout_s));
    report(fmt::format("system=ordo ranks={} tb=1", r), by_ranks.back().second);
  }
  Measured tb;
  if (o.tb > 1) {
    const std::uint64_t tb_iters = std::max(o.iters, o.tb);
    std::vector<std::string> argv{app_bin->string(), "--size", size, "--iters",
                                  std::to_string(tb_iters), "--tb", std::to_string(o.tb)};
    if (!blocks.empty()) argv.insert(argv.end(), {"--blocks", blocks});
    tb = measure(argv, app, 1, o.timeout_s);
    report(fmt::format("system=ordo ranks=1 tb={} tb_iters={}", o.tb, tb_iters), tb);
  }

  double one = 0;
  for (const auto& [r, m] : by_ranks)
    if (r == 1) one = static_cast<double>(m.max());
  fmt::print("{} {}\n", head, judged("ordo_vs_openmp", one, static_cast<double>(omp.max()), 0.6));
  for (const auto& [r, m] : by_ranks) {
    if (r == 1) continue;
    const double share = one > 0 ? one / static_cast<double>(r) + kRankAllowance : 0;
    fmt::print("{} ranks={} {} rank_vs_one={}\n", head, r,
               judged("rank_vs_share", static_cast<double>(m.max()), share, 1.0),
               one > 0 && m.max() > 0 ? fmt::format("{:.3f}", static_cast<double>(m.max()) / one)
                                      : std::string("n/a"));
  }
  if (o.tb > 1)
    fmt::print("{} tb={} {}\n", head, o.tb,
               judged("tb_vs_depth1", static_cast<double>(tb.max()), one, 1.1));
  std::fflush(stdout);
  return ok;
}

int run(int argc, char** argv) {
  CLI::App cli{"Peak resident memory of ordo's heat apps per rank, against one rank and the "
               "OpenMP baseline (docs/benchmarks.md)",
               "ordo-bench-memory"};
  Options o;
  std::string apps = "heat2d,heat3d", ranks = "1,2,4";
  bool quick = false;
  cli.add_option("--apps", apps, "apps to measure: heat2d, heat3d or both")->capture_default_str();
  cli.add_option("--size2d", o.size2d, "heat2d grid (default 8192x8192; --quick: 512x512)");
  cli.add_option("--size3d", o.size3d, "heat3d grid (default 512x512x512; --quick: 64x64x64)");
  cli.add_option("--blocks2d", o.blocks2d, "heat2d block grid (default: the app's)");
  cli.add_option("--blocks3d", o.blocks3d, "heat3d block grid (default: the app's)");
  cli.add_option("--ranks", ranks, "rank counts (1 runs without ordorun)")->capture_default_str();
  cli.add_option("--tb", o.tb, "temporal-blocking depth of the one-rank run (1: none)")
      ->check(ordo::cli::Integer(1, 1u << 20))
      ->capture_default_str();
  cli.add_option("--iters", o.iters, "time steps per run")
      ->check(ordo::cli::Integer(1, ordo::app::max_iters))
      ->capture_default_str();
  cli.add_option("--timeout", o.timeout_s, "seconds per run before it is killed")
      ->check(ordo::cli::Integer(1, 1u << 24))
      ->capture_default_str();
  cli.add_option("--bin-dir", o.bin_dir, "folder of the app binaries (default: the build tree "
                                         "or install beside this one)");
  cli.add_flag("--quick", quick, "small grids and ranks 1,2 (the plumbing, in seconds)");
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  for (std::size_t pos = 0; pos <= apps.size();) {
    std::size_t comma = apps.find(',', pos);
    if (comma == std::string::npos) comma = apps.size();
    const std::string a = apps.substr(pos, comma - pos);
    if (a != "heat2d" && a != "heat3d")
      throw ordo::Error("--apps " + apps + ": '" + a + "' is not heat2d or heat3d");
    o.apps.push_back(a);
    pos = comma + 1;
  }
  if (o.size2d.empty()) o.size2d = quick ? "512x512" : "8192x8192";
  if (o.size3d.empty()) o.size3d = quick ? "64x64x64" : "512x512x512";
  if (quick && ranks == "1,2,4") ranks = "1,2";
  o.ranks = parse_size_list(ranks, "--ranks", {1, 1024, 1});
  bool ok = true;
  for (const std::string& a : o.apps) ok = bench_app(o, a) && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ordo::bench

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-memory",
                                 [&] { return ordo::bench::run(argc, argv); });
}
