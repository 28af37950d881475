// Lock-plan compilation: phases, read-only locations, the wrap-around read group, and the
// refusal of bad explicit orders.
#include <catch2/catch.hpp>

#include "runtime/graph.hpp"
#include "runtime/plan.hpp"

using namespace ordo::rt;

namespace {
std::uint32_t loc(Graph& g, const std::string& name) {
  return g.add_location(name, 8, 1, typeid(long));
}
void task(Graph& g, const std::string& name, std::vector<AccessDesc> acc) {
  g.add_task({name, std::move(acc), [](const Instance&) {}});
}
}  // namespace

TEST_CASE("phases: writes alone, consecutive reads grouped", "[plan]") {
  Graph g;
  auto x = loc(g, "x");
  task(g, "a", {{x, Mode::write}});
  task(g, "b", {{x, Mode::read}});
  task(g, "c", {{x, Mode::read}});
  task(g, "d", {{x, Mode::write}});
  auto c = compile(g);
  REQUIRE(c.error.empty());
  const LockPlan& lp = c.plan.locks[x];
  REQUIRE(lp.locked);
  REQUIRE(lp.phases.size() == 3);
  CHECK(lp.phases[1].end - lp.phases[1].begin == 2);
  CHECK(lp.initial_phase == 0);
  CHECK(lp.initial_end - lp.initial_begin == 1);
}

TEST_CASE("a location nobody writes needs no lock", "[plan]") {
  Graph g;
  auto x = loc(g, "x");
  task(g, "a", {{x, Mode::read}});
  task(g, "b", {{x, Mode::read}});
  auto c = compile(g);
  REQUIRE(c.error.empty());
  CHECK_FALSE(c.plan.locks[x].locked);
  CHECK(c.plan.task_locks_of(0).empty());
}

TEST_CASE("the trailing and leading read groups merge across iterations", "[plan]") {
  Graph g;
  auto x = loc(g, "x");
  task(g, "r0", {{x, Mode::read}});
  task(g, "w", {{x, Mode::write}});
  task(g, "r1", {{x, Mode::read}});
  task(g, "r2", {{x, Mode::read}});
  auto c = compile(g);
  REQUIRE(c.error.empty());
  const LockPlan& lp = c.plan.locks[x];
  REQUIRE(lp.phases.size() == 2);  // [w] [r1 r2 | r0]
  CHECK(lp.members[lp.phases[0].begin] == 1);
  CHECK(lp.phases[1].end - lp.phases[1].begin == 3);
  CHECK(lp.initial_phase == 1);
  REQUIRE(lp.initial_end - lp.initial_begin == 1);  // iteration 0: only r0 holds
  CHECK(lp.members[lp.initial_begin] == 0);
}

TEST_CASE("explicit positions: all or none per location", "[plan][errors]") {
  Graph g;
  auto x = loc(g, "x");
  task(g, "a", {{x, Mode::write, true, 1}});
  task(g, "b", {{x, Mode::read}});
  auto c = compile(g);
  CHECK_THAT(c.error, Catch::Contains("location 'x'") && Catch::Contains("'a'") &&
                          Catch::Contains("'b'") && Catch::Contains("or to none"));
}

TEST_CASE("explicit positions: a write cannot share its position", "[plan][errors]") {
  Graph g;
  auto x = loc(g, "x");
  task(g, "a", {{x, Mode::write, true, 1}});
  task(g, "b", {{x, Mode::read, true, 1}});
  auto c = compile(g);
  CHECK_THAT(c.error, Catch::Contains("share position 1") && Catch::Contains("reads only"));
}

TEST_CASE("a cyclic explicit order is refused with the cycle named", "[plan][errors]") {
  Graph g;
  auto x = loc(g, "x");
  auto y = loc(g, "y");
  task(g, "A", {{x, Mode::write, true, 0}, {y, Mode::write, true, 1}});
  task(g, "B", {{x, Mode::write, true, 1}, {y, Mode::write, true, 0}});
  auto c = compile(g);
  CHECK_THAT(c.error, Catch::Contains("cyclic lock order") &&
                          Catch::Contains("task 'B' waits for task 'A' on location 'x'") &&
                          Catch::Contains("task 'A' waits for task 'B' on location 'y'"));
}

TEST_CASE("sequential order follows explicit positions", "[plan]") {
  Graph g;
  auto x = loc(g, "x");
  auto y = loc(g, "y");
  task(g, "A", {{x, Mode::write, true, 1}});
  task(g, "B", {{x, Mode::write, true, 0}, {y, Mode::write, true, 0}});
  task(g, "C", {{y, Mode::read, true, 1}});
  REQUIRE(compile(g).error.empty());
  CHECK(sequential_order(g) == std::vector<std::uint32_t>{1, 0, 2});
}

TEST_CASE("a cycle through a program-order location and an explicit one is refused",
          "[plan][errors]") {
  // compile() skips the cycle check when no location has explicit positions; one explicit
  // location must bring it back for the whole graph.
  Graph g;
  auto x = loc(g, "x");
  auto y = loc(g, "y");
  task(g, "A", {{x, Mode::write, true, 1}, {y, Mode::write, false, 0}});
  task(g, "B", {{x, Mode::write, true, 0}, {y, Mode::write, false, 0}});
  auto c = compile(g);
  CHECK_THAT(c.error, Catch::Contains("cyclic lock order") &&
                          Catch::Contains("task 'A' waits for task 'B' on location 'x'"));
}

TEST_CASE("program order compiles many tasks on one location without a cycle check error",
          "[plan]") {
  Graph g;
  auto x = loc(g, "x");
  for (int i = 0; i < 1000; ++i) task(g, "t" + std::to_string(i), {{x, Mode::write, false, 0}});
  auto c = compile(g);
  CHECK(c.error.empty());
  REQUIRE(c.plan.locks[x].phases.size() == 1000);
  CHECK(c.plan.locks[x].members[999] == 999);
}
