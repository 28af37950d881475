// The busy-cores measurement of ordo-bench-tasks: does ordo keep its workers in task bodies
// when tasks are long enough to hide its overhead?
//
// Graph: the stencil1d pattern of bench.hpp (T tiles, program-order dependencies, K
// iterations), run with W workers. Each body does the stencil step and then spins on the
// steady clock until `task_us` microseconds have passed since it started, so every task lasts
// at least that long. Each body adds its own duration (steady clock, measured inside the body)
// to its worker's slot; the busy fraction is the sum over workers divided by
// W x (wall time of Runtime::run). The result is checked against the sequential one.
// Preemption by other processes counts as busy when it hits a body and as idle otherwise, so
// on a loaded machine the fraction says little; two more figures help there: the nominal
// fraction (tasks x task_us / W x wall) and the share of the process's CPU time spent in
// bodies (thread CPU clocks: what the runtime itself costs, whatever the load).
//
// The stencil's wavefront leaves about T/2 tasks ready at any time in steady state, so with
// T = 64 and W = 2 idle time can only come from the runtime (and from the start and end of the
// wavefront, a few task durations in all).
#include <time.h>

#include <chrono>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

#include "bench.hpp"

namespace ordo::bench {

BusyResult measure_busy(unsigned workers, double task_us, std::uint32_t tiles,
                        std::uint32_t iterations) {
  using Clock = std::chrono::steady_clock;
  struct alignas(64) Slot {
    double seconds = 0;      // written only by the worker of this slot, read after the run
    double cpu_seconds = 0;  // the same bodies' CPU time (that thread's clock)
  };
  auto cpu_now = [](clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  std::vector<Slot> busy(workers);
  const auto task_len = std::chrono::duration<double, std::micro>(task_us);

  ordo::Runtime rt(ordo::RuntimeOptions{.workers = workers});
  ordo::Graph g;
  std::vector<ordo::Location<std::uint64_t>> tile;
  for (std::uint32_t i = 0; i < tiles; ++i)
    tile.push_back(g.location<std::uint64_t>("tile" + std::to_string(i), 1));
  for (std::uint32_t i = 0; i < tiles; ++i) {
    const bool has_left = i > 0, has_right = i + 1 < tiles;
    auto left = has_left ? tile[i - 1] : tile[i];
    auto self = tile[i];
    auto right = has_right ? tile[i + 1] : tile[i];
    std::vector<ordo::Access> acc;
    if (has_left) acc.push_back(ordo::read(left));
    acc.push_back(ordo::write(self));
    if (has_right) acc.push_back(ordo::read(right));
    g.task("step" + std::to_string(i), std::move(acc), [=, &busy](ordo::Context& ctx) {
      const double c0 = cpu_now(CLOCK_THREAD_CPUTIME_ID);
      const auto t0 = Clock::now();
      auto v = ctx.write(self);
      v[0] = stencil_step(has_left ? ctx.read(left)[0] : 0, v[0],
                          has_right ? ctx.read(right)[0] : 0);
      auto t1 = Clock::now();
      while (t1 - t0 < task_len) t1 = Clock::now();
      Slot& slot = busy[ctx.worker()];
      slot.seconds += std::chrono::duration<double>(t1 - t0).count();
      slot.cpu_seconds += cpu_now(CLOCK_THREAD_CPUTIME_ID) - c0;
    });
  }
  const double cpu0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
  const auto t0 = Clock::now();
  rt.run(g, iterations);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;

  Sizes s;
  s.tiles = tiles;
  s.iterations = iterations;
  s.chain = 0;
  std::vector<std::uint64_t> result(tiles);
  for (std::uint32_t i = 0; i < tiles; ++i) result[i] = g.data(tile[i])[0];
  check_stencil("ordo (busy)", result, expected_values(s));

  double inside = 0, inside_cpu = 0;
  for (const Slot& slot : busy) {
    inside += slot.seconds;
    inside_cpu += slot.cpu_seconds;
  }
  return {inside / (workers * wall), wall, std::uint64_t{tiles} * iterations,
          cpu > 0 ? inside_cpu / cpu : 0};
}

}  // namespace ordo::bench
