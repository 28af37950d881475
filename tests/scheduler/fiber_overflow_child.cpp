// Helper for test_fiber: overflows a fiber's stack on a worker thread. Expected to die of
// SIGSEGV after printing ordo's overflow report on stderr; exits 0 only if it did not.
#include <sys/prctl.h>

#include <cstdio>
#include <thread>

#include "scheduler/fiber.hpp"

namespace {

volatile int depth_limit = 1 << 30;  // volatile: the recursion must not look infinite to GCC

[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (depth >= depth_limit) return frame[0];
  return recurse(depth + 1) + frame[0];
}

void entry(void*) noexcept { recurse(0); }

}  // namespace

int main() {
  prctl(PR_SET_DUMPABLE, 0);  // no core file for the expected crash
  ordo::sched::StackPool stacks(64 * 1024);
  std::thread worker([&] {
    ordo::sched::Fiber f;
    f.start(stacks, &entry, nullptr, "deep");
    f.resume();
  });
  worker.join();
  std::puts("the overflow went unnoticed");
  return 0;
}
