// The METG computation of ordo-bench-tasks --metg (apps/bench-tasks/metg.hpp) on made-up
// sweeps whose answer is known, and the pieces every system shares: the time per task and
// efficiency of a run, and the stencil's sequential reference.
#include <catch2/catch.hpp>

#include "metg.hpp"

using namespace ordo::bench::metg;

namespace {

Point at(std::uint64_t iterations, double task_us, double efficiency) {
  return Point{iterations, task_us * 1e-6, efficiency};
}

}  // namespace

TEST_CASE("METG: the smallest task time at 50%, interpolated towards the next point") {
  // Efficiency falls as tasks shrink; 50% lies halfway between the 8 us and 4 us points.
  const std::vector<Point> sweep = {at(64, 32, 0.95), at(32, 16, 0.9), at(16, 8, 0.7),
                                    at(8, 4, 0.3), at(4, 3, 0.1)};
  auto m = metg(sweep);
  REQUIRE(m);
  CHECK(m->seconds == Approx(6e-6));
  CHECK_FALSE(m->below_all);
  // Order does not matter.
  auto shuffled = sweep;
  std::swap(shuffled[0], shuffled[3]);
  std::swap(shuffled[1], shuffled[4]);
  CHECK(metg(shuffled)->seconds == Approx(6e-6));
  // Exactly 50% at a point: that point.
  CHECK(metg({at(16, 8, 0.5), at(8, 4, 0.2)})->seconds == Approx(8e-6));
  // A threshold of 80%.
  CHECK(metg(sweep, 0.8)->seconds == Approx(12e-6));
}

TEST_CASE("METG: none reach 50%, or all do") {
  CHECK_FALSE(metg({at(64, 32, 0.4), at(32, 16, 0.3)}));
  CHECK_FALSE(metg({}));
  auto m = metg({at(64, 32, 0.9), at(32, 16, 0.8), at(1, 0.5, 0.6)});
  REQUIRE(m);
  CHECK(m->below_all);
  CHECK(m->seconds == Approx(0.5e-6));
}

TEST_CASE("METG: overheads that stop the task time from shrinking are not rewarded") {
  // Below 8 iterations the time per task no longer falls (the runtime's overhead dominates):
  // the smallest time with >= 50% is the 16-iteration point's 6 us.
  auto m = metg({at(32, 10, 0.8), at(16, 6, 0.6), at(8, 6.5, 0.3), at(4, 6.2, 0.15)});
  REQUIRE(m);
  CHECK(m->seconds == Approx(6e-6));
}

TEST_CASE("a run's time per task and efficiency") {
  // 2000 tasks of 100 iterations on 2 cores in 1 ms: 1 us of a core per task.
  const Point p = point(100, 1e-3, 2000, 2, 1e9);
  CHECK(p.task_seconds == Approx(1e-6));
  CHECK(p.efficiency == Approx(kFlopsPerIteration * 100 * 2000 / 1e-3 / 1e9));
}

TEST_CASE("the stencil's reference depends on every neighbour, the order and the kernel") {
  const auto base = reference(3, 4, 10);
  CHECK(base.size() == 3);
  CHECK(reference(3, 4, 10) == base);  // deterministic
  CHECK(reference(3, 4, 11) != base);  // the kernel's duration shows in the result
  CHECK(reference(3, 5, 10) != base);
  // Step by step by hand for one step: each point from the initial tiles of its neighbours.
  const auto t = initial_tiles(3);
  const auto one = reference(3, 1, 10);
  CHECK(one[0] == task(0, t[0], t[1], 10));
  CHECK(one[1] == task(t[0], t[1], t[2], 10));
  CHECK(one[2] == task(t[1], t[2], 0, 10));
  // The kernel is deterministic and its input matters.
  CHECK(kernel(100, 7) == kernel(100, 7));
  CHECK(kernel(100, 7) != kernel(100, 8));
  CHECK(kernel(0, 7) != kernel(1, 7));
}
