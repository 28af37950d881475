// ordo's side of ordo-bench-tasks, written against the public API only.
//
// Modelling (iterations are ordo's native form for repeated work, so stencil1d uses them):
//   independent  N tasks without accesses, run for 1 iteration. A body increments a counter
//                (outside any location: the tasks share nothing).
//   chain        one location x; N tasks each declaring write(x), run for 1 iteration. The
//                program-order FIFO of x runs them one after the other in declaration order.
// Two forms of declaring the N tasks of independent and chain, both public API:
//   system=ordo          one Graph::task_family call (N members, body gets its index);
//   system=ordo-pertask  N Graph::task calls in a loop, each with its own name, access vector
//                        and std::function, as a user writing one task at a time would.
// Both declare exactly the same tasks (same FIFOs, same results). stencil1d has 64 tasks per
// graph, so it uses task() in both.
//   stencil1d    T locations (tiles) and T tasks; task i declares read(tile i-1), write(tile i)
//                and read(tile i+1); the graph runs for K iterations. Program order gives
//                exactly the dependencies of bench.hpp.
// Timed: building the Graph (locations and tasks), Runtime::run, reading the result and
// destroying the Graph. The Runtime (its worker threads) is created once per thread count,
// untimed, as the peers' thread pools are.
#include <chrono>
#include <string>

#include <ordo/ordo.hpp>

#include "bench.hpp"

namespace ordo::bench {

namespace {

class OrdoSystem final : public System {
 public:
  OrdoSystem(unsigned threads, bool per_task)
      : rt_(ordo::RuntimeOptions{.workers = threads}), per_task_(per_task) {}

 private:

  double independent(const Sizes& s) override {
    std::vector<std::uint64_t> counters(s.independent, 0);
    auto t0 = Clock::now();
    {
      ordo::Graph g;
      if (per_task_) {
        for (std::uint64_t i = 0; i < s.independent; ++i)
          g.task(std::to_string(i), {}, [c = &counters[i]](ordo::Context&) { ++*c; });
      } else {
        g.task_family("t", static_cast<std::uint32_t>(s.independent),
                      [c = counters.data()](ordo::Context&, std::uint32_t i) { ++c[i]; });
      }
      rt_.run(g, 1);
    }
    double secs = since(t0);
    check_independent("ordo", counters);
    return secs;
  }

  double chain(const Sizes& s, const Expected& e) override {
    std::uint64_t result = 0;
    auto t0 = Clock::now();
    {
      ordo::Graph g;
      auto x = g.location<std::uint64_t>("x", 1);
      if (per_task_) {
        for (std::uint64_t i = 0; i < s.chain; ++i)
          g.task(std::to_string(i), {ordo::write(x)}, [x, i](ordo::Context& ctx) {
            auto v = ctx.write(x);
            v[0] = chain_step(v[0], i);
          });
      } else {
        g.task_family(
            "t", static_cast<std::uint32_t>(s.chain),
            [x](std::uint32_t, ordo::AccessList& acc) { acc.add(ordo::write(x)); },
            [x](ordo::Context& ctx, std::uint32_t i) {
              auto v = ctx.write(x);
              v[0] = chain_step(v[0], i);
            });
      }
      rt_.run(g, 1);
      result = g.data(x)[0];
    }
    double secs = since(t0);
    check_chain("ordo", result, e);
    return secs;
  }

  double stencil(const Sizes& s, const Expected& e) override {
    std::vector<std::uint64_t> result(s.tiles);
    auto t0 = Clock::now();
    {
      ordo::Graph g;
      std::vector<ordo::Location<std::uint64_t>> tile;
      tile.reserve(s.tiles);
      for (std::uint32_t i = 0; i < s.tiles; ++i)
        tile.push_back(g.location<std::uint64_t>("tile" + std::to_string(i), 1));
      for (std::uint32_t i = 0; i < s.tiles; ++i) {
        const bool has_left = i > 0, has_right = i + 1 < s.tiles;
        auto left = has_left ? tile[i - 1] : tile[i];
        auto self = tile[i];
        auto right = has_right ? tile[i + 1] : tile[i];
        std::vector<ordo::Access> acc;
        if (has_left) acc.push_back(ordo::read(left));
        acc.push_back(ordo::write(self));
        if (has_right) acc.push_back(ordo::read(right));
        g.task("step" + std::to_string(i), std::move(acc),
               [=](ordo::Context& ctx) {
                 auto v = ctx.write(self);
                 std::uint64_t l = has_left ? ctx.read(left)[0] : 0;
                 std::uint64_t r = has_right ? ctx.read(right)[0] : 0;
                 v[0] = stencil_step(l, v[0], r);
               });
      }
      rt_.run(g, s.iterations);
      for (std::uint32_t i = 0; i < s.tiles; ++i) result[i] = g.data(tile[i])[0];
    }
    double secs = since(t0);
    check_stencil("ordo", result, e);
    return secs;
  }

  ordo::Runtime rt_;
  bool per_task_;
};

}  // namespace

std::unique_ptr<System> make_ordo(unsigned threads) {
  return std::make_unique<OrdoSystem>(threads, false);
}

std::unique_ptr<System> make_ordo_pertask(unsigned threads) {
  return std::make_unique<OrdoSystem>(threads, true);
}

}  // namespace ordo::bench
