// The engine's lanes (lanes.hpp): the protocol's choice at the start of a run, and the lane
// items that run a graph in one process without the phase machine's shared counters.
#include <chrono>
#include <stdexcept>
#include <string>

#include "runtime/engine.hpp"

namespace ordo::rt {

void Engine::choose_protocol(const sched::Pool& pool) {
  bool lanes = false;
  if (!net_ && !fibers_ && trace_ == nullptr && lane_choice_ != LaneChoice::never) {
    if (!locked_tasks_)
      locked_tasks_ = std::make_unique<const Lanes::LockedTasks>(Lanes::LockedTasks::of(graph_, plan_));
    // Tasks without locks run as range items from the deques, which a lane never looks at
    // until it parks or ends: with such tasks the phase machine runs.
    lanes = lane_choice_ == LaneChoice::always ||
            (!pool.numa_mode() && !pool.is_oversubscribed() && free_runs_.empty() &&
             Lanes::fits(*locked_tasks_, pool.size()));
  }
  // Between runs every instance below done_iterations_ has completed and none beyond it has
  // started, so every locked task is at that iteration in either state.
  const std::uint64_t at = done_iterations_;
  if (lanes) {
    if (!lanes_ || lanes_->size() != pool.size()) {
      if (lanes_) earlier_lane_parks_ += lanes_->parks();
      lanes_ = std::make_unique<Lanes>(graph_, plan_, *locked_tasks_, pool.size());
    }
    lanes_->reset(at);
    // The phase machine's state is left as it is (and rebuilt if it comes back): what it held
    // is not run by it.
    std::lock_guard lock(hold_mu_);
    held_.clear();
  } else if (lanes_on_) {
    for (std::uint32_t t : lanes_->tasks()) {
      TaskState& ts = tasks_[t];
      ts.iteration = at;
      ts.missing = ts.requests;
    }
    grant_initial();
  }
  lanes_on_ = lanes;
}

void Engine::pin_lane(unsigned lane) {
  try {
    pool_->push_to(lane, kLane | lane);
  } catch (const std::logic_error& e) {
    // Thrown out of the worker it would end the process. The item still pinned there is this
    // lane's (lane i's item goes to worker i only), so the lane runs on and the run drains.
    fail({Failure::Kind::own, rank(), std::string("a lane could not be woken: ") + e.what(), nullptr});
  }
}

bool Engine::wait_lane_inputs(unsigned lane, std::uint32_t position, std::uint64_t iteration) {
  Lanes& lanes = *lanes_;
  // A lane waits for work on its worker as an idle worker does, so it spins as long as the
  // pool's policy lets that one spin, and not at all where threads share cores.
  const std::chrono::nanoseconds spin = pool_->idle_spin();
  if (spin.count() > 0) {
    lanes.prefetch_inputs(position);
    sched::SpinDeadline deadline(spin);
    do {
      sched::cpu_relax();
      if (lanes.has_inputs(position, iteration)) return true;
    } while (!deadline.is_over());
  }
  return !lanes.park(lane);
}

void Engine::run_lane(unsigned lane, unsigned worker) {
  Lanes& lanes = *lanes_;
  // acquire: pairs with raise_limit's release store (the limit only rises while no lane runs).
  std::uint64_t limit = limit_.load(std::memory_order_acquire);
  std::uint64_t completed = 0;
  for (;;) {
    Lanes::Cursor& at = lanes.cursor(lane);
    const std::uint64_t k = at.iteration;
    // At the gate of a checked iteration the lane waits for the decision (engine_decision.cpp).
    if (k >= limit && (!decision_ || (limit = wait_gate(lane, k)) == 0)) break;
    const std::uint32_t position = at.position;
    if (!lanes.has_inputs(position, k) && !wait_lane_inputs(lane, position, k)) {
      // Parked: a producer pushes the lane's item again, which may already run elsewhere.
      // The run cannot end before it does, so the count is safe to add now.
      if (completed != 0) instance_done(completed);
      return;
    }
    const std::uint32_t task = lanes.task_at(position);
    {
      const Family& f = *tasks_[task].family;
      const std::uint32_t index = task - f.first;
      run_body(
          f, Instance{&graph_, task, k, worker, nullptr, index, graph_.member_accesses(f, index)});
    }
    if (decision_) [[unlikely]]
      maybe_decide(task, k);
    lanes.complete(position, k, [this](unsigned waiting) { pin_lane(waiting); });
    lanes.advance(lane);
    ++completed;
  }
  // The lane's last instance below the limit: nothing after this touches the engine, which
  // the run's caller may free once every lane has counted. (An item always has an instance
  // to run: raise_limit pushes non-empty lanes below the new limit, a producer a parked one.)
  instance_done(completed);
}

}  // namespace ordo::rt
