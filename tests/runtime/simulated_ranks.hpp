// Simulated ranks for the engine's tests across ranks: every rank in this process over
// LoopbackNet (loopback_net.hpp), each building its own copy of the graph (SPMD) on its own
// pool. Shared by the tests of each part: test_remote_locks.cpp, test_shared_peers.cpp,
// test_storage.cpp and test_failures.cpp.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph_spec.hpp"
#include "loopback_net.hpp"
#include "runtime/engine.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"

namespace ordo::test {

// Builds `spec` as a runtime graph (every rank does the same). `families`: consecutive tasks
// grouped into families of up to 3 members sharing one body, which finds its task from
// Instance::index.
inline void build(rt::Graph& g, const GraphSpec& spec, bool families = false) {
  for (std::size_t l = 0; l < spec.sizes.size(); ++l)
    g.add_location("L" + std::to_string(l), 8, spec.sizes[l], typeid(std::uint64_t));
  if (families) {
    for (std::uint32_t first = 0; first < spec.tasks.size(); first += 3) {
      const auto end =
          std::min<std::uint32_t>(first + 3, static_cast<std::uint32_t>(spec.tasks.size()));
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
inline std::vector<std::vector<std::uint64_t>> run_ranks(
    const GraphSpec& spec, unsigned ranks, unsigned workers, std::uint64_t first,
    std::uint64_t second, const std::vector<std::int32_t>& homes = {},
    LoopbackHub* hub_out = nullptr, bool families = false, bool late_copy = false,
    bool shared = false, const std::function<void(std::vector<Rank>&)>& inspect = {},
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

// `seeds` random graphs (seeds from `base`) on `lo`..`hi` ranks x 1-2 workers, each compared
// with the sequential interpreter.
inline void check_random_graphs(std::uint64_t base, std::uint64_t seeds, unsigned lo, unsigned hi,
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

// What a rank's run threw: "RunError(<kind>, rank R): <what>" for a failure across ranks,
// "exception: <what>" for a body's own exception.
inline std::string described(const std::exception& e) {
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
inline std::vector<std::future<std::string>> run_failing(
    LoopbackHub& hub, std::vector<Rank>& rs, unsigned workers, std::uint64_t iterations,
    const std::function<void(rt::Graph&, unsigned)>& declare, std::uint64_t check_every = 0,
    std::uint32_t channel = 1) {
  std::vector<std::future<std::string>> f;
  for (unsigned r = 0; r < hub.size(); ++r)
    f.push_back(std::async(
        std::launch::async,
        [&hub, &rs, workers, iterations, declare, check_every, channel, r]() -> std::string {
          declare(rs[r].graph, r);
          auto c = rt::compile(rs[r].graph);
          rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{workers});
          rs[r].engine =
              std::make_unique<rt::Engine>(rs[r].graph, std::move(c.plan), &hub.net(r), channel);
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

}  // namespace ordo::test
