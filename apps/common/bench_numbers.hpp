// The small numeric helpers of the benchmark drivers: the median of repetitions, the order of
// systems in a round, ratios as printed, size lists given on the command line, and what the machine
// was doing (load average, CPU time). One copy for every driver.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

#include "cli_number.hpp"

namespace ordo::bench {

// The median of `v`: the middle value, or the mean of the two middle ones; 0 when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// The order in which round `round` (from 0) runs `n` systems that take turns: as listed in
// even rounds, reversed in odd ones. Under a load that drifts during an invocation, a fixed
// order gives the first system other conditions than the last in every round; alternating
// gives each system both ends.
inline std::vector<std::size_t> round_order(std::size_t n, unsigned round) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = round % 2 == 0 ? i : n - 1 - i;
  return order;
}

// num / den with three decimals, or "nan" when either is not positive (a system that failed,
// was skipped or measured nothing): what the drivers print as a ratio.
inline std::string format_ratio(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "nan";
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", num / den);
  return text;
}

// What a size list may hold: integers in [min, max] that are multiples of `multiple_of`.
struct SizeRule {
  std::uint64_t min = 1;
  std::uint64_t max = std::uint64_t{1} << 40;
  std::uint64_t multiple_of = 1;
};

// Parses a comma-separated list of sizes ("8192,65536") given with `flag`. Throws ordo::Error
// naming the flag, the offending item and what is allowed.
inline std::vector<std::size_t> parse_size_list(const std::string& text, const std::string& flag,
                                                const SizeRule& rule) {
  std::vector<std::size_t> out;
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t c = text.find(',', pos);
    if (c == std::string::npos) c = text.size();
    const std::string item = text.substr(pos, c - pos);
    const bool ok = cli::integer_problem(item, rule.min, rule.max).empty();
    const std::uint64_t v = ok ? std::stoull(item) : 0;
    if (!ok || v % rule.multiple_of != 0)
      throw Error(flag + ": '" + item + "' is not a size in [" + std::to_string(rule.min) + ", " +
                  std::to_string(rule.max) + "]" +
                  (rule.multiple_of > 1 ? ", a multiple of " + std::to_string(rule.multiple_of)
                                        : std::string()) +
                  "; give a comma-separated list such as " + std::to_string(rule.min) + "," +
                  std::to_string(rule.min * 8));
    out.push_back(static_cast<std::size_t>(v));
    pos = c + 1;
  }
  return out;
}

// CPU time of the whole process (every thread), in seconds.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The first field of /proc/loadavg (the 1-minute load average), or "?" where there is none.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  return in >> first ? first : "?";
}

}  // namespace ordo::bench
