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
// Fiber tasks (local view, ORWL's orwl_handle2 driven by the body; docs/fibers.md). Their
// requests are declared like a dataflow task's and sit in the same cyclic plans (declaring is
// ORWL's proactive request). What differs is when the body runs and when handles release:
//   - instance k starts, on a fiber, as soon as instance k-1 has finished and k is below the
//     iteration gate, without waiting for grants (ready() is called at the end of k-1);
//   - fiber_acquire(h) returns once h's grant for k has arrived, else suspends the fiber; the
//     worker goes on with other items;
//   - fiber_release(h) releases h's hold of iteration k at once (the request for k+1 is
//     implied by the cyclic plan, as in orwl_release2); handles not released by the body are
//     acquired and released after it returns.
// Per handle, one word counts the grants received: the grant for iteration i is the (i+1)-th
// one, since the task is one member of every phase cycle of that lock. So "granted for k" is
// count > k, and a grant for k+1 that arrives while instance k still runs (after it released
// the handle early) is simply count > k+1 already when k+1 asks. A grant for k+2 cannot come
// before instance k+1 has released the handle. The word's low bit says "the fiber is parked
// on this handle":
//   fiber:   count > k ? go on : record the handle, suspend to the worker;
//   worker:  CAS the bit in, unless count > k by now (then resume the fiber at once);
//   granter: fetch_add(2); if the bit was set, clear it and push a resume item.
// Exactly one of worker and granter sees the other, so the fiber is resumed exactly once.
// A resume item is the task index with kResume set; a start item is the plain index.
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

#include "fiber.hpp"
#include "graph.hpp"
#include "plan.hpp"
#include "pool.hpp"

namespace ordo::rt {

class Engine;

// What a body sees of the instance it runs.
struct Instance {
  const Graph* graph;
  std::uint32_t task;
  std::uint64_t iteration;
  unsigned worker;         // a fiber task's instance may move between workers when it suspends
  Engine* engine;          // set for fiber tasks: their acquire and release go through it
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
  // Fiber tasks take their stacks from `stacks`; nullptr: a pool of the default stack size
  // that the engine owns.
  std::uint64_t run(sched::Pool& pool, std::uint64_t iterations,
                    const std::function<bool(std::uint64_t)>& until, std::uint64_t check_every,
                    sched::StackPool* stacks = nullptr);

  std::uint64_t iterations_done() const { return done_iterations_; }
  bool broken() const { return broken_; }

  void execute(sched::Item item, unsigned worker) override;

  // For fiber task bodies, on the instance's own fiber. `access` indexes the task's
  // TaskDesc::accesses. The api layer checks misuse (see hold()) before calling these.
  enum class Hold : std::uint8_t { requested, held, released };
  Hold hold(const Instance& inst, std::uint32_t access) const;
  // Whether the caller runs on `inst`'s fiber (and not on another thread or after the body).
  bool on_own_fiber(const Instance& inst) const;
  // Returns once the access is granted for inst.iteration (suspending the fiber meanwhile).
  // Precondition: hold() == requested.
  void fiber_acquire(const Instance& inst, std::uint32_t access);
  // Releases the access's hold of this iteration. Precondition: hold() == held.
  void fiber_release(const Instance& inst, std::uint32_t access);

  static constexpr sched::Item kResume = sched::Item{1} << 63;

 private:
  struct alignas(64) LockState {
    std::atomic<std::uint32_t> remaining{0};
    std::uint32_t phase = 0;
  };
  struct FiberTask;
  struct alignas(64) TaskState {
    std::atomic<std::uint32_t> missing{0};
    std::uint32_t requests = 0;
    std::uint64_t iteration = 0;  // of the next instance to fire (or firing)
    std::unique_ptr<FiberTask> fiber;  // fiber tasks only
  };
  struct FiberTask {
    Engine* engine = nullptr;
    Instance instance{};          // the running instance; worker updated at each resume
    sched::Fiber fiber;
    std::uint32_t waiting = 0;    // handle the fiber suspended on (read by its worker)
    std::unique_ptr<std::atomic<std::uint64_t>[]> grants;  // per handle: count << 1 | parked
    std::vector<std::int32_t> handle_of;  // per access: handle index, -1 when not locked
    std::vector<Hold> holds;              // per access, of the running instance
  };

  void release(std::uint32_t location);
  void grant(std::uint32_t task, std::uint32_t location);
  void ready(std::uint32_t task);
  void raise_limit(std::uint64_t limit);
  void fail(std::exception_ptr error);
  void instance_done();
  void run_fiber(std::uint32_t task, bool resume, unsigned worker);
  bool park(FiberTask& ft);
  void fiber_grant(std::uint32_t task, std::uint32_t location);
  void wait_grant(FiberTask& ft, std::uint32_t access);
  static void fiber_main(void* arg) noexcept;

  Graph& graph_;
  Plan plan_;
  std::unique_ptr<LockState[]> locks_;
  std::unique_ptr<TaskState[]> tasks_;
  sched::Pool* pool_ = nullptr;
  sched::StackPool* stacks_ = nullptr;
  std::unique_ptr<sched::StackPool> own_stacks_;  // when run() was given none
  bool has_fibers_ = false;

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
