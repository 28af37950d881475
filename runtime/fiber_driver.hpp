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
// before instance k+1 has released the handle. The word is count << 2 | stopped | parked: its
// low bit says "the fiber is parked on this handle". What pairs across threads:
//   fiber:   count > k ? go on : record the handle, suspend to the worker;
//   worker:  CAS the bit in, unless count > k or stopped by now (then resume the fiber at
//            once) -- park();
//   granter: add one grant; if the bit was set, clear it and push a resume item -- grant().
// Exactly one of worker and granter sees the other, so the fiber is resumed exactly once. The
// acq_rel read-modify-writes also carry the data: the fiber sees what the location's previous
// holders wrote. A resume item is the task index with Engine::kResume set; a start item is
// the plain index.
//
// A failure that stops the run (a peer lost: its grants will never come; failure.hpp) calls
// stop(), which wakes every parked fiber; an acquire then throws RunStopped instead of
// waiting, which unwinds the body, and the handles it never got are not released. Whoever
// clears the parked bit resumes the fiber, so stop() and a granter racing for it resume it
// once. stop() sets the stopped bit in every word and then clears the parked bits; park()'s
// CAS on the same word either comes first (stop() then sees the parked bit) or sees the
// stopped bit (and resumes the fiber itself). Once its CAS has parked the fiber, park() touches
// nothing more: the fiber may be resumed, finish and end the run, and the engine be freed,
// before park() returns.
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
#include "runtime/trace.hpp"
#include "scheduler/fiber.hpp"

namespace ordo::rt {

class Engine;
struct Instance;

// Thrown by an acquire once the run has stopped on a failure (a peer lost): it unwinds the
// fiber's body. Not an error of the body's own; the engine already holds the failure.
struct RunStopped {};

class FiberDriver {
 public:
  enum class Hold : std::uint8_t { requested, held, released };

  // What the driver needs of the engine, which implements it: the phase machine's side of a
  // fiber instance and the one way a body runs. Virtual calls: a few per fiber instance, which
  // a fiber switch outweighs.
  class Host {
   public:
    // The iteration of `task`'s next instance (the one a start item starts).
    virtual std::uint64_t next_iteration(std::uint32_t task) const = 0;
    // Runs `inst`'s body as every body runs (Engine::run_body), then `settle(arg)`.
    virtual void run_fiber_body(const Family& family, const Instance& inst, void (*settle)(void*),
                                void* arg) = 0;
    // `task`'s hold of `location` for instance `iteration` ends, on `worker`.
    virtual void release(std::uint32_t location, std::uint32_t task, std::uint64_t iteration,
                         unsigned worker) = 0;
    // Queues the resume item of `task`'s parked fiber (any thread).
    virtual void resume(std::uint32_t task) = 0;
    // Instance `iteration` of `task` has ended, every handle released: the next may start.
    virtual void fiber_done(std::uint32_t task, std::uint64_t iteration) = 0;
    // The recorder of this run, or null.
    virtual trace::Recorder* trace() const = 0;

   protected:
    ~Host() = default;
  };

  // `engine` is only named in each Instance (the body's acquire and release go through it).
  FiberDriver(Host& host, Engine& engine, const Graph& graph, const Plan& plan);
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
  // engine: Host::fiber_done).
  void run(std::uint32_t task, bool resume, unsigned worker);

  // For fiber task bodies, on the instance's own fiber. `access` indexes the task's accesses.
  // The api layer checks misuse (see hold()) before calling these.
  Hold hold(const Instance& inst, std::uint32_t access) const;
  // Whether the caller runs on `inst`'s fiber (and not on another thread or after the body).
  bool is_on_own_fiber(const Instance& inst) const;
  // Returns once the access is granted for inst.iteration (suspending the fiber meanwhile).
  // Precondition: hold() == requested.
  void acquire(const Instance& inst, std::uint32_t access);
  // Releases the access's hold of this iteration. Precondition: hold() == held.
  void release(const Instance& inst, std::uint32_t access);

  // The run stops on a failure: wakes every parked fiber and makes acquires throw RunStopped
  // from now on (any thread; see the header comment).
  void stop();

 private:
  struct Task;
  bool park(Task& ft);
  // Returns once the handle of `access` is granted for the instance's iteration; false (only
  // after stop()) when it never will be. With `throw_if_stopped`, throws RunStopped instead.
  bool wait_grant(Task& ft, std::uint32_t access, bool throw_if_stopped);
  // A handle's word (header): grants received << 2 | kStopped | kParked.
  static constexpr std::uint64_t kParked = 1, kStopped = 2, kOneGrant = 4;
  static std::uint64_t grants_in(std::uint64_t word) { return word >> 2; }
  // Clears `word`'s parked bit; true when this call cleared it (and so must resume the fiber).
  static bool unpark(std::atomic<std::uint64_t>& word) {
    return (word.fetch_and(~kParked) & kParked) != 0;
  }
  static void fiber_main(void* arg) noexcept;
  // After the body (skipped or not): acquires and releases the handles it left (`arg`: the
  // Task).
  static void settle(void* arg);

  Host& host_;
  Engine& engine_;
  const Graph& graph_;
  const Plan& plan_;
  std::vector<std::unique_ptr<Task>> tasks_;  // per task of the graph; null: not a fiber task
  sched::StackPool* stacks_ = nullptr;
  std::atomic<bool> stopped_{false};
};

}  // namespace ordo::rt
