// ordo-bench-gather: the gather's two routes (api/gather.hpp, docs/distributed.md "Gather")
// against each other, in one job: `ordorun -n N ordo-bench-gather`. Each rank holds one piece
// of bytes/N; for each total size, onto rank 0 and onto every rank, the tree's graph and the
// direct one (all to all onto every rank, as the gather was before it took the tree) run
// --reps times, alternating, each timed on rank 0 from the gather's declaration to its end
// (graph check and barrier included, as a gather pays them; endpoints made beforehand by an
// untimed round of each). Rank 0 prints one line per size
// and destination:
//   bytes=S onto=one|all tree_seconds=T direct_seconds=D tree_vs_direct=T/D
// with medians. Internal headers: it forces the route, which gather_pieces chooses (so it is
// built with the tests, not in apps/, which see only the public API).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "api/gather.hpp"
#include "app_cli.hpp"
#include "bench_numbers.hpp"

namespace {

using ordo::detail::GatherPiece;
using ordo::detail::GatherRoute;

double gather_seconds(ordo::Runtime& rt, const std::vector<GatherPiece>& pieces, unsigned to,
                      GatherRoute route, std::vector<std::byte>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  ordo::Graph g;
  const std::size_t share = pieces.front().bytes;
  ordo::detail::declare_gather(
      g, "ordo.gather[bench].", rt.ranks(), pieces, to, route,
      [&](std::size_t i, std::span<std::byte> dst) {
        std::memset(dst.data(), static_cast<int>(i & 0xff), dst.size());
      },
      [&](std::size_t i, std::span<const std::byte> src) {
        std::memcpy(out.data() + i * share, src.data(), src.size());
      });
  rt.run(g, 1);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(int argc, char** argv) {
  std::string sizes_text = "4096,65536,1048576,16777216";
  unsigned reps = 5;
  CLI::App cli{"The gather's tree route against the direct one, across the ranks of this job "
               "(run it under ordorun -n N)",
               "ordo-bench-gather"};
  cli.add_option("--bytes", sizes_text, "total bytes gathered, comma-separated")
      ->capture_default_str();
  cli.add_option("--reps", reps, "gathers per route, size and destination (medians printed)")
      ->check(ordo::cli::Integer(1, 1000))
      ->capture_default_str();
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  const std::vector<std::size_t> sizes =
      ordo::bench::parse_size_list(sizes_text, "--bytes", {1, std::size_t{1} << 32, 1});
  ordo::Runtime rt({.workers = 1});
  const unsigned n = rt.ranks();
  if (n < 2) throw ordo::Error("run it on several ranks: ordorun -n 8 ordo-bench-gather");
  if (rt.rank() == 0)
    std::printf("# ordo-bench-gather: %u ranks, one piece of bytes/%u per rank, 1 worker per "
                "rank, %u gathers per route, load average %s\n",
                n, n, reps, ordo::bench::load_average().c_str());
  {  // Warm-up, untimed: both routes' endpoints exist before anything is timed.
    std::vector<GatherPiece> pieces(n);
    for (unsigned r = 0; r < n; ++r) pieces[r] = {1, r};
    std::vector<std::byte> out(n);
    for (unsigned to : {0u, ordo::kAllRanks})
      for (GatherRoute route : {GatherRoute::tree, GatherRoute::direct})
        gather_seconds(rt, pieces, to, route, out);
  }
  for (std::size_t bytes : sizes) {
    std::vector<GatherPiece> pieces(n);
    for (unsigned r = 0; r < n; ++r) pieces[r] = {std::max<std::size_t>(bytes / n, 1), r};
    std::vector<std::byte> out(pieces[0].bytes * n);
    for (unsigned to : {0u, ordo::kAllRanks}) {
      std::vector<double> tree, direct;
      for (unsigned rep = 0; rep < reps; ++rep) {
        // Alternated, each first in every other repetition.
        const bool tree_first = rep % 2 == 0;
        const double a = gather_seconds(rt, pieces, to,
                                        tree_first ? GatherRoute::tree : GatherRoute::direct, out);
        const double b = gather_seconds(rt, pieces, to,
                                        tree_first ? GatherRoute::direct : GatherRoute::tree, out);
        tree.push_back(tree_first ? a : b);
        direct.push_back(tree_first ? b : a);
      }
      if (rt.rank() != 0) continue;
      const double t = ordo::bench::median(tree), d = ordo::bench::median(direct);
      std::printf("%s\n", fmt::format("bytes={} onto={} tree_seconds={:.6f} direct_seconds={:.6f} "
                                      "tree_vs_direct={:.3f}",
                                      pieces[0].bytes * n, to == 0 ? "one" : "all", t, d, t / d)
                              .c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-gather", [&] { return run(argc, argv); });
}
