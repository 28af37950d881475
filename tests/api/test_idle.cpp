// Idle workers park: after a run completes, and while every task waits (between iterations of
// run_until, while the stop predicate runs), the process uses almost no CPU. The one test that
// measures something: CPU time over an idle interval, against a generous bound (a single
// spinning worker would use the whole interval, or at least a large share of it on a loaded
// machine). Runs alone (is_parallel: false).
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <thread>

#include <ordo/ordo.hpp>

namespace {

constexpr auto kInterval = std::chrono::milliseconds(500);
constexpr double kMaxShare = 0.05;  // of one core over the interval

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds the whole process uses while the calling thread sleeps for kInterval.
double cpu_while_sleeping() {
  const double t0 = process_cpu_seconds();
  std::this_thread::sleep_for(kInterval);
  return process_cpu_seconds() - t0;
}

ordo::Graph small_graph() {
  ordo::Graph g;
  auto a = g.location<double>("a", 4096);
  auto b = g.location<double>("b", 4096);
  g.task("fwd", {ordo::read(a), ordo::write(b)}, [=](ordo::Context& ctx) {
    auto in = ctx.read(a);
    auto out = ctx.write(b);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] + 1;
  });
  g.task("back", {ordo::read(b), ordo::write(a)}, [=](ordo::Context& ctx) {
    auto in = ctx.read(b);
    auto out = ctx.write(a);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] * 0.5;
  });
  return g;
}

const double kBound = kMaxShare * std::chrono::duration<double>(kInterval).count();

}  // namespace

TEST_CASE("workers use no CPU after a run completes", "[idle]") {
  ordo::Runtime rt({.workers = 4});
  ordo::Graph g = small_graph();
  rt.run(g, 200);
  const double used = cpu_while_sleeping();
  INFO("CPU seconds used while idle: " << used << " (bound " << kBound << ")");
  CHECK(used < kBound);
}

TEST_CASE("workers use no CPU while every task waits for the next iteration", "[idle]") {
  ordo::Runtime rt({.workers = 4});
  ordo::Graph g = small_graph();
  double used = -1;
  ordo::Until until;
  until.check_every = 10;
  until.max_iterations = 100;
  // Called between iterations with no instance running: every task waits at the gate.
  until.done = [&](const ordo::Graph&) {
    if (used < 0) used = cpu_while_sleeping();
    return false;
  };
  auto stats = rt.run_until(g, until);
  CHECK(stats.iterations == 100);
  INFO("CPU seconds used while waiting: " << used << " (bound " << kBound << ")");
  CHECK(used >= 0);
  CHECK(used < kBound);
}
