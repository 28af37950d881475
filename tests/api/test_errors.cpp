// Every misuse of the API gets an ordo::Error saying what is wrong and what to do.
#include <catch2/catch.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <ordo/ordo.hpp>

using namespace ordo;
using Catch::Contains;

TEST_CASE("zero iterations are refused", "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  g.task("t", {write(x)}, [](Context&) {});
  Runtime rt({.workers = 1});
  CHECK_THROWS_WITH(rt.run(g, 0), Contains("zero iterations") && Contains("at least one"));
  CHECK_THROWS_WITH(rt.run_until(g, Until{[](const Graph&) { return true; }, 1, 0}),
                    Contains("max_iterations is 0"));
  CHECK_THROWS_WITH(rt.run_until(g, Until{[](const Graph&) { return true; }, 0, 5}),
                    Contains("check_every is 0"));
  CHECK_THROWS_WITH(rt.run_until(g, Until{}), Contains("Until::done is empty"));
}

TEST_CASE("a body touching a location it did not declare stops the run", "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  auto y = g.location<int>("y", 1);
  g.task("writer", {write(x)}, [](Context&) {});
  g.task("sneaky", {read(x)}, [=](Context& ctx) { (void)ctx.read(y); });
  Runtime rt({.workers = 2});
  CHECK_THROWS_WITH(rt.run(g, 3), Contains("task 'sneaky'") && Contains("location 'y'") &&
                                      Contains("did not declare") && Contains("ordo::read()"));
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("previous run failed"));
}

TEST_CASE("writing through a read access is refused", "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  g.task("reader", {read(x)}, [=](Context& ctx) { ctx.write(x)[0] = 1; });
  Runtime rt({.workers = 1});
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("declared it with read()"));
}

// Location<T> is typed, so only a handle whose bytes were copied into another T's reaches a
// location with the wrong type; a body, dataflow or fiber, is refused rather than reinterpret.
TEST_CASE("a body reading a location as another type is refused, naming the handle to use",
          "[errors]") {
  for (const bool fiber : {false, true}) {
    INFO((fiber ? "fiber task" : "dataflow task"));
    Graph g;
    auto x = g.location<double>("x", 4);
    const auto as_long = std::bit_cast<Location<std::int64_t>>(x);
    if (fiber)
      g.fiber_task("reader", {read(x)},
                   [=](FiberContext& ctx) { (void)ctx.acquire_read(as_long); });
    else
      g.task("reader", {read(x)}, [=](Context& ctx) { (void)ctx.read(as_long); });
    Runtime rt({.workers = 1});
    CHECK_THROWS_WITH(rt.run(g, 1),
                      Contains(std::string("task 'reader' ") + (fiber ? "acquires" : "accesses") +
                               " location 'x' with another element type") &&
                          Contains("use the Location<T> that Graph::location returned (the same "
                                   "T)"));
  }
}

TEST_CASE("a location of another graph is refused at declaration", "[errors]") {
  Graph other;
  other.location<int>("a", 1);
  other.location<int>("b", 1);
  auto foreign = other.location<int>("c", 1);
  Graph g;
  g.location<int>("x", 1);
  CHECK_THROWS_WITH(g.task("t", {write(foreign)}, [](Context&) {}),
                    Contains("location #2 belongs to another Graph"));
}

TEST_CASE("declaration errors", "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 4);
  CHECK_THROWS_WITH(g.location<int>("x", 1), Contains("already exists"));
  CHECK_THROWS_WITH(g.location<int>("empty", 0), Contains("0 elements"));
  CHECK_THROWS_WITH(g.task("dup", {read(x), write(x)}, [](Context&) {}),
                    Contains("lists location 'x' twice"));
  CHECK_THROWS_WITH(g.task("nobody", {read(x)}, Graph::Body{}), Contains("has no body"));
  g.task("t", {write(x)}, [](Context&) {});
  Runtime rt({.workers = 1});
  rt.run(g, 1);
  CHECK_THROWS_WITH(g.location<int>("late", 1), Contains("after the graph's first run"));
  CHECK_THROWS_WITH(g.task("late", {read(x)}, [](Context&) {}),
                    Contains("after the graph's first run"));
}

TEST_CASE("a cyclic explicit order is refused before running", "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  auto y = g.location<int>("y", 1);
  g.task("A", {write(x).at(0), write(y).at(1)}, [](Context&) {});
  g.task("B", {write(x).at(1), write(y).at(0)}, [](Context&) {});
  Runtime rt({.workers = 2});
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("cyclic lock order") &&
                                      Contains("task 'B' waits for task 'A' on location 'x'") &&
                                      Contains("task 'A' waits for task 'B' on location 'y'"));
}

TEST_CASE("running a graph from inside a task body is refused", "[errors]") {
  Graph inner;
  auto z = inner.location<int>("z", 1);
  inner.task("t", {write(z)}, [](Context&) {});
  Graph g;
  auto x = g.location<int>("x", 1);
  Runtime rt({.workers = 2});
  g.task("nested", {write(x)}, [&](Context&) { rt.run(inner, 1); });
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("inside a task body"));
}

TEST_CASE("an exception from a body reaches the caller unchanged", "[errors]") {
  struct Custom : std::exception {
    const char* what() const noexcept override { return "custom failure"; }
  };
  Graph g;
  auto x = g.location<int>("x", 1);
  g.task("t", {write(x)}, [](Context& ctx) {
    if (ctx.iteration() == 2) throw Custom{};
  });
  Runtime rt({.workers = 2});
  CHECK_THROWS_AS(rt.run(g, 5), Custom);
}

TEST_CASE("rank placement errors", "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  g.task("t", {write(x)}, [](Context&) {});
  CHECK_THROWS_WITH(g.home_rank(x), Contains("decided at the graph's first run"));
  g.set_home_rank(x, 1);  // this process is a job of one rank
  Runtime rt({.workers = 1});
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("location 'x' is placed on rank 1") &&
                                      Contains("job has 1 rank(s)"));
  Graph ok;
  auto y = ok.location<int>("y", 1);
  ok.task("t", {write(y)}, [](Context&) {});
  rt.run(ok, 1);
  CHECK(ok.home_rank(y) == 0);
  CHECK_THROWS_WITH(ok.set_home_rank(y, 0), Contains("after the graph's first run"));
}

// A handle of another graph with a number this graph has, the same type and
// a larger count, gave a span past the end of this graph's location.
TEST_CASE("a handle of another graph is refused everywhere, not taken for a location here",
          "[errors]") {
  Graph g;
  auto x = g.location<int>("x", 1);
  Graph other;
  auto big = other.location<int>("big", 1 << 20);  // number 0, as x's
  REQUIRE(big.id() == x.id());
  CHECK_THROWS_WITH(g.data(big), Contains("Graph::data") && Contains("belongs to another Graph"));
  CHECK_THROWS_WITH(g.set_home_node(big, 0), Contains("belongs to another Graph"));
  CHECK_THROWS_WITH(g.set_home_rank(big, 0), Contains("belongs to another Graph"));
  CHECK_THROWS_WITH(g.data(Location<int>{}), Contains("default-constructed Location"));
  Access crafted{x.id(), Mode::write};  // not built by read() or write()
  CHECK_THROWS_WITH(g.task("crafted", {crafted}, [](Context&) {}),
                    Contains("names no graph"));

  // In a body: the task declared x, whose number the foreign handle shares.
  g.task("t", {write(x)}, [=](Context& ctx) { (void)ctx.write(big); });
  Runtime rt({.workers = 1});
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("task 't' accesses a location through a handle") &&
                                      Contains("belongs to another Graph"));
  CHECK_THROWS_WITH(g.home_rank(big), Contains("belongs to another Graph"));

  Graph f;
  auto y = f.location<int>("y", 1);
  f.fiber_task("fiber", {write(y)}, [=](FiberContext& ctx) { (void)ctx.acquire_read(big); });
  CHECK_THROWS_WITH(rt.run(f, 1), Contains("task 'fiber' acquires a location through a handle") &&
                                      Contains("belongs to another Graph"));
}

// On a graph that had run, set_home_rank looked the location up with at()
// before checking it, and threw std::out_of_range.
TEST_CASE("set_home_rank refuses a bad location or rank with an Error, also after a run",
          "[errors]") {
  Graph other;
  for (int i = 0; i < 5; ++i) other.location<int>("o" + std::to_string(i), 1);
  auto far = other.location<int>("far", 1);  // number 5: no location of g has it
  Graph g;
  auto x = g.location<int>("x", 1);
  g.task("t", {write(x)}, [](Context&) {});
  CHECK_THROWS_WITH(g.set_home_rank(x, 1u << 31), Contains("rank 2147483648") &&
                                                      Contains("is not a rank number"));
  Runtime rt({.workers = 1});
  rt.run(g, 1);
  CHECK_THROWS_AS(g.set_home_rank(far, 0), Error);
  CHECK_THROWS_WITH(g.set_home_rank(far, 0), Contains("belongs to another Graph"));
  CHECK_THROWS_WITH(g.set_home_rank(x, 0), Contains("after the graph's first run"));
}

TEST_CASE("one graph run on two Runtimes at once is refused, and runs on each in turn",
          "[errors]") {
  // The first run holds its body until the second has been tried (bounded, so that a second
  // run let through cannot hang the test), so the two overlap for certain.
  Graph g;
  auto x = g.location<int>("x", 1);
  std::atomic<bool> started{false}, tried{false};
  g.task("t", {write(x)}, [&, x](Context& ctx) {
    ctx.write(x)[0] += 1;
    started = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!tried && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  Runtime first({.workers = 1}), second({.workers = 1});
  std::thread running([&] { first.run(g, 1); });
  while (!started) std::this_thread::yield();
  std::string said;
  try {
    second.run(g, 1);
  } catch (const Error& e) {
    said = e.what();
  }
  tried = true;
  running.join();
  CHECK_THAT(said, Contains("is running already") && Contains("one Runtime at a time"));
  // Each in turn is allowed: the graph counts on.
  CHECK(second.run(g, 2).iterations == 2);
  CHECK(g.data(x)[0] == 3);
}
