// The fiber driver: runs fiber tasks (local view, ORWL's orwl_handle2 driven by the body;
// docs/fibers.md) for the engine. Their requests are declared like a dataflow task's and sit
// in the same cyclic plans (declaring is ORWL's proactive request). What differs is when the
// body runs and when handles release:
//   - instance k starts, on a fiber, as soon as instance k-1 has finished and k is below the
//     iteration gate, without waiting for grants (the engine makes it ready at the end of k-1);
//   - acquire(h) returns once h's grant for k has arrived, else suspends the fiber; the worker
//     goes on with other items;
//   - release(h) releases h's hold of iteration k at once (the request for k+1 is implied by
//     the cyclic plan, as in orwl_release2); handles not released by the body are acquired and
//     released after it returns.
//
// Per handle, one word counts the grants received: the grant for iteration i is the (i+1)-th
// one, since the task is one member of every phase cycle of that lock. So "granted for k" is
// count > k, and a grant for k+1 that arrives while instance k still runs (after it released
// the handle early) is simply count > k+1 already when k+1 asks. A grant for k+2 cannot come
// before instance k+1 has released the handle. The word's low bit says "the fiber is parked
// on this handle". What pairs across threads:
//   fiber:   count > k ? go on : record the handle, suspend to the worker;
//   worker:  CAS the bit in, unless count > k by now (then resume the fiber at once) -- park();
//   granter: fetch_add(2); if the bit was set, clear it and push a resume item -- grant().
// Exactly one of worker and granter sees the other, so the fiber is resumed exactly once. The
// acq_rel read-modify-writes also carry the data: the fiber sees what the location's previous
// holders wrote. A resume item is the task index with Engine::kResume set; a start item is
// the plain index.
//
// Threads: start and resume items run on workers (run()), the fiber possibly moving between
// workers at each suspension; grant() runs on whichever thread grants (a releasing worker,
// the transport's thread). The per-instance fields of a FiberTask (instance, waiting, holds)
// belong to the fiber and to the worker running it, handed over by the resume item's push.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/graph.hpp"
#include "runtime/plan.hpp"
#include "scheduler/fiber.hpp"

namespace ordo::rt {

class Engine;
struct Instance;

class FiberDriver {
 public:
  enum class Hold : std::uint8_t { requested, held, released };

  FiberDriver(Engine& engine, const Graph& graph, const Plan& plan);
  ~FiberDriver();
  FiberDriver(const FiberDriver&) = delete;
  FiberDriver& operator=(const FiberDriver&) = delete;

  // Registers task `task`, member `index` of fiber family `family` (while the engine is built).
  void add(std::uint32_t task, const Family& family, std::uint32_t index);
  // Whether `task` is a fiber task.
  bool drives(std::uint32_t task) const { return tasks_[task] != nullptr; }
  // Stacks of the next run's fibers (no fiber is active between runs).
  void set_stacks(sched::StackPool* stacks) { stacks_ = stacks; }

  // `task`'s handle of `location` is granted (any thread).
  void grant(std::uint32_t task, std::uint32_t location);
  // For tracing, before the grant: the iteration this grant of `location` to `task` is for.
  std::uint64_t granted_iteration(std::uint32_t task, std::uint32_t location) const;
  // Starts instance `iteration` of `task` (`resume` false) or resumes its fiber, on `worker`;
  // returns when the fiber suspends or the instance has ended (then handed back to the
  // engine: Engine::fiber_done).
  void run(std::uint32_t task, bool resume, unsigned worker);

  // For fiber task bodies, on the instance's own fiber. `access` indexes the task's accesses.
  // The api layer checks misuse (see hold()) before calling these.
  Hold hold(const Instance& inst, std::uint32_t access) const;
  // Whether the caller runs on `inst`'s fiber (and not on another thread or after the body).
  bool on_own_fiber(const Instance& inst) const;
  // Returns once the access is granted for inst.iteration (suspending the fiber meanwhile).
  // Precondition: hold() == requested.
  void acquire(const Instance& inst, std::uint32_t access);
  // Releases the access's hold of this iteration. Precondition: hold() == held.
  void release(const Instance& inst, std::uint32_t access);

 private:
  struct Task;
  bool park(Task& ft);
  void wait_grant(Task& ft, std::uint32_t access);
  static void fiber_main(void* arg) noexcept;

  Engine& engine_;
  const Graph& graph_;
  const Plan& plan_;
  std::vector<std::unique_ptr<Task>> tasks_;  // per task of the graph; null: not a fiber task
  sched::StackPool* stacks_ = nullptr;
};

}  // namespace ordo::rt
