// ordo-bench-scale: how the control plane grows with the ranks. heat2d on 2, 4, 8, ... ranks of
// this one host under ordorun, with tiny blocks and one worker per rank, oversubscribed on
// purpose (what is measured is the control plane, not the stencil), one line per rank count:
//   ranks=N control_messages_per_rank_per_run=M startup_seconds=S run_seconds=T
//     store_bytes_per_rank=B addresses_per_rank=A [mpi_run_seconds=U ordo_vs_mpi=T/U]
// M is the runtime's own count of the control messages rank 0 sent during the run (the app's
// control_messages=; rank 0 is the root of the control plane's tree, and no rank sends more):
// the graph check, shared memory's set-up, the run's barrier and its quiescence waves. S is the
// job's wall time less the run (spawn, connect, graph building and check, verdict, teardown),
// T rank 0's run. B is the most bytes ordorun's store sent one rank (ordorun --verbose: its
// start-up exchange, address fetches and closing barrier), A the most other ranks' addresses
// one rank held at its end (ORDO_VERBOSE's endpoints line): both O(1) and O(neighbours) per
// rank, where every rank used to receive and keep N addresses. B and A depend on the rank
// count only: they are read from one more job per rank count, run verbose and not timed, so
// that the timed jobs pay for no verbose output. The MPI baseline (mpirun -n N ordo-mpi-heat2d, same grid) runs in the same
// invocation when it is built and mpirun is there. Each rank count runs --reps times,
// round-robin with MPI, and the medians are printed. The last line is the growth of M from 4
// ranks to the most asked for: growth=M(max)/M(4) (the target, log growth, is at most 3 for 64
// ranks; the all-to-all control plane it replaced grew as N - 1, 21 from 4 to 64).
//
// The default sweep stops at 16 ranks: on a small shared host 64 ranks take minutes. Ask for
// more with --ranks 2,4,8,16,32,64.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "result_line.hpp"

// In ordo::bench, beside the helpers it uses (bench_process.hpp, bench_numbers.hpp,
// result_line.hpp), which it therefore names unqualified.
namespace ordo::bench {
namespace {

struct Measure {
  std::vector<double> messages, startup, run, mpi_run;
  double store_bytes = 0, addresses = 0;  // from the verbose job
  std::string failure;  // set once a run of this rank count failed
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ordorun --verbose's "store: sent T bytes to N rank(s), at most B to one rank" and the
// ranks' "ordo: endpoints: ... it holds A rank address(es)": B and the largest A.
std::optional<std::pair<double, double>> store_and_addresses(const std::string& text) {
  static const std::regex store_line(R"(store: sent \d+ bytes to \d+ rank\(s\), at most (\d+) to one rank)");
  static const std::regex held_line(R"(ordo: endpoints: .* it holds (\d+) rank address)");
  std::smatch m;
  if (!std::regex_search(text, m, store_line)) return std::nullopt;
  const double bytes = std::stod(m[1].str());
  double most = -1;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), held_line); it != std::sregex_iterator(); ++it)
    most = std::max(most, std::stod((*it)[1].str()));
  if (most < 0) return std::nullopt;
  return std::pair{bytes, most};
}

std::optional<double> number(const AppResult& r, const std::string& key) {
  auto it = r.fields.find(key);
  if (it == r.fields.end()) return std::nullopt;
  return parse_number(it->second);
}

int run(int argc, char** argv) {
  std::string ranks_text = "2,4,8,16", bin_dir, mpirun = "mpirun";
  std::uint64_t iters = 20, rows = 8, cols = 64;
  unsigned reps = 1, timeout_s = 600;
  CLI::App cli{"Control messages, start-up and run time of heat2d against the number of ranks "
               "on this host (tiny blocks, one worker per rank)",
               "ordo-bench-scale"};
  cli.add_option("--ranks", ranks_text, "rank counts, comma-separated (each 2..1024)")
      ->capture_default_str();
  cli.add_option("--iters", iters, "heat2d iterations per run")
      ->check(ordo::cli::Integer(1, 1000000))
      ->capture_default_str();
  cli.add_option("--rows-per-rank", rows, "grid rows per rank (weak scaling)")
      ->check(ordo::cli::Integer(2, 1 << 16))
      ->capture_default_str();
  cli.add_option("--cols", cols, "grid columns")
      ->check(ordo::cli::Integer(4, 1 << 16))
      ->capture_default_str();
  cli.add_option("--reps", reps, "runs per rank count (medians are printed)")
      ->check(ordo::cli::Integer(1, 100))
      ->capture_default_str();
  cli.add_option("--timeout", timeout_s, "seconds one job may take")
      ->check(ordo::cli::Integer(1, 86400))
      ->capture_default_str();
  cli.add_option("--bin-dir", bin_dir, "where ordo-heat2d and ordorun are (default: the build "
                                       "tree or install this program is in)");
  cli.add_option("--mpirun", mpirun, "MPI launcher for the baseline")->capture_default_str();
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  const std::vector<std::size_t> counts = parse_size_list(ranks_text, "--ranks", {2, 1024, 1});

  const auto app = find_binary("ordo-heat2d", bin_dir);
  const auto ordorun = find_ordorun(bin_dir);
  if (!app || !ordorun)
    throw ordo::Error(std::string(!app ? "ordo-heat2d" : "ordorun") +
                      " not found; build it, or give --bin-dir");
  const auto mpi_bin = find_binary("ordo-mpi-heat2d", bin_dir);
  const auto launcher = find_in_path(mpirun);
  if (!mpi_bin)
    std::printf("# the MPI baseline ordo-mpi-heat2d is not built (no MPI?): its side skipped\n");
  else if (!launcher)
    std::printf("# %s not found: the MPI side skipped\n", mpirun.c_str());
  else
    set_mpi_environment();
  const bool with_mpi = mpi_bin && launcher;
  std::printf("# ordo-bench-scale: heat2d, %llu rows per rank x %llu columns, 2 blocks per rank, "
              "1 worker per rank, %llu iterations, load average %s\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(cols),
              static_cast<unsigned long long>(iters), load_average().c_str());

  auto grid = [&](std::size_t n) {
    return std::vector<std::string>{"--size", std::to_string(rows * n) + "x" + std::to_string(cols),
                                    "--iters", std::to_string(iters)};
  };
  // heat2d on n ranks under ordorun; `verbose`: ordorun --verbose and ORDO_VERBOSE=1.
  auto ordo_job = [&](std::size_t n, bool verbose) {
    std::vector<std::string> job{ordorun->string(), "--timeout", std::to_string(timeout_s),
                                 "-n", std::to_string(n), app->string(),
                                 "--blocks", std::to_string(n) + "x2", "--workers", "1"};
    if (verbose) {
      job.insert(job.begin(), {"env", "ORDO_VERBOSE=1"});
      job.insert(job.begin() + 3, "--verbose");
    }
    const std::vector<std::string> g = grid(n);
    job.insert(job.end(), g.begin(), g.end());
    return job;
  };
  auto give_up = [](std::size_t n, Measure& m, std::string why, const CommandOutput& out) {
    m.failure = std::move(why);
    std::fprintf(stderr, "ordo-bench-scale: %zu ranks failed (%s); the last output:\n%s\n", n,
                 m.failure.c_str(), last_lines(out.text, 8).c_str());
  };

  std::map<std::size_t, Measure> measures;
  for (std::size_t n : counts) {
    Measure& m = measures[n];
    const CommandOutput out = run_command(ordo_job(n, true), timeout_s + 10);
    const auto traffic = store_and_addresses(out.text);
    if (out.status != 0 || !traffic) {
      give_up(n, m, out.status != 0 ? "rc=" + std::to_string(out.status) : "no_store_or_address_line",
              out);
      continue;
    }
    m.store_bytes = traffic->first;
    m.addresses = traffic->second;
  }
  for (unsigned rep = 0; rep < reps; ++rep)
    for (std::size_t n : counts) {
      Measure& m = measures[n];
      if (!m.failure.empty()) continue;
      const auto t0 = std::chrono::steady_clock::now();
      CommandOutput out = run_command(ordo_job(n, false), timeout_s + 10);
      const double wall = seconds_since(t0);
      auto res = find_rank_results(out.text, "heat2d");
      std::optional<double> messages, run;
      if (!res.empty()) {
        messages = number(res[0], "control_messages");
        run = number(res[0], "seconds");
      }
      if (out.status != 0 || !messages || !run) {
        give_up(n, m, out.status != 0 ? "rc=" + std::to_string(out.status) : "no_result_line", out);
        continue;
      }
      m.messages.push_back(*messages);
      m.run.push_back(*run);
      m.startup.push_back(std::max(0.0, wall - *run));
      if (!with_mpi) continue;
      std::vector<std::string> mpi{launcher->string(), "-n", std::to_string(n), mpi_bin->string(),
                                   "--workers", std::to_string(n)};
      const std::vector<std::string> g = grid(n);
      mpi.insert(mpi.end(), g.begin(), g.end());
      CommandOutput mout = run_command(mpi, timeout_s);
      auto mres = find_rank_results(mout.text, "heat2d");
      std::optional<double> mrun;
      if (!mres.empty()) mrun = number(mres[0], "seconds");
      if (mout.status == 0 && mrun)
        m.mpi_run.push_back(*mrun);
      else
        std::fprintf(stderr, "ordo-bench-scale: MPI on %zu ranks failed; its last output:\n%s\n",
                     n, last_lines(mout.text, 8).c_str());
    }

  bool failed = false;
  for (std::size_t n : counts) {
    const Measure& m = measures[n];
    if (m.messages.empty()) {
      failed = true;
      fmt::print("ranks={} failed {}\n", n, m.failure);
      continue;
    }
    std::string line = fmt::format(
        "ranks={} control_messages_per_rank_per_run={:.0f} startup_seconds={:.3f} "
        "run_seconds={:.4f} store_bytes_per_rank={:.0f} addresses_per_rank={:.0f}",
        n, median(m.messages), median(m.startup), median(m.run), m.store_bytes, m.addresses);
    if (!m.mpi_run.empty())
      line += fmt::format(" mpi_run_seconds={:.4f} ordo_vs_mpi={:.3f}", median(m.mpi_run),
                          median(m.run) / median(m.mpi_run));
    fmt::print("{}\n", line);
  }
  const std::size_t most = *std::max_element(counts.begin(), counts.end());
  if (measures.count(4) && !measures[4].messages.empty() && most > 4 &&
      !measures[most].messages.empty())
    fmt::print("growth=M({})/M(4)={:.3f} all_to_all_growth={:.3f}\n", most,
               median(measures[most].messages) / median(measures[4].messages),
               static_cast<double>(most - 1) / 3.0);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace ordo::bench

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-scale", [&] { return ordo::bench::run(argc, argv); });
}
