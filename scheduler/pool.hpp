// A pool of worker threads that execute opaque work items.
//
// The scheduler layer knows nothing of locks, tasks or graphs: an item is a 64-bit word that
// the attached Executor interprets (the runtime uses a task index). This keeps the direction of
// dependence one way (runtime -> scheduler) and keeps queue slots one machine word wide.
//
// Protocol:
//   attach(exec)  -- one executor at a time; items pushed before attach are not allowed.
//   push(item)    -- any thread; the item is executed exactly once by some worker.
//   detach()      -- caller guarantees that no item is queued or running (the runtime knows
//                    this from its own completion count); workers then park.
// Workers that find nothing to do park on a condition variable and use no CPU.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace ordo::sched {

using Item = std::uint64_t;

// Interprets items. execute() runs on a worker thread; it may push further items.
class Executor {
 public:
  virtual void execute(Item item, unsigned worker) = 0;

 protected:
  ~Executor() = default;
};

// Receives scheduler events (for tracing). Callbacks run on the worker concerned and must be
// cheap and non-blocking.
class Observer {
 public:
  virtual void on_park(unsigned worker) = 0;    // the worker found no work and goes to sleep
  virtual void on_unpark(unsigned worker) = 0;  // it woke up
  virtual void on_steal(unsigned thief, unsigned victim) = 0;

 protected:
  ~Observer() = default;
};

struct PoolConfig {
  unsigned workers = 0;  // 0: one per hardware thread
};

class Pool {
 public:
  explicit Pool(PoolConfig config);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

  void attach(Executor& exec);
  void detach();
  void push(Item item);

  // Installs (or, with nullptr, removes) the observer. Call only while no executor is attached.
  // Under mu_: parked workers read the pointer under it.
  void set_observer(Observer* observer) {
    std::lock_guard lock(mu_);
    observer_ = observer;
  }

  // Index of the calling worker in its pool, or -1 on a thread that is not a worker.
  static int current_worker();

 private:
  void worker_main(unsigned index);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;   // guarded by mu_
  Executor* exec_ = nullptr; // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  Observer* observer_ = nullptr;  // guarded by mu_
};

}  // namespace ordo::sched
