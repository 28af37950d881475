// Random graphs across ranks, for the multiprocess suite: every rank builds the same graphs
// (SPMD), runs them, and checks the locations whose home is this rank against the sequential
// interpreter, bit for bit. Exit 0 when all match, 1 otherwise; one summary line per rank.
//   ordorun -n 3 dist_graphs --seeds 20 --workers 2
// Fault modes: --mismatch (rank 1 names a task differently), --die-at K (rank 1 kills itself
// with SIGKILL in iteration K of a long run), --fiber-die-at K (rank 0 kills itself in
// iteration K while rank 1's fiber task waits for a location rank 0 writes: the fiber must be
// woken and the run end with PeerFailure). --ignore-sigterm leaves the ending to the runtime
// (ordorun sends SIGTERM to the survivors at once, SIGKILL after --grace). A failure prints
// its type: "dist_graphs: PeerFailure of rank R: ...", "ProtocolError ...", "GraphMismatch".
// --ring K: location x[r] on each rank r, task t[r] writes x[r] = x[r-1] + 1 (x[R-1] of the
// previous iteration for r = 0) for K iterations: each rank talks to the two ranks beside it
// and to its control-plane tree, no other; each checks its x[r] against the sequential value.
// --memory-check: Runtime::check_memory_on_all_ranks across the ranks of this host.
// --memory-check-alone: rank 0 calls it while the other ranks run a graph: every rank is
// refused with an Error (rank 0's saying the check is collective), none waits for ever.
// --busy-home (2 ranks, 1 worker each): rank 1's only worker stays in one task body until rank
// 0 has run 200 iterations of a task whose every iteration needs rank 1 (the home of a
// location it writes) to answer its RELEASE with the next GRANT. Idle workers drive the
// network, so this checks that the progress thread takes over while the worker is busy (else
// rank 1 gives up after 20 s and the run fails).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "random_graph.hpp"

using namespace ordo;
using namespace ordo::test;

int main(int argc, char** argv) {
  std::uint64_t seeds = 20;
  unsigned workers = 2;
  bool mismatch = false, busy_home = false, memory_check = false, memory_check_alone = false;
  long die_at = -1, fiber_die_at = -1, ring = -1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mismatch")) mismatch = true;
    if (!std::strcmp(argv[i], "--busy-home")) busy_home = true;
    if (!std::strcmp(argv[i], "--memory-check")) memory_check = true;
    if (!std::strcmp(argv[i], "--memory-check-alone")) memory_check_alone = true;
    if (!std::strcmp(argv[i], "--ignore-sigterm")) std::signal(SIGTERM, SIG_IGN);
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--seeds")) seeds = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--workers")) workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--die-at")) die_at = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--fiber-die-at")) fiber_die_at = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--ring")) ring = std::atol(argv[i + 1]);
  }
  try {
    Runtime rt({.workers = workers});
    if (memory_check_alone) {
      try {
        if (rt.rank() == 0) {
          rt.check_memory_on_all_ranks(std::uint64_t{1} << 20, "a mebibyte on rank 0 alone");
        } else {
          Graph g;
          auto a = g.location<double>("a", 1);
          g.task("t", {write(a)}, [=](Context& ctx) { ctx.write(a)[0] += 1; });
          rt.run(g, 1);
        }
        std::printf("rank %u: not refused\n", rt.rank());
        return 1;
      } catch (const Error& e) {
        const std::string m = e.what();
        const bool ok =
            rt.rank() != 0 || m.find("is collective: every rank must call it") != std::string::npos;
        std::printf("rank %u: %s: %s\n", rt.rank(), ok ? "refused" : "WRONG refusal", m.c_str());
        return ok ? 0 : 1;
      }
    }
    if (memory_check) {
      // Runtime::check_memory_on_all_ranks: a mebibyte passes on every rank; three fifths of the
      // host's available memory fit each rank alone but not its host's ranks together, so
      // every rank refuses, naming every rank and the host's sum.
      rt.check_memory_on_all_ranks(std::uint64_t{1} << 20, "a mebibyte");
      std::uint64_t available_kb = 0, swap_kb = 0;
      std::ifstream meminfo("/proc/meminfo");
      for (std::string key; meminfo >> key;) {
        if (key == "MemAvailable:") meminfo >> available_kb;
        if (key == "SwapFree:") meminfo >> swap_kb;
      }
      const std::uint64_t share = (available_kb + swap_kb) * 1024 / 5 * 3;
      try {
        rt.check_memory_on_all_ranks(share, "three fifths of the host");
        std::printf("rank %u: %u ranks of one host were allowed three fifths of it each\n",
                    rt.rank(), rt.ranks());
        return 1;
      } catch (const Error& e) {
        const std::string m = e.what();
        bool ok = m.rfind("three fifths of the host do not fit in memory: rank ", 0) == 0 &&
                  m.find("its host's ranks") != std::string::npos;
        for (unsigned r = 0; r < rt.ranks(); ++r)
          ok = ok && m.find("rank " + std::to_string(r) + " needs ") != std::string::npos;
        std::printf("rank %u: %s: %s\n", rt.rank(), ok ? "refused" : "WRONG refusal", m.c_str());
        return ok ? 0 : 1;
      }
    }
    if (busy_home) {
      if (rt.ranks() != 2) throw std::runtime_error("--busy-home runs on 2 ranks");
      constexpr std::uint64_t kIters = 200;
      // Both ranks run on this host: rank 0's last iteration leaves a file that rank 1 waits for.
      const char* token = std::getenv("ORDO_STORE");
      std::string name = "ordo-busy-home-" + std::string(token ? token : "x");
      for (char& c : name)
        if (c == ':' || c == '/') c = '-';
      const std::filesystem::path marker = std::filesystem::temp_directory_path() / name;
      bool seen = false;
      Graph g;
      auto a = g.location<double>("a", 1);
      auto x = g.location<double>("x", 1);
      auto b = g.location<double>("b", 1);
      g.set_home_rank(a, 0);
      g.set_home_rank(x, 1);
      g.set_home_rank(b, 1);
      g.task("w", {write(a), write(x)}, [&](Context& ctx) {  // runs on rank 0
        ctx.write(x)[0] += 1;
        if (ctx.iteration() == kIters - 1) std::ofstream(marker) << "done\n";
      });
      g.task("long", {write(b)}, [&](Context& ctx) {  // runs on rank 1
        if (ctx.iteration() != 0) return;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!(seen = std::filesystem::exists(marker)) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      rt.run(g, kIters);
      if (rt.rank() == 0) {
        std::printf("rank 0: %llu iterations of w done\n", static_cast<unsigned long long>(kIters));
        return 0;
      }
      std::filesystem::remove(marker);
      const double xv = g.data(x)[0];
      std::printf("rank 1: %s; x = %g\n",
                  seen ? "the home answered while its only worker was busy"
                       : "rank 0 did not finish while this rank's worker was busy",
                  xv);
      return seen && xv == static_cast<double>(kIters) ? 0 : 1;
    }
    if (ring > 0) {
      const unsigned ranks = rt.ranks(), me = rt.rank();
      Graph g;
      std::vector<Location<long>> x;
      for (unsigned r = 0; r < ranks; ++r) {
        x.push_back(g.location<long>("x[" + std::to_string(r) + "]", 1));
        g.set_home_rank(x[r], r);
      }
      for (unsigned r = 0; r < ranks; ++r) {
        const auto& before = x[(r + ranks - 1) % ranks];
        if (ranks == 1) {
          g.task("t[0]", {write(x[0])}, [&](Context& ctx) { ctx.write(x[0])[0] += 1; });
          break;
        }
        g.task("t[" + std::to_string(r) + "]", {write(x[r]), read(before)},
               [&, r](Context& ctx) { ctx.write(x[r])[0] = ctx.read(before)[0] + 1; });
      }
      rt.run(g, static_cast<std::uint64_t>(ring));
      std::vector<long> want(ranks, 0);
      for (long i = 0; i < ring; ++i)
        for (unsigned r = 0; r < ranks; ++r) want[r] = want[(r + ranks - 1) % ranks] + 1;
      const long got = g.data(x[me])[0];
      std::printf("rank %u: ring of %u ranks, %ld iterations: x = %ld (sequential %ld)\n", me,
                  ranks, ring, got, want[me]);
      return got == want[me] ? 0 : 1;
    }
    if (fiber_die_at >= 0) {
      Graph g;
      auto a = g.location<int>("a", 4);
      auto b = g.location<int>("b", 4);
      g.set_home_rank(a, 0);
      g.set_home_rank(b, 1);
      g.task("wa", {write(a)}, [&](Context& ctx) {  // rank 0
        if (ctx.iteration() == static_cast<std::uint64_t>(fiber_die_at)) std::raise(SIGKILL);
      });
      g.fiber_task("wb", {write(b), read(a)}, [=](FiberContext& ctx) {  // rank 1
        ctx.acquire_write(b)[0] = ctx.acquire_read(a)[0];
      });
      rt.run(g, 1000000);
      std::printf("rank %u: the faulty run completed\n", rt.rank());
      return 0;
    }
    if (mismatch || die_at >= 0) {
      Graph g;
      auto a = g.location<int>("a", 4);
      auto b = g.location<int>("b", 4);
      const bool dying = die_at >= 0 && rt.rank() == 1;
      // wb runs on b's home: rank 1 whatever the rank count (ranks 2.. then only take part in
      // the control plane's rounds, which the death must end too).
      g.set_home_rank(b, 1);
      g.task("wa", {write(a), read(b)}, [](Context&) {});
      g.task(mismatch && rt.rank() == 1 ? "wb-renamed" : "wb", {write(b), read(a)},
             [&](Context& ctx) {
               if (dying && ctx.iteration() == static_cast<std::uint64_t>(die_at))
                 std::raise(SIGKILL);
             });
      rt.run(g, 1000000);
      std::printf("rank %u: the faulty run completed\n", rt.rank());
      return 0;
    }
    std::uint64_t checked = 0, wrong = 0;
    // The runs below share location memory between the ranks (one host) unless told not to.
    const char* share_env = std::getenv("ORDO_SHARED_MEMORY");
    const bool shared = share_env != nullptr && std::strcmp(share_env, "1") == 0;
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      GraphSpec spec = random_spec(seed + 77, 7, 12);
      Graph g;
      auto locs = build(g, spec);
      // Odd seeds: a scattered placement instead of the default chunks.
      if (seed % 2)
        for (std::size_t l = 0; l < locs.size(); ++l)
          g.set_home_rank(locs[l], static_cast<unsigned>((l * 7 + seed) % rt.ranks()));
      // Seeds 2 and 3 of every 4: every rank sets every location first (SPMD initialisation).
      const bool initialise = seed % 4 >= 2;
      if (initialise)
        for (std::uint32_t l = 0; l < locs.size(); ++l) {
          auto d = g.data(locs[l]);
          for (std::size_t i = 0; i < d.size(); ++i) d[i] = initial_value(l, i);
        }
      const std::uint64_t first = 1 + seed % 3, second = 1 + seed % 2;
      rt.run(g, first);
      rt.run(g, second);
      // This rank holds storage for its home locations and its tasks' replicas only (not for
      // a replica it shares with the home), whatever the program set before the first run.
      std::size_t want_bytes = 0, want_count = 0;
      const auto held = expected_storage(
          spec, [&](std::uint32_t l) { return g.home_rank(locs[l]); }, rt.rank(), rt.ranks(),
          shared);
      for (std::size_t l = 0; l < locs.size(); ++l)
        if (held[l]) {
          want_bytes += spec.sizes[l] * sizeof(std::uint64_t);
          ++want_count;
        }
      if (g.storage_held().bytes != want_bytes || g.storage_held().locations != want_count) {
        ++wrong;
        std::fprintf(stderr, "rank %u: seed %llu holds %zu locations of %zu bytes, expected %zu of "
                     "%zu\n", rt.rank(), static_cast<unsigned long long>(seed),
                     g.storage_held().locations, g.storage_held().bytes, want_count, want_bytes);
      }
      std::vector<std::uint32_t> order(spec.tasks.size());
      std::iota(order.begin(), order.end(), 0u);
      auto want = interpret(spec, order, first + second, initialise);
      auto complain = [&](const char* what, std::size_t l) {
        ++wrong;
        std::fprintf(stderr, "rank %u: seed %llu location %zu: %s\n", rt.rank(),
                     static_cast<unsigned long long>(seed), l, what);
      };
      // A gather onto one rank (a different one per seed) delivers there only.
      const unsigned to = static_cast<unsigned>(seed % rt.ranks());
      for (std::size_t l = 0; l < locs.size(); ++l) {
        // Every rank collects every location, bit for bit the sequential run's.
        const std::vector<std::uint64_t> all = rt.gather(g, locs[l]);
        if (all != want[l]) complain("gathered onto every rank, differs from the sequential run", l);
        const std::vector<std::uint64_t> one = rt.gather(g, locs[l], to);
        if (rt.rank() == to ? one != want[l] : !one.empty())
          complain("gathered onto one rank, differs (or reached another rank)", l);
        if (g.home_rank(locs[l]) != rt.rank()) {
          // Another rank's location: Graph::data refuses it, saying to gather.
          try {
            (void)g.data(locs[l]);
            complain("Graph::data of another rank's location was not refused", l);
          } catch (const Error& e) {
            if (!std::strstr(e.what(), "Runtime::gather")) complain(e.what(), l);
          }
          continue;
        }
        ++checked;
        auto got = g.data(locs[l]);
        if (!std::equal(got.begin(), got.end(), want[l].begin(), want[l].end()))
          complain("differs from the sequential run", l);
      }
    }
    // Every rank's value, in rank order, on every rank; a rank the job does not have is refused
    // on every rank before anything is sent.
    std::vector<unsigned> ranks_seen = rt.gather_values(rt.rank());
    for (unsigned r = 0; r < rt.ranks(); ++r)
      if (ranks_seen.size() != rt.ranks() || ranks_seen[r] != r) {
        ++wrong;
        std::fprintf(stderr, "rank %u: gather_values gave the wrong ranks\n", rt.rank());
        break;
      }
    try {
      (void)rt.gather_values(1, rt.ranks());
      ++wrong;
      std::fprintf(stderr, "rank %u: a gather onto rank %u was not refused\n", rt.rank(), rt.ranks());
    } catch (const Error&) {
    }
    // Convergence across ranks: stops at the first checked iteration where every rank agrees.
    Graph g;
    auto counter = g.location<std::uint64_t>("counter", 1);
    g.task("count", {write(counter)}, [=](Context& ctx) { ctx.write(counter)[0] += 1; });
    Until until{[&](const Graph& graph) {
                  return g.home_rank(counter) != rt.rank() || graph.data(counter)[0] >= 37;
                },
                5, 1000};
    RunStats s = rt.run_until(g, until);
    if (s.iterations != 40) {
      ++wrong;
      std::fprintf(stderr, "rank %u: run_until ran %llu iterations, expected 40\n", rt.rank(),
                   static_cast<unsigned long long>(s.iterations));
    }
    std::printf("rank %u of %u: %llu locations checked, %llu wrong\n", rt.rank(), rt.ranks(),
                static_cast<unsigned long long>(checked), static_cast<unsigned long long>(wrong));
    return wrong ? 1 : 0;
  } catch (const ProtocolError& e) {
    std::fprintf(stderr, "dist_graphs: ProtocolError from rank %u: %s\n", e.rank(), e.what());
    return 2;
  } catch (const PeerFailure& e) {
    std::fprintf(stderr, "dist_graphs: PeerFailure of rank %u: %s\n", e.rank(), e.what());
    return 2;
  } catch (const GraphMismatch& e) {
    std::fprintf(stderr, "dist_graphs: GraphMismatch: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_graphs: %s\n", e.what());
    return 2;
  }
}
