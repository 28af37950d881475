// ORDO_ASSERT (runtime/assert.hpp): checked where NDEBUG is not defined -- the ThreadSanitizer
// build of scripts/test.sh among them, so the tsan suite runs with the engine's invariants
// checked -- and compiled out of release builds, where its condition is not even evaluated.
#include <catch2/catch.hpp>
#include <csignal>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "runtime/assert.hpp"

#if defined(__SANITIZE_THREAD__) && defined(NDEBUG)
#error "the ThreadSanitizer build must check ORDO_ASSERT: build it without NDEBUG (debugoptimized)"
#endif

TEST_CASE("ORDO_ASSERT aborts naming the condition where checked, costs nothing in release",
          "[assert]") {
  int err[2];
  REQUIRE(::pipe(err) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(err[1], 2);
    std::signal(SIGABRT, SIG_DFL);  // not the test framework's handler: die of the abort
    int evaluated = 0;
    ORDO_ASSERT(++evaluated == 0);
    ::_exit(evaluated);  // release: 0, the condition was not evaluated
  }
  ::close(err[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) text.append(buf, std::size_t(n));
  ::close(err[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("child stderr: " << text);
#ifdef NDEBUG
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(text.empty());
#else
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(text.find("assertion '++evaluated == 0' failed") != std::string::npos);
  CHECK(text.find("test_assert.cpp") != std::string::npos);
#endif
}
