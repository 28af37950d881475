// Peak resident memory, for the result lines that ordo-bench-memory reads: each process reads
// its own VmHWM from /proc/self/status, and a job's ranks report theirs through rank 0's
// result line, so it works under ordorun, mpirun and srun alike (no launcher accounting).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace ordo::app {

// A field of this process's /proc/self/status counted in kB ("VmHWM", "VmRSS", "VmSize"), in
// bytes; 0 where /proc does not say.
inline std::uint64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  const std::string key = field + ":";
  std::string word;
  std::uint64_t kb = 0;
  while (status >> word)
    if (word == key) {
      status >> kb;
      return kb * 1024;
    }
  return 0;
}

// This process's peak resident set (VmHWM) in bytes; 0 where /proc does not say.
inline std::uint64_t peak_rss_bytes() { return status_bytes("VmHWM"); }

// The result line's field: "peak_rss=B0,B1,..." with each rank's peak in bytes, rank order.
inline std::string peak_rss_field(const std::vector<std::uint64_t>& per_rank) {
  std::string field = "peak_rss=";
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    if (r) field += ',';
    field += std::to_string(per_rank[r]);
  }
  return field;
}

}  // namespace ordo::app
