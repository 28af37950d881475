#include "engine.hpp"

#include <algorithm>
#include <cassert>

namespace ordo::rt {

Engine::Engine(Graph& graph, Plan plan)
    : graph_(graph),
      plan_(std::move(plan)),
      locks_(new LockState[plan_.locks.size()]),
      tasks_(new TaskState[plan_.tasks.size()]) {
  for (std::size_t t = 0; t < plan_.tasks.size(); ++t) {
    auto n = static_cast<std::uint32_t>(plan_.tasks[t].locks.size());
    tasks_[t].requests = n;
    tasks_[t].missing.store(n, std::memory_order_relaxed);
    const TaskDesc& desc = graph_.tasks()[t];
    if (!desc.fiber) continue;
    has_fibers_ = true;
    auto ft = std::make_unique<FiberTask>();
    ft->engine = this;
    ft->grants.reset(new std::atomic<std::uint64_t>[n]);
    for (std::uint32_t h = 0; h < n; ++h) ft->grants[h].store(0, std::memory_order_relaxed);
    const auto& locks = plan_.tasks[t].locks;  // sorted by location (plan.cpp builds it so)
    assert(std::is_sorted(locks.begin(), locks.end()));  // fiber_grant binary-searches it
    for (const AccessDesc& a : desc.accesses) {
      auto it = std::lower_bound(locks.begin(), locks.end(), a.location);
      ft->handle_of.push_back(it != locks.end() && *it == a.location
                                  ? static_cast<std::int32_t>(it - locks.begin())
                                  : -1);
    }
    ft->holds.assign(desc.accesses.size(), Hold::requested);
    tasks_[t].fiber = std::move(ft);
  }
  // Grant the initial phase of every lock. limit_ is 0, so every instance that becomes ready
  // is held until the first run raises the limit.
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    locks_[l].phase = lp.initial_phase;
    locks_[l].remaining.store(lp.initial_end - lp.initial_begin, std::memory_order_relaxed);
  }
  // Fiber tasks start without waiting for grants (header).
  for (std::uint32_t t = 0; t < plan_.tasks.size(); ++t)
    if (tasks_[t].requests == 0 || tasks_[t].fiber) ready(t);
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    for (std::uint32_t m = lp.initial_begin; m < lp.initial_end; ++m)
      grant(lp.members[m], static_cast<std::uint32_t>(l));
  }
}

Engine::~Engine() = default;

void Engine::grant(std::uint32_t task, std::uint32_t location) {
  if (tasks_[task].fiber) {
    fiber_grant(task, location);
    return;
  }
  // acq_rel: pairs with the other grants of this instance, so that whoever fires it sees the
  // phase updates made by every granting thread.
  if (tasks_[task].missing.fetch_sub(1, std::memory_order_acq_rel) == 1) ready(task);
}

void Engine::ready(std::uint32_t task) {
  TaskState& ts = tasks_[task];
  // No grant for the next instance can arrive before this one releases something (header).
  ts.missing.store(ts.requests, std::memory_order_relaxed);
  // acquire: pairs with the release store in raise_limit.
  if (ts.iteration < limit_.load(std::memory_order_acquire)) {
    pool_->push(task);
    return;
  }
  std::lock_guard lock(hold_mu_);
  if (ts.iteration < limit_.load(std::memory_order_relaxed))
    pool_->push(task);
  else
    held_.push_back(task);
}

void Engine::raise_limit(std::uint64_t limit) {
  std::vector<std::uint32_t> go;
  {
    std::lock_guard lock(hold_mu_);
    limit_.store(limit, std::memory_order_release);  // pairs with the acquire in ready()
    auto keep = std::partition(held_.begin(), held_.end(),
                               [&](std::uint32_t t) { return tasks_[t].iteration >= limit; });
    go.assign(keep, held_.end());
    held_.erase(keep, held_.end());
  }
  for (std::uint32_t t : go) pool_->push(t);
}

void Engine::release(std::uint32_t location) {
  LockState& ls = locks_[location];
  // acq_rel: the last holder must see every other holder's work before it advances.
  if (ls.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const LockPlan& lp = plan_.locks[location];
  std::uint32_t next = ls.phase + 1;
  if (next == lp.phases.size()) next = 0;
  ls.phase = next;
  const Phase& ph = lp.phases[next];
  ls.remaining.store(ph.end - ph.begin, std::memory_order_relaxed);  // published by grant()
  for (std::uint32_t m = ph.begin; m < ph.end; ++m) grant(lp.members[m], location);
}

void Engine::execute(sched::Item item, unsigned worker) {
  const auto task = static_cast<std::uint32_t>(item);
  TaskState& ts = tasks_[task];
  if (ts.fiber) {
    run_fiber(task, (item & kResume) != 0, worker);
    return;
  }
  const std::uint64_t k = ts.iteration;
  if (!aborted_.load(std::memory_order_relaxed)) {
    try {
      graph_.tasks()[task].body(Instance{&graph_, task, k, worker, nullptr});
    } catch (...) {
      fail(std::current_exception());
    }
  }
  ts.iteration = k + 1;
  const auto& locks = plan_.tasks[task].locks;
  if (locks.empty())
    ready(task);
  else
    for (std::uint32_t l : locks) release(l);
  instance_done();
}

void Engine::fail(std::exception_ptr error) {
  std::lock_guard lock(error_mu_);
  if (!error_) error_ = std::move(error);
  aborted_.store(true, std::memory_order_relaxed);
}

void Engine::instance_done() {
  // acq_rel: the final increment makes every body's writes visible to the caller.
  if (completed_.fetch_add(1, std::memory_order_acq_rel) + 1 == target_.load(std::memory_order_relaxed)) {
    std::lock_guard lock(done_mu_);
    done_ = true;
    done_cv_.notify_all();  // under the lock: the caller may free us once it can take it
  }
}

std::uint64_t Engine::run(sched::Pool& pool, std::uint64_t iterations,
                          const std::function<bool(std::uint64_t)>& until,
                          std::uint64_t check_every, sched::StackPool* stacks) {
  const std::uint64_t ntasks = plan_.tasks.size();
  const std::uint64_t start = done_iterations_;
  const std::uint64_t end = start + iterations;
  if (check_every == 0) check_every = 1;
  pool_ = &pool;
  if (has_fibers_) {
    if (stacks == nullptr) {
      if (!own_stacks_) own_stacks_ = std::make_unique<sched::StackPool>();
      stacks = own_stacks_.get();
    }
    stacks_ = stacks;  // no fiber is active between runs, so each run may bring its own
  }
  pool.attach(*this);
  while (done_iterations_ < end) {
    std::uint64_t stop = until ? std::min(done_iterations_ + check_every, end) : end;
    target_.store(ntasks * stop, std::memory_order_relaxed);
    {
      std::lock_guard lock(done_mu_);
      done_ = completed_.load(std::memory_order_acquire) == ntasks * stop;
    }
    raise_limit(stop);
    {
      std::unique_lock lock(done_mu_);
      done_cv_.wait(lock, [this] { return done_; });
    }
    done_iterations_ = stop;
    if (aborted_.load(std::memory_order_relaxed)) break;
    if (until && until(done_iterations_)) break;
  }
  pool.detach();
  pool_ = nullptr;
  if (error_) {
    broken_ = true;
    std::rethrow_exception(error_);
  }
  return done_iterations_ - start;
}

}  // namespace ordo::rt

// ---- fiber tasks (protocol in engine.hpp) ----------------------------------------------------

namespace ordo::rt {

void Engine::run_fiber(std::uint32_t task, bool resume, unsigned worker) {
  TaskState& ts = tasks_[task];
  FiberTask& ft = *ts.fiber;
  if (!resume) {
    ft.instance = Instance{&graph_, task, ts.iteration, worker, this};
    std::fill(ft.holds.begin(), ft.holds.end(), Hold::requested);
    ft.fiber.start(*stacks_, &Engine::fiber_main, &ft, graph_.tasks()[task].name.c_str());
  }
  for (;;) {
    ft.instance.worker = worker;
    if (ft.fiber.resume()) break;
    if (park(ft)) return;  // the grant will push the resume item
  }
  // The body has returned and every handle is released (fiber_main).
  ts.iteration = ft.instance.iteration + 1;
  ready(task);
  instance_done();
}

bool Engine::park(FiberTask& ft) {
  std::atomic<std::uint64_t>& g = ft.grants[ft.waiting];
  const std::uint64_t k = ft.instance.iteration;
  // acquire: pairs with the fetch_add in fiber_grant (the granter's view of the data).
  std::uint64_t w = g.load(std::memory_order_acquire);
  for (;;) {
    if ((w >> 1) > k) return false;  // granted since the fiber looked: resume it here
    // acq_rel: pairs with the fetch_add in fiber_grant, which then sees the parked bit.
    if (g.compare_exchange_weak(w, w | 1, std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
  }
}

void Engine::fiber_grant(std::uint32_t task, std::uint32_t location) {
  FiberTask& ft = *tasks_[task].fiber;
  const auto& locks = plan_.tasks[task].locks;
  const auto h = static_cast<std::size_t>(
      std::lower_bound(locks.begin(), locks.end(), location) - locks.begin());
  // acq_rel: pairs with the CAS in park() and the acquire loads in park() and wait_grant(), so
  // the fiber sees what the previous holders wrote.
  const std::uint64_t old = ft.grants[h].fetch_add(2, std::memory_order_acq_rel);
  if ((old & 1) == 0) return;
  // The fiber is parked on this handle and only this grant resumes it; no other grant can
  // reach this handle before the fiber runs again. Relaxed: the push below publishes it.
  ft.grants[h].fetch_and(~std::uint64_t{1}, std::memory_order_relaxed);
  pool_->push(task | kResume);
}

void Engine::wait_grant(FiberTask& ft, std::uint32_t access) {
  const std::int32_t h = ft.handle_of[access];
  if (h < 0) return;  // a read-only location has no lock
  // acquire: pairs with the fetch_add in fiber_grant.
  if ((ft.grants[h].load(std::memory_order_acquire) >> 1) > ft.instance.iteration) return;
  ft.waiting = static_cast<std::uint32_t>(h);
  sched::Fiber::suspend();  // park() or fiber_grant() resumes us once the grant is in
}

void Engine::fiber_main(void* arg) noexcept {
  FiberTask& ft = *static_cast<FiberTask*>(arg);
  Engine& e = *ft.engine;
  if (!e.aborted_.load(std::memory_order_relaxed)) {
    try {
      e.graph_.tasks()[ft.instance.task].body(ft.instance);
    } catch (...) {
      e.fail(std::current_exception());
    }
  }
  // Handles the body left requested or held: acquire (a release needs the grant), release.
  for (std::uint32_t a = 0; a < ft.holds.size(); ++a) {
    if (ft.holds[a] == Hold::released) continue;
    if (ft.holds[a] == Hold::requested) e.wait_grant(ft, a);
    ft.holds[a] = Hold::released;
    const std::int32_t h = ft.handle_of[a];
    if (h >= 0) e.release(e.plan_.tasks[ft.instance.task].locks[static_cast<std::size_t>(h)]);
  }
}

Engine::Hold Engine::hold(const Instance& inst, std::uint32_t access) const {
  return tasks_[inst.task].fiber->holds[access];
}

bool Engine::on_own_fiber(const Instance& inst) const {
  const FiberTask* ft = tasks_[inst.task].fiber.get();
  return ft != nullptr && sched::Fiber::current() == &ft->fiber;
}

void Engine::fiber_acquire(const Instance& inst, std::uint32_t access) {
  FiberTask& ft = *tasks_[inst.task].fiber;
  wait_grant(ft, access);
  ft.holds[access] = Hold::held;
}

void Engine::fiber_release(const Instance& inst, std::uint32_t access) {
  FiberTask& ft = *tasks_[inst.task].fiber;
  ft.holds[access] = Hold::released;
  const std::int32_t h = ft.handle_of[access];
  if (h >= 0) release(plan_.tasks[inst.task].locks[static_cast<std::size_t>(h)]);
}

}  // namespace ordo::rt
