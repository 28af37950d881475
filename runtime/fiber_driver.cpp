// The fiber driver (protocol in fiber_driver.hpp).
#include "runtime/fiber_driver.hpp"

#include <algorithm>

#include "runtime/assert.hpp"
#include "runtime/engine.hpp"

namespace ordo::rt {

struct FiberDriver::Task {
  FiberDriver* driver = nullptr;
  const Family* family = nullptr;
  Instance instance{};          // the running instance; worker updated at each resume
  sched::Fiber fiber;
  std::uint32_t waiting = 0;    // handle the fiber suspended on (read by its worker)
  std::unique_ptr<std::atomic<std::uint64_t>[]> grants;  // per handle: count << 1 | parked
  std::vector<std::int32_t> handle_of;  // per access: handle index, -1 when not locked
  std::vector<Hold> holds;              // per access, of the running instance
};

FiberDriver::FiberDriver(Host& host, Engine& engine, const Graph& graph, const Plan& plan)
    : host_(host), engine_(engine), graph_(graph), plan_(plan), tasks_(plan.tasks) {}

FiberDriver::~FiberDriver() = default;

void FiberDriver::add(std::uint32_t task, const Family& family, std::uint32_t index) {
  const auto locks = plan_.task_locks_of(task);
  const auto n = static_cast<std::uint32_t>(locks.size());
  auto ft = std::make_unique<Task>();
  ft->driver = this;
  ft->family = &family;
  ft->grants.reset(new std::atomic<std::uint64_t>[n]);
  for (std::uint32_t h = 0; h < n; ++h) ft->grants[h].store(0, std::memory_order_relaxed);
  // Sorted by location (plan.cpp builds it so): grant() binary-searches it.
  ORDO_ASSERT(std::is_sorted(locks.begin(), locks.end()));
  const auto accesses = graph_.member_accesses(family, index);
  for (const AccessDesc& a : accesses) {
    auto it = std::lower_bound(locks.begin(), locks.end(), a.location);
    ft->handle_of.push_back(it != locks.end() && *it == a.location
                                ? static_cast<std::int32_t>(it - locks.begin())
                                : -1);
  }
  ft->holds.assign(accesses.size(), Hold::requested);
  tasks_[task] = std::move(ft);
}

void FiberDriver::run(std::uint32_t task, bool resume, unsigned worker) {
  Task& ft = *tasks_[task];
  if (!resume) {
    const Family& f = *ft.family;
    const std::uint32_t index = task - f.first;
    ft.instance = Instance{&graph_,  task,  host_.next_iteration(task),      worker,
                           &engine_, index, graph_.member_accesses(f, index)};
    std::fill(ft.holds.begin(), ft.holds.end(), Hold::requested);
    ft.fiber.start(*stacks_, &FiberDriver::fiber_main, &ft, f.name.c_str());
  }
  for (;;) {
    ft.instance.worker = worker;
    if (ft.fiber.resume()) break;
    if (park(ft)) return;  // the grant will push the resume item
  }
  // The body has returned and every handle is released (fiber_main).
  host_.fiber_done(task, ft.instance.iteration);
}

bool FiberDriver::park(Task& ft) {
  std::atomic<std::uint64_t>& g = ft.grants[ft.waiting];
  const std::uint64_t k = ft.instance.iteration;
  // acquire: pairs with the fetch_add in grant() (the granter's view of the data).
  std::uint64_t w = g.load(std::memory_order_acquire);
  for (;;) {
    // Granted since the fiber looked, or the run stopped: resume it here.
    if (grants_in(w) > k || (w & kStopped) != 0) return false;
    // acq_rel: pairs with the fetch_add in grant() and the fetch_or in stop(), which then see
    // the parked bit. Parked, the fiber belongs to whoever clears the bit: nothing here may be
    // touched any more (header).
    if (g.compare_exchange_weak(w, w | kParked, std::memory_order_acq_rel,
                                std::memory_order_acquire))
      return true;
  }
}

std::uint64_t FiberDriver::granted_iteration(std::uint32_t task, std::uint32_t location) const {
  // A fiber task can be granted while its instance still runs (it released early) and moves
  // its iteration on only when the body ends, so count this handle's grants: the grant for
  // iteration k is the k+1-th. Relaxed: only this thread grants the handle now (the lock's
  // phase is ours).
  const auto locks = plan_.task_locks_of(task);
  const auto h = static_cast<std::size_t>(
      std::lower_bound(locks.begin(), locks.end(), location) - locks.begin());
  return grants_in(tasks_[task]->grants[h].load(std::memory_order_relaxed));
}

void FiberDriver::grant(std::uint32_t task, std::uint32_t location) {
  Task& ft = *tasks_[task];
  const auto locks = plan_.task_locks_of(task);
  const auto h = static_cast<std::size_t>(
      std::lower_bound(locks.begin(), locks.end(), location) - locks.begin());
  ORDO_ASSERT(h < locks.size() && locks[h] == location);
  // acq_rel: pairs with the CAS in park() and the acquire loads in park() and wait_grant(), so
  // the fiber sees what the previous holders wrote.
  const std::uint64_t old = ft.grants[h].fetch_add(kOneGrant, std::memory_order_acq_rel);
  if ((old & kParked) == 0) return;
  // The fiber is parked on this handle: no other grant can reach it before the fiber runs
  // again, but stop() may race for the bit; whoever clears it resumes the fiber.
  if (unpark(ft.grants[h])) host_.resume(task);
}

void FiberDriver::stop() {
  stopped_.store(true);  // before the stopped bits, which publish it to park()'s resumes
  for (std::uint32_t t = 0; t < tasks_.size(); ++t) {
    Task* ft = tasks_[t].get();
    if (ft == nullptr) continue;
    const std::size_t handles = plan_.task_locks_of(t).size();
    for (std::size_t h = 0; h < handles; ++h) {
      ft->grants[h].fetch_or(kStopped);  // a park() from now on resumes the fiber itself
      if (unpark(ft->grants[h])) host_.resume(t);
    }
  }
}

bool FiberDriver::wait_grant(Task& ft, std::uint32_t access, bool throw_if_stopped) {
  const std::int32_t h = ft.handle_of[access];
  if (h < 0) return true;  // a read-only location has no lock
  std::atomic<std::uint64_t>& g = ft.grants[h];
  // acquire: pairs with the fetch_add in grant().
  if (grants_in(g.load(std::memory_order_acquire)) > ft.instance.iteration) return true;
  if (stopped_.load()) {
    if (throw_if_stopped) throw RunStopped{};
    return false;
  }
  ft.waiting = static_cast<std::uint32_t>(h);
  const std::uint32_t location = plan_.task_locks_of(ft.instance.task)[static_cast<std::size_t>(h)];
  trace::Recorder* const trace = host_.trace();
  if (trace) [[unlikely]]
    trace->fiber_suspend(ft.instance.worker, ft.instance.task, location, ft.instance.iteration);
  sched::Fiber::suspend();  // park(), grant() or stop() resumes us
  if (trace) [[unlikely]]  // possibly on another worker: run() updated instance.worker
    trace->fiber_resume(ft.instance.worker, ft.instance.task, location, ft.instance.iteration);
  if (grants_in(g.load(std::memory_order_acquire)) > ft.instance.iteration) return true;
  ORDO_ASSERT(stopped_.load());  // woken without the grant: only stop() does that
  if (throw_if_stopped) throw RunStopped{};
  return false;
}

void FiberDriver::fiber_main(void* arg) noexcept {
  Task& ft = *static_cast<Task*>(arg);
  FiberDriver& d = *ft.driver;
  // The instance ends, in the trace too, once the handles its body left are released.
  d.host_.run_fiber_body(*ft.family, ft.instance, &FiberDriver::settle, &ft);
}

void FiberDriver::settle(void* arg) {
  Task& ft = *static_cast<Task*>(arg);
  FiberDriver& d = *ft.driver;
  // Handles the body left requested or held: acquire (a release needs the grant), release.
  // A grant that will never come (the run stopped) is not waited for, nor released.
  for (std::uint32_t a = 0; a < ft.holds.size(); ++a) {
    if (ft.holds[a] == Hold::released) continue;
    const bool granted = ft.holds[a] == Hold::held || d.wait_grant(ft, a, false);
    ft.holds[a] = Hold::released;
    if (!granted) continue;
    const std::int32_t h = ft.handle_of[a];
    if (h >= 0)
      d.host_.release(d.plan_.task_locks_of(ft.instance.task)[static_cast<std::size_t>(h)],
                      ft.instance.task, ft.instance.iteration, ft.instance.worker);
  }
}

FiberDriver::Hold FiberDriver::hold(const Instance& inst, std::uint32_t access) const {
  return tasks_[inst.task]->holds[access];
}

bool FiberDriver::is_on_own_fiber(const Instance& inst) const {
  const Task* ft = tasks_[inst.task].get();
  return ft != nullptr && sched::Fiber::current() == &ft->fiber;
}

void FiberDriver::acquire(const Instance& inst, std::uint32_t access) {
  Task& ft = *tasks_[inst.task];
  ORDO_ASSERT(ft.holds[access] == Hold::requested);
  wait_grant(ft, access, true);
  ft.holds[access] = Hold::held;
}

void FiberDriver::release(const Instance& inst, std::uint32_t access) {
  Task& ft = *tasks_[inst.task];
  ORDO_ASSERT(ft.holds[access] == Hold::held);
  ft.holds[access] = Hold::released;
  const std::int32_t h = ft.handle_of[access];
  if (h >= 0)
    host_.release(plan_.task_locks_of(inst.task)[static_cast<std::size_t>(h)], inst.task,
                  inst.iteration, ft.instance.worker);
}

}  // namespace ordo::rt
