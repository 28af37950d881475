// Executes a compiled graph on a scheduler pool.
//
// State machine per location (see plan.hpp for why this is the ORWL FIFO):
//   phase      -- index of the granted phase in the location's cyclic phase list
//   remaining  -- holders of that phase that have not released yet
// release(l): the holder that drops `remaining` to zero advances `phase` (wrapping into the next
// iteration), stores the new phase's size in `remaining`, then grants every member. Because the
// grant reaches each member before that member can release, `phase` needs no lock: it is only
// written by the thread that completed the previous phase, and read by the one that completes
// this one, ordered through the grant -> queue -> execute chain.
//
// State per task: `missing` counts the grants the task's next instance still lacks. The
// instance fires when it reaches zero. Grants for instance k+1 can only arrive after instance k
// has fired (each of the task's locations stays at the task's phase until instance k releases
// it), so one counter, reset when the instance fires, serves every iteration.
//
// Iteration gate: an instance of iteration >= limit_ is held instead of queued. A run raises
// the limit; convergence checks raise it in steps, so that a predicate is evaluated on the
// contents after exactly iteration k, with nothing of k+1 started: the stop is deterministic.
//
// Shutdown of a run: every instance below the limit has completed (counted after its
// releases), so no worker touches the graph's data; the last one wakes the caller while holding
// done_mu_, so the caller cannot free the engine under a worker's feet.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "graph.hpp"
#include "plan.hpp"
#include "pool.hpp"
#include "trace.hpp"

namespace ordo::rt {

// What a body sees of the instance it runs.
struct Instance {
  const Graph* graph;
  std::uint32_t task;
  std::uint64_t iteration;
  unsigned worker;
};

class Engine final : public sched::Executor {
 public:
  Engine(Graph& graph, Plan plan);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs up to `iterations` further iterations on `pool`. When `until` is set it is called on
  // the caller's thread after every `check_every` iterations (and after the last), with the
  // number of iterations completed so far, while no instance runs; returning true stops the
  // run there. Returns the number of iterations run. An exception thrown by a body stops the
  // run and is rethrown here; the engine is unusable afterwards (see broken()).
  std::uint64_t run(sched::Pool& pool, std::uint64_t iterations,
                    const std::function<bool(std::uint64_t)>& until, std::uint64_t check_every);

  std::uint64_t iterations_done() const { return done_iterations_; }
  bool broken() const { return broken_; }

  void execute(sched::Item item, unsigned worker) override;

  // Records this engine's events into `recorder` from the next run on (null: tracing off).
  // Call between runs only.
  void set_trace(trace::Recorder* recorder) { trace_ = recorder; }

 private:
  struct alignas(64) LockState {
    std::atomic<std::uint32_t> remaining{0};
    std::uint32_t phase = 0;
  };
  struct alignas(64) TaskState {
    std::atomic<std::uint32_t> missing{0};
    std::uint32_t requests = 0;
    std::uint64_t iteration = 0;  // of the next instance to fire (or firing)
  };

  // `releaser` is the task whose instance `iteration` releases, on `worker` (for tracing).
  void release(std::uint32_t location, std::uint32_t releaser, std::uint64_t iteration,
               unsigned worker);
  void grant(std::uint32_t task);
  void ready(std::uint32_t task);
  void raise_limit(std::uint64_t limit);

  Graph& graph_;
  Plan plan_;
  std::unique_ptr<LockState[]> locks_;
  std::unique_ptr<TaskState[]> tasks_;
  sched::Pool* pool_ = nullptr;
  trace::Recorder* trace_ = nullptr;

  std::atomic<std::uint64_t> limit_{0};
  std::mutex hold_mu_;
  std::vector<std::uint32_t> held_;  // ready instances at or beyond limit_, guarded by hold_mu_

  std::atomic<std::uint64_t> completed_{0};
  // completed_ value that ends the current step. Atomic: a worker of the previous step may
  // still compare against it while the caller sets the next one (its count is below both).
  std::atomic<std::uint64_t> target_{0};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;  // guarded by done_mu_

  std::atomic<bool> aborted_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;  // first body exception, guarded by error_mu_

  std::uint64_t done_iterations_ = 0;
  bool broken_ = false;
};

}  // namespace ordo::rt
