// Location storage (runtime/engine_storage.cpp, runtime/storage.hpp): which locations a rank
// holds, the refusal of a graph that does not fit, naming each rank, and what the system says
// is available.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <sys/resource.h>

#include "apps/common/peak_rss.hpp"
#include "runtime/storage.hpp"
#include "simulated_ranks.hpp"
#include "skip.hpp"

using namespace ordo;
using namespace ordo::test;

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
      CHECK_THAT(why, Catch::Contains("rank " + last + " needs 1.00 PiB (" + std::to_string(need) +
                                      " bytes) more"));
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
                                    verdict(G, G, 3 * G, UINT64_MAX), verdict(G, G, 3 * G, G / 2)};
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
