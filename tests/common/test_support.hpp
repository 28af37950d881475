// Small pieces several test suites share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ordo::test {

// Under ThreadSanitizer, stress loops are scaled down (it is 5-15x slower).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif

// Counts `n` completions on any threads; wait() returns once all are in. The counting thread
// never touches the object after the last count except under the mutex that wait() takes, so
// the waiter may destroy it as soon as wait() returns.
class Countdown {
 public:
  explicit Countdown(std::uint64_t n) : n_(n) {}
  void count_one() {
    // n_ is read before counting: once every count is in, the waiter may destroy this object,
    // so only the last counter may touch it afterwards (and only under mu_).
    const std::uint64_t n = n_;
    // acq_rel: pairs with itself, so the last count sees every other thread's work and
    // publishes it to wait() through the mutex.
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      std::lock_guard lock(mu_);
      finished_ = true;
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
  }

 private:
  const std::uint64_t n_;
  std::atomic<std::uint64_t> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;  // guarded by mu_
};

}  // namespace ordo::test
