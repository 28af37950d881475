// The gather's graphs (api/gather.hpp, declare_gather) on 2 to 64 simulated ranks over the
// loopback net: every receiving rank takes every piece, in piece order, bit for bit, and the
// others nothing; each piece is filled once, on its home; and the ranks that exchange protocol
// messages are the control plane's tree neighbours (plus rank 0 and a receiving rank other than
// it) by the tree route, so that no rank talks to more than ceil(log2 N) + 2 others, while the
// direct route links each home to the receiver only. Whole jobs: api_dist_graphs_*,
// stencil_dist_*, ranks_endpoints_heat2d.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/gather.hpp"
#include "api/graph_impl.hpp"
#include "loopback_net.hpp"
#include "runtime/tree.hpp"
#include "scheduler/pool.hpp"

namespace {

using ordo::detail::GatherPiece;
using ordo::detail::GatherRoute;
using ordo::test::LoopbackHub;

std::byte byte_of(std::size_t piece, std::size_t at) {
  return static_cast<std::byte>((piece * 131 + at * 7 + 1) & 0xff);
}

// A few pieces per rank, some ranks none, some pieces empty; homes not in piece order.
std::vector<GatherPiece> pieces_for(unsigned ranks, std::uint64_t seed) {
  std::vector<GatherPiece> out;
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + ranks;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (unsigned r = 0; r < ranks; ++r) {
    const unsigned count = static_cast<unsigned>(next() % 3);  // 0, 1 or 2
    for (unsigned k = 0; k < count; ++k)
      out.push_back({static_cast<std::size_t>(next() % 40), static_cast<unsigned>(next() % ranks)});
  }
  return out;
}

struct Outcome {
  // Per rank: the pieces taken, in the order taken, with their bytes; the pieces filled.
  std::vector<std::vector<std::pair<std::size_t, std::vector<std::byte>>>> taken;
  std::vector<std::vector<std::size_t>> filled;
  // Per rank: the ranks it exchanged protocol messages with (either way).
  std::vector<std::set<unsigned>> peers;
};

Outcome run_gather(unsigned ranks, const std::vector<GatherPiece>& pieces, unsigned to,
                   GatherRoute route) {
  LoopbackHub hub(ranks);
  Outcome out;
  out.taken.resize(ranks);
  out.filled.resize(ranks);
  std::vector<std::unique_ptr<ordo::Graph>> graphs(ranks);
  std::vector<std::unique_ptr<ordo::sched::Pool>> pools(ranks);
  std::mutex mu;  // guards `filled` (every rank's fills go to their own vector, but tidy)
  std::vector<std::function<void(std::size_t, std::span<std::byte>)>> fill(ranks);
  std::vector<std::function<void(std::size_t, std::span<const std::byte>)>> take(ranks);
  for (unsigned r = 0; r < ranks; ++r) {
    fill[r] = [&, r](std::size_t i, std::span<std::byte> dst) {
      for (std::size_t k = 0; k < dst.size(); ++k) dst[k] = byte_of(i, k);
      std::lock_guard lock(mu);
      out.filled[r].push_back(i);
    };
    take[r] = [&, r](std::size_t i, std::span<const std::byte> src) {
      out.taken[r].emplace_back(i, std::vector<std::byte>(src.begin(), src.end()));
    };
  }
  // Engines are built concurrently: construction checks the graphs across ranks.
  std::vector<std::future<std::uint64_t>> f;
  for (unsigned r = 0; r < ranks; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      graphs[r] = std::make_unique<ordo::Graph>();
      ordo::detail::declare_gather(*graphs[r], "ordo.gather[test].", ranks, pieces, to, route,
                                   fill[r], take[r]);
      pools[r] = std::make_unique<ordo::sched::Pool>(ordo::sched::PoolConfig{1});
      // The hub owns the net: a shared_ptr that does not.
      std::shared_ptr<ordo::rt::Net> net(std::shared_ptr<void>(), &hub.net(r));
      ordo::rt::Engine& engine = ordo::detail::impl_of(*graphs[r]).prepare(net, 3);
      return engine.run(*pools[r], 1, {}, 0);
    }));
  for (auto& x : f) CHECK(x.get() == 1);
  out.peers.resize(ranks);
  for (unsigned a = 0; a < ranks; ++a)
    for (unsigned b = 0; b < ranks; ++b)
      if (hub.messages(a, b) > 0) {
        out.peers[a].insert(b);
        out.peers[b].insert(a);
      }
  graphs.clear();  // engines detach from the nets before the hub goes
  return out;
}

void check_outcome(const Outcome& o, unsigned ranks, const std::vector<GatherPiece>& pieces,
                   unsigned to) {
  for (unsigned r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i].home == r) mine.push_back(i);
    std::vector<std::size_t> filled = o.filled[r];
    std::sort(filled.begin(), filled.end());
    CHECK(filled == mine);
    if (to != ordo::kAllRanks && to != r) {
      CHECK(o.taken[r].empty());
      continue;
    }
    REQUIRE(o.taken[r].size() == pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      CHECK(o.taken[r][i].first == i);
      std::vector<std::byte> want(pieces[i].bytes);
      for (std::size_t k = 0; k < want.size(); ++k) want[k] = byte_of(i, k);
      CHECK(o.taken[r][i].second == want);
    }
  }
}

unsigned ceil_log2(unsigned n) {
  unsigned k = 0;
  while ((1u << k) < n) ++k;
  return k;
}

}  // namespace

TEST_CASE("a gather over the tree delivers every piece in order and talks to tree neighbours") {
  for (unsigned ranks : {2u, 3u, 4u, 5u, 7u, 8u, 9u, 13u, 16u, 17u, 31u, 32u, 33u, 64u})
    for (unsigned to : {ordo::kAllRanks, 0u, ranks - 1, ranks / 2}) {
      INFO(ranks << " ranks, onto " << (to == ordo::kAllRanks ? "every rank" : std::to_string(to)));
      const std::vector<GatherPiece> pieces = pieces_for(ranks, ranks + to);
      // What gather_pieces picks for these pieces: the tree (they are small).
      REQUIRE(ordo::detail::gather_route(pieces, to) == GatherRoute::tree);
      const Outcome o = run_gather(ranks, pieces, to, ordo::detail::gather_route(pieces, to));
      check_outcome(o, ranks, pieces, to);
      for (unsigned r = 0; r < ranks; ++r) {
        INFO("rank " << r);
        const std::vector<unsigned> children = ordo::rt::tree::children(r, ranks);
        std::set<unsigned> allowed(children.begin(), children.end());
        if (r != 0) allowed.insert(ordo::rt::tree::parent(r));
        // The one edge off the tree: rank 0 hands the result to a receiver other than itself.
        if (to != ordo::kAllRanks && to != 0 && r == 0) allowed.insert(to);
        if (to != ordo::kAllRanks && to != 0 && r == to) allowed.insert(0);
        for (unsigned p : o.peers[r]) CHECK(allowed.count(p) == 1);
        CHECK(o.peers[r].size() <= ceil_log2(ranks) + 2);
      }
    }
}

TEST_CASE("a direct gather onto one rank links each home to the receiver only") {
  for (unsigned ranks : {2u, 5u, 16u})
    for (unsigned to : {0u, ranks - 1}) {
      INFO(ranks << " ranks, onto " << to);
      const std::vector<GatherPiece> pieces = pieces_for(ranks, 7 * ranks + to);
      const Outcome o = run_gather(ranks, pieces, to, GatherRoute::direct);
      check_outcome(o, ranks, pieces, to);
      std::set<unsigned> homes;
      for (const GatherPiece& p : pieces)
        if (p.home != to) homes.insert(p.home);
      CHECK(o.peers[to] == homes);
      for (unsigned r = 0; r < ranks; ++r)
        if (r != to) CHECK(o.peers[r] == (homes.count(r) ? std::set<unsigned>{to} : std::set<unsigned>{}));
    }
}

TEST_CASE("a large gather onto one rank goes direct; onto every rank, by the tree") {
  const std::vector<GatherPiece> big{{ordo::detail::kGatherTreeBytes, 1}, {1, 2}};
  CHECK(ordo::detail::gather_route(big, 0) == GatherRoute::direct);
  CHECK(ordo::detail::gather_route(big, ordo::kAllRanks) == GatherRoute::tree);
  const std::vector<GatherPiece> small{{ordo::detail::kGatherTreeBytes - 1, 1}, {1, 2}};
  CHECK(ordo::detail::gather_route(small, 0) == GatherRoute::tree);
}
