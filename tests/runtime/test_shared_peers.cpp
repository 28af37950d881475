// Location memory shared with the ranks of one host (runtime/shared_peers.hpp) on simulated
// ranks: results with shared and copied locations, which peers share, and a peer's description
// of its memory that cannot be mapped or lies.
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

#include <unistd.h>

#include "runtime/shared_peers.hpp"
#include "runtime/wire.hpp"
#include "simulated_ranks.hpp"

using namespace ordo;
using namespace ordo::test;

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
TEST_CASE("ranks share only with peers whose locations are in shared memory too", "[distributed]") {
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
