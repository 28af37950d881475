// A stop condition on reduced values taken in the dataflow (Engine::Decision;
// docs/convergence.md): the gate of a checked iteration is opened, or left shut for good, by
// the worker that makes the last of this rank's reduced values final, not by the caller's
// thread between two steps.
//
// Threads and what pairs across them:
//   - the caller sets the run's fields (deciders_, decide_*, segment_end_, check_at_,
//     pending_) before raise_limit, which publishes them to the workers it pushes to;
//   - a decider's acq_rel decrement of pending_ pairs with the other deciders' of the same
//     check, so the last sees every value; it stores pending_ and check_at_ for the next check
//     before it raises limit_ (open_gate), whose release store (under hold_mu_, or sequentially
//     consistent for lanes) publishes them to the instances the gate lets through;
//   - stopped_after_ is written by the decider before its counted skip (an acq_rel increment
//     of completed_), which the caller's acquire load after the step pairs with;
//   - a lane parked at the gate (gate_parked_) and the decider opening it are Dekker's
//     pattern, as for a lane parked on its inputs: the lane stores its word, then loads
//     limit_; the decider stores limit_, then exchanges the word; whoever takes it owns the
//     lane.
#include <algorithm>

#include "runtime/engine.hpp"

namespace ordo::rt {

std::uint64_t Engine::check_of(std::uint64_t gate) const {
  const bool checked = (gate - decide_start_) % decide_every_ == 0 || gate == decide_end_;
  return checked ? gate - 1 : kNoCheck;
}

void Engine::decide(std::uint64_t iteration) {
  const std::uint64_t done = iteration + 1;
  bool stop = true;  // a failure stops at the gate as well: the run drains to it
  if (!aborted_.load(std::memory_order_relaxed)) {
    try {
      stop = decision_->test(done);
    } catch (...) {
      fail_body();
    }
  }
  if (stop) {
    stopped_after_ = done;
    stopped_.store(true, std::memory_order_release);
    // This step's instances beyond the gate will never run: counted now, so that the step ends
    // once those below it have completed (this decider's own is not counted yet, so this is
    // never the step's last count). The caller takes them back after the step.
    if (done < segment_end_) {
      const std::uint64_t skipped = local_tasks_ * (segment_end_ - done);
      if (dist_) {
        std::lock_guard lock(done_mu_);
        completed_.fetch_add(skipped, std::memory_order_acq_rel);
      } else {
        completed_.fetch_add(skipped, std::memory_order_acq_rel);
      }
    }
    return;
  }
  if (done >= segment_end_) return;  // the caller's step ends here (the run's end or a pause)
  const std::uint64_t next = std::min(done + decide_every_, segment_end_);
  pending_.store(static_cast<std::uint32_t>(deciders_.size()), std::memory_order_relaxed);
  check_at_.store(check_of(next), std::memory_order_relaxed);
  open_gate(next);
}

void Engine::open_gate(std::uint64_t limit) {
  if (lanes_on_) {
    limit_.store(limit, std::memory_order_seq_cst);  // before the parked words (header)
    for (unsigned l = 0; l < lanes_->size(); ++l)
      if (gate_parked_[l].load(std::memory_order_seq_cst) != 0 &&
          gate_parked_[l].exchange(0, std::memory_order_seq_cst) != 0)
        pin_lane(l);
    return;
  }
  // One decider at a time (the next check's cannot run before this gate opens): its buffer.
  release_held(limit, gate_go_);
}

std::uint64_t Engine::wait_gate(unsigned lane, std::uint64_t iteration) {
  if (iteration >= segment_end_) return 0;  // the step's end: the caller raises the gate
  auto decided = [&]() -> std::uint64_t {
    if (stopped_.load(std::memory_order_acquire)) return 0;
    const std::uint64_t l = limit_.load(std::memory_order_acquire);
    return l > iteration ? l : kNoCheck;
  };
  if (const std::uint64_t l = decided(); l != kNoCheck) return l;
  const std::chrono::nanoseconds spin = pool_->idle_spin();
  if (spin.count() > 0) {
    sched::SpinDeadline deadline(spin);
    do {
      sched::cpu_relax();
      if (const std::uint64_t l = decided(); l != kNoCheck) return l;
    } while (!deadline.is_over());
  }
  gate_parked_[lane].store(1, std::memory_order_seq_cst);
  const bool stopped = stopped_.load(std::memory_order_seq_cst);
  const std::uint64_t l = limit_.load(std::memory_order_seq_cst);
  if ((stopped || l > iteration) && gate_parked_[lane].exchange(0, std::memory_order_seq_cst) != 0)
    return stopped ? 0 : l;  // decided meanwhile, and the lane is still its own
  return 0;                  // parked (the decider pins the lane's item again), or taken already
}

std::uint64_t Engine::run_deciding(std::uint64_t start, std::uint64_t end,
                                   std::uint64_t check_every, const Pause* pause) {
  const std::uint64_t ntasks = local_tasks_;
  decide_start_ = start;
  decide_every_ = check_every;
  decide_end_ = end;
  stopped_.store(false, std::memory_order_relaxed);
  // This rank's deciders: where its value of each reduction becomes final here.
  deciders_.clear();
  std::vector<std::uint32_t> reductions = decision_->reductions;
  std::sort(reductions.begin(), reductions.end());
  reductions.erase(std::unique(reductions.begin(), reductions.end()), reductions.end());
  for (std::uint32_t r : reductions) {
    const Reduction& red = graph_.reductions()[r];
    if (!dist_) {
      deciders_.push_back(red.combine_task);
      continue;
    }
    for (unsigned v = 0; v < red.copies; ++v)
      if (dist_->dist.task_rank[red.first_copy_task + v] == rank())
        deciders_.push_back(red.first_copy_task + v);
  }
  ORDO_ASSERT(deciders_.size() == reductions.size());
  if (lanes_on_ && (!gate_parked_ || gate_lanes_ != lanes_->size())) {
    gate_lanes_ = lanes_->size();
    gate_parked_ = std::make_unique<std::atomic<std::uint8_t>[]>(gate_lanes_);
  }
  const std::uint64_t first = graph_.first_iteration();
  while (done_iterations_ < end) {
    std::uint64_t segment = end;
    if (pause)
      segment =
          std::min(segment, ((first + done_iterations_) / pause->every + 1) * pause->every - first);
    segment_end_ = segment;
    const std::uint64_t gate =
        std::min(start + ((done_iterations_ - start) / check_every + 1) * check_every, segment);
    pending_.store(static_cast<std::uint32_t>(deciders_.size()), std::memory_order_relaxed);
    check_at_.store(check_of(gate), std::memory_order_relaxed);
    if (lanes_on_)
      for (unsigned l = 0; l < gate_lanes_; ++l)
        gate_parked_[l].store(0, std::memory_order_relaxed);
    target_.store(ntasks * segment, std::memory_order_relaxed);
    {
      std::lock_guard lock(done_mu_);
      done_ = completed_.load(std::memory_order_acquire) == ntasks * segment;
    }
    raise_limit(gate);
    wait_step_done();
    check_at_.store(kNoCheck, std::memory_order_relaxed);
    if (dist_ && !quiesce_step()) break;
    const bool stopped = stopped_.load(std::memory_order_acquire);
    done_iterations_ = stopped ? stopped_after_ : segment;
    // The instances the stop skipped were counted as done: they are not.
    if (stopped && stopped_after_ < segment)
      completed_.fetch_sub(ntasks * (segment - stopped_after_), std::memory_order_relaxed);
    if (aborted_.load(std::memory_order_relaxed)) break;
    // A pause that throws fails as a body does (as between iterations, engine.cpp).
    try {
      if (pause && done_iterations_ == segment && (first + segment) % pause->every == 0 &&
          !pause->at(first + segment))
        break;
    } catch (...) {
      fail_body();
      break;
    }
    if (stopped) break;
  }
  return done_iterations_;
}

}  // namespace ordo::rt
