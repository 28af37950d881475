// The sparse layer's property test across ranks (run under ordorun on 1-3 ranks): random
// sparse patterns and part counts (parts that read no ghosts, parts that read from every other
// part, random homes), a few iterations of x <- A x through Matrix, Vector::exchange and
// LocalRows::multiply, against a dense sequential loop: every rank checks its parts bit for bit.
// And the bytes: the exchange's message bytes from each rank equal the minimum a brute force
// over the dense matrix finds (each value another rank's part reads, once per reading part),
// and the storage each rank holds is its home locations plus exactly that minimum received
// (when locations are copied, ORDO_SHARED_MEMORY=0): no task reads anything else remotely.
// What the transport was really handed for the program's locations (ordo::bench::bytes_sent)
// is that minimum once per iteration when locations are copied, and nothing when the ranks of
// the host share them.
// The same matrix again as a sweep (Gauss-Seidel by parts: part q's product reads the newest
// values of the parts before it and the previous ones of itself and the parts after it;
// Vector::pack, add_ghost_sources, fetch_ghosts, prime_messages) against a sequential sweep
// over the dense matrix, bit for bit, with the same bytes on the wire.
//   dist_sparse --seeds N --workers W
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <ordo/bench.hpp>
#include <ordo/sparse.hpp>

namespace {

using ordo::sparse::Index;

struct Case {
  Index n = 0;
  std::uint32_t parts = 0;
  std::vector<double> dense;  // n x n, row-major; 0 = no entry
  std::vector<unsigned> homes;
  unsigned iters = 0;
};

Case make(std::uint64_t seed, unsigned ranks) {
  std::mt19937_64 rng(seed * 7919 + 1);
  Case c;
  c.parts = ranks + std::uint32_t(rng() % 6);
  c.n = c.parts + rng() % 70;
  c.iters = 1 + unsigned(rng() % 3);
  c.dense.assign(c.n * c.n, 0.0);
  const ordo::sparse::Partition part = ordo::sparse::Partition::blocks(c.n, c.parts);
  std::uniform_real_distribution<double> val(0.05, 0.45);
  const double density = double(rng() % 100) / 400.0;
  for (std::uint32_t q = 0; q < c.parts; ++q) {
    const unsigned kind = unsigned(rng() % 4);
    for (Index i = part.begin(q); i < part.end(q); ++i) {
      for (Index j = 0; j < c.n; ++j) {
        const bool own = j >= part.begin(q) && j < part.end(q);
        bool on = std::uniform_real_distribution<double>(0, 1)(rng) < density;
        if (kind == 0 && !own) on = false;                                     // no ghosts at all
        if (kind == 1 && !own && i == part.begin(q) && j % 3 == 0) on = true;  // every part
        if (i == j) on = true;
        if (on) c.dense[i * c.n + j] = (rng() & 1 ? 1 : -1) * val(rng);
      }
    }
    if (kind == 1)  // at least one index of every other part
      for (std::uint32_t p = 0; p < c.parts; ++p)
        c.dense[part.begin(q) * c.n + part.begin(p)] = 0.25;
  }
  for (std::uint32_t p = 0; p < c.parts; ++p) c.homes.push_back(unsigned(rng() % ranks));
  for (unsigned r = 0; r < ranks; ++r) c.homes[r] = r;  // every rank holds a part
  return c;
}

double initial(Index i) { return 1.0 + double(i % 17) * 0.125; }

[[noreturn]] void fail(unsigned rank, const std::string& what) {
  std::fprintf(stderr, "rank %u: %s\n", rank, what.c_str());
  std::exit(1);
}

void check(ordo::Runtime& rt, std::uint64_t seed, bool shared) {
  const unsigned rank = rt.rank(), ranks = rt.ranks();
  const Case c = make(seed, ranks);
  ordo::sparse::IndexMap map(ordo::sparse::Partition::blocks(c.n, c.parts), ranks);
  for (std::uint32_t p = 0; p < c.parts; ++p) map.set_home(p, c.homes[p]);
  const ordo::sparse::Partition part = map.partition();
  std::vector<ordo::sparse::Rows> rows(c.parts);
  for (std::uint32_t p = 0; p < c.parts; ++p) {
    if (ranks > 1 && c.homes[p] != rank) continue;
    rows[p].first = part.begin(p);
    for (Index i = part.begin(p); i < part.end(p); ++i) {
      std::vector<Index> cols;
      std::vector<double> vals;
      for (Index j = 0; j < c.n; ++j)
        if (c.dense[i * c.n + j] != 0) {
          cols.push_back(j);
          vals.push_back(c.dense[i * c.n + j]);
        }
      rows[p].add_row(cols, vals);
    }
  }
  const auto a = std::make_shared<const ordo::sparse::Matrix>(rt, std::move(map), std::move(rows));
  const ordo::sparse::IndexMap& m = *a->map();

  ordo::Graph g;
  ordo::sparse::Vector<double> x(g, "x", a->map());
  const auto y =
      g.location_family<double>("y", c.parts, [&](std::uint32_t p) { return part.count(p); });
  for (std::uint32_t p = 0; p < c.parts; ++p) g.set_home_rank(y[p], m.home(p));
  x.exchange();
  g.task_family(
      "matvec", c.parts,
      [&](std::uint32_t p, ordo::AccessList& acc) {
        acc.add(ordo::write(y[p]));
        acc.add(ordo::read(x.owned(p)));
        if (x.has_ghosts(p)) acc.add(ordo::read(x.ghosts(p)));
      },
      [a, x, y](ordo::Context& ctx, std::uint32_t p) {
        a->part(p).multiply(ctx.read(x.owned(p)).data(),
                            x.has_ghosts(p) ? ctx.read(x.ghosts(p)).data() : nullptr,
                            ctx.write(y[p]).data());
      });
  g.task_family(
      "copy", c.parts,
      [&](std::uint32_t p, ordo::AccessList& acc) {
        acc.add(ordo::write(x.owned(p)));
        acc.add(ordo::read(y[p]));
      },
      [x, y](ordo::Context& ctx, std::uint32_t p) {
        const auto from = ctx.read(y[p]);
        std::memcpy(ctx.write(x.owned(p)).data(), from.data(), from.size_bytes());
      });
  for (std::uint32_t p = 0; p < c.parts; ++p) {
    if (ranks > 1 && m.home(p) != rank) continue;
    const auto own = g.data(x.owned(p));
    for (std::size_t i = 0; i < own.size(); ++i) own[i] = initial(part.begin(p) + i);
  }
  rt.run(g, c.iters);
  const std::uint64_t wire = ordo::bench::bytes_sent(g).program;

  // The sweep over the same matrix: one task per part in part order, each packing after it.
  ordo::Graph gs;
  ordo::sparse::Vector<double> sx(gs, "sx", a->map());
  for (std::uint32_t q = 0; q < c.parts; ++q) {
    gs.task_family(
        "sweep[" + std::to_string(q) + "]", 1,
        [&](std::uint32_t, ordo::AccessList& acc) {
          sx.add_ghost_sources(q, acc);
          acc.add(ordo::write(sx.owned(q)));
        },
        [a, sx, q](ordo::Context& ctx, std::uint32_t) {
          const std::span<double> ghost = sx.fetch_ghosts(ctx, q);
          const std::span<double> own = ctx.write(sx.owned(q));
          std::vector<double> next(own.size());
          a->part(q).multiply(own.data(), ghost.data(), next.data());
          std::memcpy(own.data(), next.data(), own.size_bytes());
        });
    sx.pack(q);
  }
  for (std::uint32_t p = 0; p < c.parts; ++p) {
    if (ranks > 1 && m.home(p) != rank) continue;
    const auto own = gs.data(sx.owned(p));
    for (std::size_t i = 0; i < own.size(); ++i) own[i] = initial(part.begin(p) + i);
  }
  sx.prime_messages(gs, rt);
  rt.run(gs, c.iters);
  const std::uint64_t sweep_wire = ordo::bench::bytes_sent(gs).program;

  // The dense sequential reference: x <- A x, each row summed over j in order.
  std::vector<double> want(c.n), next(c.n);
  for (Index i = 0; i < c.n; ++i) want[i] = initial(i);
  for (unsigned k = 0; k < c.iters; ++k) {
    for (Index i = 0; i < c.n; ++i) {
      double s = 0.0;
      for (Index j = 0; j < c.n; ++j)
        if (c.dense[i * c.n + j] != 0) s += c.dense[i * c.n + j] * want[j];
      next[i] = s;
    }
    want = next;
  }
  // The sequential sweep: parts in order, each part's rows from the values as they stand
  // (earlier parts already updated in this iteration), written back once the part is done.
  std::vector<double> swept(c.n);
  for (Index i = 0; i < c.n; ++i) swept[i] = initial(i);
  for (unsigned k = 0; k < c.iters; ++k)
    for (std::uint32_t q = 0; q < c.parts; ++q) {
      std::vector<double> rows_q;
      for (Index i = part.begin(q); i < part.end(q); ++i) {
        double s = 0.0;
        for (Index j = 0; j < c.n; ++j)
          if (c.dense[i * c.n + j] != 0) s += c.dense[i * c.n + j] * swept[j];
        rows_q.push_back(s);
      }
      std::copy(rows_q.begin(), rows_q.end(), swept.begin() + std::ptrdiff_t(part.begin(q)));
    }
  const std::string what = "seed " + std::to_string(seed) + " (n " + std::to_string(c.n) + ", " +
                           std::to_string(c.parts) + " parts)";
  for (std::uint32_t p = 0; p < c.parts; ++p) {
    if (ranks > 1 && m.home(p) != rank) continue;
    const auto got = g.data(x.owned(p));
    if (std::memcmp(got.data(), &want[part.begin(p)], got.size_bytes()) != 0)
      fail(rank, what + ": part " + std::to_string(p) + " differs from the dense reference");
    const auto got_sweep = gs.data(sx.owned(p));
    if (std::memcmp(got_sweep.data(), &swept[part.begin(p)], got_sweep.size_bytes()) != 0)
      fail(rank, what + ": part " + std::to_string(p) + " of the sweep differs from the " +
                     "sequential sweep");
  }
  // The minimum: each (reading part, column) pair whose owner lives on another rank, once.
  // back_sent: the share of parts read by an earlier part (the sweep reads them before they
  // are packed).
  std::vector<std::uint64_t> least_sent(ranks), least_received(ranks), back_sent(ranks);
  for (std::uint32_t q = 0; q < c.parts; ++q) {
    std::set<Index> cols;
    for (Index i = part.begin(q); i < part.end(q); ++i)
      for (Index j = 0; j < c.n; ++j)
        if (c.dense[i * c.n + j] != 0 && part.owner(j) != q) cols.insert(j);
    for (Index j : cols) {
      const unsigned from = c.homes[part.owner(j)], to = c.homes[q];
      if (from != to) {
        least_sent[from] += sizeof(double);
        least_received[to] += sizeof(double);
        if (part.owner(j) > q) back_sent[from] += sizeof(double);
      }
    }
  }
  if (x.bytes_sent(rank) != least_sent[rank] ||
      m.entries_sent(rank) * sizeof(double) != least_sent[rank])
    fail(rank, what + ": the exchange sends " + std::to_string(x.bytes_sent(rank)) +
                   " bytes from this rank, the minimum is " + std::to_string(least_sent[rank]));
  // A message read before its pack (the sweep's from a later part) goes once more at the end
  // of the run: the protocol grants the next iteration's read as soon as the last pack is
  // done, ahead of the next run.
  const std::uint64_t wire_want = shared ? 0 : least_sent[rank] * c.iters;
  const std::uint64_t sweep_want = shared ? 0 : wire_want + back_sent[rank];
  if (wire != wire_want || sweep_wire != sweep_want)
    fail(rank, what + ": the transport was handed " + std::to_string(wire) + " bytes (the sweep " +
                   std::to_string(sweep_wire) + ") of the program's locations over " +
                   std::to_string(c.iters) + " iteration(s), expected " +
                   std::to_string(wire_want) + " (" + std::to_string(sweep_want) + ")" +
                   (shared ? ": the ranks share their locations"
                           : ": the minimum per iteration, and the sweep's next reads"));
  if (ranks > 1) {
    // What this rank holds: its home locations (x's owned, ghost and outgoing message
    // locations, y), plus the replicas its tasks read: exactly the messages to its parts.
    std::uint64_t home = 0;
    for (std::uint32_t p = 0; p < c.parts; ++p) {
      if (m.home(p) != rank) continue;
      home += 2 * part.count(p) * sizeof(double) + m.ghosts(p).size() * sizeof(double);
    }
    home += least_sent[rank];
    const std::uint64_t held = g.storage_held().bytes;
    const std::uint64_t expected = home + (shared ? 0 : least_received[rank]);
    if (held != expected)
      fail(rank, what + ": this rank holds " + std::to_string(held) +
                     " bytes of locations, "
                     "expected " +
                     std::to_string(expected) + " (home " + std::to_string(home) + " + received " +
                     std::to_string(shared ? 0 : least_received[rank]) + ")");
  }
}

}  // namespace

int main(int argc, char** argv) {
  unsigned seeds = 20, workers = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seeds")
      seeds = unsigned(std::atoi(argv[i + 1]));
    else if (std::string(argv[i]) == "--workers")
      workers = unsigned(std::atoi(argv[i + 1]));
  }
  const char* env = std::getenv("ORDO_SHARED_MEMORY");
  try {
    ordo::Runtime rt({.workers = workers});
    const bool shared = rt.ranks() > 1 && !(env != nullptr && std::string(env) == "0");
    for (unsigned s = 0; s < seeds; ++s) check(rt, s, shared);
    std::printf(
        "rank %u of %u: %u seeds, every part bit-identical to the dense reference and the "
        "sweep to the sequential sweep, bytes at the minimum on the plan and on the wire\n",
        rt.rank(), rt.ranks(), seeds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_sparse: %s\n", e.what());
    return 1;
  }
  return 0;
}
