#include "host_limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace ordorun {

namespace {

std::optional<std::uint64_t> read_number(const char* path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

// Tasks (threads) running on the host now: the sum of every process's thread count.
std::optional<std::uint64_t> tasks_running() {
  std::ifstream in("/proc/loadavg");  // "0.1 0.2 0.3 running/total last_pid"
  std::string a, b, c, counts;
  if (!(in >> a >> b >> c >> counts)) return std::nullopt;
  const auto slash = counts.find('/');
  if (slash == std::string::npos) return std::nullopt;
  try {
    return std::stoull(counts.substr(slash + 1));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<std::uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

HostLimits read_host_limits() {
  HostLimits h;
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0)
    h.open_files = files.rlim_max == RLIM_INFINITY ? std::uint64_t{1} << 40 : files.rlim_max;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++h.files_open;  // counts the directory's own descriptor too: a margin of one
  const auto running = tasks_running();
  auto threads_max = read_number("/proc/sys/kernel/threads-max");
  const auto pid_max = read_number("/proc/sys/kernel/pid_max");
  if (running && (threads_max || pid_max)) {
    std::uint64_t cap = std::min(threads_max.value_or(UINT64_MAX), pid_max.value_or(UINT64_MAX));
    // RLIMIT_NPROC counts this user's tasks; root is not held to it.
    rlimit nproc{};
    if (getuid() != 0 && getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY)
      cap = std::min<std::uint64_t>(cap, nproc.rlim_cur);
    h.tasks_free = cap > *running ? cap - *running : 0;
    h.known_tasks = true;
  }
  if (const auto m = mem_available()) {
    h.memory_available = *m;
    h.known_memory = true;
  }
  return h;
}

std::optional<std::string> refuse_ranks(std::uint64_t ranks, std::uint64_t local,
                                        const HostLimits& limits) {
  const std::string what = std::to_string(ranks) + " rank(s)";
  const std::uint64_t base = limits.files_open + kFilesBase;
  const std::uint64_t files = base + kFilesPerRank * ranks;
  if (files > limits.open_files) {
    const std::uint64_t most = limits.open_files > base ? (limits.open_files - base) / kFilesPerRank : 0;
    return "cannot start " + what + ": ordorun needs " + std::to_string(files) +
           " open files (" + std::to_string(kFilesPerRank) + " per rank) and may open " +
           std::to_string(limits.open_files) + " (its hard limit); raise it (ulimit -Hn, "
           "limits.conf) or start at most " + std::to_string(most) + " ranks";
  }
  if (limits.known_tasks && local * kThreadsPerRank > limits.tasks_free)
    return "cannot start " + what + " on this host: they need at least " +
           std::to_string(local * kThreadsPerRank) + " threads (" +
           std::to_string(kThreadsPerRank) + " per rank) and the kernel allows " +
           std::to_string(limits.tasks_free) + " more (kernel.threads-max, kernel.pid_max, "
           "ulimit -u); start at most " + std::to_string(limits.tasks_free / kThreadsPerRank) +
           " ranks here, or spread them over hosts with --hosts";
  if (limits.known_memory && local * kBytesPerRank > limits.memory_available)
    return "cannot start " + what + " on this host: each needs at least " + mib(kBytesPerRank) +
           " of memory, " + mib(local * kBytesPerRank) + " in all, and " +
           mib(limits.memory_available) + " are available; start at most " +
           std::to_string(limits.memory_available / kBytesPerRank) +
           " ranks here, or spread them over hosts with --hosts";
  return std::nullopt;
}

}  // namespace ordorun
