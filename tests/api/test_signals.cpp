// Linking libordo changes no signal disposition: UCX's libraries install
// handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE when they are loaded, so a program's own crash
// printed UCX's backtrace ("Caught signal 8 ... libucs.so"), Runtime or not. libordo gives them
// back when it is loaded (comm/ucx_signals.hpp) unless UCX_HANDLE_ERRORS asks for them.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Outcome {
  int status = 0;
  std::string err;  // what the child wrote to stderr
};

// Runs signal_child (its path in SIGNAL_CHILD, set by meson) with `how`, with `env` added.
Outcome run_child(const char* how, const char* env = nullptr) {
  const char* child = std::getenv("SIGNAL_CHILD");
  REQUIRE(child != nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::unsetenv("UCX_HANDLE_ERRORS");
    if (env != nullptr) ::putenv(const_cast<char*>(env));
    ::execl(child, child, how, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  Outcome o;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) o.err.append(buf, std::size_t(n));
  ::close(fds[0]);
  REQUIRE(::waitpid(pid, &o.status, 0) == pid);
  return o;
}

}  // namespace

TEST_CASE("a program linking ordo dies of its own fault with the default action",
          "[signals]") {
  for (auto [how, sig] : {std::pair{"fpe", SIGFPE}, std::pair{"divide", SIGFPE},
                          std::pair{"segv", SIGSEGV}}) {
    INFO(how);
    const Outcome o = run_child(how);
    INFO("stderr: " << o.err);
    CHECK(WIFSIGNALED(o.status));
    CHECK(WTERMSIG(o.status) == sig);
    CHECK(o.err.find("Caught signal") == std::string::npos);
    CHECK(o.err.find("backtrace") == std::string::npos);
  }
}

TEST_CASE("UCX_HANDLE_ERRORS keeps UCX's handlers for those who ask", "[signals]") {
  static char ask[] = "UCX_HANDLE_ERRORS=bt";
  const Outcome o = run_child("fpe", ask);
  INFO("stderr: " << o.err);
  CHECK(WIFSIGNALED(o.status));
  CHECK(o.err.find("Caught signal 8") != std::string::npos);
}
