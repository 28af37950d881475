// Fibers: suspend and resume, migration between threads, pooled stacks, many suspended fibers,
// and the stack overflow report.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "skip.hpp"
#include "test_support.hpp"

#include "scheduler/fiber.hpp"

using ordo::sched::Fiber;
using ordo::sched::StackPool;

namespace {

using ordo::test::kTsan;

struct Steps {
  int value = 0;
  int rounds = 0;
  Fiber* seen = nullptr;
};

void stepper(void* arg) noexcept {
  auto* s = static_cast<Steps*>(arg);
  s->seen = Fiber::current();
  for (int i = 0; i < s->rounds; ++i) {
    s->value += 1;
    Fiber::suspend();
  }
  s->value += 100;
}

struct Hop {
  std::thread::id before, after;
};

// pthread_self() is declared const, so the compiler may reuse its result across a suspension
// inside one function (docs/fibers.md): ask through a call it cannot treat as const.
[[gnu::noinline]] std::thread::id thread_now() {
  asm volatile("" ::: "memory");
  return std::this_thread::get_id();
}

void hopper(void* arg) noexcept {
  auto* h = static_cast<Hop*>(arg);
  h->before = thread_now();
  Fiber::suspend();
  h->after = thread_now();
}

void once(void* arg) noexcept {
  // Touch a little stack, as a real body would.
  volatile char frame[256];
  frame[0] = 1;
  ++*static_cast<int*>(arg);
  Fiber::suspend();
  ++*static_cast<int*>(arg);
  (void)frame[0];
}

}  // namespace

TEST_CASE("a fiber runs until it suspends and continues where it stopped", "[fiber]") {
  StackPool stacks(64 * 1024);
  Fiber f;
  Steps s;
  s.rounds = 3;
  CHECK(Fiber::current() == nullptr);
  f.start(stacks, &stepper, &s);
  CHECK(f.active());
  for (int i = 1; i <= 3; ++i) {
    CHECK_FALSE(f.resume());
    CHECK(s.value == i);
  }
  CHECK(f.resume());  // returns: value + 100
  CHECK(s.value == 103);
  CHECK(s.seen == &f);
  CHECK_FALSE(f.active());
  CHECK(Fiber::current() == nullptr);
  // The slot starts again, on the stack it used before.
  Steps t;
  t.rounds = 0;
  f.start(stacks, &stepper, &t);
  CHECK(f.resume());
  CHECK(t.value == 100);
  CHECK(stacks.mapped() == 1);
}

TEST_CASE("a suspended fiber resumes on another thread", "[fiber]") {
  StackPool stacks(64 * 1024);
  Fiber f;
  Hop h;
  f.start(stacks, &hopper, &h);
  CHECK_FALSE(f.resume());  // on this thread, which outlives b (thread ids can be reused)
  std::thread b([&] { CHECK(f.resume()); });
  b.join();
  CHECK(h.before == std::this_thread::get_id());
  CHECK(h.after != h.before);
}

TEST_CASE("stacks are reused: sequential fibers share one stack", "[fiber]") {
  StackPool stacks(64 * 1024);
  Fiber f;
  int count = 0;
  for (int i = 0; i < 200; ++i) {
    f.start(stacks, &once, &count);
    CHECK_FALSE(f.resume());
    CHECK(f.resume());
  }
  CHECK(count == 400);
  CHECK(stacks.mapped() == 1);
  CHECK(stacks.idle() == 1);
}

TEST_CASE("ten thousand suspended fibers complete and commit only what they touch", "[fiber]") {
  // Under TSan every fiber also carries the sanitizer's own state (much larger than ours):
  // the protocol is the same with fewer.
  const std::size_t n = kTsan ? 1000 : 10000;
  const std::size_t stack = 256 * 1024;
  StackPool stacks(stack);
  auto fibers = std::make_unique<Fiber[]>(n);
  int count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    fibers[i].start(stacks, &once, &count);
    REQUIRE_FALSE(fibers[i].resume());
  }
  CHECK(count == static_cast<int>(n));
  CHECK(stacks.mapped() == n);
  CHECK(stacks.idle() == 0);
  // Every fiber has touched at most a few pages of its 256 KiB: what is resident stays a small
  // fraction of what is mapped (a fully committed stack would be 64 pages).
  const std::size_t resident = stacks.resident_bytes();
  INFO("resident bytes " << resident << " for " << n << " fibers");
  CHECK(resident <= n * 32 * 1024);
  CHECK(resident < n * stack / 8);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(fibers[i].resume());
  CHECK(count == static_cast<int>(2 * n));
  CHECK(stacks.idle() == n);
  // A second generation reuses the pool: no new mapping.
  for (std::size_t i = 0; i < n; ++i) {
    fibers[i].start(stacks, &once, &count);
    REQUIRE_FALSE(fibers[i].resume());
  }
  for (std::size_t i = 0; i < n; ++i) REQUIRE(fibers[i].resume());
  CHECK(stacks.mapped() == n);
  CHECK(count == static_cast<int>(4 * n));
}

TEST_CASE("stack sizes parse and bad ones are refused", "[fiber]") {
  CHECK(StackPool::parse_size("262144") == 262144);
  CHECK(StackPool::parse_size("256K") == 256 * 1024);
  CHECK(StackPool::parse_size("2M") == 2 * 1024 * 1024);
  CHECK(StackPool::parse_size("1G") == std::size_t{1} << 30);
  CHECK(StackPool::parse_size("") == 0);
  CHECK(StackPool::parse_size("12Q") == 0);
  CHECK(StackPool::parse_size("K") == 0);
  CHECK_THROWS_AS(StackPool(1024), std::invalid_argument);
  CHECK_THROWS_AS(StackPool(std::size_t{4} << 30), std::invalid_argument);
  StackPool odd(100 * 1000);  // rounded up to whole pages
  CHECK(odd.stack_size() >= 100 * 1000);
  CHECK(odd.stack_size() % static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) == 0);
}

TEST_CASE("a fiber stack overflow is reported and ends the process", "[fiber]") {
  const char* child = std::getenv("ORDO_FIBER_OVERFLOW_CHILD");
  if (child == nullptr) ORDO_SKIP("ORDO_FIBER_OVERFLOW_CHILD is not set (run through meson test)");
  int err[2];
  REQUIRE(pipe(err) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(err[1], STDERR_FILENO);
    close(err[0]);
    close(err[1]);
    execl(child, child, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err[1]);
  std::string text;
  char buf[512];
  for (ssize_t r; (r = read(err[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(r));
  close(err[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("child stderr: " << text);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(text.find("stack overflow in fiber of task 'deep'") != std::string::npos);
  CHECK(text.find("64 KiB") != std::string::npos);
  CHECK(text.find("ORDO_FIBER_STACK") != std::string::npos);
}
