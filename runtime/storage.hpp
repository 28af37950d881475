// How much memory this process can still get from the system, and the verdict on whether a
// rank's locations fit (docs/distributed.md, "Memory"). The engine asks before it gives a
// graph's locations their storage at the first run, so that a problem too large for its ranks
// is refused with the bytes needed and available instead of ending in std::bad_alloc or the
// OOM killer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ordo::rt {

// Where a limit comes from (named in the refusal).
enum class MemorySource : std::uint8_t {
  none,       // no limit found
  meminfo,    // MemAvailable + SwapFree in /proc/meminfo: the host's, shared by its ranks
  cgroup,     // memory.max - memory.current of this process's cgroup (v2) or an ancestor
  rlimit_as,  // RLIMIT_AS (ulimit -v) less the address space in use: this process's own
  rlimit_data,  // RLIMIT_DATA (ulimit -d) less the data in use: this process's own
};
const char* describe(MemorySource source);

struct MemoryAvailable {
  // What the ranks of this host share (meminfo, cgroup) and what this process alone may still
  // map (rlimits). UINT64_MAX where nothing limits.
  std::uint64_t host = UINT64_MAX;
  MemorySource host_source = MemorySource::none;
  std::uint64_t process = UINT64_MAX;
  MemorySource process_source = MemorySource::none;
};
// Reads /proc and /sys now (a few small files).
MemoryAvailable memory_available();

// One rank's storage need and verdict, as the ranks exchange them at the first run.
struct StorageVerdict {
  std::uint64_t more = 0;       // bytes this rank has yet to give its locations
  std::uint64_t total = 0;      // bytes of every location it uses (home and replicas)
  std::uint64_t host_more = 0;  // `more` of this rank and of the ranks on its host together
  MemoryAvailable available;
  bool allocation_failed = false;  // the limits allowed it, the system refused (mmap)
  bool fits() const {
    return !allocation_failed && host_more <= available.host && more <= available.process;
  }
};

// The refusal naming every rank whose verdict does not fit (empty when all fit). `verdicts`
// is indexed by rank.
std::string storage_refusal(const std::vector<StorageVerdict>& verdicts);
// The same for any need: `opening`, then per rank that does not fit "rank R needs " +
// need(its verdict) and what limits it.
std::string memory_refusal(const std::vector<StorageVerdict>& verdicts, const std::string& opening,
                           const std::function<std::string(const StorageVerdict&)>& need);

// "1.50 GiB (1610612736 bytes)", "512 bytes".
std::string format_bytes(std::uint64_t bytes);

}  // namespace ordo::rt
