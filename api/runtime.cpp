#include <chrono>
#include <stdexcept>

#include "fiber.hpp"
#include "graph_impl.hpp"
#include "pool.hpp"

namespace ordo {

namespace {

// The fiber stack pool: checked when the Runtime is built, so a bad size fails early. No stack
// is mapped until a fiber task runs.
std::unique_ptr<sched::StackPool> make_stacks(std::size_t size) {
  try {
    return std::make_unique<sched::StackPool>(size);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(e.what()) + " (RuntimeOptions::fiber_stack_size or ORDO_FIBER_STACK)");
  }
}

}  // namespace

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& o)
      : stacks(make_stacks(o.fiber_stack_size)), pool(sched::PoolConfig{o.workers}) {}
  std::unique_ptr<sched::StackPool> stacks;  // outlives the pool's workers (declared first)
  sched::Pool pool;
};

namespace {

rt::Engine& prepare_run(Graph& graph) {
  if (sched::Pool::current_worker() >= 0)
    throw Error("Runtime::run called from inside a task body; a body cannot run a graph (it "
                "would wait for workers that include itself). Run graphs from outside any task");
  rt::Engine& engine = graph.impl().prepare();
  if (engine.broken())
    throw Error("this graph's previous run stopped on an exception thrown by a task body, so its "
                "locations hold a partial iteration; build the graph anew to run again");
  return engine;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// The scheduler reports a bad ORDO_PUS as std::invalid_argument; the public face is Error.
Runtime::Runtime(RuntimeOptions options) try : impl_(std::make_unique<Impl>(options)) {
} catch (const std::invalid_argument& e) {
  throw Error(e.what());
}
Runtime::~Runtime() = default;

unsigned Runtime::workers() const { return impl_->pool.size(); }
unsigned Runtime::numa_nodes() const { return impl_->pool.nodes(); }

RunStats Runtime::run(Graph& graph, std::uint64_t iterations) {
  if (iterations == 0)
    throw Error("zero iterations requested; ask Runtime::run for at least one iteration");
  rt::Engine& engine = prepare_run(graph);
  auto t0 = std::chrono::steady_clock::now();
  RunStats stats;
  stats.iterations = engine.run(impl_->pool, iterations, {}, 0, impl_->stacks.get());
  stats.seconds = seconds_since(t0);
  return stats;
}

RunStats Runtime::run_until(Graph& graph, const Until& until) {
  if (!until.done) throw Error("Until::done is empty; give the stop condition as a callable");
  if (until.max_iterations == 0)
    throw Error("Until::max_iterations is 0; allow at least one iteration");
  if (until.check_every == 0)
    throw Error("Until::check_every is 0; check at least every iteration (1)");
  rt::Engine& engine = prepare_run(graph);
  auto t0 = std::chrono::steady_clock::now();
  RunStats stats;
  stats.iterations = engine.run(impl_->pool, until.max_iterations,
                                [&](std::uint64_t) { return until.done(graph); },
                                until.check_every, impl_->stacks.get());
  stats.seconds = seconds_since(t0);
  return stats;
}

}  // namespace ordo
