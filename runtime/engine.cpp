// Over 600 lines: the phase machine's hot path (grant, ready, release, execute), the iteration
// gate and run loop, construction and the one failure path all work on the engine's private
// state under the threading contract in engine.hpp; the protocols across ranks are parts of
// their own, the failure relay too (failure_relay.hpp). The next cut, where it grows:
// construction into a file of its own, as engine_storage.cpp is.
#include "runtime/engine.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "runtime/assert.hpp"

namespace ordo::rt {

Engine::Distributed::Distributed(Engine& engine, Net& net, std::uint32_t channel)
    : dist(Distribution::compute(engine.graph_, engine.plan_, net.rank(), net.size())),
      control(net, channel, dist.rank, dist.ranks,
              // A rank that left will never answer: lost to this graph, and told to every
              // rank, which may not have heard of it (its leave goes along the tree).
              [&engine](unsigned rank, const std::string& what) {
                Failure f{Failure::Kind::peer_lost, rank, what, nullptr};
                f.seen_here = true;
                engine.fail(std::move(f));
              }),
      relay(net, channel, dist.rank, dist.ranks, control.tree_neighbours()),
      shared(engine.graph_, dist),
      remote(static_cast<RemoteLocks::Host&>(engine), engine.graph_, engine.plan_, dist, net,
             channel, control, relay, shared) {}

namespace {

// `plan`, checked before anything is allocated for its tasks.
Plan runnable(Plan plan) {
  if (!Engine::can_run_tasks(plan.tasks))
    throw std::length_error("a graph of " + std::to_string(plan.tasks) + " tasks is more than " +
                            std::to_string(Engine::kMaxTasks) + ", the most an engine runs");
  return plan;
}

}  // namespace

Engine::Engine(Graph& graph, Plan plan, Net* net, std::uint32_t channel, bool share,
               const std::function<bool(Engine&)>& load)
    : graph_(graph),
      plan_(runnable(std::move(plan))),
      locks_(new LockState[plan_.locks.size()]),
      // Default-initialised (TaskState is trivial): see TaskState.
      tasks_(new TaskState[plan_.tasks]),
      net_(net),
      channel_(channel) {
  local_tasks_ = plan_.tasks;
  const auto& families = graph_.families();
  for (const Family& f : families)
    if (f.fiber && !fibers_)
      fibers_ = std::make_unique<FiberDriver>(static_cast<FiberDriver::Host&>(*this), *this, graph_,
                                              plan_);
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
      const auto n = static_cast<std::uint32_t>(plan_.task_locks_of(t).size());
      if (!net_ && !fam.fiber && n == 0) {
        add_free(t, t + 1);
        continue;
      }
      TaskState& ts = tasks_[t];
      ts.missing = n;
      ts.requests = n;
      ts.iteration = 0;
      ts.family = &fam;
      if (fam.fiber) fibers_->add(t, fam, i);
      // Fiber tasks start without waiting for grants (fiber_driver.hpp).
      if (!net_ && (n == 0 || fam.fiber)) ready(t);
    }
  }
  if (net_) {
    dist_ = std::make_unique<Distributed>(*this, *net_, channel_);
    local_tasks_ = dist_->dist.local_tasks;
    // The job failed before this graph: the first run reports that failure, this rank's own
    // as its own, a peer's as that peer's, and nothing is sent (every rank knows of it).
    if (auto earlier = net_->job_failure()) {
      Failure f{earlier->first == dist_->dist.rank ? Failure::Kind::own : Failure::Kind::peer_lost,
                earlier->first, earlier->second, nullptr};
      f.earlier = true;
      fail(std::move(f));
      return;
    }
    dist_->remote.attach();
    start_distributed(share, load);
    return;
  }
  provide_storage();
  if (load && storage_error_.empty() && !load(*this)) {
    broken_ = true;
    return;
  }
  // limit_ is 0: every instance this makes ready is held until the first run raises it.
  grant_initial();
}

void Engine::grant_initial() {
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    locks_[l].phase = lp.initial_phase;
    locks_[l].remaining.store(lp.initial_end - lp.initial_begin, std::memory_order_relaxed);
  }
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    for (std::uint32_t m = lp.initial_begin; m < lp.initial_end; ++m)
      grant(lp.members[m], static_cast<std::uint32_t>(l));
  }
}

void Engine::start_distributed(bool share, const std::function<bool(Engine&)>& load) {
  Distributed& d = *dist_;
  // The graph's peers, in one batch before any protocol message goes to them.
  net_->will_talk_to(d.dist.neighbours);
  if (auto difference = graph_difference(d.control, graph_))
    fail({Failure::Kind::mismatch, d.dist.rank, *difference, nullptr});
  if (has_failed()) return;
  provide_storage();
  // A problem that does not fit: run() refuses it, on every rank alike.
  if (has_failed() || !storage_error_.empty()) return;
  if (auto error = d.shared.setup(d.control, *net_, plan_, share))
    fail({Failure::Kind::protocol, error->rank, error->what, nullptr});
  if (has_failed()) return;
  release_shared_replicas();
  // After shared memory's set-up (a home fills the buffer its peers map), before any GRANT
  // copies a home's bytes. `load` agrees across ranks itself (gather), so every rank stops
  // here or none.
  if (load && !load(*this)) {
    broken_ = true;
    return;
  }
  for (std::uint32_t t = 0; t < plan_.tasks; ++t)
    if (d.dist.task_rank[t] == d.dist.rank &&
        (tasks_[t].requests == 0 || (fibers_ && fibers_->drives(t))))
      ready(t);
  // Only home locations: a proxy's state is set by the GRANT it receives (possibly already).
  for (std::uint32_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked || !d.dist.is_home(l)) continue;
    const PhaseRanks& pr = d.dist.initial[l];
    locks_[l].phase = lp.initial_phase;
    locks_[l].remaining.store(static_cast<std::uint32_t>(pr.local.size() + pr.remote.size()),
                              std::memory_order_relaxed);
    for (std::uint32_t r : pr.remote) d.remote.send_initial_grant(l, lp.initial_phase, r);
    for (std::uint32_t t : pr.local) grant(t, l);
  }
}

Engine::~Engine() {
  // No callback of the channel runs after this (the parts it uses go with the engine). A
  // receive the transport could not end may still write into its location: that memory is
  // never given back.
  if (net_)
    for (std::span<std::byte> abandoned : net_->detach(channel_)) graph_.keep_forever(abandoned);
}

void Engine::set_trace(trace::Recorder* recorder) {
  if (!dist_) {
    trace_ = recorder;
    return;
  }
  auto paused = dist_->remote.pause();
  trace_ = recorder;
}

void Engine::grant(std::uint32_t task, std::uint32_t location) {
  if (fibers_ && fibers_->drives(task)) {
    fibers_->grant(task, location);
    return;
  }
  // acq_rel: pairs with the other grants of this instance, so that whoever fires it sees the
  // phase updates made by every granting thread.
  const std::uint32_t missed = missing(tasks_[task]).fetch_sub(1, std::memory_order_acq_rel);
  ORDO_ASSERT(missed != 0);  // more grants than the instance has requests
  if (missed == 1) ready(task);
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
    if (dist_) {
      // A run stopped by a failure starts nothing new: it returns once what is queued or
      // running has ended (a chain of local instances would otherwise run to the gate).
      if (failed_.load(std::memory_order_relaxed)) {
        std::lock_guard lock(hold_mu_);
        held_.push_back(task);
        return;
      }
      inflight_.fetch_add(1, std::memory_order_relaxed);
    }
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
  if (ts.iteration < limit_.load(std::memory_order_relaxed) &&
      !(dist_ && failed_.load(std::memory_order_relaxed))) {
    if (dist_) inflight_.fetch_add(1, std::memory_order_relaxed);
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
  ORDO_ASSERT(limit >= limit_.load(std::memory_order_relaxed));  // the gate only rises
  if (lanes_on_) {
    // Nothing is held on lanes: every lane is at the old limit, and its item runs on to this.
    limit_.store(limit, std::memory_order_release);  // pairs with the acquire in run_lane
    for (unsigned l = 0; l < lanes_->size(); ++l)
      if (!lanes_->is_empty(l)) pool_->push_to(l, kLane | l);  // lane l on worker l
    return;
  }
  std::vector<std::uint32_t> go;
  release_held(limit, go);
}

void Engine::release_held(std::uint64_t limit, std::vector<std::uint32_t>& go) {
  {
    std::lock_guard lock(hold_mu_);
    limit_.store(limit, std::memory_order_release);  // pairs with the acquire in ready()
    auto keep = std::partition(held_.begin(), held_.end(),
                               [&](std::uint32_t t) { return tasks_[t].iteration >= limit; });
    go.assign(keep, held_.end());
    held_.erase(keep, held_.end());
  }
  if (dist_) inflight_.fetch_add(static_cast<std::int64_t>(go.size()), std::memory_order_relaxed);
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
  if (!dist_) {  // one process: a dataflow instance's releases, for one location
    release_all({&location, 1}, releaser, iteration, worker);
    return;
  }
  if (!dist_->dist.is_home(location)) {
    dist_->remote.proxy_release(location);
    return;
  }
  if (const auto next = complete_phase(location))
    dist_->remote.enter_phase(location, *next, locks_[location].remaining, releaser, iteration,
                              worker);
}

void Engine::prefetch_release(std::uint32_t task, std::span<const std::uint32_t> locks) const {
  __builtin_prefetch(&tasks_[task], 1);
  for (std::uint32_t l : locks) __builtin_prefetch(&locks_[l], 1);
}

void Engine::release_all(std::span<const std::uint32_t> locks, std::uint32_t releaser,
                         std::uint64_t iteration, unsigned worker) {
  Grants grants;
  for (std::uint32_t l : locks) {
    const auto next = complete_phase(l);
    if (!next) continue;
    const LockPlan& lp = plan_.locks[l];
    const Phase& ph = lp.phases[*next];
    // Published by the grants.
    locks_[l].remaining.store(ph.end - ph.begin, std::memory_order_relaxed);
    for (std::uint32_t m = ph.begin; m < ph.end; ++m) {
      const std::uint32_t member = lp.members[m];
      trace_grant(member, l, releaser, iteration, worker);
      if (fibers_ && fibers_->drives(member)) {
        fibers_->grant(member, l);
        continue;
      }
      // Its line arrives while the other locations are released.
      __builtin_prefetch(&tasks_[member], 1);
      if (!grants.add(member)) {
        grant_all(grants);
        grants.add(member);
      }
    }
  }
  grant_all(grants);
}

void Engine::grant_all(Grants& grants) {
  for (std::uint32_t i = 0; i < grants.size; ++i) {
    const std::uint32_t task = grants.tasks[i], count = grants.counts[i];
    // acq_rel: as in grant(), for `count` grants at once.
    const std::uint32_t missed = missing(tasks_[task]).fetch_sub(count, std::memory_order_acq_rel);
    ORDO_ASSERT(missed >= count);  // more grants than the instance has requests
    if (missed == count) ready(task);
  }
  grants.size = 0;
}

unsigned Engine::trace_buffer() const {
  const int w = sched::Pool::current_worker();
  return w >= 0 ? static_cast<unsigned>(w) : trace_->control();
}

void Engine::record_grant(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                          std::uint64_t iteration, unsigned worker) {
  // Before the grant: once granted, the member may fire and move its iteration on. A release
  // that came from another rank (kNoTask) has no local releaser: the event says so, and goes to
  // the buffer of the thread handling the message.
  if (releaser == kNoTask)
    trace_->grant(trace_buffer(), member, location, granted_iteration(member, location),
                  trace::kNone, 0);
  else
    trace_->grant(worker, member, location, granted_iteration(member, location), releaser,
                  iteration);
}

void Engine::grant_traced(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                          std::uint64_t iteration, unsigned worker) {
  trace_grant(member, location, releaser, iteration, worker);
  grant(member, location);
}

void Engine::execute(sched::Item item, unsigned worker) {
  tl_worker = worker;
  std::uint64_t uncounted = 0;
  for (;;) {
    execute_one(item, worker, uncounted);
    // A handed-off successor means this instance was not the run's last, so the engine is
    // still alive; otherwise nothing below touches it.
    if (tl_next < 0) break;
    item = static_cast<sched::Item>(tl_next);
    tl_next = -1;
  }
}

void Engine::execute_one(sched::Item item, unsigned worker, std::uint64_t& uncounted) {
  // kRange first: a range item's begin (bits 31..61) may have kLane's bit set.
  if (item & kRange) {
    run_range(static_cast<std::uint32_t>((item >> 31) & 0x7fffffff),
              static_cast<std::uint32_t>(item & 0x7fffffff), worker);
    return;
  }
  if (item & kLane) {
    run_lane(static_cast<unsigned>(item & ~kLane), worker);
    return;
  }
  const auto task = static_cast<std::uint32_t>(item);
  if (fibers_ && fibers_->drives(task)) {
    fibers_->run(task, (item & kResume) != 0, worker);
    return;
  }
  TaskState& ts = tasks_[task];
  const std::uint64_t k = ts.iteration;
  {
    const Family& f = *ts.family;
    const std::uint32_t index = task - f.first;
    run_body(f,
             Instance{&graph_, task, k, worker, nullptr, index, graph_.member_accesses(f, index)});
  }
  // Before the releases: a successor the gate lets through is then handed off by them.
  if (decision_) [[unlikely]]
    maybe_decide(task, k);
  const auto locks = plan_.task_locks_of(task);
  // Before the store below: the task's own state line may sit with another worker too.
  if (!dist_ && !locks.empty()) prefetch_release(task, locks);
  ts.iteration = k + 1;
  tl_engine = this;
  if (locks.empty())
    ready(task);
  else if (!dist_)
    release_all(locks, task, k, worker);
  else
    for (std::uint32_t l : locks) release(l, task, k, worker);
  tl_engine = nullptr;
  // With a successor handed off to this worker, the run cannot end before that successor
  // completes: count this instance with the chain's last one, so that a chain pays one
  // read-modify-write of the counter every worker shares instead of one per instance. (Across
  // ranks instance_done also counts in-flight items one by one: no deferral there.)
  if (tl_next >= 0 && !net_) {
    ++uncounted;
    return;
  }
  instance_done(1 + uncounted);
  uncounted = 0;
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
    for (std::uint64_t k = from; k < to; ++k)
      run_body(f, Instance{&graph_, t, k, worker, nullptr, t - f.first, accesses});
  }
  instance_done(std::uint64_t{end - begin} * (to - from));
}

void Engine::fiber_done(std::uint32_t task, std::uint64_t iteration) {
  tasks_[task].iteration = iteration + 1;
  ready(task);
  instance_done();
}

std::uint64_t Engine::granted_iteration(std::uint32_t task, std::uint32_t location) const {
  // A dataflow task's next instance is ts.iteration: it cannot be granted before its current
  // instance has released, after moving the iteration on (header). A fiber task's driver counts
  // its grants per handle.
  if (fibers_ && fibers_->drives(task)) return fibers_->granted_iteration(task, location);
  return tasks_[task].iteration;
}

void Engine::instance_done(std::uint64_t count) {
  if (dist_) {
    // Distributed: the caller may also wait for inflight_ to drain (peer failure), so both
    // counts change under done_mu_, and nothing touches the engine after the unlock.
    std::lock_guard lock(done_mu_);
    // acq_rel: the final increment makes every body's writes visible to the caller.
    const std::uint64_t now = completed_.fetch_add(count, std::memory_order_acq_rel) + count;
    ORDO_ASSERT(now <= target_.load(std::memory_order_relaxed));  // no instance beyond the gate
    const bool last = now == target_.load(std::memory_order_relaxed);
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

void Engine::fail_body() {
  std::string what = "unknown exception";
  try {
    throw;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  fail({Failure::Kind::body, rank(), what, std::current_exception()});
}

void Engine::fail(Failure f) {
  const std::string tell = FailureRelay::word(f, rank());
  // Across ranks every failure but a mismatch stops (failure.hpp: draining needs every rank to
  // learn of it within the same step, which a message cannot promise). In one process every
  // failure drains: no peer can leave, and run() counts no instance in flight to wait for.
  const bool stops = dist_ && (f.stops_run() || f.kind == Failure::Kind::body);
  bool first;
  {
    std::lock_guard lock(error_mu_);
    first = !failure_;
    if (first) failure_ = f;
  }
  aborted_.store(true, std::memory_order_relaxed);
  if (dist_ && !f.earlier) dist_->relay.pass_on(f, tell, first);
  // Every rank that stops tells its net, also one that heard of the failure in a message: the
  // nets then all take leave without the close barrier, which waits for every rank and would
  // wait for ever for a dead one (a survivor that learned of the death through a relayed ABORT
  // once hung there, after its run had ended with the dead rank's PeerFailure).
  if (dist_ && stops) net_->job_failed(f.rank, f.what);
  if (stops) stop_run();
}

// failed_ is set before the control plane and the fiber driver stop, so that whoever returns
// from a wait because of them sees it.
void Engine::stop_run() {
  {
    std::lock_guard lock(done_mu_);
    failed_.store(true, std::memory_order_relaxed);
    done_cv_.notify_all();
  }
  if (dist_) dist_->control.stop();
  if (fibers_) fibers_->stop();
}

bool Engine::has_failed() const {
  std::lock_guard lock(error_mu_);
  return failure_.has_value();
}

void Engine::rethrow_failure() {
  broken_ = true;
  Failure f;
  {
    std::lock_guard lock(error_mu_);
    f = *failure_;
  }
  if (f.kind == Failure::Kind::body) std::rethrow_exception(f.error);
  throw RunError(f.kind, f.rank, f.what);
}

void Engine::wait_step_done() {
  std::unique_lock lock(done_mu_);
  done_cv_.wait(lock, [this] { return done_ || failed_; });
}

bool Engine::quiesce_step() {
  if (failed_) return false;  // a peer is gone: nothing more will arrive
  const auto quiet = dist_->control.quiesce(dist_->remote.traffic());
  // Found by every rank in the same wave: each stops, naming itself (no rank can tell which
  // peer sent the message that no rank sent).
  if (quiet == ControlPlane::Quiescence::overcounted)
    fail({Failure::Kind::protocol, rank(),
          "the ranks handled more protocol messages than they sent: a message was forged or "
          "delivered twice, or the ranks' ordo versions differ",
          nullptr});
  return quiet == ControlPlane::Quiescence::quiet && !failed_;
}

std::uint64_t Engine::run(sched::Pool& pool, std::uint64_t iterations,
                          const std::function<bool(std::uint64_t)>& given_until,
                          std::uint64_t check_every, sched::StackPool* stacks, const Pause* pause,
                          const Decision* decision) {
  // A decision the dataflow cannot take is tested as `until` is, on this thread.
  std::function<bool(std::uint64_t)> tested;
  if (decision && !decides_in_dataflow()) tested = decision->test;
  const std::function<bool(std::uint64_t)>& until = tested ? tested : given_until;
  if (!decides_in_dataflow()) decision = nullptr;
  // Bad input, the same refusal on every rank (engine_storage.cpp).
  if (!storage_error_.empty()) throw std::runtime_error(storage_error_);
  if (has_failed()) rethrow_failure();  // e.g. the ranks did not build the same graph
  const std::uint64_t ntasks = local_tasks_;
  const std::uint64_t start = done_iterations_;
  const std::uint64_t end = start + iterations;
  if (check_every == 0) check_every = 1;
  pool_ = &pool;
  place(pool);
  // Locations shared with their home on this host: this run's tasks use the home's buffer.
  std::optional<SharedPeers::RunViews> views;
  if (dist_) views.emplace(graph_, dist_->shared);
  if (fibers_) {
    if (stacks == nullptr) {
      if (!own_stacks_) own_stacks_ = std::make_unique<sched::StackPool>();
      stacks = own_stacks_.get();
    }
    fibers_->set_stacks(stacks);  // no fiber is active between runs: each run may bring its own
  }
  choose_protocol(pool);
  pool.attach(*this);
  if (pause && pause->every == 0) pause = nullptr;
  const std::uint64_t first = graph_.first_iteration();
  std::uint64_t next_check = until ? std::min(start + check_every, end) : end;
  if (decision) {
    decision_ = decision;
    run_deciding(start, end, check_every, pause);
    decision_ = nullptr;
  }
  while (!decision && done_iterations_ < end) {
    std::uint64_t stop = next_check;
    if (pause) {
      const std::uint64_t next_pause = ((first + done_iterations_) / pause->every + 1) * pause->every;
      stop = std::min(stop, next_pause - first);
    }
    target_.store(ntasks * stop, std::memory_order_relaxed);
    {
      std::lock_guard lock(done_mu_);
      done_ = completed_.load(std::memory_order_acquire) == ntasks * stop;
    }
    raise_limit(stop);
    wait_step_done();
    if (dist_ && !quiesce_step()) break;
    done_iterations_ = stop;
    if (aborted_.load(std::memory_order_relaxed)) break;
    // The program's code between steps (a pause, the stop condition) fails as a body does: its
    // exception is this rank's failure, told to the other ranks, which would otherwise wait
    // for this one in the vote or the next step, and rethrown here as it was.
    bool stop_here = false;
    try {
      if (pause && (first + stop) % pause->every == 0 && !pause->at(first + stop)) break;
      if (until && stop == next_check) stop_here = until(done_iterations_);
    } catch (...) {
      fail_body();
      break;
    }
    if (until && stop == next_check) {
      if (dist_) stop_here = dist_->control.all(stop_here).value_or(true);  // stopped: stop
      if (stop_here) break;
      next_check = std::min(stop + check_every, end);
    }
  }
  if (failed_) {
    // The live peers may still send (an early grant's deferred GRANT answers a RELEASE, with
    // no quiescence to wait for): from here on their messages are dropped, and early GRANTs'
    // `sent` no longer act, so none makes an instance ready on the pool this run is about to
    // leave; none is half-way through either when stop() returns.
    dist_->remote.stop();
    // Instances still queued drain quickly (bodies are skipped once aborted), parked fibers
    // were woken (their acquires throw).
    std::unique_lock lock(done_mu_);
    done_cv_.wait(lock, [this] { return inflight_.load(std::memory_order_relaxed) == 0; });
  }
  pool.detach();
  pool_ = nullptr;
  if (has_failed()) rethrow_failure();
  return done_iterations_ - start;
}

std::optional<std::vector<std::string>> Engine::gather(const std::string& mine) {
  if (!dist_) return std::vector<std::string>{mine};
  auto theirs = dist_->control.exchange(std::as_bytes(std::span(mine.data(), mine.size())));
  if (!theirs) return std::nullopt;
  std::vector<std::string> all;
  all.reserve(theirs->size());
  for (const auto& bytes : *theirs)
    all.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  all[rank()] = mine;  // the exchange leaves this rank's own entry empty
  return all;
}

}  // namespace ordo::rt
