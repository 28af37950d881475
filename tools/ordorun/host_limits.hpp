// Whether this host can start the ranks ordorun is asked for, checked before any rank starts,
// so that `ordorun -n 100000` is refused with what to change instead of failing half-way (a
// fork or pipe that fails after some ranks are running).
//
// What each rank costs (docs/comm.md, "ordorun"): in ordorun, an output pipe each for stdout
// and stderr and two store connections (requests and lifeline); on the host, a process of at
// least kThreadsPerRank threads (main, a worker, UCX's and ordo's progress threads) and at
// least kBytesPerRank of memory (an idle rank's resident set).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ordorun {

inline constexpr std::uint64_t kFilesPerRank = 4;
inline constexpr std::uint64_t kFilesBase = 8;  // ordorun's own beyond those open now: store, signals
inline constexpr std::uint64_t kThreadsPerRank = 5;
inline constexpr std::uint64_t kBytesPerRank = std::uint64_t{16} << 20;

struct HostLimits {
  std::uint64_t open_files = 0;  // ordorun's hard RLIMIT_NOFILE (Job::run raises the soft one)
  std::uint64_t files_open = 0;  // descriptors ordorun holds already (inherited ones too)
  std::uint64_t tasks_free = 0;       // threads the kernel would still create (threads-max,
                                      // pid_max and RLIMIT_NPROC, less the tasks running now)
  std::uint64_t memory_available = 0;  // bytes (MemAvailable)
  bool known_tasks = false, known_memory = false;  // read from /proc
};

// The limits of this host and process, as read now.
HostLimits read_host_limits();

// Nothing when `ranks` ranks (of which `local` start on this host; remote ones still cost
// ordorun a pipe pair and a local rsh process) fit `limits`; otherwise the message saying what
// is short and what to change.
std::optional<std::string> refuse_ranks(std::uint64_t ranks, std::uint64_t local,
                                        const HostLimits& limits);

}  // namespace ordorun
