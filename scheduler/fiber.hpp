// Fibers: user-level threads on pooled, guard-paged stacks. The only Boost.Context user is
// fiber.cpp; nothing of Boost shows here.
//
// Protocol (one fiber):
//   start(stacks, entry, arg) -- takes a stack from the pool; nothing runs yet.
//   resume()                  -- any thread: runs the fiber on the calling thread until it calls
//                                suspend() (returns false) or its entry returns (returns true;
//                                the stack is back in the pool and the Fiber can start again).
//   suspend()                 -- on the fiber: switches back to the thread that resumed it.
// A suspended fiber may be resumed on another thread than the one it ran on before; the
// caller of resume() must make sure that only one thread resumes it at a time and that the
// suspend() has happened before (the runtime orders this through its grant protocol).
//
// Stacks: each is an mmap'd region [guard | usable], the guard (PROT_NONE) at the low end,
// where a downward-growing stack overflows into. Pages are committed only when touched, so
// the memory a fiber costs is the stack it actually uses. Stacks are reused (LIFO, so a reused
// stack's touched pages are still warm) and unmapped when the pool is destroyed.
//
// Overflow: the first StackPool installs a SIGSEGV handler that runs on a per-thread
// alternate signal stack (installed by resume() on each thread that runs fibers). A fault in
// the guard of the fiber running on the faulting thread prints a report with write(2) (which
// fiber, its stack size, how to raise it) and the process dies of SIGSEGV; any other fault is
// passed to the handler that was installed before, or gets the default action.
//
// ThreadSanitizer: each fiber is a TSan fiber (__tsan_create_fiber); every switch is announced
// with __tsan_switch_to_fiber immediately before the jump, in the same function, so that no
// instrumented frame straddles a switch. AddressSanitizer is told of each switch the same way
// (__sanitizer_start/finish_switch_fiber), so that it checks a fiber's frames against its stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ordo::sched {

// A pool of fiber stacks of one size. Thread-safe.
class StackPool {
 public:
  static constexpr std::size_t kDefaultStackSize = 256 * 1024;
  static constexpr std::size_t kMinStackSize = 16 * 1024;
  static constexpr std::size_t kMaxStackSize = std::size_t{1} << 30;

  // `stack_size`: usable bytes per stack, rounded up to whole pages; 0 means
  // kDefaultStackSize. Throws std::invalid_argument outside [kMinStackSize, kMaxStackSize].
  explicit StackPool(std::size_t stack_size = 0);
  // Every stack must be back (no fiber of this pool active).
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  std::size_t stack_size() const { return stack_size_; }
  std::size_t guard_size() const { return guard_size_; }
  std::size_t mapped() const;  // stacks mapped so far (in use or idle)
  std::size_t idle() const;    // stacks waiting for reuse
  // Bytes of the pool's stacks that are resident in memory (mincore; slow: for tests and
  // diagnostics).
  std::size_t resident_bytes() const;

  // Parses a size such as "262144", "256K", "1M". Returns 0 on a malformed text.
  static std::size_t parse_size(const std::string& text);

 private:
  friend class Fiber;
  std::byte* take();  // low end of a stack mapping (its guard)
  void give(std::byte* stack);

  std::size_t stack_size_ = 0;
  std::size_t guard_size_ = 0;
  mutable std::mutex mu_;
  std::vector<std::byte*> free_;  // guarded by mu_
  std::vector<std::byte*> all_;   // guarded by mu_
};

// One fiber slot; it runs one entry function at a time and can be started again once that
// returned. Not movable (a running fiber refers to it). Not thread-safe: see the protocol.
class Fiber {
 public:
  // The fiber's body. Must not throw (an exception cannot cross the switch back).
  using Entry = void (*)(void* arg) noexcept;

  Fiber() = default;
  ~Fiber();  // a suspended fiber is abandoned (never unwound); run fibers to the end
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares entry(arg) on a stack of `stacks`. `label` names the fiber in an overflow report
  // and must outlive it. Precondition: !active(). Throws std::runtime_error if no stack can be
  // mapped.
  void start(StackPool& stacks, Entry entry, void* arg, const char* label = nullptr);
  // Runs the fiber on the calling thread until it suspends (false) or returns (true).
  bool resume();
  // Started and not yet returned.
  bool active() const { return stack_ != nullptr; }

  // On a fiber: switches back to the thread that resumed it; returns when resumed again,
  // possibly on another thread.
  static void suspend();
  // The fiber running on the calling thread, or nullptr.
  static Fiber* current();

 private:
  friend struct FiberAccess;
  void* context_ = nullptr;     // the suspended fiber's fcontext (a Boost.Context handle)
  void* caller_ = nullptr;      // the resumer's fcontext while the fiber runs
  std::byte* stack_ = nullptr;  // low end of the stack mapping, null when idle
  StackPool* stacks_ = nullptr;
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  const char* label_ = nullptr;
  [[maybe_unused]] void* tsan_fiber_ = nullptr;   // ThreadSanitizer's fiber state (only under TSan)
  [[maybe_unused]] void* tsan_caller_ = nullptr;  // the resumer's TSan state while the fiber runs
  // AddressSanitizer (only under ASan): the fiber's fake stack while it is suspended, and the
  // resumer's stack bounds while it runs.
  [[maybe_unused]] void* asan_fake_stack_ = nullptr;
  [[maybe_unused]] const void* asan_caller_bottom_ = nullptr;
  [[maybe_unused]] std::size_t asan_caller_size_ = 0;
};

}  // namespace ordo::sched
