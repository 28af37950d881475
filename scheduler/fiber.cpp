// Fibers on Boost.Context's fcontext layer (make_fcontext / jump_fcontext, the switch under
// boost::context::fiber). Why that layer and not boost::context::fiber itself: fiber's inline
// members and its record on the stack add instrumented frames that straddle each switch (its
// constructor even jumps into the new stack and back), so ThreadSanitizer's per-fiber shadow
// call stacks would drift by a frame per switch; with the raw jump every switch happens in one
// of the functions below, right after the TSan announcement. It also lets the stack come
// straight from our pool, with no record or allocator copy on it.
//
// Switch protocol (see fiber.hpp): resume() jumps to context_ passing `this`; the fiber side
// stores the transfer's fctx as caller_ (the resumer's continuation) and jumps back with
// kSuspended (from suspend()) or kFinished (when the entry returns; that jump never comes
// back, so the stack is free as soon as the resumer sees kFinished).
#include "scheduler/fiber.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if defined(__SANITIZE_THREAD__)
#define ORDO_TSAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORDO_TSAN_FIBERS 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define ORDO_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORDO_ASAN_FIBERS 1
#endif
#endif

#ifdef ORDO_ASAN_FIBERS
#include <sanitizer/common_interface_defs.h>
#endif

#ifdef ORDO_TSAN_FIBERS
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

namespace ordo::sched {

namespace ctx = boost::context::detail;

// Reaches Fiber's private members from the trampoline and the signal handler.
struct FiberAccess {
  static void trampoline(ctx::transfer_t t) noexcept;
  static bool in_guard(const Fiber& f, std::uintptr_t addr) {
    auto lo = reinterpret_cast<std::uintptr_t>(f.stack_);
    return f.stack_ != nullptr && addr >= lo && addr < lo + f.stacks_->guard_size();
  }
  static const char* label(const Fiber& f) { return f.label_; }
  static std::size_t stack_size(const Fiber& f) { return f.stacks_->stack_size(); }
};

namespace {

// Markers passed back to the resumer in transfer_t::data.
char finished_marker;
void* const kFinished = &finished_marker;
void* const kSuspended = nullptr;

// The fiber running on this thread. initial-exec: a plain %fs-relative access, so that the
// signal handler may read it, and so that no TLS address is cached across a switch (a fiber
// may come back on another thread). Accessed only through the noinline functions below.
__attribute__((tls_model("initial-exec"))) thread_local Fiber* tls_running = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local bool tls_altstack = false;

[[gnu::noinline]] Fiber* running() { return tls_running; }
[[gnu::noinline]] void set_running(Fiber* f) { tls_running = f; }

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// AddressSanitizer must be told of every stack switch, or it takes the fiber's frames for an
// overflow of the thread's stack (and an exception thrown on a fiber for a wild unwind). Each
// switch is announced before the jump (start: where it goes) and acknowledged after it
// (finish: where it came from); a null save slot at start says the stack being left dies.
#ifdef ORDO_ASAN_FIBERS
inline void asan_leave(void** fake_stack, const void* bottom, std::size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
inline void asan_arrive(void* fake_stack, const void** bottom_old, std::size_t* size_old) {
  __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
}
#else
inline void asan_leave(void**, const void*, std::size_t) {}
inline void asan_arrive(void*, const void**, std::size_t*) {}
#endif

// ---- overflow report ------------------------------------------------------------------------

struct sigaction previous_segv;  // written once before our handler is installed

void say(const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<std::size_t>(w);
  }
}

void say_number(std::size_t value) {
  char digits[24];
  char* p = digits + sizeof(digits);
  *--p = '\0';
  do {
    *--p = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  say(p);
}

void die_by_default(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  // Returning re-executes the faulting access, which now kills the process; a SIGSEGV sent by
  // kill() would not come back, so raise it (it stays blocked until the handler returns).
  raise(sig);
}

// Runs on the alternate signal stack. Async-signal-safe: reads a TLS pointer and the fiber's
// fields, and writes with write(2).
void on_segv(int sig, siginfo_t* info, void* uctx) {
  Fiber* f = running();
  auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (f != nullptr && FiberAccess::in_guard(*f, addr)) {
    say("ordo: stack overflow in fiber");
    if (const char* label = FiberAccess::label(*f)) {
      say(" of task '");
      say(label);
      say("'");
    }
    say(": its stack of ");
    say_number(FiberAccess::stack_size(*f) / 1024);
    say(" KiB is exhausted (the access hit the guard page below it). Give fibers a larger stack "
        "with RuntimeOptions::fiber_stack_size or the environment variable ORDO_FIBER_STACK "
        "(for example ORDO_FIBER_STACK=1M), or move large arrays off the stack.\n");
    die_by_default(sig);
    return;
  }
  const struct sigaction& prev = previous_segv;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, uctx);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  } else {
    die_by_default(sig);
  }
}

void install_segv_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = &on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, nullptr, &previous_segv);
    sigaction(SIGSEGV, &sa, nullptr);
  });
}

// The alternate signal stack of a thread that runs fibers: the overflow handler cannot run on
// the overflowed stack. Removed and unmapped when the thread exits.
struct AltStack {
  static constexpr std::size_t kSize = 64 * 1024;
  void* mem = nullptr;
  ~AltStack() {
    if (mem == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    munmap(mem, kSize);
  }
};

[[gnu::noinline]] void ensure_altstack() {
  if (tls_altstack) return;
  tls_altstack = true;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0)
    return;  // the thread has one already (its owner's, or a sanitizer's): keep it
  static thread_local AltStack holder;
  void* mem = mmap(nullptr, AltStack::kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (mem == MAP_FAILED) return;  // no report on overflow then, but fibers still run
  stack_t ss{};
  ss.ss_sp = mem;
  ss.ss_size = AltStack::kSize;
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(mem, AltStack::kSize);
    return;
  }
  holder.mem = mem;
}

}  // namespace

// ---- StackPool --------------------------------------------------------------------------------

StackPool::StackPool(std::size_t stack_size) {
  if (stack_size == 0) stack_size = kDefaultStackSize;
  if (stack_size < kMinStackSize || stack_size > kMaxStackSize)
    throw std::invalid_argument("fiber stack size " + std::to_string(stack_size) +
                                " bytes is out of range; give between " +
                                std::to_string(kMinStackSize / 1024) + " KiB and " +
                                std::to_string(kMaxStackSize >> 30) + " GiB");
  stack_size_ = round_up(stack_size, page_size());
  // Several pages: a frame a little larger than a page still lands in the guard instead of
  // jumping over it into the neighbouring mapping. Only address space, never memory.
  guard_size_ = round_up(64 * 1024, page_size());
}

StackPool::~StackPool() {
  for (std::byte* s : all_) munmap(s, guard_size_ + stack_size_);
}

std::size_t StackPool::mapped() const {
  std::lock_guard lock(mu_);
  return all_.size();
}

std::size_t StackPool::idle() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

std::size_t StackPool::resident_bytes() const {
  std::lock_guard lock(mu_);
  const std::size_t pages = stack_size_ / page_size();
  std::vector<unsigned char> in_core(pages);
  std::size_t resident = 0;
  for (std::byte* s : all_) {
    if (mincore(s + guard_size_, stack_size_, in_core.data()) != 0) continue;
    for (unsigned char c : in_core) resident += (c & 1) != 0 ? page_size() : 0;
  }
  return resident;
}

std::size_t StackPool::parse_size(const std::string& text) {
  if (text.empty()) return 0;
  std::size_t digits = 0;
  std::size_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    if (value > (std::size_t{1} << 40)) return 0;
    value = value * 10 + static_cast<std::size_t>(text[digits] - '0');
    ++digits;
  }
  if (digits == 0) return 0;
  std::string suffix = text.substr(digits);
  if (suffix.empty()) return value;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") return value << 10;
  if (suffix == "M" || suffix == "m" || suffix == "MiB") return value << 20;
  if (suffix == "G" || suffix == "g" || suffix == "GiB") return value << 30;
  return 0;
}

std::byte* StackPool::take() {
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      std::byte* s = free_.back();
      free_.pop_back();
      return s;
    }
  }
  install_segv_handler();
  const std::size_t total = guard_size_ + stack_size_;
  // MAP_NORESERVE: nothing is committed until touched, and the guard never is.
  void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED || mprotect(mem, guard_size_, PROT_NONE) != 0) {
    int err = errno;
    if (mem != MAP_FAILED) munmap(mem, total);
    throw std::runtime_error("ordo: cannot map a fiber stack of " + std::to_string(total) +
                             " bytes: " + std::strerror(err) +
                             " (each suspended fiber holds a stack of two mappings, and the "
                             "system allows vm.max_map_count mappings per process)");
  }
  auto* s = static_cast<std::byte*>(mem);
  std::lock_guard lock(mu_);
  all_.push_back(s);
  return s;
}

void StackPool::give(std::byte* stack) {
  std::lock_guard lock(mu_);
  free_.push_back(stack);
}

// ---- Fiber ------------------------------------------------------------------------------------

// A fiber still suspended here is abandoned: its frames are never unwound and its stack stays
// with its pool (unmapped with it). The pool may already be gone, so it is not touched; owners
// run their fibers to the end (the engine has none active between runs).
Fiber::~Fiber() = default;

void FiberAccess::trampoline(ctx::transfer_t t) noexcept {
  auto* self = static_cast<Fiber*>(t.data);
  self->caller_ = t.fctx;
  asan_arrive(nullptr, &self->asan_caller_bottom_, &self->asan_caller_size_);
  self->entry_(self->arg_);
  // safety: the jump below never returns, so nothing on this stack is used after it and the
  // resumer may hand the stack to another fiber as soon as it sees kFinished.
  asan_leave(nullptr, self->asan_caller_bottom_, self->asan_caller_size_);
#ifdef ORDO_TSAN_FIBERS
  __tsan_switch_to_fiber(self->tsan_caller_, 0);
#endif
  ctx::jump_fcontext(self->caller_, kFinished);
  __builtin_unreachable();
}

void Fiber::start(StackPool& stacks, Entry entry, void* arg, const char* label) {
  std::byte* stack = stacks.take();
  stacks_ = &stacks;
  stack_ = stack;
  entry_ = entry;
  arg_ = arg;
  label_ = label;
  std::byte* top = stack + stacks.guard_size() + stacks.stack_size();
  context_ = ctx::make_fcontext(top, stacks.stack_size(), &FiberAccess::trampoline);
#ifdef ORDO_TSAN_FIBERS
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

bool Fiber::resume() {
  ensure_altstack();
  Fiber* outer = running();  // a fiber may resume another one (tests do)
  set_running(this);
  [[maybe_unused]] void* resumer_fake_stack = nullptr;
  asan_leave(&resumer_fake_stack, stack_ + stacks_->guard_size(), stacks_->stack_size());
#ifdef ORDO_TSAN_FIBERS
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
  ctx::transfer_t t = ctx::jump_fcontext(context_, this);
  asan_arrive(resumer_fake_stack, nullptr, nullptr);
  set_running(outer);
  if (t.data != kFinished) {
    context_ = t.fctx;
    return false;
  }
#ifdef ORDO_TSAN_FIBERS
  __tsan_destroy_fiber(tsan_fiber_);
  tsan_fiber_ = nullptr;
#endif
  context_ = nullptr;
  caller_ = nullptr;
  std::byte* stack = stack_;
  stack_ = nullptr;
  stacks_->give(stack);
  return true;
}

void Fiber::suspend() {
  Fiber* self = running();
  asan_leave(&self->asan_fake_stack_, self->asan_caller_bottom_, self->asan_caller_size_);
#ifdef ORDO_TSAN_FIBERS
  __tsan_switch_to_fiber(self->tsan_caller_, 0);
#endif
  ctx::transfer_t t = ctx::jump_fcontext(self->caller_, kSuspended);
  // Resumed, perhaps on another thread: `self` is a local on this stack, not a TLS read.
  self->caller_ = t.fctx;
  asan_arrive(self->asan_fake_stack_, &self->asan_caller_bottom_, &self->asan_caller_size_);
}

Fiber* Fiber::current() { return running(); }

}  // namespace ordo::sched
