// The FIFO read-write lock as the engine runs it: read groups, write exclusivity, grants in
// FIFO order, and the order kept across iterations by re-request-then-release.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/engine.hpp"
#include "runtime/graph.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"

using namespace ordo::rt;

namespace {

// Builds an engine over `graph`; fails the test if the plan does not compile.
std::unique_ptr<Engine> make_engine(Graph& graph) {
  CompileResult c = compile(graph);
  REQUIRE(c.error.empty());
  return std::make_unique<Engine>(graph, std::move(c.plan));
}

std::uint32_t loc(Graph& g, const char* name) { return g.add_location(name, 8, 1, typeid(long)); }

// Waits until `flag` becomes true or a deadline passes; returns whether it did.
bool wait_for(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_CASE("consecutive reads form a group that holds the lock together", "[lock]") {
  Graph g;
  auto x = loc(g, "x");
  std::atomic<bool> a_in{false}, b_in{false};
  std::atomic<bool> a_saw_b{false}, b_saw_a{false};
  g.add_task({"writer", {{x, Mode::write}}, [](const Instance&) {}});
  // Each reader waits for the other to be inside: only possible if both are granted at once.
  g.add_task({"reader-a", {{x, Mode::read}}, [&](const Instance&) {
                a_in = true;
                a_saw_b = wait_for(b_in, std::chrono::seconds(10));
              }});
  g.add_task({"reader-b", {{x, Mode::read}}, [&](const Instance&) {
                b_in = true;
                b_saw_a = wait_for(a_in, std::chrono::seconds(10));
              }});
  auto engine = make_engine(g);
  ordo::sched::Pool pool({2});
  engine->run(pool, 1, {}, 0);
  CHECK(a_saw_b);
  CHECK(b_saw_a);
}

TEST_CASE("a write excludes every other holder and grants follow FIFO order", "[lock]") {
  Graph g;
  auto x = loc(g, "x");
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::mutex mu;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> order;  // (iteration, task)
  // Pattern per iteration: W R R W R W W; the reads of one group may interleave, nothing else.
  const std::vector<Mode> modes{Mode::write, Mode::read,  Mode::read, Mode::write,
                                Mode::read,  Mode::write, Mode::write};
  for (std::size_t i = 0; i < modes.size(); ++i) {
    Mode m = modes[i];
    g.add_task({"t" + std::to_string(i), {{x, m}}, [&, m](const Instance& in) {
                  int now = inside.fetch_add(1) + 1;
                  if (m == Mode::write && now != 1) overlap = true;
                  std::this_thread::sleep_for(std::chrono::microseconds(50));
                  {
                    std::lock_guard lock(mu);
                    order.emplace_back(in.iteration, in.task);
                  }
                  inside.fetch_sub(1);
                }});
  }
  auto engine = make_engine(g);
  ordo::sched::Pool pool({2});
  const std::uint64_t iters = 20;
  engine->run(pool, iters, {}, 0);
  CHECK_FALSE(overlap);
  REQUIRE(order.size() == iters * modes.size());
  // Group each iteration's record by phase: {0} {1,2} {3} {4} {5} {6}; phases in order.
  const std::vector<int> phase_of{0, 1, 1, 2, 3, 4, 5};
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::uint64_t expect_iter = i / modes.size();
    CHECK(order[i].first == expect_iter);
    if (i + 1 < order.size() && order[i].first == order[i + 1].first)
      CHECK(phase_of[order[i].second] <= phase_of[order[i + 1].second]);
  }
}

TEST_CASE("iterative re-request keeps each location's order across iterations", "[lock]") {
  // Two locations, three tasks. On x: A(w) B(r); on y: B(w) C(r) A(r). Program order gives,
  // for every iteration k: A_k before B_k (x), B_k before C_k and A_{k+1} after C_k... via y's
  // cycle C_k, A_k read y together in the wrap-around group only with B between them.
  Graph g;
  auto x = loc(g, "x");
  auto y = loc(g, "y");
  std::mutex mu;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> log;
  auto record = [&](const Instance& in) {
    std::lock_guard lock(mu);
    log.emplace_back(in.iteration, in.task);
  };
  g.add_task({"A", {{x, Mode::write}, {y, Mode::read}}, record});
  g.add_task({"B", {{x, Mode::read}, {y, Mode::write}}, record});
  g.add_task({"C", {{y, Mode::read}}, record});
  auto engine = make_engine(g);
  ordo::sched::Pool pool({2});
  const std::uint64_t iters = 200;
  engine->run(pool, iters, {}, 0);
  REQUIRE(log.size() == 3 * iters);
  // Position of each (task, iteration) in the global log.
  std::vector<std::vector<std::size_t>> at(3, std::vector<std::size_t>(iters));
  for (std::size_t i = 0; i < log.size(); ++i) at[log[i].second][log[i].first] = i;
  for (std::uint64_t k = 0; k < iters; ++k) {
    CHECK(at[0][k] < at[1][k]);                       // x: A_k then B_k
    CHECK(at[1][k] < at[2][k]);                       // y: B_k then C_k
    if (k + 1 < iters) CHECK(at[1][k] < at[0][k + 1]);  // x: B_k then A_{k+1}
    if (k + 1 < iters) CHECK(at[2][k] < at[1][k + 1]);  // y: C_k then B_{k+1}
    if (k + 1 < iters) CHECK(at[0][k] < at[1][k + 1]);  // y: A_k then B_{k+1}
  }
}

TEST_CASE("explicit positions order the FIFO instead of program order", "[lock]") {
  Graph g;
  auto x = loc(g, "x");
  std::mutex mu;
  std::vector<std::uint32_t> seen;
  auto record = [&](const Instance& in) {
    std::lock_guard lock(mu);
    seen.push_back(in.task);
  };
  // Declared 0,1,2 but positioned 2,0,1: the lock grants task 1, then 2, then 0.
  g.add_task({"p2", {{x, Mode::write, true, 2}}, record});
  g.add_task({"p0", {{x, Mode::write, true, 0}}, record});
  g.add_task({"p1", {{x, Mode::write, true, 1}}, record});
  auto engine = make_engine(g);
  ordo::sched::Pool pool({2});
  engine->run(pool, 3, {}, 0);
  CHECK(seen == std::vector<std::uint32_t>{1, 2, 0, 1, 2, 0, 1, 2, 0});
}

TEST_CASE("the iteration gate holds instances between runs", "[lock]") {
  Graph g;
  auto x = loc(g, "x");
  std::atomic<std::uint64_t> runs{0};
  g.add_task({"w", {{x, Mode::write}}, [&](const Instance&) { ++runs; }});
  g.add_task({"free", {}, [&](const Instance&) { ++runs; }});
  auto engine = make_engine(g);
  ordo::sched::Pool pool({2});
  CHECK(engine->run(pool, 5, {}, 0) == 5);
  CHECK(runs == 10);
  CHECK(engine->run(pool, 7, {}, 0) == 7);
  CHECK(runs == 24);
  CHECK(engine->iterations_done() == 12);
}

TEST_CASE("a body exception stops the run and is rethrown", "[lock]") {
  Graph g;
  auto x = loc(g, "x");
  std::atomic<int> after{0};
  g.add_task({"boom", {{x, Mode::write}}, [](const Instance& in) {
                if (in.iteration == 3) throw std::runtime_error("boom at 3");
              }});
  g.add_task({"next", {{x, Mode::read}}, [&](const Instance& in) {
                if (in.iteration >= 3) ++after;
              }});
  auto engine = make_engine(g);
  ordo::sched::Pool pool({2});
  CHECK_THROWS_WITH(engine->run(pool, 100, {}, 0), "boom at 3");
  CHECK(after == 0);  // nothing ran after the failing instance in FIFO order
  CHECK(engine->broken());
}

TEST_CASE("an engine refuses a plan of more tasks than a range item encodes", "[engine]") {
  Graph graph;
  Plan plan;
  plan.tasks = static_cast<std::uint32_t>(Engine::kMaxTasks) + 1;
  CHECK_THROWS_AS(Engine(graph, std::move(plan)), std::length_error);
  CHECK(Engine::can_run_tasks(Engine::kMaxTasks));
  CHECK_FALSE(Engine::can_run_tasks(Engine::kMaxTasks + 1));
}
