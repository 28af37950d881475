// Graph::task_family: a family of n tasks is the same graph as n task() calls (same FIFOs, same
// results, compared with a sequential computation), its members get their index, access-free
// families run every member once per iteration (range items, split across workers, also over
// several run_until steps), and bad declarations are refused without changing the graph.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace {

std::uint64_t step(std::uint64_t l, std::uint64_t s, std::uint64_t r) { return 3 * l + 5 * s + 7 * r + 1; }

// The sequential program: per iteration, tile i = step(tile i-1, tile i, tile i+1) for i in order.
std::vector<std::uint64_t> sequential_stencil(std::uint32_t n, std::uint64_t iterations) {
  std::vector<std::uint64_t> t(n, 0);
  for (std::uint64_t k = 0; k < iterations; ++k)
    for (std::uint32_t i = 0; i < n; ++i)
      t[i] = step(i > 0 ? t[i - 1] : 0, t[i], i + 1 < n ? t[i + 1] : 0);
  return t;
}

// A 1-D stencil of n tiles declared as one family (or as n task() calls), run for `iterations`.
std::vector<std::uint64_t> run_stencil(std::uint32_t n, std::uint64_t iterations, unsigned workers,
                                       bool family) {
  ordo::Graph g;
  std::vector<ordo::Location<std::uint64_t>> tile;
  for (std::uint32_t i = 0; i < n; ++i) tile.push_back(g.location<std::uint64_t>("t" + std::to_string(i), 1));
  auto body = [tile, n](ordo::Context& ctx, std::uint32_t i) {
    auto v = ctx.write(tile[i]);
    std::uint64_t l = i > 0 ? ctx.read(tile[i - 1])[0] : 0;
    std::uint64_t r = i + 1 < n ? ctx.read(tile[i + 1])[0] : 0;
    v[0] = step(l, v[0], r);
  };
  if (family) {
    const std::uint32_t first = g.task_family(
        "step", n,
        [&](std::uint32_t i, ordo::AccessList& acc) {
          CHECK(acc.index() == i);
          if (i > 0) acc.add(ordo::read(tile[i - 1]));
          acc.add(ordo::write(tile[i]));
          if (i + 1 < n) acc.add(ordo::read(tile[i + 1]));
        },
        body);
    CHECK(first == 0);
  } else {
    for (std::uint32_t i = 0; i < n; ++i) {
      std::vector<ordo::Access> acc;
      if (i > 0) acc.push_back(ordo::read(tile[i - 1]));
      acc.push_back(ordo::write(tile[i]));
      if (i + 1 < n) acc.push_back(ordo::read(tile[i + 1]));
      g.task("step" + std::to_string(i), acc, [body, i](ordo::Context& ctx) { body(ctx, i); });
    }
  }
  CHECK(g.tasks() == n);
  ordo::Runtime rt({.workers = workers});
  rt.run(g, iterations);
  std::vector<std::uint64_t> out;
  for (auto t : tile) out.push_back(g.data(t)[0]);
  return out;
}

}  // namespace

TEST_CASE("a family computes what the same tasks declared one by one compute") {
  for (unsigned workers : {1u, 2u, 4u}) {
    for (std::uint32_t n : {1u, 2u, 7u, 33u}) {
      INFO("workers " << workers << " tiles " << n);
      const auto want = sequential_stencil(n, 25);
      CHECK(run_stencil(n, 25, workers, true) == want);
      CHECK(run_stencil(n, 25, workers, false) == want);
    }
  }
}

TEST_CASE("a chain declared as a family runs its members in index order") {
  constexpr std::uint32_t kN = 5000;
  for (unsigned workers : {1u, 2u}) {
    ordo::Graph g;
    auto x = g.location<std::uint64_t>("x", 1);
    auto before = g.location<std::uint64_t>("before", 1);
    g.task("seed", {ordo::write(x), ordo::write(before)}, [=](ordo::Context& ctx) {
      ctx.write(x)[0] = 7;
      ctx.write(before)[0] += 1;
    });
    const std::uint32_t first = g.task_family(
        "link", kN, [x](std::uint32_t, ordo::AccessList& acc) { acc.add(ordo::write(x)); },
        [x](ordo::Context& ctx, std::uint32_t i) {
          auto v = ctx.write(x);
          v[0] = v[0] * 6364136223846793005ull + i + 1;
        });
    CHECK(first == 1);
    CHECK(g.tasks() == kN + 1);
    ordo::Runtime rt({.workers = workers});
    rt.run(g, 2);
    std::uint64_t want = 0;
    for (int k = 0; k < 2; ++k) {
      want = 7;
      for (std::uint32_t i = 0; i < kN; ++i) want = want * 6364136223846793005ull + i + 1;
    }
    CHECK(g.data(x)[0] == want);
    CHECK(g.data(before)[0] == 2);
  }
}

TEST_CASE("every member of an access-free family runs once per iteration") {
  // Large enough to be split across workers, over several run_until steps, beside tasks with
  // locks and a second free family right after the first (adjacent runs).
  constexpr std::uint32_t kN = 20'000, kM = 3;
  for (unsigned workers : {1u, 2u, 4u}) {
    INFO("workers " << workers);
    std::vector<std::atomic<std::uint32_t>> count(kN + kM);
    std::vector<std::uint64_t> last_iteration(kN + kM, ~std::uint64_t{0});
    std::atomic<bool> out_of_order{false};
    ordo::Graph g;
    auto x = g.location<std::int64_t>("x", 1);
    g.task("before", {ordo::write(x)}, [x](ordo::Context& ctx) { ctx.write(x)[0] += 1; });
    auto body = [&](ordo::Context& ctx, std::uint32_t i) {
      // Instances of one member run in iteration order.
      if (last_iteration[i] + 1 != ctx.iteration()) out_of_order = true;
      last_iteration[i] = ctx.iteration();
      count[i].fetch_add(1, std::memory_order_relaxed);
    };
    CHECK(g.task_family("free", kN, body) == 1);
    CHECK(g.task_family("more", kM, [&](ordo::Context& ctx, std::uint32_t i) { body(ctx, kN + i); }) ==
          1 + kN);
    g.task("after", {ordo::write(x)}, [x](ordo::Context& ctx) { ctx.write(x)[0] *= 2; });
    CHECK(g.tasks() == kN + kM + 2);
    ordo::Runtime rt({.workers = workers});
    rt.run(g, 2);
    std::uint64_t checks = 0;
    auto stats = rt.run_until(g, {.done = [&](const ordo::Graph&) { return ++checks == 3; },
                                  .check_every = 2,
                                  .max_iterations = 100});
    CHECK(stats.iterations == 6);
    std::int64_t want = 0;
    for (int k = 0; k < 8; ++k) want = (want + 1) * 2;
    CHECK(g.data(x)[0] == want);
    CHECK_FALSE(out_of_order);
    std::uint32_t wrong = 0;
    for (auto& c : count) wrong += c.load() != 8;
    CHECK(wrong == 0);
  }
}

TEST_CASE("family declarations that are wrong are refused and leave the graph as it was") {
  ordo::Graph g;
  auto a = g.location<int>("a", 1);
  auto b = g.location<int>("b", 1);
  g.task("first", {ordo::write(a)}, [](ordo::Context&) {});

  CHECK_THROWS_WITH(
      g.task_family("dup", 4,
                    [&](std::uint32_t i, ordo::AccessList& acc) {
                      acc.add(ordo::write(a));
                      if (i == 2) acc.add(ordo::read(a));
                    },
                    [](ordo::Context&, std::uint32_t) {}),
      Catch::Contains("task 'dup[2]' lists location 'a' twice"));
  CHECK(g.tasks() == 1);

  ordo::Graph other;
  auto foreign = other.location<int>("f0", 1);
  (void)other.location<int>("f1", 1);
  (void)other.location<int>("f2", 1);
  auto far = other.location<int>("f3", 1);
  (void)foreign;
  CHECK_THROWS_WITH(
      g.task_family("foreign", 2, [&](std::uint32_t, ordo::AccessList& acc) { acc.add(ordo::read(far)); },
                    [](ordo::Context&, std::uint32_t) {}),
      Catch::Contains("task 'foreign[0]' cannot access it: location #3 belongs to another Graph"));
  CHECK(g.tasks() == 1);

  CHECK_THROWS_WITH(g.task_family(
                        "throws", 5,
                        [&](std::uint32_t i, ordo::AccessList& acc) {
                          acc.add(ordo::read(b));
                          if (i == 3) throw std::runtime_error("pattern failed");
                        },
                        [](ordo::Context&, std::uint32_t) {}),
                    "pattern failed");
  CHECK(g.tasks() == 1);

  CHECK_THROWS_WITH(g.task_family(
                        "outer", 2,
                        [&](std::uint32_t, ordo::AccessList&) {
                          g.task("inner", {}, [](ordo::Context&) {});
                        },
                        [](ordo::Context&, std::uint32_t) {}),
                    Catch::Contains("inside the access pattern of task family 'outer'"));
  CHECK(g.tasks() == 1);

  CHECK_THROWS_WITH(g.task_family("nobody", 3, ordo::Graph::IndexedBody{}),
                    Catch::Contains("task 'nobody' has no body"));
  CHECK_THROWS_WITH(g.task_family("nopattern", 3, ordo::Graph::AccessPattern{},
                                  [](ordo::Context&, std::uint32_t) {}),
                    Catch::Contains("has no access pattern"));
  CHECK(g.task_family("empty", 0, [](ordo::Context&, std::uint32_t) {}) == 1);
  CHECK(g.tasks() == 1);

  // The graph still runs as declared.
  g.task("second", {ordo::read(a), ordo::write(b)},
         [=](ordo::Context& ctx) { ctx.write(b)[0] = ctx.read(a)[0] + 1; });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 1);
  CHECK(g.data(b)[0] == 1);
  CHECK_THROWS_WITH(g.task_family("late", 2, [](ordo::Context&, std::uint32_t) {}),
                    Catch::Contains("after the graph's first run"));
}

TEST_CASE("errors while running name the family member") {
  ordo::Graph g;
  auto a = g.location<int>("a", 1);
  auto b = g.location<int>("b", 1);
  g.task("w", {ordo::write(a), ordo::write(b)}, [](ordo::Context&) {});
  g.task_family(
      "r", 4, [=](std::uint32_t, ordo::AccessList& acc) { acc.add(ordo::read(a)); },
      [=](ordo::Context& ctx, std::uint32_t i) {
        if (i == 3) ctx.write(a);
      });
  ordo::Runtime rt({.workers = 2});
  CHECK_THROWS_WITH(rt.run(g, 1), Catch::Contains("task 'r[3]' writes location 'a' but declared it with read()"));

  // Explicit positions that make a cycle: the message names the members.
  ordo::Graph c;
  auto x = c.location<int>("x", 1);
  auto y = c.location<int>("y", 1);
  c.task_family(
      "p", 2,
      [=](std::uint32_t i, ordo::AccessList& acc) {
        acc.add(ordo::write(x).at(i));
        acc.add(ordo::write(y).at(1 - static_cast<std::int64_t>(i)));
      },
      [](ordo::Context&, std::uint32_t) {});
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("task 'p[1]' waits for task 'p[0]'") &&
                                      Catch::Contains("deadlock"));
}

TEST_CASE("an exception in an access-free family's body stops the run and is rethrown") {
  for (unsigned workers : {1u, 2u}) {
    ordo::Graph g;
    std::atomic<std::uint32_t> ran{0};
    g.task_family("free", 10'000, [&](ordo::Context&, std::uint32_t i) {
      ran.fetch_add(1, std::memory_order_relaxed);
      if (i == 4321) throw std::runtime_error("member 4321 failed");
    });
    ordo::Runtime rt({.workers = workers});
    CHECK_THROWS_WITH(rt.run(g, 3), "member 4321 failed");
    CHECK(ran.load() <= 3 * 10'000u);  // bodies are skipped once the run is aborted
  }
}

TEST_CASE("a graph of more tasks than the engine runs is refused while it is declared") {
  ordo::Graph g;
  auto a = g.location<int>("a", 1);
  g.task("first", {ordo::write(a)}, [](ordo::Context&) {});
  // Refused before any member is declared: the pattern never runs.
  bool pattern_ran = false;
  CHECK_THROWS_WITH(g.task_family("huge", std::uint32_t{1} << 31,
                                  [&](std::uint32_t, ordo::AccessList&) { pattern_ran = true; },
                                  [](ordo::Context&, std::uint32_t) {}),
                    Catch::Contains("task 'huge' would make the graph hold more than 2147483647 "
                                    "tasks"));
  CHECK_FALSE(pattern_ran);
  CHECK(g.tasks() == 1);
  // One task below the limit is not refused for its count.
  CHECK_THROWS_WITH(g.task_family("almost", (std::uint32_t{1} << 31) - 2,
                                  [&](std::uint32_t, ordo::AccessList&) {
                                    throw std::runtime_error("pattern reached");
                                  },
                                  [](ordo::Context&, std::uint32_t) {}),
                    Catch::Contains("pattern reached"));
  CHECK(g.tasks() == 1);
}
