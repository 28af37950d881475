// ordo-bench-halo: ordo's halo throughput between two ranks, one line per message size, for
// ordo-bench-stencil --ranks (which compares it with ucx_perftest's tag bandwidth in the same
// run). Run it as two ranks:
//   ordorun -n 2 ordo-bench-halo --bytes 8192,65536 [--window 8] [--mib 64]
//
// What is measured: a location of S bytes homed on rank 0 and written there by a task every
// iteration, read by a task on rank 1 (which writes a one-element sink of its own, homed on
// rank 1, so that the owner-computes rule places it there). Each iteration therefore moves the
// location's new version once, rank 0 -> rank 1 (the read GRANT carries the bytes), and brings
// back a RELEASE without bytes before rank 0 may write again -- exactly a stencil's halo
// exchange. `--window K` such pairs of locations run side by side, so K transfers can be in
// flight, as K halos of a decomposition are (ucx_perftest's tag_bw, the peer, keeps many sends
// in flight too). The writer touches one element per iteration (the bytes moved are the whole
// location regardless: the protocol sends versions, not diffs), and so does the reader, unless
// `--read-all`: then it reads every byte of the version it got (XOR of its words), as a stencil
// reads its halo. That matters between ranks of one host, which share the location's memory
// (docs/distributed.md): no byte moves, and without --read-all the figure is the rate at which
// a new version becomes readable on the other rank.
//
// Rank 0 prints, per size, after a warm-up run:
//   bench=halo system=ordo bytes=S window=K iters=N seconds=T mbps=X
// with mbps = S * K * N / T / 1e6 (decimal megabytes per second).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <span>

#include "app_cli.hpp"
#include "bench_numbers.hpp"

namespace {

int run(int argc, char** argv) {
  CLI::App cli{"Halo throughput of ordo between two ranks (run under ordorun -n 2)",
               "ordo-bench-halo"};
  std::string bytes_list = "8192,16384,65536,262144,1048576,4194304";
  unsigned window = 8;
  double mib = 64;
  unsigned workers = 1;
  bool read_all = false;
  cli.add_option("--bytes", bytes_list, "comma-separated location sizes in bytes")
      ->capture_default_str();
  cli.add_option("--window", window, "location pairs side by side (transfers in flight)")
      ->check(ordo::cli::Integer(0, 1024))
      ->capture_default_str();
  cli.add_option("--mib", mib, "MiB moved per size in the timed run (at least 20 iterations)")
      ->check(ordo::cli::Real(0, 1e6))
      ->capture_default_str();
  cli.add_option("--workers", workers, "worker threads per rank")
      ->check(ordo::cli::Integer(1, ordo::app::max_workers))
      ->capture_default_str();
  cli.add_flag("--read-all", read_all, "the reader reads every byte of each version it gets");
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  const std::vector<std::size_t> sizes =
      ordo::bench::parse_size_list(bytes_list, "--bytes", {8, std::uint64_t{1} << 30, 8});
  if (window == 0) throw ordo::Error("--window 0: use at least one location pair");
  if (!(mib > 0)) throw ordo::Error("--mib must be positive");

  ordo::Runtime rt({.workers = workers});
  if (rt.ranks() != 2)
    throw ordo::Error("ordo-bench-halo runs on exactly 2 ranks (ordorun -n 2 ordo-bench-halo), "
                      "not " + std::to_string(rt.ranks()));
  for (std::size_t bytes : sizes) {
    ordo::Graph g;
    const std::size_t n = bytes / sizeof(double);
    for (unsigned k = 0; k < window; ++k) {
      auto halo = g.location<double>("halo" + std::to_string(k), n);
      auto sink = g.location<double>("sink" + std::to_string(k), 1);
      g.set_home_rank(halo, 0);
      g.set_home_rank(sink, 1);
      g.task("put" + std::to_string(k), {ordo::write(halo)}, [=](ordo::Context& ctx) {
        ctx.write(halo)[ctx.iteration() % n] = static_cast<double>(ctx.iteration());
      });
      g.task("get" + std::to_string(k), {ordo::write(sink), ordo::read(halo)},
             [=](ordo::Context& ctx) {
               std::span<const double> h = ctx.read(halo);
               if (!read_all) {
                 ctx.write(sink)[0] += h[ctx.iteration() % n];
                 return;
               }
               std::uint64_t x = 0;  // integer XOR: vectorised, unlike a strict double sum
               for (double v : h) x ^= std::bit_cast<std::uint64_t>(v);
               ctx.write(sink)[0] += static_cast<double>(x & 1);
             });
    }
    const double total = mib * 1048576.0;
    const auto iters = std::max<std::uint64_t>(
        20, static_cast<std::uint64_t>(total / static_cast<double>(bytes * window)));
    rt.run(g, std::max<std::uint64_t>(3, iters / 10));  // warm-up: connect, graph check, pages
    const ordo::RunStats s = rt.run(g, iters);
    if (rt.rank() == 0)
      fmt::print("bench=halo system=ordo bytes={} window={} iters={} seconds={:.6f} mbps={:.2f}{}\n",
                 bytes, window, iters, s.seconds,
                 static_cast<double>(bytes * window * iters) / s.seconds / 1e6,
                 read_all ? " read=all" : "");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-halo", [&] { return run(argc, argv); });
}
