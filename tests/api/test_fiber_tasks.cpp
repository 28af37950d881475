// Fiber tasks through the public API, one task at a time: acquire suspends the fiber and not
// its worker, many suspended fibers, release hands a location on before the body ends, and
// misuse, exceptions and stack sizes reported as ordo::Error. Whole graphs of fiber and
// dataflow tasks against program order: test_fiber_graphs.cpp.
#include <array>
#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ordo/ordo.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "test_support.hpp"

using Catch::Matchers::Contains;

namespace {

using ordo::test::kTsan;

// ---- a chain that only completes on one worker if acquire does not block the thread ----------

// T_0 -> T_1 -> ... -> T_{n-1} through x_i (written by T_i, read by T_{i+1}); T_i adds its
// input to its own running total. `reverse` declares the chain backwards and orders the FIFOs
// with explicit positions, so whichever end a scheduler runs first, some consumer starts
// before its producer has released: it must wait, and if it blocked its (only) worker, the
// producer could never run.
struct Chain {
  std::vector<ordo::Location<std::int64_t>> x;      // x[i]: T_i's output
  std::vector<ordo::Location<std::int64_t>> total;  // per task, running sum of its inputs
  std::shared_ptr<std::vector<std::atomic<std::uint64_t>>> finished;  // instances done per task
  std::shared_ptr<std::atomic<int>> early;  // bodies that started before their producer ended
};

Chain make_chain(ordo::Graph& g, const std::string& name, int n, bool reverse) {
  Chain c;
  c.finished = std::make_shared<std::vector<std::atomic<std::uint64_t>>>(n);
  c.early = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < n; ++i) {
    c.x.push_back(g.location<std::int64_t>(name + "-x" + std::to_string(i), 1));
    c.total.push_back(g.location<std::int64_t>(name + "-total" + std::to_string(i), 1));
  }
  auto declare = [&](int i) {
    std::vector<ordo::Access> acc{ordo::write(c.x[i]), ordo::write(c.total[i])};
    if (reverse) acc[0] = acc[0].at(0);
    if (i > 0) acc.push_back(reverse ? ordo::read(c.x[i - 1]).at(1) : ordo::read(c.x[i - 1]));
    ordo::Location<std::int64_t> in = i > 0 ? c.x[i - 1] : ordo::Location<std::int64_t>{};
    auto out = c.x[i], total = c.total[i];
    auto finished = c.finished;
    auto early = c.early;
    g.fiber_task(name + std::to_string(i), acc, [=](ordo::FiberContext& ctx) {
      const std::uint64_t k = ctx.iteration();
      std::int64_t v = static_cast<std::int64_t>(k) + 1;
      if (i > 0) {
        if ((*finished)[static_cast<std::size_t>(i - 1)].load() <= k) early->fetch_add(1);
        v = ctx.acquire_read(in)[0] * 3 + i;
        ctx.release(in);
      }
      ctx.acquire_write(out)[0] = v;
      ctx.release(out);
      ctx.acquire_write(total)[0] += v;
      (*finished)[static_cast<std::size_t>(i)].fetch_add(1);
    });
  };
  if (reverse)
    for (int i = n - 1; i >= 0; --i) declare(i);
  else
    for (int i = 0; i < n; ++i) declare(i);
  return c;
}

// What the chain's totals are after `iterations`, computed sequentially.
std::vector<std::int64_t> chain_totals(int n, std::uint64_t iterations) {
  std::vector<std::int64_t> total(static_cast<std::size_t>(n), 0);
  for (std::uint64_t k = 0; k < iterations; ++k) {
    std::int64_t v = static_cast<std::int64_t>(k) + 1;
    for (int i = 0; i < n; ++i) {
      if (i > 0) v = v * 3 + i;
      total[static_cast<std::size_t>(i)] += v;
    }
  }
  return total;
}

}  // namespace

TEST_CASE("a graph that needs acquire to suspend completes on one worker", "[fiber]") {
  ordo::Graph g;
  const int n = 5;
  const std::uint64_t iterations = 30;
  Chain backward = make_chain(g, "backward", n, true);
  Chain forward = make_chain(g, "forward", n, false);
  ordo::Runtime rt({.workers = 1});
  rt.run(g, iterations);
  const auto expect = chain_totals(n, iterations);
  for (int i = 0; i < n; ++i) {
    CHECK(g.data(backward.total[i])[0] == expect[static_cast<std::size_t>(i)]);
    CHECK(g.data(forward.total[i])[0] == expect[static_cast<std::size_t>(i)]);
  }
  // Some body did start before its producer had finished, and waited on its one worker.
  CHECK(backward.early->load() + forward.early->load() > 0);
}

TEST_CASE("ten thousand fiber tasks wait at once on one worker and complete", "[fiber]") {
  const int n = kTsan ? 1000 : 10000;
  ordo::Graph g;
  auto x = g.location<std::int64_t>("x", 1);
  std::vector<ordo::Location<std::int64_t>> y;
  // The readers are declared before the writer but queued behind it in x's FIFO: every reader
  // that runs before the writer suspends in acquire_read.
  for (int i = 0; i < n; ++i) {
    y.push_back(g.location<std::int64_t>("y" + std::to_string(i), 1));
    auto out = y.back();
    g.fiber_task("reader" + std::to_string(i), {ordo::read(x).at(1), ordo::write(out)},
                 [=](ordo::FiberContext& ctx) {
                   const std::int64_t v = ctx.acquire_read(x)[0];
                   ctx.acquire_write(out)[0] += v + i;
                 });
  }
  g.fiber_task("writer", {ordo::write(x).at(0)}, [=](ordo::FiberContext& ctx) {
    ctx.acquire_write(x)[0] = static_cast<std::int64_t>(ctx.iteration()) + 1;
  });
  ordo::Runtime rt({.workers = 1});
  rt.run(g, 3);
  for (int i = 0; i < n; ++i) REQUIRE(g.data(y[static_cast<std::size_t>(i)])[0] == 1 + 2 + 3 + 3 * i);
}

TEST_CASE("release hands a location on before the body ends", "[fiber]") {
  // F writes x, releases it, then waits (blocking its own worker on purpose, which a real body
  // must not do) until D, the next holder of x, has run in the same iteration. D can run on
  // the second worker only if F's release took effect at once.
  ordo::Graph g;
  auto x = g.location<std::int64_t>("x", 1);
  auto seen = g.location<std::int64_t>("seen", 1);
  auto d_done = std::make_shared<std::atomic<std::uint64_t>>(0);  // D's instances finished
  auto in_time = std::make_shared<std::atomic<int>>(0);
  // One deadline for the whole run, far beyond what a working release needs.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  g.fiber_task("F", {ordo::write(x)}, [=](ordo::FiberContext& ctx) {
    const std::uint64_t k = ctx.iteration();
    ctx.acquire_write(x)[0] = static_cast<std::int64_t>(k) * 7;
    ctx.release(x);
    while (d_done->load() <= k && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    if (d_done->load() > k) in_time->fetch_add(1);
  });
  g.task("D", {ordo::read(x), ordo::write(seen)}, [=](ordo::Context& ctx) {
    ctx.write(seen)[0] += ctx.read(x)[0];
    d_done->fetch_add(1);
  });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 5);
  CHECK(in_time->load() == 5);
  CHECK(g.data(seen)[0] == 7 * (0 + 1 + 2 + 3 + 4));
}

// ---- misuse ----------------------------------------------------------------------------------

namespace {

// Runs a one-task graph whose fiber body is `body` over locations x (declared read) and
// y (declared write) and z (not declared); returns the error message, or "" if none.
std::string misuse(const std::function<void(ordo::FiberContext&, ordo::Location<int>,
                                            ordo::Location<int>, ordo::Location<int>)>& body) {
  ordo::Graph g;
  auto x = g.location<int>("x", 4);
  auto y = g.location<int>("y", 4);
  auto z = g.location<int>("z", 4);
  g.task("writer-of-x", {ordo::write(x)}, [](ordo::Context&) {});
  g.fiber_task("misuser", {ordo::read(x), ordo::write(y)},
               [=](ordo::FiberContext& ctx) { body(ctx, x, y, z); });
  ordo::Runtime rt({.workers = 2});
  try {
    rt.run(g, 2);
  } catch (const ordo::Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("fiber task misuse is reported as ordo::Error", "[fiber]") {
  using L = ordo::Location<int>;
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L, L, L z) { ctx.acquire_read(z); }),
             Contains("'misuser' acquires location 'z', which it did not declare"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L x, L, L) { ctx.acquire_write(x); }),
             Contains("calls acquire_write on location 'x' but declared it with read()"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L, L y, L) {
               ctx.acquire_write(y);
               ctx.acquire_read(y);
             }),
             Contains("acquires location 'y' twice in iteration 0"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L x, L, L) {
               ctx.acquire_read(x);
               ctx.release(x);
               ctx.acquire_read(x);
             }),
             Contains("acquires location 'x' again after releasing it"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L x, L, L) { ctx.release(x); }),
             Contains("releases location 'x', which it has not acquired"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L, L y, L) {
               ctx.acquire_write(y);
               ctx.release(y);
               ctx.release(y);
             }),
             Contains("releases location 'y' twice"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L, L, L z) { ctx.release(z); }),
             Contains("releases location 'z', which it did not declare"));
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L x, L, L) {
               try {
                 throw std::runtime_error("inner");
               } catch (const std::runtime_error&) {
                 ctx.acquire_read(x);
               }
             }),
             Contains("acquires location 'x' inside a catch block"));
  // Handing the context to another thread is caught there.
  CHECK_THAT(misuse([](ordo::FiberContext& ctx, L x, L, L) {
               std::string message;
               std::thread t([&] {
                 try {
                   ctx.acquire_read(x);
                 } catch (const ordo::Error& e) {
                   message = e.what();
                 }
               });
               t.join();
               throw ordo::Error(message);
             }),
             Contains("off its body's fiber"));
  // A body that follows the rules runs clean.
  CHECK(misuse([](ordo::FiberContext& ctx, L x, L y, L) {
          ctx.acquire_read(x);
          ctx.acquire_write(y)[0] += 1;
          ctx.release(x);
        }) == "");
}

TEST_CASE("a FiberContext copied out of its body is refused after the body returned", "[fiber]") {
  // The copy outlives the body's frame (and its fiber's stack, given back to the pool): each
  // use must be refused with an Error, from the program's thread and from another task's body.
  ordo::Graph g;
  auto x = g.location<int>("x", 1);
  auto kept = std::make_shared<std::optional<ordo::FiberContext>>();
  g.fiber_task("keeper", {ordo::write(x)}, [=](ordo::FiberContext& ctx) {
    ctx.acquire_write(x)[0] += 1;
    if (!*kept) kept->emplace(ctx);
  });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 3);
  REQUIRE(kept->has_value());
  CHECK_THROWS_WITH((*kept)->acquire_read(x), Contains("kept after the body returned"));
  CHECK_THROWS_WITH((*kept)->release(x), Contains("kept after the body returned"));
  // From another fiber task's body, while the keeper's own fiber is parked between runs.
  ordo::Graph h;
  auto y = h.location<int>("y", 1);
  auto said = std::make_shared<std::string>();
  h.fiber_task("user", {ordo::write(y)}, [=](ordo::FiberContext& ctx) {
    ctx.acquire_write(y)[0] = 1;
    try {
      (*kept)->acquire_read(x);
    } catch (const ordo::Error& e) {
      *said = e.what();
    }
  });
  rt.run(h, 1);
  CHECK_THAT(*said, Contains("kept after the body returned"));
  CHECK(g.data(x)[0] == 3);
}

TEST_CASE("an exception in a fiber body stops the run and is rethrown", "[fiber]") {
  ordo::Graph g;
  auto x = g.location<int>("x", 1);
  g.fiber_task("thrower", {ordo::write(x)}, [=](ordo::FiberContext& ctx) {
    ctx.acquire_write(x)[0] += 1;
    if (ctx.iteration() == 3) throw std::runtime_error("boom at 3");
  });
  g.task("reader", {ordo::read(x)}, [](ordo::Context&) {});
  ordo::Runtime rt({.workers = 2});
  CHECK_THROWS_WITH(rt.run(g, 10), "boom at 3");
  CHECK_THROWS_AS(rt.run(g, 1), ordo::Error);  // the graph is broken now
}

TEST_CASE("fiber stack sizes are checked when the runtime is built", "[fiber]") {
  CHECK_THROWS_WITH(ordo::Runtime({.workers = 1, .fiber_stack_size = 1024}),
                    Contains("fiber stack size 1024 bytes is out of range"));
  ordo::Runtime big({.workers = 1, .fiber_stack_size = 1 << 20});
  ordo::Graph g;
  auto x = g.location<double>("x", 1);
  g.fiber_task("deep", {ordo::write(x)}, [=](ordo::FiberContext& ctx) {
    // 512 KiB of locals: only fits the 1 MiB stack asked for.
    std::array<double, 64 * 1024> big_frame{};
    big_frame[ctx.iteration() % big_frame.size()] = 1.5;
    volatile double* p = big_frame.data();
    ctx.acquire_write(x)[0] += p[ctx.iteration() % big_frame.size()];
  });
  big.run(g, 2);
  CHECK(g.data(x)[0] == 3.0);
}
