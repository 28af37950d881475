// The sparse layer's index map and exchange in one process: the plan against a brute force
// over random index sets (parts with no ghosts, parts reading every other part), and the
// exchange's values against a sequential loop, for the previous iteration's values (Jacobi,
// Vector::exchange) and the newest ones (a sweep over the parts in order), on 1-4 workers.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <ordo/sparse.hpp>

using Catch::Contains;
using ordo::sparse::Index;
using ordo::sparse::IndexMap;
using ordo::sparse::Partition;

namespace {

struct Case {
  Index n;
  std::uint32_t parts;
  unsigned ranks;
  std::vector<std::set<Index>> reads;  // per part, global indices (owned ones included)
  std::vector<unsigned> homes;
};

Case random_case(std::mt19937_64& rng) {
  Case c;
  c.parts = 1 + std::uint32_t(rng() % 7);
  c.n = c.parts + rng() % 60;
  c.ranks = 1 + unsigned(rng() % std::min<std::uint32_t>(3, c.parts));
  c.reads.resize(c.parts);
  for (std::uint32_t q = 0; q < c.parts; ++q) {
    const unsigned kind = unsigned(rng() % 4);
    if (kind == 0) continue;  // no ghosts
    if (kind == 1) {          // one index of every index: reads from every other part
      for (Index i = 0; i < c.n; ++i) c.reads[q].insert(i);
      continue;
    }
    const std::size_t k = rng() % (c.n + 1);
    for (std::size_t j = 0; j < k; ++j) c.reads[q].insert(rng() % c.n);
  }
  for (std::uint32_t p = 0; p < c.parts; ++p) c.homes.push_back(unsigned(rng() % c.ranks));
  // Every rank holds a part.
  for (unsigned r = 0; r < c.ranks; ++r) c.homes[r] = r;
  return c;
}

IndexMap build(const Case& c) {
  IndexMap m(Partition::blocks(c.n, c.parts), c.ranks);
  for (std::uint32_t p = 0; p < c.parts; ++p) m.set_home(p, c.homes[p]);
  for (std::uint32_t q = 0; q < c.parts; ++q)
    m.set_ghosts(q, std::vector<Index>(c.reads[q].rbegin(), c.reads[q].rend()));
  return m;
}

// x's value at global index i after iteration k of the reference, and the update both use: a
// non-commutative mix of the old value with the ghosts in slot order, exact in integers.
std::uint64_t initial(Index i) { return 0x9E3779B97F4A7C15ull * (i + 1); }
std::uint64_t mix(std::uint64_t acc, std::uint64_t v) {
  return (acc ^ v) * 0xBF58476D1CE4E5B9ull + 1;
}

// Sequential reference: `iters` iterations, each updating every owned entry of part q from its
// old value and the part's ghosts (Jacobi: all from the iteration's start; sweep: parts in
// order, each reading the newest values).
std::vector<std::uint64_t> reference(const IndexMap& m, unsigned iters, bool sweep) {
  std::vector<std::uint64_t> x(m.size());
  for (Index i = 0; i < m.size(); ++i) x[i] = initial(i);
  for (unsigned k = 0; k < iters; ++k) {
    const std::vector<std::uint64_t> old = x;
    for (std::uint32_t q = 0; q < m.parts(); ++q) {
      std::uint64_t h = 0;
      for (Index g : m.ghosts(q)) h = mix(h, sweep ? x[g] : old[g]);
      for (Index i = m.partition().begin(q); i < m.partition().end(q); ++i) x[i] = mix(x[i], h);
    }
  }
  return x;
}

std::vector<std::uint64_t> run_graph(const IndexMap& map, unsigned iters, bool sweep,
                                     unsigned workers) {
  auto shared = std::make_shared<const IndexMap>(map);
  ordo::Graph g;
  ordo::sparse::Vector<std::uint64_t> x(g, "x", shared);
  const std::uint32_t parts = map.parts();
  const auto update = [x, shared](ordo::Context& ctx, std::uint32_t q,
                                  std::span<const std::uint64_t> ghost) {
    std::uint64_t h = 0;
    for (std::uint64_t v : ghost) h = mix(h, v);
    for (std::uint64_t& v : ctx.write(x.owned(q))) v = mix(v, h);
  };
  if (!sweep) {
    x.exchange();
    g.task_family(
        "update", parts,
        [&](std::uint32_t q, ordo::AccessList& acc) {
          acc.add(ordo::write(x.owned(q)));
          if (x.has_ghosts(q)) acc.add(ordo::read(x.ghosts(q)));
        },
        [x, update](ordo::Context& ctx, std::uint32_t q) {
          update(ctx, q,
                 x.has_ghosts(q) ? ctx.read(x.ghosts(q)) : std::span<const std::uint64_t>());
        });
  } else {
    for (std::uint32_t q = 0; q < parts; ++q) {
      g.task_family(
          "sweep[" + std::to_string(q) + "]", 1,
          [&](std::uint32_t, ordo::AccessList& acc) {
            x.add_ghost_sources(q, acc);
            // A part reading itself is its own source (never: set_ghosts drops owned indices).
            acc.add(ordo::write(x.owned(q)));
          },
          [x, q, update](ordo::Context& ctx, std::uint32_t) {
            update(ctx, q, x.fetch_ghosts(ctx, q));
          });
      x.pack(q);
    }
  }
  for (std::uint32_t p = 0; p < parts; ++p) {
    auto own = g.data(x.owned(p));
    for (std::size_t i = 0; i < own.size(); ++i) own[i] = initial(map.partition().begin(p) + i);
  }
  ordo::Runtime rt({.workers = workers});
  if (sweep) x.prime_messages(g, rt);
  rt.run(g, iters);
  std::vector<std::uint64_t> out;
  for (std::uint32_t p = 0; p < parts; ++p)
    for (std::uint64_t v : g.data(x.owned(p))) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("the plan moves exactly the indices each part reads, from their owners") {
  std::mt19937_64 rng(7);
  for (int seed = 0; seed < 300; ++seed) {
    const Case c = random_case(rng);
    const IndexMap m = build(c);
    std::vector<std::uint64_t> sent(c.ranks), received(c.ranks);
    for (std::uint32_t q = 0; q < c.parts; ++q) {
      // The ghosts: what q reads that it does not own, sorted.
      std::vector<Index> want;
      for (Index g : c.reads[q])
        if (g < m.partition().begin(q) || g >= m.partition().end(q)) want.push_back(g);
      REQUIRE(std::vector<Index>(m.ghosts(q).begin(), m.ghosts(q).end()) == want);
      // The transfers cover the slots in order, each from the owner of its indices.
      std::uint32_t slot = 0;
      std::int64_t last_from = -1;
      for (const ordo::sparse::Transfer& t : m.into(q)) {
        REQUIRE(t.to == q);
        REQUIRE(t.ghost_begin == slot);
        REQUIRE(t.count > 0);
        REQUIRE(std::int64_t(t.from) > last_from);
        REQUIRE(t.remote == (c.homes[t.from] != c.homes[q]));
        for (std::uint32_t k = 0; k < t.count; ++k)
          REQUIRE(m.partition().owner(want[slot + k]) == t.from);
        slot += t.count;
        last_from = t.from;
      }
      REQUIRE(slot == want.size());
      // Brute force of the minimum: each ghost owned on another rank, once.
      for (Index g : want) {
        const unsigned from = c.homes[m.partition().owner(g)], to = c.homes[q];
        if (from != to) {
          ++sent[from];
          ++received[to];
        }
      }
    }
    for (unsigned r = 0; r < c.ranks; ++r) {
      REQUIRE(m.entries_sent(r) == sent[r]);
      REQUIRE(m.entries_received(r) == received[r]);
    }
  }
}

TEST_CASE("the exchange gives the previous iteration's values, or the newest in a sweep") {
  std::mt19937_64 rng(11);
  for (int seed = 0; seed < 40; ++seed) {
    Case c = random_case(rng);
    // One process holds every part: one rank (homes elsewhere are refused by the Runtime; the
    // messages between ranks are dist_sparse's).
    c.ranks = 1;
    c.homes.assign(c.parts, 0);
    const IndexMap m = build(c);
    const unsigned iters = 1 + unsigned(rng() % 4);
    for (bool sweep : {false, true}) {
      const std::vector<std::uint64_t> want = reference(m, iters, sweep);
      for (unsigned w = 1; w <= 4; ++w) {
        INFO("seed " << seed << " parts " << c.parts << " n " << c.n << " ranks " << c.ranks
                     << (sweep ? " sweep" : " jacobi") << " workers " << w);
        REQUIRE(run_graph(m, iters, sweep, w) == want);
      }
    }
  }
}

TEST_CASE("the vector's messages hold exactly the remote transfers' values") {
  // Two parts on two ranks, part 1 reading 3 of part 0's 5 entries.
  IndexMap m(Partition::blocks(10, 2), 2);
  m.set_ghosts(1, {4, 0, 2, 2, 7});
  auto shared = std::make_shared<const IndexMap>(m);
  ordo::Graph g;
  ordo::sparse::Vector<double> x(g, "x", shared);
  REQUIRE(x.bytes_sent(0) == 3 * sizeof(double));
  REQUIRE(x.bytes_sent(1) == 0);
  REQUIRE(!x.has_ghosts(0));
  REQUIRE(x.has_ghosts(1));
  REQUIRE(x.ghosts(1).size() == 3);
  REQUIRE_THROWS_WITH(x.ghosts(0), Contains("part 0 reads no ghosts"));
}

TEST_CASE("bad index sets are refused with what is wrong") {
  IndexMap m(Partition::blocks(10, 3), 1);
  REQUIRE_THROWS_WITH(
      m.set_ghosts(1, {3, 10}),
      Contains("part 1 reads index 10, which no part owns (the index space has 10 entries"));
  REQUIRE(m.ghosts(1).empty());
  REQUIRE_THROWS_WITH(m.set_ghosts(3, {1}), Contains("part 3 does not exist"));
  REQUIRE_THROWS_WITH(Partition::blocks(3, 4), Contains("give at most 3 parts"));
  REQUIRE_THROWS_WITH(Partition({0, 4, 4, 9}), Contains("part 1 of the partition is empty"));
  REQUIRE_THROWS_WITH(IndexMap(Partition::blocks(10, 2), 3),
                      Contains("every rank needs at least one part"));
  REQUIRE_THROWS_WITH(m.set_home(0, 1), Contains("the map spans 1 rank"));
  REQUIRE_THROWS_WITH(m.partition().owner(10), Contains("no part owns it"));
  // Block rows: sizes differ by at most one, in order.
  const Partition p = Partition::blocks(10, 3);
  REQUIRE(p.starts() == std::vector<Index>{0, 4, 7, 10});
  REQUIRE(p.owner(3) == 0);
  REQUIRE(p.owner(4) == 1);
  REQUIRE(p.owner(9) == 2);
}
