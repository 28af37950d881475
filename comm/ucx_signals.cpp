// UCX's error-signal handlers, given back (ucx_signals.hpp).
#include "comm/ucx_signals.hpp"

#include <dlfcn.h>

#include <csignal>
#include <cstring>

namespace ordo::comm {

namespace {

// Whether `address` lies in a shared object whose file name starts with "libuc" (libucs,
// libucp, libuct, libucm: UCX's libraries).
bool is_in_ucx(void* address) {
  Dl_info info{};
  if (address == nullptr || ::dladdr(address, &info) == 0 || info.dli_fname == nullptr)
    return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return std::strncmp(base, "libuc", 5) == 0;
}

}  // namespace

int restore_signals_taken_by_ucx() {
  int restored = 0;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) != 0) continue;
    void* handler = (now.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(now.sa_sigaction)
                                                : reinterpret_cast<void*>(now.sa_handler);
    if (handler == reinterpret_cast<void*>(SIG_DFL) || handler == reinterpret_cast<void*>(SIG_IGN) ||
        !is_in_ucx(handler))
      continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (::sigaction(sig, &dfl, nullptr) == 0) ++restored;
  }
  return restored;
}

}  // namespace ordo::comm
