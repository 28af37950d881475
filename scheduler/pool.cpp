#include "pool.hpp"

namespace ordo::sched {

namespace {
thread_local int tls_worker = -1;
}

Pool::Pool(PoolConfig config) {
  unsigned n = config.workers;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  threads_.reserve(n);
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { worker_main(i); });
}

Pool::~Pool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Pool::attach(Executor& exec) {
  std::lock_guard lock(mu_);
  exec_ = &exec;
}

void Pool::detach() {
  std::lock_guard lock(mu_);
  exec_ = nullptr;
}

void Pool::push(Item item) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(item);
  }
  cv_.notify_one();
}

int Pool::current_worker() { return tls_worker; }

void Pool::worker_main(unsigned index) {
  tls_worker = static_cast<int>(index);
  std::unique_lock lock(mu_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      if (observer_) observer_->on_park(index);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (observer_) observer_->on_unpark(index);
    }
    if (stop_) return;
    Item item = queue_.front();
    queue_.pop_front();
    Executor* exec = exec_;
    lock.unlock();
    exec->execute(item, index);
    lock.lock();
  }
}

}  // namespace ordo::sched
