#include "engine.hpp"

#include <algorithm>

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
  }
  // Grant the initial phase of every lock. limit_ is 0, so every instance that becomes ready
  // is held until the first run raises the limit.
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    locks_[l].phase = lp.initial_phase;
    locks_[l].remaining.store(lp.initial_end - lp.initial_begin, std::memory_order_relaxed);
  }
  for (std::uint32_t t = 0; t < plan_.tasks.size(); ++t)
    if (tasks_[t].requests == 0) ready(t);
  for (std::size_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    for (std::uint32_t m = lp.initial_begin; m < lp.initial_end; ++m) grant(lp.members[m]);
  }
}

Engine::~Engine() = default;

void Engine::grant(std::uint32_t task) {
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
    pool_->push(task, node_of(task));
    return;
  }
  std::lock_guard lock(hold_mu_);
  if (ts.iteration < limit_.load(std::memory_order_relaxed))
    pool_->push(task, node_of(task));
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
  for (std::uint32_t t : go) pool_->push(t, node_of(t));
}

void Engine::place(sched::Pool& pool) {
  if (placed_for_ == &pool) return;
  placed_for_ = &pool;
  home_ = graph_.homes(pool.nodes());
  task_node_.assign(plan_.tasks.size(), -1);
  if (!pool.numa_mode()) return;
  const auto& locs = graph_.locations();
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    pool.bind_memory(graph_.data(l), locs[l].elem_size * locs[l].count, home_[l]);
  const auto& tasks = graph_.tasks();
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    const auto& acc = tasks[t].accesses;
    auto w = std::find_if(acc.begin(), acc.end(), [](const AccessDesc& a) { return a.mode == Mode::write; });
    if (w == acc.end()) w = acc.begin();
    if (w != acc.end()) task_node_[t] = static_cast<int>(home_[w->location]);
  }
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
  for (std::uint32_t m = ph.begin; m < ph.end; ++m) grant(lp.members[m]);
}

void Engine::execute(sched::Item item, unsigned worker) {
  const auto task = static_cast<std::uint32_t>(item);
  TaskState& ts = tasks_[task];
  const std::uint64_t k = ts.iteration;
  if (!aborted_.load(std::memory_order_relaxed)) {
    try {
      graph_.tasks()[task].body(Instance{&graph_, task, k, worker});
    } catch (...) {
      std::lock_guard lock(error_mu_);
      if (!error_) error_ = std::current_exception();
      aborted_.store(true, std::memory_order_relaxed);
    }
  }
  ts.iteration = k + 1;
  const auto& locks = plan_.tasks[task].locks;
  if (locks.empty())
    ready(task);
  else
    for (std::uint32_t l : locks) release(l);

  // target_ is read before the increment: once every increment is in, the caller may free the
  // engine, so only the last incrementer may touch it afterwards (and only under done_mu_).
  const std::uint64_t target = target_.load(std::memory_order_relaxed);
  // acq_rel: the final increment makes every body's writes visible to the caller.
  if (completed_.fetch_add(1, std::memory_order_acq_rel) + 1 == target) {
    std::lock_guard lock(done_mu_);
    done_ = true;
    done_cv_.notify_all();  // under the lock: the caller may free us once it can take it
  }
}

std::uint64_t Engine::run(sched::Pool& pool, std::uint64_t iterations,
                          const std::function<bool(std::uint64_t)>& until,
                          std::uint64_t check_every) {
  const std::uint64_t ntasks = plan_.tasks.size();
  const std::uint64_t start = done_iterations_;
  const std::uint64_t end = start + iterations;
  if (check_every == 0) check_every = 1;
  pool_ = &pool;
  place(pool);
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
