#include "runtime/engine.hpp"

#include <algorithm>
#include <cassert>

namespace ordo::rt {

Engine::Engine(Graph& graph, Plan plan, Net* net, std::uint32_t channel, bool share)
    : graph_(graph),
      plan_(std::move(plan)),
      locks_(new LockState[plan_.locks.size()]),
      // Default-initialised (TaskState is trivial): see TaskState.
      tasks_(new TaskState[plan_.tasks]),
      net_(net),
      channel_(channel),
      share_memory_(share) {
  local_tasks_ = plan_.tasks;
  const auto& families = graph_.families();
  for (const Family& f : families)
    if (f.fiber) has_fibers_ = true;
  if (has_fibers_) fibers_.resize(plan_.tasks);
  if (!net_) {
    // Grant the initial phase of every lock (below, once the tasks are set up). limit_ is 0,
    // so every instance that becomes ready is held until the first run raises the limit.
    for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
      const LockPlan& lp = plan_.locks[l];
      if (!lp.locked) continue;
      locks_[l].phase = lp.initial_phase;
      locks_[l].remaining.store(lp.initial_end - lp.initial_begin, std::memory_order_relaxed);
    }
  }
  auto add_free = [&](std::uint32_t begin, std::uint32_t end) {
    if (!free_runs_.empty() && free_runs_.back().second == begin)
      free_runs_.back().second = end;
    else
      free_runs_.emplace_back(begin, end);
  };
  for (const Family& fam : families) {
    if (!net_ && !fam.fiber && fam.offsets == Graph::kNoAccesses) {
      add_free(fam.first, fam.first + fam.count);  // touches no per-task state
      continue;
    }
    for (std::uint32_t i = 0; i < fam.count; ++i) {
      const std::uint32_t t = fam.first + i;
      const auto locks = plan_.task_locks_of(t);
      const auto n = static_cast<std::uint32_t>(locks.size());
      if (!net_ && !fam.fiber && n == 0) {
        add_free(t, t + 1);
        continue;
      }
      TaskState& ts = tasks_[t];
      ts.missing = n;
      ts.requests = n;
      ts.iteration = 0;
      ts.family = &fam;
      if (fam.fiber) {
        auto ft = std::make_unique<FiberTask>();
        ft->engine = this;
        ft->grants.reset(new std::atomic<std::uint64_t>[n]);
        for (std::uint32_t h = 0; h < n; ++h) ft->grants[h].store(0, std::memory_order_relaxed);
        // sorted by location (plan.cpp builds it so): fiber_grant binary-searches it
        assert(std::is_sorted(locks.begin(), locks.end()));
        const auto accesses = graph_.member_accesses(fam, i);
        for (const AccessDesc& a : accesses) {
          auto it = std::lower_bound(locks.begin(), locks.end(), a.location);
          ft->handle_of.push_back(it != locks.end() && *it == a.location
                                      ? static_cast<std::int32_t>(it - locks.begin())
                                      : -1);
        }
        ft->holds.assign(accesses.size(), Hold::requested);
        fibers_[t] = std::move(ft);
      }
      // Fiber tasks start without waiting for grants (header).
      if (!net_ && (n == 0 || fam.fiber)) ready(t);
    }
  }
  if (net_) {
    distribute();
    check_same_graph();
    if (!error_) provide_storage();
    if (!error_) share_memory();
    if (!error_) release_shared_replicas();
    if (!error_) start_initial_grants();
    return;
  }
  provide_storage();
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    for (std::uint32_t m = lp.initial_begin; m < lp.initial_end; ++m)
      grant(lp.members[m], static_cast<std::uint32_t>(l));
  }
}

Engine::~Engine() {
  if (net_) net_->detach(channel_);
}

void Engine::grant(std::uint32_t task, std::uint32_t location) {
  if (has_fibers_ && fibers_[task]) {
    fiber_grant(task, location);
    return;
  }
  // acq_rel: pairs with the other grants of this instance, so that whoever fires it sees the
  // phase updates made by every granting thread.
  if (missing(tasks_[task]).fetch_sub(1, std::memory_order_acq_rel) == 1) ready(task);
}

namespace {
// Successor hand-off: while a worker releases the locations of a dataflow instance whose body
// has returned (`tl_engine` set only then), the first instance this makes ready is kept in
// `tl_next` and run next on this worker, without a trip through the deques (no push, pop or
// wake-up). The others are pushed, for thieves. Not during a body: a fiber that releases early
// still occupies its worker, and the successor must be free to run elsewhere at once.
// initial-exec: libordo is linked, never dlopen'ed, so its TLS sits in the static block and
// each access is one %fs-relative load instead of a __tls_get_addr call (several per task).
__attribute__((tls_model("initial-exec"))) thread_local Engine* tl_engine = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local unsigned tl_worker = 0;
__attribute__((tls_model("initial-exec"))) thread_local std::int64_t tl_next = -1;
}  // namespace

void Engine::ready(std::uint32_t task) {
  TaskState& ts = tasks_[task];
  // No grant for the next instance can arrive before this one releases something (header).
  missing(ts).store(ts.requests, std::memory_order_relaxed);
  // acquire: pairs with the release store in raise_limit.
  if (ts.iteration < limit_.load(std::memory_order_acquire)) {
    if (net_) inflight_.fetch_add(1, std::memory_order_relaxed);
    const int node = node_of(task);
    if (tl_engine == this && tl_next < 0 &&
        (node < 0 || !pool_->numa_mode() || static_cast<unsigned>(node) == pool_->node_of(tl_worker))) {
      tl_next = task;
      return;
    }
    pool_->push(task, node);
    return;
  }
  std::lock_guard lock(hold_mu_);
  if (ts.iteration < limit_.load(std::memory_order_relaxed)) {
    if (net_) inflight_.fetch_add(1, std::memory_order_relaxed);
    pool_->push(task, node_of(task));
  } else {
    held_.push_back(task);
  }
}

void Engine::raise_limit(std::uint64_t limit) {
  // Every instance below the old limit has completed (run() waits for that), so no range item
  // runs now and every access-free task is at the old limit.
  if (!free_runs_.empty() && limit > free_to_) {
    free_from_ = free_to_;
    free_to_ = limit;
    for (const auto& [begin, end] : free_runs_) pool_->push(range_item(begin, end));
  }
  std::vector<std::uint32_t> go;
  {
    std::lock_guard lock(hold_mu_);
    limit_.store(limit, std::memory_order_release);  // pairs with the acquire in ready()
    auto keep = std::partition(held_.begin(), held_.end(),
                               [&](std::uint32_t t) { return tasks_[t].iteration >= limit; });
    go.assign(keep, held_.end());
    held_.erase(keep, held_.end());
  }
  if (net_) inflight_.fetch_add(static_cast<std::int64_t>(go.size()), std::memory_order_relaxed);
  for (std::uint32_t t : go) pool_->push(t, node_of(t));
}

void Engine::place(sched::Pool& pool) {
  if (placed_for_ == &pool) return;
  placed_for_ = &pool;
  home_ = graph_.homes(pool.nodes());
  task_node_.clear();  // node_of(): no hint
  if (!pool.numa_mode()) return;
  task_node_.assign(plan_.tasks, -1);
  const auto& locs = graph_.locations();
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    if (graph_.has_storage(l))  // untouched yet: its pages will come from the home node
      pool.bind_memory(graph_.data(l), graph_.bytes_of(l), home_[l]);
  for (const Family& f : graph_.families()) {
    if (f.offsets == Graph::kNoAccesses) continue;
    for (std::uint32_t i = 0; i < f.count; ++i) {
      const auto acc = graph_.member_accesses(f, i);
      auto w = std::find_if(acc.begin(), acc.end(), [](const AccessDesc& a) { return a.mode == Mode::write; });
      if (w == acc.end()) w = acc.begin();
      if (w != acc.end()) task_node_[f.first + i] = static_cast<int>(home_[w->location]);
    }
  }
}

void Engine::release(std::uint32_t location, std::uint32_t releaser, std::uint64_t iteration,
                     unsigned worker) {
  if (net_ && dist_.home[location] != rank_) {
    proxy_release(location);
    return;
  }
  LockState& ls = locks_[location];
  // acq_rel: the last holder must see every other holder's work before it advances.
  if (ls.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const LockPlan& lp = plan_.locks[location];
  std::uint32_t next = ls.phase + 1;
  if (next == lp.phases.size()) next = 0;
  ls.phase = next;
  grant_phase(location, next, releaser, iteration, worker);
}

void Engine::grant_traced(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                          std::uint64_t iteration, unsigned worker) {
  // Traced before the grant: once granted, the member may fire and move its iteration on.
  // A release that came from another rank (kNoTask) has no local releaser: the event says so,
  // and goes to the buffer of the thread handling the message.
  if (trace_) [[unlikely]] {
    if (releaser == kNoTask)
      trace_->grant(trace_buffer(), member, location, granted_iteration(member, location),
                    trace::kNone, 0);
    else
      trace_->grant(worker, member, location, granted_iteration(member, location), releaser,
                    iteration);
  }
  grant(member, location);
}

void Engine::grant_phase(std::uint32_t location, std::uint32_t phase, std::uint32_t releaser,
                         std::uint64_t iteration, unsigned worker) {
  if (net_) {
    enter_phase(location, phase, releaser, iteration, worker);
    return;
  }
  LockState& ls = locks_[location];
  const Phase& ph = plan_.locks[location].phases[phase];
  ls.remaining.store(ph.end - ph.begin, std::memory_order_relaxed);  // published by grant()
  for (std::uint32_t m = ph.begin; m < ph.end; ++m)
    grant_traced(plan_.locks[location].members[m], location, releaser, iteration, worker);
}

void Engine::execute(sched::Item item, unsigned worker) {
  tl_worker = worker;
  for (;;) {
    execute_one(item, worker);
    // A handed-off successor means this instance was not the run's last, so the engine is
    // still alive; otherwise nothing below touches it.
    if (tl_next < 0) break;
    item = static_cast<sched::Item>(tl_next);
    tl_next = -1;
  }
}

void Engine::execute_one(sched::Item item, unsigned worker) {
  if (item & kRange) {
    run_range(static_cast<std::uint32_t>((item >> 31) & 0x7fffffff),
              static_cast<std::uint32_t>(item & 0x7fffffff), worker);
    return;
  }
  const auto task = static_cast<std::uint32_t>(item);
  if (has_fibers_ && fibers_[task]) {
    run_fiber(task, (item & kResume) != 0, worker);
    return;
  }
  TaskState& ts = tasks_[task];
  const std::uint64_t k = ts.iteration;
  if (!aborted_.load(std::memory_order_relaxed)) {
    if (trace_) [[unlikely]] trace_->task_begin(worker, task, k);
    const Family& f = *ts.family;
    const std::uint32_t index = task - f.first;
    try {
      f.body(Instance{&graph_, task, k, worker, nullptr, index, graph_.member_accesses(f, index)});
    } catch (...) {
      record_error(std::current_exception());
    }
    if (trace_) [[unlikely]] trace_->task_end(worker, task, k);
  }
  ts.iteration = k + 1;
  const auto locks = plan_.task_locks_of(task);
  tl_engine = this;
  if (locks.empty())
    ready(task);
  else
    for (std::uint32_t l : locks) release(l, task, k, worker);
  tl_engine = nullptr;
  instance_done();
}

void Engine::run_range(std::uint32_t begin, std::uint32_t end, unsigned worker) {
  const std::uint64_t from = free_from_, to = free_to_;  // read before instance_done (header)
  // Split off the upper half for thieves while the range is large: the first pushes are the
  // largest pieces, which is what a thief takes first.
  if (pool_->size() > 1) {
    while (end - begin > kRangeGrain) {
      const std::uint32_t mid = begin + (end - begin) / 2;
      pool_->push(range_item(mid, end));
      end = mid;
    }
  }
  auto fam = graph_.families().begin() + graph_.family_of(begin);
  for (std::uint32_t t = begin; t < end; ++t) {
    while (t >= fam->first + fam->count) ++fam;
    const Family& f = *fam;
    const auto accesses = graph_.member_accesses(f, t - f.first);  // read-only locations only
    for (std::uint64_t k = from; k < to; ++k) {
      if (aborted_.load(std::memory_order_relaxed)) break;
      if (trace_) [[unlikely]] trace_->task_begin(worker, t, k);
      try {
        f.body(Instance{&graph_, t, k, worker, nullptr, t - f.first, accesses});
      } catch (...) {
        record_error(std::current_exception());
      }
      if (trace_) [[unlikely]] trace_->task_end(worker, t, k);
    }
  }
  instance_done(std::uint64_t{end - begin} * (to - from));
}

void Engine::instance_done(std::uint64_t count) {
  if (net_) {
    // Distributed: the caller may also wait for inflight_ to drain (peer failure), so both
    // counts change under done_mu_, and nothing touches the engine after the unlock.
    std::lock_guard lock(done_mu_);
    // acq_rel: the final increment makes every body's writes visible to the caller.
    const bool last = completed_.fetch_add(count, std::memory_order_acq_rel) + count ==
                      target_.load(std::memory_order_relaxed);
    const bool drained = inflight_.fetch_sub(1, std::memory_order_relaxed) == 1;
    if (last) done_ = true;
    if (last || (drained && failed_)) done_cv_.notify_all();
    return;
  }
  // target_ is read before the increment: once every increment is in, the caller may free the
  // engine, so only the last incrementer may touch it afterwards (and only under done_mu_).
  const std::uint64_t target = target_.load(std::memory_order_relaxed);
  // acq_rel: the final increment makes every body's writes visible to the caller.
  if (completed_.fetch_add(count, std::memory_order_acq_rel) + count == target) {
    std::lock_guard lock(done_mu_);
    done_ = true;
    done_cv_.notify_all();  // under the lock: the caller may free us once it can take it
  }
}

void Engine::record_error(std::exception_ptr error) {
  bool first = false;
  {
    std::lock_guard lock(error_mu_);
    if (!error_) {
      error_ = error;
      first = true;
    }
  }
  aborted_.store(true, std::memory_order_relaxed);
  if (first && net_) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    abort_everywhere("rank " + std::to_string(rank_) + " failed: " + what);
  }
}

void Engine::wait_step_done() {
  std::unique_lock lock(done_mu_);
  done_cv_.wait(lock, [this] { return done_ || failed_; });
}

std::uint64_t Engine::run(sched::Pool& pool, std::uint64_t iterations,
                          const std::function<bool(std::uint64_t)>& until,
                          std::uint64_t check_every, sched::StackPool* stacks) {
  if (error_) {  // e.g. the ranks did not build the same graph
    broken_ = true;
    std::rethrow_exception(error_);
  }
  const std::uint64_t ntasks = local_tasks_;
  const std::uint64_t start = done_iterations_;
  const std::uint64_t end = start + iterations;
  if (check_every == 0) check_every = 1;
  pool_ = &pool;
  place(pool);
  // Locations shared with their home on this host: this run's tasks use the home's buffer.
  // Only those views change: the transport's thread may meanwhile copy a GRANT's bytes into
  // another location's replica (reading data()), never into a shared one (no bytes).
  struct Views {
    Graph& graph;
    const std::vector<std::byte*>& shared;
    void set(bool on) {
      for (std::uint32_t l = 0; l < shared.size(); ++l)
        if (shared[l] != nullptr) on ? graph.set_view(l, shared[l]) : graph.reset_view(l);
    }
    ~Views() { set(false); }
  } views{graph_, shared_view_};
  views.set(true);
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
    wait_step_done();
    if (net_) {
      if (failed_) break;  // a peer is gone: nothing more will arrive
      quiesce();
      if (failed_) break;
    }
    done_iterations_ = stop;
    if (aborted_.load(std::memory_order_relaxed)) break;
    if (until) {
      bool stop_here = until(done_iterations_);
      if (net_) stop_here = vote(stop_here);
      if (stop_here) break;
    }
  }
  if (failed_) {
    // The live peers may still send (an early grant's deferred GRANT answers a RELEASE, with
    // no quiescence to wait for): from here on their messages are dropped, so none makes an
    // instance ready on the pool this run is about to leave. on_message holds trace_mu_ while
    // it handles one, so none is half-way through either.
    {
      std::lock_guard lock(trace_mu_);
      stopped_ = true;
    }
    // Nor does an early GRANT's `sent` act any more (the live peers' may still come).
    sent_open_.store(false);
    while (sent_running_.load() != 0) std::this_thread::yield();
    // Peer failure: instances still queued drain quickly (bodies are skipped once aborted).
    std::unique_lock lock(done_mu_);
    done_cv_.wait(lock, [this] { return inflight_.load(std::memory_order_relaxed) == 0; });
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
  FiberTask& ft = *fibers_[task];
  if (!resume) {
    const Family& f = *ts.family;
    const std::uint32_t index = task - f.first;
    ft.instance = Instance{&graph_, task, ts.iteration, worker, this, index,
                           graph_.member_accesses(f, index)};
    std::fill(ft.holds.begin(), ft.holds.end(), Hold::requested);
    if (trace_) [[unlikely]] trace_->task_begin(worker, task, ts.iteration);
    ft.fiber.start(*stacks_, &Engine::fiber_main, &ft, f.name.c_str());
  }
  for (;;) {
    ft.instance.worker = worker;
    if (ft.fiber.resume()) break;
    if (park(ft)) return;  // the grant will push the resume item
  }
  // The body has returned and every handle is released (fiber_main).
  if (trace_) [[unlikely]] trace_->task_end(worker, task, ft.instance.iteration);
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

std::uint64_t Engine::granted_iteration(std::uint32_t task, std::uint32_t location) const {
  const TaskState& ts = tasks_[task];
  // A dataflow task's next instance is ts.iteration: it cannot be granted before its current
  // instance has released, after moving the iteration on (header). A fiber task can be granted
  // while its instance still runs (it released early) and moves its iteration on only when
  // the body ends, so count this handle's grants instead: the grant for iteration k is the
  // k+1-th. Relaxed: only this thread grants the handle now (the lock's phase is ours).
  const FiberTask* ft = fiber_of(task);
  if (!ft) return ts.iteration;
  const auto locks = plan_.task_locks_of(task);
  const auto h = static_cast<std::size_t>(
      std::lower_bound(locks.begin(), locks.end(), location) - locks.begin());
  return ft->grants[h].load(std::memory_order_relaxed) >> 1;
}

void Engine::fiber_grant(std::uint32_t task, std::uint32_t location) {
  FiberTask& ft = *fibers_[task];
  const auto locks = plan_.task_locks_of(task);
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
  const std::uint32_t location = plan_.task_locks_of(ft.instance.task)[static_cast<std::size_t>(h)];
  if (trace_) [[unlikely]]
    trace_->fiber_suspend(ft.instance.worker, ft.instance.task, location, ft.instance.iteration);
  sched::Fiber::suspend();  // park() or fiber_grant() resumes us once the grant is in
  if (trace_) [[unlikely]]  // possibly on another worker: run_fiber updated instance.worker
    trace_->fiber_resume(ft.instance.worker, ft.instance.task, location, ft.instance.iteration);
}

void Engine::fiber_main(void* arg) noexcept {
  FiberTask& ft = *static_cast<FiberTask*>(arg);
  Engine& e = *ft.engine;
  if (!e.aborted_.load(std::memory_order_relaxed)) {
    try {
      e.tasks_[ft.instance.task].family->body(ft.instance);
    } catch (...) {
      e.record_error(std::current_exception());
    }
  }
  // Handles the body left requested or held: acquire (a release needs the grant), release.
  for (std::uint32_t a = 0; a < ft.holds.size(); ++a) {
    if (ft.holds[a] == Hold::released) continue;
    if (ft.holds[a] == Hold::requested) e.wait_grant(ft, a);
    ft.holds[a] = Hold::released;
    const std::int32_t h = ft.handle_of[a];
    if (h >= 0)
      e.release(e.plan_.task_locks_of(ft.instance.task)[static_cast<std::size_t>(h)],
                ft.instance.task, ft.instance.iteration, ft.instance.worker);
  }
}

Engine::Hold Engine::hold(const Instance& inst, std::uint32_t access) const {
  return fibers_[inst.task]->holds[access];
}

bool Engine::on_own_fiber(const Instance& inst) const {
  const FiberTask* ft = fiber_of(inst.task);
  return ft != nullptr && sched::Fiber::current() == &ft->fiber;
}

void Engine::fiber_acquire(const Instance& inst, std::uint32_t access) {
  FiberTask& ft = *fibers_[inst.task];
  wait_grant(ft, access);
  ft.holds[access] = Hold::held;
}

void Engine::fiber_release(const Instance& inst, std::uint32_t access) {
  FiberTask& ft = *fibers_[inst.task];
  ft.holds[access] = Hold::released;
  const std::int32_t h = ft.handle_of[access];
  if (h >= 0)
    release(plan_.task_locks_of(inst.task)[static_cast<std::size_t>(h)], inst.task, inst.iteration,
            ft.instance.worker);
}

}  // namespace ordo::rt
