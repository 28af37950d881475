// ordo-bench-stencil --ranks (ranks.hpp): the runs, the halo measurement, and ucx_perftest's.
#include "ranks.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "result_line.hpp"

namespace ordo::bench {
namespace {

namespace fs = std::filesystem;

// A TCP port free on loopback now (the kernel's pick), for ucx_perftest's connection setup.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 13337;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 13337;
  // safety: sockaddr_in is the sockaddr the AF_INET calls expect.
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// One ucx_perftest tag_bw measurement on loopback: a server process, then the client (retried
// while the server is not listening yet). The client's output, or empty on failure.
std::string run_ucx_perftest(const fs::path& perftest, std::size_t bytes, std::uint64_t iters,
                             const char* wait, unsigned timeout_s) {
  const int port = free_port();
  std::vector<std::string> args{perftest.string(), "-t", "tag_bw", "-s", std::to_string(bytes),
                                "-n", std::to_string(iters), "-w",
                                std::to_string(std::max<std::uint64_t>(10, iters / 10)), "-p",
                                std::to_string(port), "-E", wait};
  // No -e (peer failure handling): ordo's endpoints to ranks of the same host have none either
  // (comm/transport.cpp watches those ranks through pidfds), so UCX picks the same transports
  // (shared memory) for both.
  std::fflush(stdout);
  const pid_t server = fork();
  if (server < 0) return {};
  if (server == 0) {
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    av.push_back(nullptr);
    if (std::FILE* f = std::freopen("/dev/null", "w", stdout)) (void)f;
    if (std::FILE* f = std::freopen("/dev/null", "w", stderr)) (void)f;
    execv(av[0], av.data());
    _exit(127);
  }
  std::vector<std::string> client = args;
  client.insert(client.begin() + 1, "127.0.0.1");
  CommandOutput out;
  for (int attempt = 0; attempt < 20; ++attempt) {
    usleep(200000);  // the server sets up its listening socket
    out = run_command(client, timeout_s);
    if (out.status == 0 || out.text.find("Final:") != std::string::npos) break;
    int st = 0;
    if (waitpid(server, &st, WNOHANG) == server) return {};  // the server gave up
  }
  kill(server, SIGTERM);
  int st = 0;
  waitpid(server, &st, 0);
  return out.status == 0 ? out.text : std::string();
}

}  // namespace

std::vector<std::size_t> halo_sizes(const std::string& text) {
  return parse_size_list(text, "--halo-bytes", {8, std::uint64_t{1} << 30, 8});
}

int run_ranks(const RanksOptions& o) {
  const std::string head = "bench=stencil app=" + o.app;
  const std::vector<std::string> common{"--size", o.size, "--iters", std::to_string(o.iters)};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  struct RankSystem {
    std::string name;
    unsigned ranks, workers;
    std::vector<std::string> argv;  // empty: skipped
    std::string skip_reason, failure;
    std::vector<double> gst;
  };
  std::vector<RankSystem> systems{{"ordo-threads", 1, 2, {}, {}, {}, {}},
                                  {"ordo-ranks", 2, 1, {}, {}, {}, {}},
                                  {"mpi", 2, 1, {}, {}, {}, {}}};
  const auto app_bin = find_binary("ordo-" + o.app, o.bin_dir);
  const auto ordorun = find_ordorun(o.bin_dir);
  if (app_bin) {
    systems[0].argv = with(with({app_bin->string()}, common), {"--workers", "2"});
    if (ordorun)
      systems[1].argv = with(with({ordorun->string(), "--timeout", std::to_string(o.timeout_s),
                                   "-n", "2", app_bin->string()},
                                  common),
                             {"--workers", "1"});
    else
      systems[1].skip_reason = "ordorun_not_found";
  } else {
    systems[0].skip_reason = systems[1].skip_reason = "ordo-" + o.app + "_not_built";
  }
  {
    auto bin = find_binary("ordo-mpi-" + o.app, o.bin_dir);
    auto launcher = find_in_path(o.mpirun);
    if (!bin) {
      systems[2].skip_reason = "ordo-mpi-" + o.app + "_not_built_(no_MPI?)";
    } else if (!launcher) {
      systems[2].skip_reason = o.mpirun + "_not_found";
    } else {
      set_mpi_environment();
      // The baseline's --workers counts ranks (one worker each).
      systems[2].argv =
          with({launcher->string(), "-n", "2", bin->string()}, with(common, {"--workers", "2"}));
    }
  }
  for (unsigned r = 0; r < o.reps; ++r)
    for (std::size_t i : round_order(systems.size(), r)) {  // reversed every other round
      RankSystem& s = systems[i];
      if (s.argv.empty() || !s.failure.empty()) continue;
      CommandOutput out = run_command(s.argv, o.timeout_s);
      // Rank 0 prints the job's line (an ordo job's ranks end together at the run's closing
      // barrier; docs/distributed.md), with ranks=R across ranks; so do mpirun's. Should
      // several ranks print, the slowest counts.
      auto res = find_rank_results(out.text, o.app);
      const bool ranks_ok =
          s.name != "ordo-ranks" ||
          (!res.empty() && res[0].fields.count("ranks") &&
           res[0].fields.at("ranks") == std::to_string(s.ranks));
      if (out.status != 0 || res.empty() || !ranks_ok) {
        s.failure = out.status != 0 ? "rc=" + std::to_string(out.status) : "no_result_line";
        std::fprintf(stderr, "ordo-bench-stencil: %s failed (%s); its last output:\n%s\n",
                     s.name.c_str(), s.failure.c_str(), last_lines(out.text, 8).c_str());
        continue;
      }
      double g = res[0].gstencils;
      for (const auto& x : res) g = std::min(g, x.gstencils);
      s.gst.push_back(g);
    }
  bool failed = false;
  for (const RankSystem& s : systems) {
    if (!s.gst.empty())
      fmt::print("{} system={} ranks={} workers={} size={} iters={} reps={} gstencils={:.4f}\n",
                 head, s.name, s.ranks, s.workers, o.size, o.iters, s.gst.size(), median(s.gst));
    else if (!s.failure.empty())
      failed = true, fmt::print("{} system={} ranks={} workers={} failed {}\n", head, s.name,
                                s.ranks, s.workers, s.failure);
    else
      fmt::print("{} system={} ranks={} workers={} skipped reason={}\n", head, s.name, s.ranks,
                 s.workers, s.skip_reason);
  }
  const double threads = median(systems[0].gst), ranks = median(systems[1].gst),
               mpi = median(systems[2].gst);
  fmt::print("{} ranks_vs_threads={}\n", head, format_ratio(ranks, threads));
  fmt::print("{} ranks_vs_mpi={}\n", head, format_ratio(ranks, mpi));

  // Halo throughput.
  const std::vector<std::size_t> sizes = halo_sizes(o.halo_bytes);
  const auto halo_bin = find_binary("ordo-bench-halo", o.bin_dir);
  const auto perftest = find_in_path("ucx_perftest");
  if (!halo_bin) std::printf("# bench=halo: ordo-bench-halo not built: ordo side skipped\n");
  if (!ordorun) std::printf("# bench=halo: ordorun not found: ordo side skipped\n");
  if (!perftest)
    std::printf("# bench=halo: ucx_perftest not found (Debian package ucx-utils): its side "
                "skipped\n");
  // ordo three times: with the ranks sharing location memory (the default on one host: a halo
  // moves no bytes, so this is the rate at which a new version becomes readable by the other
  // rank), the same with the reader reading every byte of each version (what using the halo
  // costs it), and with locations copied through UCX (ORDO_SHARED_MEMORY=0, as between hosts).
  struct Mode {
    const char* name;
    const char* env;
    const char* ratio;  // name of its ratio to ucx_perftest
    bool read_all;
  };
  const Mode modes[] = {{"shared", "ORDO_SHARED_MEMORY=1", "ordo", false},
                        {"shared-read", "ORDO_SHARED_MEMORY=1", "read", true},
                        {"copy", "ORDO_SHARED_MEMORY=0", "copy", false}};
  std::map<std::pair<std::string, std::size_t>, std::vector<double>> ordo_mbps;  // mode, size
  std::map<std::pair<std::size_t, std::string>, std::vector<double>> ucx_mbps;  // by size, wait
  // By mode and size: ordo / that round's better ucx_perftest.
  std::map<std::pair<std::string, std::size_t>, std::vector<double>> paired;
  const char* tls = std::getenv("UCX_TLS");
  std::printf("# bench=halo: UCX_TLS=%s for both ordo and ucx_perftest (tag_bw, loopback, "
              "server and client on this host)\n", tls ? tls : "unset (all)");
  bool halo_failed = false;
  for (unsigned r = 0; r < o.reps; ++r) {
    auto ordo_halos = [&] {
      for (const Mode& mode : modes) {
        if (!halo_bin || !ordorun || halo_failed) break;
        std::vector<std::string> argv{"env", mode.env, ordorun->string(), "--timeout",
                                      std::to_string(o.timeout_s), "-n", "2", halo_bin->string(),
                                      "--bytes", o.halo_bytes, "--window",
                                      std::to_string(o.halo_window), "--mib",
                                      fmt::format("{}", o.halo_mib)};
        if (mode.read_all) argv.push_back("--read-all");
        CommandOutput out = run_command(argv, o.timeout_s);
        std::size_t found = 0;
        for (std::size_t pos = 0; pos < out.text.size();) {
          std::size_t nl = out.text.find('\n', pos);
          if (nl == std::string::npos) nl = out.text.size();
          auto f = parse_fields(std::string_view(out.text).substr(pos, nl - pos));
          pos = nl + 1;
          if (f["bench"] != "halo" || f["system"] != "ordo") continue;
          auto b = parse_number(f["bytes"]);
          auto m = parse_number(f["mbps"]);
          if (b && m) ordo_mbps[{mode.name, static_cast<std::size_t>(*b)}].push_back(*m), ++found;
        }
        if (out.status != 0 || found != sizes.size()) {
          halo_failed = failed = true;
          std::fprintf(stderr, "ordo-bench-stencil: ordo-bench-halo (%s) failed (rc=%d); its "
                               "last output:\n%s\n",
                       mode.env, out.status, last_lines(out.text, 8).c_str());
        }
      }
    };
    std::map<std::size_t, double> best;  // by size: this round's better wait mode
    auto ucx_halos = [&] {
      if (!perftest) return;
      for (std::size_t bytes : sizes)
        for (const char* wait : {"poll", "sleep"}) {
          const double total = o.halo_mib * 1048576.0;
          const auto iters = std::clamp<std::uint64_t>(
              static_cast<std::uint64_t>(total / static_cast<double>(bytes)), 50, 200000);
          const std::string text = run_ucx_perftest(*perftest, bytes, iters, wait, 60);
          if (auto m = parse_ucx_perftest_mbps(text, bytes)) {
            ucx_mbps[{bytes, wait}].push_back(*m);
            best[bytes] = std::max(best[bytes], *m);
          } else if (r == 0) {
            std::printf("# bench=halo bytes=%zu wait=%s: ucx_perftest gave no result (%s)\n",
                        bytes, wait,
                        text.empty() ? "it failed or timed out" : "no Final row in its output");
          }
        }
    };
    // ordo first in odd rounds, ucx_perftest first in even ones (round_order).
    for (std::size_t part : round_order(2, r)) part == 0 ? ordo_halos() : ucx_halos();
    // Paired with this round's ordo runs (as the triad is with the stencils): on a shared
    // machine both move together from one phase to the next, and their ratio much less.
    for (std::size_t bytes : sizes)
      for (const Mode& mode : modes) {
        auto& om = ordo_mbps[{mode.name, bytes}];
        if (best[bytes] > 0 && om.size() == r + 1)
          paired[{mode.name, bytes}].push_back(om.back() / best[bytes]);
      }
  }
  for (std::size_t bytes : sizes) {
    double best = 0;
    for (const char* wait : {"poll", "sleep"}) {
      const auto& v = ucx_mbps[{bytes, wait}];
      if (v.empty()) continue;
      best = std::max(best, median(v));
      fmt::print("bench=halo system=ucx_perftest bytes={} test=tag_bw wait={} reps={} "
                 "mbps={:.2f}\n", bytes, wait, v.size(), median(v));
    }
    for (const Mode& mode : modes) {
      const auto& v = ordo_mbps[{mode.name, bytes}];
      const double om = median(v);
      if (om > 0)
        fmt::print("bench=halo system=ordo mode={} bytes={} window={} reps={} mbps={:.2f}\n",
                   mode.name, bytes, o.halo_window, v.size(), om);
      // Against the better of ucx_perftest's two wait modes (busy polling wins on an idle
      // machine, sleeping on a loaded one), round by round: the median of the paired ratios.
      // ordo_vs_ucx_perftest is the default (shared), read_vs_ucx_perftest the same with the
      // reader reading the halo, copy_vs_ucx_perftest the copied halos.
      const auto& pr = paired[{mode.name, bytes}];
      fmt::print("bench=halo bytes={} {}_vs_ucx_perftest={} rounds={} medians_ratio={}\n", bytes,
                 mode.ratio,
                 pr.empty() ? std::string("nan") : fmt::format("{:.3f}", median(pr)), pr.size(),
                 format_ratio(om, best));
    }
  }
  return failed ? 1 : 0;
}

}  // namespace ordo::bench
