#include "runtime/storage.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <sys/resource.h>

namespace ordo::rt {

namespace {

constexpr std::uint64_t kUnlimited = UINT64_MAX;
// cgroup v1 says "no limit" with a huge page-rounded number; anything this large is no limit.
constexpr std::uint64_t kNoLimitAbove = std::uint64_t{1} << 62;

// A "Name:   value kB" line of a /proc file, in bytes; false when absent.
bool proc_kb(const char* path, const char* name, std::uint64_t& bytes) {
  std::ifstream in(path);
  std::string line;
  const std::size_t n = std::strlen(name);
  while (std::getline(in, line)) {
    if (line.compare(0, n, name) != 0 || line.size() <= n || line[n] != ':') continue;
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str() + n + 1, "%llu", &kb) != 1) return false;
    bytes = kb * 1024;
    return true;
  }
  return false;
}

// A file holding one number ("max": no limit).
bool read_number(const std::string& path, std::uint64_t& value) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return false;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (*end != '\0') return false;
  value = v;
  return true;
}

// The least headroom (limit - usage) of this process's memory cgroup and its ancestors.
std::uint64_t cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::uint64_t best = kUnlimited;
  while (std::getline(in, line)) {
    // "0::/path" (v2) or "N:memory:/path" (v1, possibly with other controllers: "memory,x").
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string root, limit_file, usage_file;
    if (controllers.empty()) {
      root = "/sys/fs/cgroup";
      limit_file = "memory.max";
      usage_file = "memory.current";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      root = "/sys/fs/cgroup/memory";
      limit_file = "memory.limit_in_bytes";
      usage_file = "memory.usage_in_bytes";
    } else {
      continue;
    }
    for (;;) {
      std::uint64_t limit = 0, usage = 0;
      const std::string dir = root + (path == "/" ? "" : path) + "/";
      if (read_number(dir + limit_file, limit) && limit < kNoLimitAbove &&
          read_number(dir + usage_file, usage))
        best = std::min(best, limit > usage ? limit - usage : 0);
      if (path.empty() || path == "/") break;
      const std::size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

// rlim_cur less what is in use (`status_field` of /proc/self/status), or kUnlimited.
std::uint64_t rlimit_headroom(int resource, const char* status_field) {
  struct rlimit rl {};
  if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kUnlimited;
  std::uint64_t used = 0;
  proc_kb("/proc/self/status", status_field, used);
  return rl.rlim_cur > used ? rl.rlim_cur - used : 0;
}

}  // namespace

const char* describe(MemorySource source) {
  switch (source) {
    case MemorySource::none: return "no limit";
    case MemorySource::meminfo: return "MemAvailable + SwapFree in /proc/meminfo";
    case MemorySource::cgroup: return "the memory limit of this process's cgroup";
    case MemorySource::rlimit_as: return "RLIMIT_AS, ulimit -v";
    case MemorySource::rlimit_data: return "RLIMIT_DATA, ulimit -d";
  }
  return "?";
}

MemoryAvailable memory_available() {
  MemoryAvailable m;
  std::uint64_t avail = 0, swap = 0;
  if (proc_kb("/proc/meminfo", "MemAvailable", avail)) {
    proc_kb("/proc/meminfo", "SwapFree", swap);
    m.host = avail + swap;
    m.host_source = MemorySource::meminfo;
  }
  if (const std::uint64_t c = cgroup_headroom(); c < m.host) {
    m.host = c;
    m.host_source = MemorySource::cgroup;
  }
  if (const std::uint64_t as = rlimit_headroom(RLIMIT_AS, "VmSize"); as < m.process) {
    m.process = as;
    m.process_source = MemorySource::rlimit_as;
  }
  if (const std::uint64_t data = rlimit_headroom(RLIMIT_DATA, "VmData"); data < m.process) {
    m.process = data;
    m.process_source = MemorySource::rlimit_data;
  }
  return m;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char text[80];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%" PRIu64 " bytes", bytes);
  else
    std::snprintf(text, sizeof text, "%.2f %s (%" PRIu64 " bytes)", value, units[unit], bytes);
  return text;
}

std::string storage_refusal(const std::vector<StorageVerdict>& verdicts) {
  return memory_refusal(verdicts, "the graph's locations do not fit in memory: ",
                        [](const StorageVerdict& v) {
                          return format_bytes(v.more) + " more for its locations (its home "
                                 "locations and the replicas its tasks use, " +
                                 format_bytes(v.total) + " in all)";
                        });
}

std::string memory_refusal(const std::vector<StorageVerdict>& verdicts, const std::string& opening,
                           const std::function<std::string(const StorageVerdict&)>& need) {
  std::ostringstream out;
  bool any = false;
  for (std::size_t r = 0; r < verdicts.size(); ++r) {
    const StorageVerdict& v = verdicts[r];
    if (v.fits()) continue;
    out << (any ? "; " : opening) << "rank " << r << " needs " << need(v);
    any = true;
    if (v.allocation_failed) {
      out << ", and the system refused to map them";
      continue;
    }
    if (v.more > v.available.process) {
      out << ", but " << format_bytes(v.available.process) << " are available ("
          << describe(v.available.process_source) << ")";
      continue;
    }
    if (v.host_more != v.more)
      out << ", its host's ranks " << format_bytes(v.host_more) << " together";
    out << ", but " << format_bytes(v.available.host) << " are available ("
        << describe(v.available.host_source) << ")";
  }
  if (!any) return {};
  out << ". Spread the problem over more ranks or hosts, or make it smaller";
  return out.str();
}

}  // namespace ordo::rt
