// ordo-bench-checkpoint: what a checkpoint costs per GB, against a plain
// write of the same bytes measured in the same run on the same directory.
// A graph of --locations locations holding --bytes in all (one cheap task per location) runs
// one iteration at a time on two Runtimes: one writing a checkpoint after every iteration
// (RuntimeOptions::checkpoint_every = 1), one without. A checkpoint's cost is the difference
// of the two runs' times. The plain write is what the disk itself gives: the same bytes, from
// the same buffers, into one file (temporary name, write, fsync, rename, fsync of the
// directory: the minimum an atomic write does). The three alternate, --reps times; medians.
// Output, one line:
//   bench=checkpoint bytes=B locations=L plain_gbps=P checkpoint_gbps=C ratio=R
// (ratio: checkpoint seconds / plain-write seconds; 1 means a checkpoint costs what the disk
// needs to take its bytes.)
// With --app heat2d (or another stencil app): the slowdown of a whole run. The app's binary
// (found beside this one, or in --bin-dir) runs --iters steps of --size three ways, --reps
// times in turn: without checkpoints, with one every --every steps written from a copy while
// the run goes on (the default), and with ORDO_CHECKPOINT_COPY=0 (written with the run
// stopped). The run's own seconds (its seconds= field) are compared, per repetition; medians:
//   bench=checkpoint-slowdown app=A size=S iters=I every=N plain_s=P copy_s=C stopped_s=T
//     copy_ratio=C/P stopped_ratio=T/P
// Exit status: 0 ok, 2 bad command line, an I/O error or a failed run of the app.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "cli_number.hpp"

namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The graph: `locations` blocks of doubles, each written (one element) by its own task.
struct Blocks {
  ordo::Graph graph;
  std::vector<ordo::Location<double>> locs;
  Blocks(std::uint32_t locations, std::size_t doubles_each) {
    locs = graph.location_family<double>("block", locations, doubles_each);
    for (auto l : locs) {
      auto d = graph.data(l);
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<double>(i);  // touched
    }
    const auto& L = locs;
    graph.task_family("touch", locations, [&L](std::uint32_t b, ordo::AccessList& acc) {
      acc.add(ordo::write(L[b]));
    }, [L](ordo::Context& ctx, std::uint32_t b) {
      ctx.write(L[b])[0] += 1;
    });
  }
};

void write_all(int fd, const void* p, std::size_t n, const std::string& path) {
  auto b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0) throw ordo::Error("cannot write " + path);
    b += w;
    n -= static_cast<std::size_t>(w);
  }
}

// The plain atomic write of every block's bytes into one file; its seconds.
double plain_write(const Blocks& blocks, const fs::path& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path tmp = dir / "plain.tmp", path = dir / "plain";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw ordo::Error("cannot create " + tmp.string());
  for (auto l : blocks.locs) {
    auto d = std::as_const(blocks.graph).data(l);
    write_all(fd, d.data(), d.size_bytes(), tmp.string());
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw ordo::Error("cannot sync " + tmp.string());
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw ordo::Error("cannot rename " + tmp.string());
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd < 0 || ::fsync(dfd) != 0) throw ordo::Error("cannot sync " + dir.string());
  ::close(dfd);
  return seconds_since(t0);
}

// The seconds= field of an app's result line.
double run_seconds(const ordo::bench::CommandOutput& out, const std::string& what) {
  const std::size_t at = out.text.find(" seconds=");
  if (out.status != 0 || at == std::string::npos)
    throw ordo::Error(what + " failed (exit " + std::to_string(out.status) +
                      "): " + ordo::bench::last_lines(out.text, 5));
  return std::stod(out.text.substr(at + 9));
}

struct Slowdown {
  std::string app, size, bin_dir;
  std::uint64_t iters = 300, every = 50;
  unsigned reps = 3, workers = 0;
};

// The --app mode: the app's run without checkpoints, with them from a copy, and with them
// written with the run stopped, in turn; each repetition's ratios, then their medians.
int slowdown(const Slowdown& o, const fs::path& dir) {
  const auto bin = ordo::bench::find_binary("ordo-" + o.app, o.bin_dir);
  if (!bin)
    throw ordo::Error("cannot find ordo-" + o.app + " beside this benchmark; give --bin-dir");
  std::vector<std::string> base = {"env",  bin->string(), "--size",
                                   o.size, "--iters",     std::to_string(o.iters)};
  if (o.workers) base.insert(base.end(), {"--workers", std::to_string(o.workers)});
  std::vector<double> plain, copy, stopped, copy_ratio, stopped_ratio;
  for (unsigned r = 0; r < o.reps; ++r) {
    auto timed = [&](const char* copy_setting) {
      std::vector<std::string> argv = base;
      if (copy_setting) {
        const fs::path ckpt = dir / "ckpt";
        argv.insert(argv.begin() + 1, std::string("ORDO_CHECKPOINT_COPY=") + copy_setting);
        argv.insert(argv.end(),
                    {"--checkpoint", ckpt.string(), "--checkpoint-every", std::to_string(o.every)});
        const double s = run_seconds(ordo::bench::run_command(argv, 3600),
                                     "ordo-" + o.app + " with checkpoints");
        std::error_code ec;
        fs::remove_all(ckpt, ec);
        return s;
      }
      return run_seconds(ordo::bench::run_command(argv, 3600), "ordo-" + o.app);
    };
    plain.push_back(timed(nullptr));
    copy.push_back(timed("1"));
    stopped.push_back(timed("0"));
    copy_ratio.push_back(copy.back() / plain.back());
    stopped_ratio.push_back(stopped.back() / plain.back());
  }
  using ordo::bench::median;
  fmt::print(
      "bench=checkpoint-slowdown app={} size={} iters={} every={} plain_s={:.3f} "
      "copy_s={:.3f} stopped_s={:.3f} copy_ratio={:.3f} stopped_ratio={:.3f}\n",
      o.app, o.size, o.iters, o.every, median(plain), median(copy), median(stopped),
      median(copy_ratio), median(stopped_ratio));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-checkpoint", [&]() -> int {
    CLI::App cli{"What a checkpoint costs per GB, against a plain write of the same bytes",
                 "ordo-bench-checkpoint"};
    std::uint64_t mib = 1024;
    std::uint32_t locations = 64;
    unsigned reps = 5, workers = 0;
    std::string dir_text;
    bool quick = false;
    cli.add_option("--mib", mib, "MiB of locations in all")
        ->check(ordo::cli::Integer(1, 1u << 20))->capture_default_str();
    cli.add_option("--locations", locations, "locations (blocks) holding them")
        ->check(ordo::cli::Integer(1, 1u << 16))->capture_default_str();
    cli.add_option("--reps", reps, "repetitions (medians)")
        ->check(ordo::cli::Integer(1, 1000))->capture_default_str();
    cli.add_option("--workers", workers, "worker threads (default: one per core)")
        ->check(ordo::cli::Integer(1, ordo::app::max_workers));
    cli.add_option("--dir", dir_text,
                   "directory on the disk to measure (default: a new one in $TMPDIR or /tmp)");
    cli.add_flag("--quick", quick,
                 "64 MiB, 3 repetitions (the benchmark suite's smoke run); with --app: "
                 "1024x1024, 100 steps, every 25");
    Slowdown sd;
    cli.add_option("--app", sd.app,
                   "measure the slowdown of this stencil app's run instead (heat2d, ...)");
    cli.add_option("--size", sd.size, "with --app: the grid (default 8192x8192)");
    cli.add_option("--iters", sd.iters, "with --app: steps")
        ->check(ordo::cli::Integer(1, 1u << 30))
        ->capture_default_str();
    cli.add_option("--every", sd.every, "with --app: steps between checkpoints")
        ->check(ordo::cli::Integer(1, 1u << 30))
        ->capture_default_str();
    cli.add_option("--bin-dir", sd.bin_dir, "with --app: the folder of the app's binary");
    if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
    if (quick) {
      mib = 64;
      reps = 3;
    }
    if (!sd.app.empty() && sd.size.empty()) sd.size = quick ? "1024x1024" : "8192x8192";
    if (!sd.app.empty() && quick) {
      sd.iters = 100;
      sd.every = 25;
    }
    sd.reps = reps;
    sd.workers = workers;
    const char* tmpdir = std::getenv("TMPDIR");
    fs::path base = dir_text.empty() ? fs::path(tmpdir && *tmpdir ? tmpdir : "/tmp") : fs::path(dir_text);
    std::string pattern = (base / "ordo-bench-checkpoint-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw ordo::Error("cannot create a directory in " + base.string() + "; give --dir");
    const fs::path dir = pattern;
    struct Cleanup {
      fs::path dir;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } cleanup{dir};
    if (!sd.app.empty()) return slowdown(sd, dir);

    const std::size_t doubles = std::max<std::size_t>(1, (mib << 20) / 8 / locations);
    const double bytes = static_cast<double>(doubles) * 8.0 * locations;
    Blocks plain_graph(locations, doubles), ckpt_graph(locations, doubles);
    ordo::Runtime plain_rt({.workers = workers});
    ordo::Runtime ckpt_rt({.workers = workers, .checkpoint_dir = (dir / "ckpt").string(),
                           .checkpoint_every = 1});
    plain_rt.run(plain_graph.graph, 1);  // first runs: engines built, pages placed
    ckpt_rt.run(ckpt_graph.graph, 1);
    std::vector<double> plain, ckpt;
    for (unsigned r = 0; r < reps; ++r) {
      const double without = plain_rt.run(plain_graph.graph, 1).seconds;
      const double with = ckpt_rt.run(ckpt_graph.graph, 1).seconds;
      ckpt.push_back(std::max(with - without, 1e-9));
      plain.push_back(plain_write(plain_graph, dir));
    }
    const double p = ordo::bench::median(plain), c = ordo::bench::median(ckpt);
    fmt::print("bench=checkpoint bytes={:.0f} locations={} plain_gbps={:.3f} checkpoint_gbps={:.3f} "
               "ratio={:.2f}\n",
               bytes, locations, bytes / p / 1e9, bytes / c / 1e9, c / p);
    return 0;
  });
}
