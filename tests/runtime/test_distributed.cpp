// Over 600 lines: every case runs on the same simulated ranks (LoopbackHub, run_failing, the
// forged headers), which a second file would have to share through a header of its own.
// The engine across ranks, with every rank simulated in this process over LoopbackNet: each
// rank builds its own copy of the graph (SPMD) and runs on its own pool. Results are compared
// with the sequential interpreter, taking each location from its home rank.
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "apps/common/peak_rss.hpp"
#include "graph_spec.hpp"
#include "loopback_net.hpp"
#include "protocol_graph.hpp"
#include "runtime/engine.hpp"
#include "runtime/plan.hpp"
#include "runtime/storage.hpp"
#include "runtime/wire.hpp"
#include "scheduler/pool.hpp"
#include "skip.hpp"

using namespace ordo;
using namespace ordo::test;

namespace {

// Builds `spec` as a runtime graph (every rank does the same). `families`: consecutive tasks
// grouped into families of up to 3 members sharing one body, which finds its task from
// Instance::index.
void build(rt::Graph& g, const GraphSpec& spec, bool families = false) {
  for (std::size_t l = 0; l < spec.sizes.size(); ++l)
    g.add_location("L" + std::to_string(l), 8, spec.sizes[l], typeid(std::uint64_t));
  if (families) {
    for (std::uint32_t first = 0; first < spec.tasks.size(); first += 3) {
      const auto end = std::min<std::uint32_t>(first + 3, static_cast<std::uint32_t>(spec.tasks.size()));
      g.begin_family("F" + std::to_string(first), [&spec, first](const rt::Instance& in) {
        // No Catch2 on workers: a wrong index fails the run instead.
        if (in.task != first + in.index) throw std::logic_error("member index does not match task");
        run_body(spec, first + in.index, in.iteration, [&](std::uint32_t l) {
          const auto& loc = in.graph->locations()[l];
          return std::span<std::uint64_t>(reinterpret_cast<std::uint64_t*>(in.graph->data(l)),
                                          loc.count);
        });
      });
      for (std::uint32_t t = first; t < end; ++t) {
        for (const AccessSpec& a : spec.tasks[t].accesses)
          g.add_access({a.location, a.write ? rt::Mode::write : rt::Mode::read,
                        a.position.has_value(), a.position.value_or(0)});
        g.end_member();
      }
    }
    return;
  }
  for (std::uint32_t t = 0; t < spec.tasks.size(); ++t) {
    rt::TaskDesc d;
    d.name = "T" + std::to_string(t);
    for (const AccessSpec& a : spec.tasks[t].accesses)
      d.accesses.push_back({a.location, a.write ? rt::Mode::write : rt::Mode::read,
                            a.position.has_value(), a.position.value_or(0)});
    d.body = [&spec, t](const rt::Instance& in) {
      run_body(spec, t, in.iteration, [&](std::uint32_t l) {
        const auto& loc = in.graph->locations()[l];
        return std::span<std::uint64_t>(reinterpret_cast<std::uint64_t*>(in.graph->data(l)),
                                        loc.count);
      });
    };
    g.add_task(std::move(d));
  }
}

struct Rank {
  rt::Graph graph{false};
  std::unique_ptr<sched::Pool> pool;
  std::unique_ptr<rt::Engine> engine;
};

// Runs `spec` on `ranks` simulated ranks; `homes` (optional) overrides location placement.
// Returns each location's contents taken from its home rank.
std::vector<std::vector<std::uint64_t>> run_ranks(const GraphSpec& spec, unsigned ranks,
                                                  unsigned workers, std::uint64_t first,
                                                  std::uint64_t second,
                                                  const std::vector<std::int32_t>& homes = {},
                                                  LoopbackHub* hub_out = nullptr,
                                                  bool families = false, bool late_copy = false,
                                                  bool shared = false,
                                                  const std::function<void(std::vector<Rank>&)>&
                                                      inspect = {},
                                                  bool initialise = false) {
  LoopbackHub local_hub(ranks, late_copy);
  LoopbackHub& hub = hub_out ? *hub_out : local_hub;
  std::vector<Rank> rs(ranks);
  // Locations in shared memory (the hub must then say the ranks share a host).
  if (shared)
    for (Rank& r : rs) r.graph = rt::Graph(true);
  // Engines are built concurrently: construction exchanges graph digests.
  std::vector<std::future<void>> f;
  for (unsigned r = 0; r < ranks; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      build(rs[r].graph, spec, families);
      for (std::size_t l = 0; l < homes.size(); ++l)
        rs[r].graph.set_home(static_cast<std::uint32_t>(l), homes[l]);
      // SPMD initialisation: every rank sets every location (the api's Graph::data does the
      // same before the first run).
      if (initialise)
        for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
          if (!rs[r].graph.provide_storage(l, true)) throw std::runtime_error("no memory");
          auto* p = reinterpret_cast<std::uint64_t*>(rs[r].graph.data(l));
          for (std::size_t i = 0; i < spec.sizes[l]; ++i) p[i] = initial_value(l, i);
        }
      auto c = rt::compile(rs[r].graph);
      if (!c.error.empty()) throw std::runtime_error(c.error);  // no Catch2 outside main
      rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{workers});
      rs[r].engine = std::make_unique<rt::Engine>(rs[r].graph, std::move(c.plan), &hub.net(r), 7);
    }));
  for (auto& x : f) x.get();
  f.clear();
  std::vector<std::future<std::uint64_t>> runs;
  for (unsigned r = 0; r < ranks; ++r)
    runs.push_back(std::async(std::launch::async, [&, r] {
      std::uint64_t n = rs[r].engine->run(*rs[r].pool, first, {}, 0);
      if (second) n += rs[r].engine->run(*rs[r].pool, second, {}, 0);
      return n;
    }));
  for (auto& x : runs) CHECK(x.get() == first + second);
  if (inspect) inspect(rs);
  std::vector<std::vector<std::uint64_t>> out;
  for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
    const rt::Graph& g = rs[rs[0].engine->home(l)].graph;
    auto p = reinterpret_cast<const std::uint64_t*>(g.data(l));
    out.emplace_back(p, p + spec.sizes[l]);
  }
  return out;
}

}  // namespace

namespace {

// `seeds` random graphs (seeds from `base`) on `lo`..`hi` ranks x 1-2 workers, each compared
// with the sequential interpreter.
void check_random_graphs(std::uint64_t base, std::uint64_t seeds, unsigned lo, unsigned hi,
                         bool families, bool late_copy, bool shared = false) {
  std::uint64_t messages = 0;  // protocol messages of all runs (some graphs need none)
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    GraphSpec spec = random_spec(seed + base, 6, 10);
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, 5);
    for (unsigned ranks = lo; ranks <= hi; ++ranks)
      for (unsigned workers : {1u, 2u}) {
        INFO("seed " << seed << " ranks " << ranks << " workers " << workers);
        LoopbackHub hub(ranks, late_copy, shared);
        CHECK(run_ranks(spec, ranks, workers, 3, 2, {}, &hub, families, late_copy, shared) == want);
        if (!shared) continue;
        // Every location is small, hence shared: never a byte of payload.
        std::uint64_t bytes = 0;
        for (unsigned a = 0; a < ranks; ++a)
          for (unsigned b = 0; b < ranks; ++b) {
            messages += hub.messages(a, b);
            bytes += hub.bytes(a, b);
          }
        CHECK(bytes == 0);
      }
  }
  if (shared) CHECK(messages > 0);
}

}  // namespace

TEST_CASE("random graphs give the sequential result on 1 to 4 ranks", "[distributed]") {
  check_random_graphs(1000, 40, 1, 4, false, false);
}

// The control plane's trees (control_plane.hpp) at rank counts past the all-to-all tests':
// larger graphs, each location homed on a random rank, so that most ranks hold some.
TEST_CASE("random graphs give the sequential result on 8 to 64 ranks", "[distributed]") {
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    GraphSpec spec = random_spec(seed + 3000, 40, 40);
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, 5);
    for (unsigned ranks : {8u, 17u, 64u}) {
      INFO("seed " << seed << " ranks " << ranks);
      std::vector<std::int32_t> homes(spec.sizes.size());
      for (std::size_t l = 0; l < homes.size(); ++l)
        homes[l] = static_cast<std::int32_t>((l * 7 + seed * 13) % ranks);
      CHECK(run_ranks(spec, ranks, 1, 3, 2, homes) == want);
    }
  }
}

// An early GRANT is sent from the location itself: the writer must wait for its `sent`. With
// payloads copied only at delivery, a writer let in sooner changes what the reader gets.
TEST_CASE("random graphs give the sequential result when payloads are copied late",
          "[distributed]") {
  check_random_graphs(7000, 20, 2, 4, false, true);
}

// Ranks of one host read and write the home's buffer in place: GRANTs and RELEASEs carry no
// bytes, and a writer waits for the readers' RELEASE (no early grant).
TEST_CASE("random graphs give the sequential result when the ranks share location memory",
          "[distributed]") {
  check_random_graphs(9000, 30, 2, 4, false, false, true);
  check_random_graphs(9500, 10, 2, 3, true, false, true);
}

// Locations of 2 MiB and more stay private (huge pages) and are copied, the others shared, in
// one graph: every payload byte on the wire belongs to the large location.
TEST_CASE("a graph mixing shared and copied locations gives the sequential result",
          "[distributed]") {
  std::uint64_t copied = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    GraphSpec spec = random_spec(seed + 9900, 6, 10);
    spec.sizes[0] = (std::size_t{2} << 20) / 8 + 1;  // just over 2 MiB of uint64
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, 5);
    for (unsigned ranks = 2; ranks <= 3; ++ranks)
      for (unsigned workers : {1u, 2u}) {
        INFO("seed " << seed << " ranks " << ranks << " workers " << workers);
        LoopbackHub hub(ranks, false, true);
        CHECK(run_ranks(spec, ranks, workers, 3, 2, {}, &hub, false, false, true) == want);
        std::uint64_t bytes = 0;
        for (unsigned a = 0; a < ranks; ++a)
          for (unsigned b = 0; b < ranks; ++b) bytes += hub.bytes(a, b);
        CHECK(bytes % (spec.sizes[0] * 8) == 0);
        copied += bytes;
      }
  }
  CHECK(copied > 0);
}

// Three ranks of one host where rank 2 does not share: its graph keeps its locations private
// (`private_storage`: ORDO_SHARED_MEMORY=0 there), or it is told not to share although they
// are shareable (the engine's `share`: RuntimeOptions::shared_memory = false). Ranks 0 and 1
// share with each other; rank 2 copies to and from both, and every result is the sequential
// one. Returns the payload bytes to and from rank 2 over `seeds` graphs.
std::uint64_t run_with_one_rank_copying(std::uint64_t base, std::uint64_t seeds,
                                        bool private_storage) {
  std::uint64_t copied = 0;
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    GraphSpec spec = random_spec(seed + base, 6, 10);
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, 5);
    const unsigned ranks = 3;
    LoopbackHub hub(ranks, false, true);
    std::vector<Rank> rs(ranks);
    for (unsigned r = 0; r < ranks; ++r)
      if (r != 2 || !private_storage) rs[r].graph = rt::Graph(true);
    std::vector<std::future<std::uint64_t>> f;
    for (unsigned r = 0; r < ranks; ++r)
      f.push_back(std::async(std::launch::async, [&, r] {  // no Catch2 outside main
        build(rs[r].graph, spec);
        auto c = rt::compile(rs[r].graph);
        if (!c.error.empty()) throw std::runtime_error(c.error);
        rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{1});
        rs[r].engine = std::make_unique<rt::Engine>(rs[r].graph, std::move(c.plan), &hub.net(r), 7,
                                                    /*share=*/private_storage || r != 2);
        return rs[r].engine->run(*rs[r].pool, 5, {}, 0);
      }));
    INFO("seed " << seed);
    for (auto& x : f) CHECK(x.get() == 5);
    for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
      auto p = reinterpret_cast<const std::uint64_t*>(rs[rs[0].engine->home(l)].graph.data(l));
      CHECK(std::vector<std::uint64_t>(p, p + spec.sizes[l]) == want[l]);
    }
    CHECK(hub.bytes(0, 1) == 0);
    CHECK(hub.bytes(1, 0) == 0);
    copied += hub.bytes(0, 2) + hub.bytes(2, 0) + hub.bytes(1, 2) + hub.bytes(2, 1);
  }
  return copied;
}

// Sharing needs both ends: a rank whose graph keeps its locations private (ORDO_SHARED_MEMORY=0
// there) makes its peers copy to and from it, whatever they keep.
TEST_CASE("ranks share only with peers whose locations are in shared memory too",
          "[distributed]") {
  CHECK(run_with_one_rank_copying(9700, 10, true) > 0);
}

// RuntimeOptions::shared_memory = false on one rank: it copies, though its locations are
// shareable.
TEST_CASE("a rank told not to share copies, though its locations are shareable", "[distributed]") {
  CHECK(run_with_one_rank_copying(9800, 6, false) > 0);
}

// What share_memory() reports when a peer's chunk cannot be mapped (its rank then copies).
TEST_CASE("a peer's chunk that cannot be opened or is not its memory is refused, saying why",
          "[distributed]") {
  rt::SharedArena arena;
  REQUIRE(arena.allocate(64, 64));
  const rt::SharedArena::Chunk& c = arena.chunks()[0];
  std::string error;
  CHECK(rt::PeerMapping::map(::getpid(), c.fd, c.size, c.inode, error).base() != nullptr);
  CHECK(rt::PeerMapping::map(::getpid(), c.fd, c.size, c.inode + 1, error).base() == nullptr);
  CHECK_THAT(error, Catch::Contains("is not the peer's location memory"));
  CHECK(rt::PeerMapping::map(::getpid(), 1 << 20, c.size, c.inode, error).base() == nullptr);
  CHECK_THAT(error, Catch::Contains("cannot open /proc/"));
}

namespace {

// Runs random graphs with random placements and checks, per rank, which locations have
// storage and the bytes counted, besides the results.
void check_storage(std::uint64_t base, std::uint64_t seeds, bool shared, bool initialise) {
  std::uint64_t skipped = 0;  // locations some rank did not hold, over every run
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    GraphSpec spec = random_spec(seed + base, 6, 10);
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, 5, initialise);
    for (unsigned ranks = 1; ranks <= 4; ++ranks) {
      std::vector<std::int32_t> homes(spec.sizes.size());
      SplitMix rng{seed * 17 + ranks};
      for (auto& h : homes) h = static_cast<std::int32_t>(rng.below(ranks));
      INFO("seed " << seed << " ranks " << ranks);
      LoopbackHub hub(ranks, false, shared);
      auto inspect = [&](std::vector<Rank>& rs) {
        for (unsigned r = 0; r < ranks; ++r) {
          INFO("rank " << r);
          const rt::Graph& g = rs[r].graph;
          const rt::Engine& e = *rs[r].engine;
          const auto held = expected_storage(
              spec, [&](std::uint32_t l) { return e.home(l); }, r, ranks, shared);
          std::size_t bytes = 0, count = 0;
          for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
            INFO("location " << l);
            CHECK(g.has_storage(l) == held[l]);
            if (held[l]) {
              bytes += spec.sizes[l] * 8;
              ++count;
            } else {
              ++skipped;
            }
          }
          CHECK(g.bytes_held() == bytes);
          CHECK(g.locations_held() == count);
        }
      };
      CHECK(run_ranks(spec, ranks, 2, 3, 2, homes, &hub, false, false, shared, inspect,
                      initialise) == want);
    }
  }
  CHECK(skipped > 0);
}

}  // namespace

// A rank gives storage only to what it uses, however the program initialised the locations
// (SPMD initialisation sets every location on every rank before the first run): the others
// are freed at the first run. The results stay those of the sequential run.
TEST_CASE("a rank holds storage for its home locations and its tasks' replicas only",
          "[distributed][storage]") {
  check_storage(12000, 12, false, false);
  check_storage(12500, 8, false, true);
}

TEST_CASE("ranks that share memory hold no replica of a location they share with its home",
          "[distributed][storage]") {
  check_storage(13000, 12, true, false);
  check_storage(13500, 8, true, true);
}

// A location of a pebibyte: no rank can hold it. The rank that would (its home) says so before
// anything runs, and every rank refuses alike, naming it; the ranks that do not use it need
// nothing.
TEST_CASE("a graph whose locations cannot fit is refused on every rank, naming the bytes",
          "[distributed][storage]") {
  constexpr std::size_t kPebibyteElements = std::size_t{1} << 47;  // of 8 bytes
  for (unsigned ranks : {1u, 3u}) {
    INFO("ranks " << ranks);
    LoopbackHub hub(ranks);
    std::vector<Rank> rs(ranks);
    std::vector<std::future<void>> f;
    for (unsigned r = 0; r < ranks; ++r)
      f.push_back(std::async(std::launch::async, [&, r] {
        rt::Graph& g = rs[r].graph;
        g.add_location("small", 8, 4, typeid(std::uint64_t));
        g.add_location("big", 8, kPebibyteElements, typeid(std::uint64_t));
        g.set_home(0, 0);
        g.set_home(1, static_cast<std::int32_t>(ranks - 1));
        rt::TaskDesc a{"a", {{0, rt::Mode::write}}, [](const rt::Instance&) {}};
        rt::TaskDesc b{"b", {{1, rt::Mode::write}}, [](const rt::Instance&) {}};
        g.add_task(std::move(a));
        g.add_task(std::move(b));
        auto c = rt::compile(g);
        rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{1});
        rs[r].engine = std::make_unique<rt::Engine>(g, std::move(c.plan),
                                                    ranks > 1 ? &hub.net(r) : nullptr, 7);
      }));
    for (auto& x : f) x.get();
    const std::string last = std::to_string(ranks - 1);
    for (unsigned r = 0; r < ranks; ++r) {
      const std::string& why = rs[r].engine->storage_error();
      // One rank needs "small" too.
      const std::uint64_t need = kPebibyteElements * 8 + (ranks == 1 ? 32 : 0);
      CHECK_THAT(why, Catch::Contains("rank " + last + " needs 1.00 PiB (" +
                                      std::to_string(need) + " bytes) more"));
      CHECK_THAT(why, Catch::Contains("are available"));
      CHECK_THAT(why, Catch::Contains("more ranks or hosts"));
      if (ranks > 1) CHECK_THAT(why, !Catch::Contains("rank 0 needs"));
      // Nothing of the big location was allocated anywhere.
      CHECK(rs[r].graph.bytes_held() <= 32);
      CHECK_THROWS_WITH(rs[r].engine->run(*rs[r].pool, 1, {}, 0), why);
    }
  }
}

// The verdict of each rank, judged with its host's other ranks: the message names every rank
// that does not fit, with what it needs, what its host's ranks need together and what is
// available, and the source of that limit.
TEST_CASE("the storage refusal names each rank that does not fit and why", "[storage]") {
  auto verdict = [](std::uint64_t more, std::uint64_t host_more, std::uint64_t host,
                    std::uint64_t process) {
    rt::StorageVerdict v;
    v.more = more;
    v.total = more + 100;
    v.host_more = host_more;
    v.available.host = host;
    v.available.host_source = rt::MemorySource::meminfo;
    v.available.process = process;
    v.available.process_source = rt::MemorySource::rlimit_as;
    return v;
  };
  const std::uint64_t G = std::uint64_t{1} << 30;
  // Ranks 0 and 1 share a host that has 3 GiB for their 2 + 2; rank 2 is alone and fits;
  // rank 3 fits its host but not its ulimit -v.
  std::vector<rt::StorageVerdict> v{verdict(2 * G, 4 * G, 3 * G, UINT64_MAX),
                                    verdict(2 * G, 4 * G, 3 * G, UINT64_MAX),
                                    verdict(G, G, 3 * G, UINT64_MAX),
                                    verdict(G, G, 3 * G, G / 2)};
  const std::string why = rt::storage_refusal(v);
  CHECK_THAT(why, Catch::StartsWith("the graph's locations do not fit in memory: rank 0 needs "
                                    "2.00 GiB (2147483648 bytes) more"));
  CHECK_THAT(why, Catch::Contains("its host's ranks 4.00 GiB (4294967296 bytes) together, but "
                                  "3.00 GiB (3221225472 bytes) are available (MemAvailable + "
                                  "SwapFree in /proc/meminfo)"));
  CHECK_THAT(why, Catch::Contains("; rank 1 needs"));
  CHECK_THAT(why, !Catch::Contains("rank 2"));
  CHECK_THAT(why, Catch::Contains("; rank 3 needs 1.00 GiB (1073741824 bytes) more for its "
                                  "locations (its home locations and the replicas its tasks "
                                  "use, 1.00 GiB (1073741924 bytes) in all), but 512.00 MiB "
                                  "(536870912 bytes) are available (RLIMIT_AS, ulimit -v)"));
  v[0].host_more = v[1].host_more = 2 * G;
  v[3].available.process = UINT64_MAX;
  v[0].available.host = v[1].available.host = 3 * G;
  CHECK(rt::storage_refusal(v).empty());
  v[2].allocation_failed = true;
  CHECK_THAT(rt::storage_refusal(v), Catch::Contains("rank 2 needs 1.00 GiB (1073741824 bytes) "
                                                     "more for its locations"));
  CHECK_THAT(rt::storage_refusal(v), Catch::Contains("the system refused to map them"));
}

// What the system says is available: the host's memory (this machine has /proc/meminfo), and
// an address-space limit (ulimit -v) bounds the process's share by what is left of it.
TEST_CASE("memory_available reads the host's memory and this process's limits", "[storage]") {
  const rt::MemoryAvailable m = rt::memory_available();
  CHECK(m.host_source != rt::MemorySource::none);
  CHECK(m.host > 0);
  CHECK(m.host < UINT64_MAX);
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_AS, &saved) == 0);
  // VmSize, from the same file the probe reads.
  const std::uint64_t in_use = ordo::app::status_bytes("VmSize");
  REQUIRE(in_use > 0);
  std::uint64_t room = std::uint64_t{64} << 30;  // far above what this test maps meanwhile
  // Under a finite hard limit (ulimit -Hv), the room left below it, if that is a few GiB.
  if (saved.rlim_max != RLIM_INFINITY && in_use + room > saved.rlim_max) {
    if (saved.rlim_max < in_use + (std::uint64_t{4} << 30))
      ORDO_SKIP("the hard address-space limit leaves under 4 GiB above what this process maps");
    room = saved.rlim_max - in_use;
  }
  struct rlimit lowered = saved;
  lowered.rlim_cur = in_use + room;
  REQUIRE(::setrlimit(RLIMIT_AS, &lowered) == 0);
  const rt::MemoryAvailable limited = rt::memory_available();
  ::setrlimit(RLIMIT_AS, &saved);
  CHECK(limited.process_source == rt::MemorySource::rlimit_as);
  CHECK(limited.process <= room);
  CHECK(limited.process > room - (std::uint64_t{1} << 30));
}

TEST_CASE("random graphs declared as task families give the sequential result", "[distributed]") {
  check_random_graphs(3000, 15, 1, 3, true, false);
}

TEST_CASE("random placements and explicit orders give the sequential result", "[distributed]") {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    GraphSpec spec = random_spec(seed + 5000, 6, 10);
    SplitMix rng{seed};
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<std::int64_t> rank_of(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) rank_of[order[i]] = static_cast<std::int64_t>(i);
    for (std::uint32_t t = 0; t < spec.tasks.size(); ++t)
      for (auto& a : spec.tasks[t].accesses) a.position = rank_of[t];
    auto want = interpret(spec, order, 4);
    for (unsigned ranks : {2u, 3u}) {
      std::vector<std::int32_t> homes(spec.sizes.size());
      for (auto& h : homes) h = static_cast<std::int32_t>(rng.below(ranks));
      INFO("seed " << seed << " ranks " << ranks);
      CHECK(run_ranks(spec, ranks, 2, 4, 0, homes) == want);
    }
  }
}

TEST_CASE("a version reaches each reading process once, however many tasks read it",
          "[distributed]") {
  // x (64 elements) lives on rank 0 and is written there by W; three readers live on rank 1
  // (each writes its own location there). Per iteration: one GRANT carrying x to rank 1 and one
  // RELEASE back without bytes.
  GraphSpec spec;
  spec.sizes = {64, 1, 1, 1};
  spec.tasks.resize(4);
  spec.tasks[0].accesses = {{0, true, std::nullopt}};
  for (std::uint32_t r = 1; r <= 3; ++r)
    spec.tasks[r].accesses = {{0, false, std::nullopt}, {r, true, std::nullopt}};
  std::vector<std::uint32_t> order{0, 1, 2, 3};
  LoopbackHub hub(2);
  const std::uint64_t iters = 10;
  auto got = run_ranks(spec, 2, 2, iters, 0, {0, 1, 1, 1}, &hub);
  CHECK(got == interpret(spec, order, iters));
  // x's read phase is granted once per iteration; iteration `iters` is granted too (the gate
  // holds those instances), hence iters + 1 grants at most, iters at least.
  CHECK(hub.messages(0, 1) >= iters);
  CHECK(hub.messages(0, 1) <= iters + 1);
  CHECK(hub.bytes(0, 1) == hub.messages(0, 1) * 64 * 8);
  CHECK(hub.messages(1, 0) == iters);  // one RELEASE per iteration, for all three readers
  CHECK(hub.bytes(1, 0) == 0);         // reads send no bytes back
}

// What a rank's run threw: "RunError(<kind>, rank R): <what>" for a failure across ranks,
// "exception: <what>" for a body's own exception.
std::string described(const std::exception& e) {
  if (const auto* r = dynamic_cast<const rt::RunError*>(&e)) {
    static const char* const kinds[] = {"body",     "peer_body", "peer_lost",
                                        "protocol", "mismatch",  "own"};
    return std::string("RunError(") + kinds[static_cast<int>(r->kind())] + ", rank " +
           std::to_string(r->rank()) + "): " + e.what();
  }
  return std::string("exception: ") + e.what();
}

// Runs a graph that `declare(graph, rank)` builds on every rank of `hub`, each rank on its own
// thread and pool, for `iterations`; returns what each rank's run threw ("no error" if none),
// as described().
// `check_every` > 0: the run is split into steps of that many iterations, with a vote on a
// condition that is never met between them (run_until's shape: more rounds to wait in).
std::vector<std::future<std::string>> run_failing(
    LoopbackHub& hub, std::vector<Rank>& rs, unsigned workers, std::uint64_t iterations,
    const std::function<void(rt::Graph&, unsigned)>& declare, std::uint64_t check_every = 0,
    std::uint32_t channel = 1) {
  std::vector<std::future<std::string>> f;
  for (unsigned r = 0; r < hub.size(); ++r)
    f.push_back(std::async(std::launch::async, [&hub, &rs, workers, iterations, declare,
                                                check_every, channel, r]() -> std::string {
      declare(rs[r].graph, r);
      auto c = rt::compile(rs[r].graph);
      rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{workers});
      rs[r].engine = std::make_unique<rt::Engine>(rs[r].graph, std::move(c.plan), &hub.net(r), channel);
      try {
        std::function<bool(std::uint64_t)> never;
        if (check_every != 0) never = [](std::uint64_t) { return false; };
        rs[r].engine->run(*rs[r].pool, iterations, never, check_every);
      } catch (const std::exception& e) {
        return described(e);
      }
      return "no error";
    }));
  return f;
}

TEST_CASE("ranks that built different graphs stop with the first difference named",
          "[distributed]") {
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  auto f = run_failing(hub, rs, 1, 3, [](rt::Graph& g, unsigned r) {
    auto x = g.add_location("x", 8, 4, typeid(long));
    g.add_task({"a", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
    g.add_task({r == 0 ? "b" : "c", {{x, rt::Mode::read}}, [](const rt::Instance&) {}});
  });
  for (auto& x : f) {
    std::string msg = x.get();
    CHECK_THAT(msg, Catch::StartsWith("RunError(mismatch") &&
                        Catch::Contains("ranks 0 and 1 built different graphs") &&
                        Catch::Contains("task #1") && Catch::Contains("'b'") &&
                        Catch::Contains("'c'") && Catch::Contains("SPMD"));
  }
}

TEST_CASE("a body exception on one rank stops every rank", "[distributed]") {
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  auto f = run_failing(hub, rs, 2, 50, [](rt::Graph& g, unsigned) {
    auto x = g.add_location("x", 8, 4, typeid(long));
    auto y = g.add_location("y", 8, 4, typeid(long));
    g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
    g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [](const rt::Instance& in) {
                  if (in.iteration == 4) throw std::runtime_error("wy broke at 4");
                }});
  });
  // y (and wy) live on rank 1 by default placement: there the body's own exception comes back
  // as it was, on rank 0 rank 1's failure.
  CHECK(f[0].get() == "RunError(peer_body, rank 1): rank 1 failed: wy broke at 4");
  CHECK(f[1].get() == "exception: wy broke at 4");
}

// A program that goes on after a failed run (it caught the error) and runs another graph: the
// job has failed, so that graph's first run fails at once on every rank, and on the rank whose
// body threw it names that rank's own failure. Before, that rank reported it as a lost peer
// naming itself ("RunError(peer_lost, rank 1)", a PeerFailure of rank 1 on rank 1).
TEST_CASE("a graph run after this rank's own failure reports that failure as its own",
          "[distributed]") {
  LoopbackHub hub(2);
  auto declare = [](bool throws) {
    return [throws](rt::Graph& g, unsigned) {
      auto x = g.add_location("x", 8, 4, typeid(long));
      auto y = g.add_location("y", 8, 4, typeid(long));
      g.set_home(x, 0);
      g.set_home(y, 1);
      g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
      g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [throws](const rt::Instance& in) {
                    if (throws && in.iteration == 4) throw std::runtime_error("wy broke at 4");
                  }});
    };
  };
  std::vector<Rank> first(2), second(2);
  auto f = run_failing(hub, first, 1, 50, declare(true));
  CHECK(f[0].get() == "RunError(peer_body, rank 1): rank 1 failed: wy broke at 4");
  CHECK(f[1].get() == "exception: wy broke at 4");
  auto g = run_failing(hub, second, 1, 50, declare(false), 0, 2);
  for (auto& x : g)
    if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      FAIL_CHECK("the second graph's run did not return within 30 s");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  CHECK(g[0].get() == "RunError(peer_lost, rank 1): rank 1 failed: wy broke at 4");
  CHECK(g[1].get() == "RunError(own, rank 1): rank 1 (this rank) failed: wy broke at 4");
}

TEST_CASE("a rank that dies ends the run on every rank, naming it", "[distributed]") {
  LoopbackHub hub(3);
  std::vector<Rank> rs(3);
  auto f = run_failing(hub, rs, 1, 1000000, [&hub](rt::Graph& g, unsigned) {
    std::vector<std::uint32_t> locs;
    for (int i = 0; i < 3; ++i)
      locs.push_back(g.add_location("x" + std::to_string(i), 8, 4, typeid(long)));
    for (std::uint32_t i = 0; i < 3; ++i)
      g.add_task({"t" + std::to_string(i),
                  {{locs[i], rt::Mode::write}, {locs[(i + 1) % 3], rt::Mode::read}},
                  [&hub, i](const rt::Instance& in) {
                    if (i == 2 && in.iteration == 20) hub.kill(2);
                  }});
  });
  // The dead rank's own engine hears of it from its own net (a transport failing on that
  // rank): its own failure, not the loss of a peer that is itself.
  for (unsigned r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(f[r].wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const std::string got = f[r].get();
    if (r == 2)
      CHECK_THAT(got, Catch::StartsWith("RunError(own, rank 2): rank 2 (this rank) failed: rank 2 died"));
    else
      CHECK_THAT(got, Catch::StartsWith("RunError(peer_lost, rank 2)") && Catch::Contains("rank 2 died"));
  }
}

// A transport sees a peer die only where it holds an endpoint to it (created on first use),
// so the ranks that see it tell the others: here only the dead rank's tree parent does, and
// every rank still ends, naming the dead rank (without the relay the others wait in the
// control plane's next round for ever).
TEST_CASE("a rank that dies ends the run on every rank when only one rank sees it",
          "[distributed]") {
  const unsigned ranks = 16, dead = 9;  // rank 9's only tree neighbour is its parent, 8
  LoopbackHub hub(ranks);
  std::vector<Rank> rs(ranks);
  auto f = run_failing(hub, rs, 1, 1000000, [&hub](rt::Graph& g, unsigned) {
    std::vector<std::uint32_t> locs;
    for (unsigned i = 0; i < ranks; ++i)
      locs.push_back(g.add_location("x" + std::to_string(i), 8, 4, typeid(long)));
    for (std::uint32_t i = 0; i < ranks; ++i)
      g.add_task({"t" + std::to_string(i),
                  {{locs[i], rt::Mode::write}, {locs[(i + 1) % ranks], rt::Mode::read}},
                  [&hub, i](const rt::Instance& in) {
                    if (i == dead && in.iteration == 20) hub.kill(dead, {8});
                  }});
  });
  for (unsigned r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    REQUIRE(f[r].wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const std::string got = f[r].get();
    if (r == dead)
      CHECK_THAT(got, Catch::StartsWith("RunError(own, rank 9): rank 9 (this rank) failed: rank 9 died"));
    else
      CHECK_THAT(got, Catch::StartsWith("RunError(peer_lost, rank 9)") && Catch::Contains("rank 9 died"));
  }
}

// A fiber task parked on a grant that a dead rank would have sent is woken: its acquire
// throws, unwinding the body, and the run ends with the peer's failure instead of waiting for
// the fiber forever (before the one failure path, Engine::run never returned here).
TEST_CASE("a fiber task waiting on a rank that dies returns with that rank's failure",
          "[distributed]") {
  for (bool parked_first : {true, false}) {
    LoopbackHub hub(2);
    std::vector<Rank> rs(2);
    std::atomic<bool> waiting{false};
    auto f = run_failing(hub, rs, 1, 1000000, [&hub, &waiting, parked_first](rt::Graph& g, unsigned) {
      auto a = g.add_location("a", 8, 4, typeid(long));
      auto b = g.add_location("b", 8, 4, typeid(long));
      g.set_home(a, 0);
      g.set_home(b, 1);
      g.add_task({"wa", {{a, rt::Mode::write}}, [&hub, &waiting, parked_first](const rt::Instance& in) {
                    if (in.iteration != 20) return;
                    // The fiber of iteration 20 waits for this instance's release, which never
                    // comes: either it parked already (give it time) or the death comes first.
                    if (parked_first)
                      for (int i = 0; i < 200 && !waiting; ++i)
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    hub.kill(0);
                  }});
      rt::TaskDesc fiber{"wb", {{b, rt::Mode::write}, {a, rt::Mode::read}},
                         [&waiting](const rt::Instance& in) {
                           if (in.iteration == 20) waiting = true;
                           in.engine->fiber_acquire(in, 1);  // a: from rank 0
                           in.engine->fiber_acquire(in, 0);
                         },
                         true};
      g.add_task(std::move(fiber));
    });
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        // A run that never returns cannot be joined: end the test program here.
        FAIL_CHECK("a rank's run did not return within 30 s of rank 0's death");
        std::fflush(nullptr);
        std::_Exit(1);
      }
    INFO("parked first: " << parked_first);
    CHECK_THAT(f[1].get(), Catch::StartsWith("RunError(peer_lost, rank 0)") &&
                               Catch::Contains("rank 0 died"));
    CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(own, rank 0): rank 0 (this rank) failed"));
  }
}

namespace {

// A protocol message's header as a peer would forge it (runtime/wire.hpp): kind u8 (1 = GRANT,
// 2 = RELEASE, 4 = ABORT), initial u8, flags u16 (1 = early, 4 = shared), location u32,
// phase u32.
std::vector<std::byte> header(std::uint8_t kind, std::uint16_t flags, std::uint32_t location,
                              std::uint32_t phase = 0) {
  std::vector<std::byte> h(12);
  h[0] = std::byte{kind};
  std::memcpy(h.data() + 2, &flags, 2);
  std::memcpy(h.data() + 4, &location, 4);
  std::memcpy(h.data() + 8, &phase, 4);
  return h;
}

}  // namespace

// Messages the protocol never sends (a corrupt peer, or ranks of different ordo versions) stop
// the run on every rank with a message naming the sender, instead of corrupting locks.
TEST_CASE("a peer's malformed or impossible protocol message stops every rank, naming it",
          "[distributed]") {
  struct Case {
    std::vector<std::byte> message, payload;
    std::string error;
    unsigned from = 1;  // the sender; the other rank receives it and stops
  };
  // x's phases: 0 wx writes (rank 0), 1 wy reads (rank 1, early); z's: 0 wx writes.
  const std::vector<Case> cases = {
      {std::vector<std::byte>(3), {}, "rank 1 sent a malformed message (3 header bytes)"},
      {header(2, 0, 99), {}, "rank 1 sent a message for an unknown location"},
      // z (#2) is rank 0's own and rank 1 never reads it: it cannot hold an early version.
      {header(2, 1, 2), {}, "rank 1 released location 'z' early, which it did not hold early"},
      {header(1, 0, 0), std::vector<std::byte>(3),
       "rank 1 sent 3 bytes for location 'x', which has 32"},
      // The two ranks share no memory (the hub does not put them on one host).
      {header(2, 4, 2), {},
       "rank 1 released location 'z' as shared, which this rank does not share with it"},
      {header(1, 4, 0), std::vector<std::byte>(32),
       "rank 1 sent 32 bytes for location 'x', which it shares with this rank (none expected)"},
      // Only a location's home grants it, and only to a rank that waits for that phase: a GRANT
      // of its own location once made the home grant its tasks again, and the run hung.
      {header(1, 0, 0), std::vector<std::byte>(32),
       "rank 1 granted location 'x' (phase 0), whose home is this rank"},
      {header(1, 0, 0, 0), std::vector<std::byte>(32), "rank 0 granted location 'x' (phase 0)", 0},
      // A RELEASE answers a GRANT: rank 1 is never granted x's write phase.
      {header(2, 0, 0, 0), std::vector<std::byte>(32),
       "rank 1 released location 'x' (phase 0), which this rank had not granted it"},
      {header(2, 8, 0), {}, "rank 1 sent flags 8 this rank does not know"},
      // A fatal, relayed ABORT naming the receiver (location 0 = rank 0) was taken as the
      // receiver's own loss: it stopped without telling anyone, and rank 1 waited for ever.
      {header(4, 2 | 8, 0), {}, "rank 1 relayed the loss of this rank"},
      // An ABORT's unknown flags, and a relay naming a rank outside the job, are refused too.
      {header(4, 16, 0), {}, "rank 1 sent an ABORT with flags 16 this rank does not know"},
      {header(4, 8, 5), {}, "rank 1 relayed the failure of rank 5 in a job of 2 ranks"},
  };
  for (const Case& c : cases) {
    LoopbackHub hub(2);
    std::vector<Rank> rs(2);
    auto f = run_failing(hub, rs, 1, 1000000, [&hub, &c](rt::Graph& g, unsigned) {
      declare_protocol_graph(g, {.with_z = true, .wx_body = [&hub, &c](const rt::Instance& in) {
                                   if (in.iteration == 5)
                                     hub.inject(c.from, 1 - c.from, 1, c.message, c.payload);
                                 }});
    });
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        // A run that never returns cannot be joined: end the test program here.
        FAIL_CHECK("a rank's run did not return within 30 s of the message: " << c.error);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    // The receiver stops on the sender's message and tells it, which takes it as the
    // receiver's loss.
    const unsigned to = 1 - c.from;
    INFO(c.error);
    CHECK_THAT(f[to].get(),
               Catch::StartsWith("RunError(protocol, rank " + std::to_string(c.from) + ")") &&
                   Catch::Contains("rank " + std::to_string(to) + " stopped: " + c.error));
    CHECK_THAT(f[c.from].get(),
               Catch::StartsWith("RunError(peer_lost, rank " + std::to_string(to) + ")") &&
                   Catch::Contains(c.error));
  }
}

// The home's refusals of a RELEASE that does not match an early grant it sent. Rank 1 holds
// x's read phase early while its task of iteration 5 waits for rank 0's task of iteration 6
// (which an early grant lets run) to inject the message, so the home's state is known: it
// granted rank 1 phase 1 early and has not had its RELEASE back. Before, every such message was
// refused as a release of something rank 1 "did not hold early" or "had not been granted".
TEST_CASE("an early grant's release must say early, name its phase and carry no bytes",
          "[distributed]") {
  auto release = [](std::uint16_t flags, std::uint32_t phase) { return header(2, flags, 0, phase); };
  struct Case {
    std::vector<std::byte> message, payload;
    std::string error;
  };
  // x's phases: 0 wx writes (rank 0), 1 wy reads (rank 1, early).
  const std::vector<Case> cases = {
      {release(1, 0), {}, "rank 1 released location 'x' early in phase 0, which it holds early "
                         "in phase 1"},
      {release(1, 1), std::vector<std::byte>(32),
       "rank 1 released location 'x' early with 32 bytes (a read's release carries none)"},
      {release(0, 1), {},
       "rank 1 released location 'x' (phase 1), which this rank had granted it early (its "
       "release must say so)"},
  };
  for (const Case& c : cases) {
    LoopbackHub hub(2);
    std::vector<Rank> rs(2);
    std::atomic<bool> injected{false};
    auto f = run_failing(hub, rs, 1, 1000000, [&hub, &c, &injected](rt::Graph& g, unsigned) {
      declare_protocol_graph(
          g, {.wx_body =
                  [&](const rt::Instance& in) {
                    if (in.iteration != 6) return;
                    hub.inject(1, 0, 1, c.message, c.payload);
                    injected.store(true);
                  },
              .wy_body =
                  [&injected](const rt::Instance& in) {
                    if (in.iteration != 5) return;
                    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                    while (!injected.load() && std::chrono::steady_clock::now() < until)
                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  }});
    });
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        FAIL_CHECK("a rank's run did not return within 30 s of the message: " << c.error);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    INFO(c.error);
    CHECK(injected.load());  // else rank 0's task never ran ahead of rank 1's early read
    CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(protocol, rank 1)") &&
                               Catch::Contains("rank 0 stopped: " + c.error));
    CHECK_THAT(f[1].get(), Catch::StartsWith("RunError(peer_lost, rank 0)") &&
                               Catch::Contains(c.error));
  }
}

// A receive that the transport cannot end (its peer died where UCX cannot tell, and UCX cannot
// cancel it) may still write into the location its placer chose after the engine is gone: the
// graph keeps that memory for good, so the write lands in memory still allocated. Before, the
// engine's memory was freed after a bounded wait, and the write hit freed memory.
TEST_CASE("memory a transport may still write into outlives the engine and the graph",
          "[distributed]") {
  // 64 MiB: more than malloc's largest mmap threshold, so that freed memory is unmapped and a
  // write into it faults instead of corrupting the heap unseen.
  constexpr std::size_t kCount = std::size_t{8} << 20;
  constexpr std::uint32_t kChannel = 7;
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  std::vector<std::future<void>> f;
  for (unsigned r = 0; r < 2; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      rt::Graph& g = rs[r].graph;
      const std::uint32_t big = g.add_location("big", 8, kCount, typeid(std::uint64_t));
      const std::uint32_t out = g.add_location("out", 8, 1, typeid(std::uint64_t));
      g.set_home(big, 1);
      g.set_home(out, 0);
      g.add_task({"write", {{big, rt::Mode::write}}, [](const rt::Instance&) {}});
      g.add_task({"read", {{big, rt::Mode::read}, {out, rt::Mode::write}},
                  [](const rt::Instance&) {}});
      auto c = rt::compile(g);
      if (!c.error.empty()) throw std::runtime_error(c.error);  // no Catch2 outside main
      rs[r].engine = std::make_unique<rt::Engine>(g, std::move(c.plan), &hub.net(r), kChannel);
    }));
  for (auto& x : f) x.get();
  // Rank 0 holds a replica of "big" (its task reads it in phase 1): the GRANT's bytes from the
  // home, rank 1, are placed straight into it.
  const rt::wire::Header grant{rt::wire::Kind::grant, 0, 0, 0, 1};
  const std::span<std::byte> dst =
      hub.net(0).place_stuck(kChannel, 1, rt::wire::as_bytes(grant), kCount * 8);
  REQUIRE(dst.size() == kCount * 8);
  REQUIRE(dst.data() == rs[0].graph.data(0));
  rs.clear();  // both engines, then both graphs
  std::memset(dst.data(), 0x5a, dst.size());  // the transport's late write
  CHECK(std::to_integer<int>(dst[dst.size() - 1]) == 0x5a);
}

// A fatal ABORT says its sender has stopped. The receiver takes the sender for lost and stops,
// and tells it so: were the ABORT forged (or the sender's own transport blind to the failure),
// the sender would otherwise wait for a rank that no longer answers, for ever.
TEST_CASE("a rank that takes a peer for lost tells that peer it stops", "[distributed]") {
  std::vector<std::byte> abort(12);
  abort[0] = std::byte{4};  // ABORT
  const std::uint16_t fatal = 2;
  std::memcpy(abort.data() + 2, &fatal, 2);
  const std::string text = "forged: rank 1 is not stopped";
  for (char ch : text) abort.push_back(std::byte(ch));
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  auto f = run_failing(hub, rs, 1, 1000000, [&hub, &abort](rt::Graph& g, unsigned) {
    declare_protocol_graph(g, {.wx_body = [&hub, &abort](const rt::Instance& in) {
                                 if (in.iteration == 5) hub.inject(1, 0, 1, abort, {});
                               }});
  });
  for (auto& x : f)
    if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      FAIL_CHECK("a rank's run did not return within 30 s of the forged ABORT");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(peer_lost, rank 1)") && Catch::Contains(text));
  CHECK_THAT(f[1].get(), Catch::StartsWith("RunError(peer_lost, rank 0)") &&
                             Catch::Contains("rank 0 stopped: " + text));
}

// A peer's description of its shared location memory is read from the wire: numbers near 2^64
// in it must be refused, not wrapped past the checks. Rank 1's first set-up round (control
// round 4 at construction, after the graph check and the two storage rounds) is forged before
// the engines start, so rank 0 takes it for rank 1's: a chunk count that wrapped the length
// check made rank 0 push 2^61 chunks (memory until the OOM killer), an offset that wrapped the
// bound check left rank 1's location mapped 8 bytes before the chunk.
TEST_CASE("a peer's shared-memory description with wrapping numbers is refused, naming it",
          "[distributed]") {
  auto u64 = [](std::vector<std::byte>& out, std::uint64_t v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  };
  constexpr std::uint64_t kLocations = 2;  // x on rank 0, y on rank 1
  std::vector<std::vector<std::byte>> forged(2);
  // (pid, chunks + 1 = 2^61 + 1): (n - 1) * 24 wraps to 0, so the length matched a table alone.
  u64(forged[0], static_cast<std::uint64_t>(::getpid()));
  u64(forged[0], (std::uint64_t{1} << 61) + 1);
  for (std::uint64_t l = 0; l < kLocations; ++l) {
    u64(forged[0], 0);
    u64(forged[0], 0);
  }
  // One chunk of a page; y (rank 1's, 32 bytes) at offset 2^64 - 8, which wrapped to 24.
  u64(forged[1], static_cast<std::uint64_t>(::getpid()));
  u64(forged[1], 2);
  u64(forged[1], 3);  // fd
  u64(forged[1], 4096);
  u64(forged[1], 1);  // inode
  u64(forged[1], 0);  // x: private
  u64(forged[1], 0);
  u64(forged[1], 1);  // y: chunk 0
  u64(forged[1], ~std::uint64_t{0} - 7);
  for (const auto& description : forged) {
    LoopbackHub hub(2, false, true);
    std::vector<std::byte> message(sizeof(rt::wire::Header));
    const rt::wire::Header h{rt::wire::Kind::control, 0, 0, 0, 0};
    std::memcpy(message.data(), &h, sizeof h);
    u64(message, 4);  // the round
    message.insert(message.end(), description.begin(), description.end());
    hub.inject(1, 0, 1, message);
    std::vector<Rank> rs(2);
    for (Rank& r : rs) r.graph = rt::Graph(true);
    auto f = run_failing(hub, rs, 1, 3, [](rt::Graph& g, unsigned) {
      auto x = g.add_location("x", 8, 4, typeid(long));
      auto y = g.add_location("y", 8, 4, typeid(long));
      g.set_home(x, 0);
      g.set_home(y, 1);
      g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
      g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [](const rt::Instance&) {}});
    });
    CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(protocol, rank 1)") &&
                               Catch::Contains("rank 1 described its shared memory in " +
                                               std::to_string(description.size()) + " bytes"));
    CHECK_THAT(f[1].get(), Catch::StartsWith("RunError(peer_lost, rank 0)"));
  }
}

// An ABORT that no failure caused (a forged or corrupt message, a peer of another version) must
// still end the run on every rank, each with a typed error: the receiver alone stopping, or
// draining one step, left the others waiting for it in the next step or vote, for ever. Three
// ranks, in steps of 3 iterations with a vote between them; rank 1 "sends" rank 0 the ABORT.
TEST_CASE("an ABORT no failure caused ends the run on every rank", "[distributed]") {
  auto abort = [](std::uint16_t flags, std::uint32_t named, const std::string& text) {
    std::vector<std::byte> m(12);
    m[0] = std::byte{4};  // ABORT
    std::memcpy(m.data() + 2, &flags, 2);
    std::memcpy(m.data() + 4, &named, 4);
    for (char ch : text) m.push_back(std::byte(ch));
    return m;
  };
  struct Case {
    std::string name;
    std::vector<std::byte> message;
    // What each rank's error must start with (kind and rank), and contain.
    std::vector<std::string> starts;
    std::vector<std::string> contains;
  };
  const std::string text = "forged";
  const std::vector<Case> cases = {
      // Not fatal: "a body threw on rank 1", which it did not. Rank 0 stops; rank 1 learns that
      // it was named, refuses that as a protocol error, and tells everyone.
      {"non-fatal ABORT",
       abort(0, 0, text),
       {"RunError(peer_body, rank 1)", "RunError(protocol, rank 0)", "RunError(peer_"},
       {text, "rank 1 stopped: rank 0 relayed a body failure of this rank", ", rank 1)"}},
      // Fatal: "rank 1 stopped", which it did not. Rank 0 takes it for lost and tells it and
      // rank 2; rank 2 stops and tells rank 1 too, so rank 1 hears it from rank 0 or from
      // rank 2, whichever comes first.
      {"fatal ABORT",
       abort(2, 0, text),
       {"RunError(peer_lost, rank 1)", "RunError(peer_lost, rank ", "RunError(peer_lost, rank 1)"},
       {text, " stopped: " + text, text}},
      // Relayed: "rank 1 lost rank 2", which is alive. Rank 0 takes rank 2 for lost and tells
      // rank 2 and rank 1; rank 2 hears it from rank 0 or from rank 1, whichever comes first.
      {"relayed fatal ABORT naming a third rank",
       abort(2 | 8, 2, text),
       {"RunError(peer_lost, rank 2)", "RunError(peer_lost, rank 2)", "RunError(peer_lost, rank "},
       {text, text, " stopped: " + text}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    LoopbackHub hub(3);
    std::vector<Rank> rs(3);
    auto f = run_failing(
        hub, rs, 1, 1000000,
        [&hub, &c](rt::Graph& g, unsigned) {
          std::vector<std::uint32_t> locs;
          for (unsigned i = 0; i < 3; ++i) {
            locs.push_back(g.add_location("x" + std::to_string(i), 8, 4, typeid(long)));
            g.set_home(locs[i], i);
          }
          for (std::uint32_t i = 0; i < 3; ++i)
            g.add_task({"t" + std::to_string(i),
                        {{locs[i], rt::Mode::write}, {locs[(i + 1) % 3], rt::Mode::read}},
                        [&hub, &c, i](const rt::Instance& in) {
                          if (i == 0 && in.iteration == 5) hub.inject(1, 0, 1, c.message, {});
                        }});
        },
        3);
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        FAIL_CHECK("a rank's run did not return within 30 s of the " << c.name);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    for (unsigned r = 0; r < 3; ++r) {
      INFO("rank " << r);
      CHECK_THAT(f[r].get(), Catch::StartsWith(c.starts[r]) && Catch::Contains(c.contains[r]));
    }
  }
}

// A forged GRANT that a rank accepts (it came while the rank waited for that phase, with the
// right size) is handled as a real one: rank 1 runs one instance ahead on it, and the home
// takes its RELEASEs for those of the early grants it sends afterwards, so no check refuses
// anything and the run completes with one message more handled than sent. Every rank then
// spun in the step's quiescence waves for ever (the fuzz_remote_lock livelock); now each
// stops, saying so. The order of events that makes the forged GRANT pass is made certain by a
// blocker on each rank, a message on a channel of the test's own whose handler holds the
// rank's delivery thread:
//   - wy of kForgedAt on rank 1 queues blocker B0 at rank 0 before it releases x, so the home
//     handles that RELEASE only after B0;
//   - B0 waits until that RELEASE is sent (rank 1 holds x no longer), forges the early GRANT
//     of x's read phase to rank 1, queues B1 there, and waits until rank 1 has released the
//     forged phase (wy of kForgedAt + 1) and the home has entered the next read phase (rx of
//     kForgedAt + 1 runs), which waits for rank 1's RELEASE (rule 1: pending);
//   - the home then handles the real RELEASE (sending the pending GRANT) and the one of the
//     forged phase, taken for that GRANT's; B1 holds rank 1 until that GRANT is sent, so rank
//     1 takes it too, for the instance beyond the run.
// A task on each rank (`last`, on a second worker) waits until those messages are handled, so
// that quiescence starts with every count final: with one still in flight the extra count may
// make its waves end as if none were (nothing can tell a forged message from a real one).
TEST_CASE("a forged message that the protocol accepts stops the run instead of its quiescence",
          "[distributed]") {
  constexpr std::uint32_t kBlocker = 2;
  constexpr std::uint64_t kForgedAt = 2;
  LoopbackHub hub(2);
  auto wait_until = [](const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  // x is rank 1's only remote location: hub.messages(1, 0) counts its RELEASEs of x,
  // hub.messages(0, 1) the home's GRANTs of x to it (none initial: x starts with wx).
  std::atomic<bool> next_phase{false};
  const std::vector<std::byte> grant = header(1, 1, 0, 1);  // early GRANT of x, phase 1
  hub.net(0).attach(
      kBlocker,
      [&](unsigned, std::span<const std::byte>, std::span<const std::byte>) {
        wait_until([&] { return hub.messages(1, 0) >= kForgedAt + 1; });
        hub.inject(0, 1, 1, grant, std::vector<std::byte>(32));
        hub.inject(0, 1, kBlocker, {});
        wait_until([&] { return hub.messages(1, 0) >= kForgedAt + 2 && next_phase.load(); });
      },
      [](unsigned, const std::string&) {});
  hub.net(1).attach(
      kBlocker,
      [&](unsigned, std::span<const std::byte>, std::span<const std::byte>) {
        wait_until([&] { return hub.messages(0, 1) >= kForgedAt + 2; });
      },
      [](unsigned, const std::string&) {});
  std::vector<Rank> rs(2);
  // Iterations 0 .. kForgedAt + 1: the GRANT rank 1 takes last is for one beyond the run.
  auto f = run_failing(hub, rs, 2, kForgedAt + 2, [&](rt::Graph& g, unsigned) {
    auto x = g.add_location("x", 8, 4, typeid(long));
    auto y = g.add_location("y", 8, 4, typeid(long));
    auto v = g.add_location("v", 8, 4, typeid(long));
    g.set_home(x, 0);
    g.set_home(y, 1);
    g.set_home(v, 0);
    // Rank 0 handles rank 1's RELEASEs of iterations 0 .. kForgedAt and of the forged phase;
    // rank 1 the GRANTs of iterations 0 .. kForgedAt + 1 and the forged one.
    for (unsigned r = 0; r < 2; ++r) {
      auto u = g.add_location("u" + std::to_string(r), 8, 4, typeid(long));
      g.set_home(u, static_cast<std::int32_t>(r));
      g.add_task({"last" + std::to_string(r), {{u, rt::Mode::write}}, [&, r](const rt::Instance& in) {
                    if (in.iteration == kForgedAt + 1)
                      wait_until([&] { return hub.handled(1 - r, r) >= kForgedAt + 2 + r; });
                  }});
    }
    g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
    g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [&](const rt::Instance& in) {
                  if (in.iteration == kForgedAt) hub.inject(1, 0, kBlocker, {});
                }});
    // In wy's read phase of x, at the home.
    g.add_task({"rx", {{v, rt::Mode::write}, {x, rt::Mode::read}}, [&](const rt::Instance& in) {
                  if (in.iteration == kForgedAt + 1) next_phase.store(true);
                }});
  });
  for (auto& x : f)
    if (x.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      FAIL_CHECK("a rank's run did not return within 60 s of the forged GRANT");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  for (unsigned r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK_THAT(f[r].get(), Catch::StartsWith("RunError(p") &&
                               Catch::Contains("stopped: the ranks handled more protocol "
                                               "messages than they sent"));
  }
  for (unsigned r = 0; r < 2; ++r) hub.net(r).detach(kBlocker);
}
