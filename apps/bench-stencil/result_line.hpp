// Parsing of the one-line results the ordo apps and the baselines print
// ("app=heat2d size=NxM blocks=BxC iters=I workers=W seconds=S gstencils=G verify=V [system=S]")
// and of --help texts, for ordo-bench-stencil. Header-only and free of I/O, so the unit test
// (tests/apps/test_result_line.cpp) checks exactly what the benchmark runs.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "result_fields.hpp"

namespace ordo::bench {

struct AppResult {
  std::map<std::string, std::string> fields;
  double gstencils = 0;
  double seconds = 0;  // 0 when the line has none
};

// The last result line of `app` in a program's output: a line whose first field is app=<app>
// and that carries a valid gstencils. Other lines (logs, mpirun banners) are skipped.
inline std::optional<AppResult> find_result(std::string_view output, std::string_view app) {
  std::optional<AppResult> found;
  for_each_line(output, [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string head = "app=" + std::string(app);
    if (line.substr(0, head.size()) != head ||
        (line.size() > head.size() && line[head.size()] != ' '))
      return;
    AppResult r;
    r.fields = parse_fields(line);
    auto g = r.fields.count("gstencils") ? parse_number(r.fields["gstencils"]) : std::nullopt;
    if (!g) return;
    r.gstencils = *g;
    if (auto s = r.fields.count("seconds") ? parse_number(r.fields["seconds"]) : std::nullopt)
      r.seconds = *s;
    found = std::move(r);
  });
  return found;
}

// Whether a --help text lists `flag` (e.g. "--tb") as an option name, not merely inside a word.
inline bool help_lists_flag(std::string_view help, std::string_view flag) {
  for (std::size_t at = help.find(flag); at != std::string_view::npos;
       at = help.find(flag, at + 1)) {
    const bool start_ok = at == 0 || help[at - 1] == ' ' || help[at - 1] == ',' ||
                          help[at - 1] == '\n' || help[at - 1] == '\t';
    const std::size_t after = at + flag.size();
    const bool end_ok = after == help.size() || help[after] == ' ' || help[after] == '=' ||
                        help[after] == ',' || help[after] == '\n' || help[after] == '\t';
    if (start_ok && end_ok) return true;
  }
  return false;
}


// The result lines of `app` of every rank in ordorun's output, whose lines are prefixed "[R] "
// (rank R). Lines without the prefix are read as rank 0's; the last valid line of each rank
// counts. Returned in rank order.
inline std::vector<AppResult> find_rank_results(std::string_view output, std::string_view app) {
  std::map<unsigned, std::string> per_rank;  // each rank's lines, prefix removed
  for_each_line(output, [&](std::string_view line) {
    unsigned rank = 0;
    if (line.size() > 3 && line[0] == '[') {
      std::size_t close = line.find("] ");
      unsigned r = 0;
      auto [ptr, ec] = std::from_chars(line.data() + 1, line.data() + (close == line.npos ? 1 : close), r);
      if (close != line.npos && ec == std::errc{} && ptr == line.data() + close) {
        rank = r;
        line.remove_prefix(close + 2);
      }
    }
    per_rank[rank].append(line).push_back('\n');
  });
  std::vector<AppResult> out;
  for (const auto& [rank, text] : per_rank)
    if (auto r = find_result(text, app)) out.push_back(std::move(*r));
  return out;
}

// ucx_perftest's result: the "Final:" row of its table,
//   Final: iterations  p50_usec avg_usec overall_usec  MBps_avg MBps_overall  rate_avg rate_overall
// Bandwidth in decimal megabytes per second for `bytes`-byte messages, from the overall message
// rate (exact, whatever ucx_perftest's "MB" means); from the overall bandwidth column (MiB/s in
// UCX 1.13) when the row has no rate. Nothing when there is no such row.
inline std::optional<double> parse_ucx_perftest_mbps(std::string_view output, std::size_t bytes) {
  std::optional<double> found;
  for_each_line(output, [&](std::string_view line) {
    std::size_t at = line.find("Final:");
    if (at == std::string_view::npos) return;
    line.remove_prefix(at + 6);
    std::vector<double> numbers;
    bool bad = false;
    std::size_t p = 0;
    while (p < line.size()) {
      while (p < line.size() && (line[p] == ' ' || line[p] == '\t' || line[p] == '|' ||
                                 line[p] == '\r'))
        ++p;
      std::size_t e = p;
      while (e < line.size() && line[e] != ' ' && line[e] != '\t' && line[e] != '|' &&
             line[e] != '\r')
        ++e;
      if (e == p) break;
      std::string token(line.substr(p, e - p));
      token.erase(std::remove(token.begin(), token.end(), ','), token.end());  // -N separators
      if (auto v = parse_number(token))
        numbers.push_back(*v);
      else
        bad = true;
      p = e;
    }
    if (bad || numbers.size() < 6) return;
    double mbps = numbers.size() >= 8 ? numbers[7] * static_cast<double>(bytes) / 1e6
                                      : numbers[5] * 1.048576;
    if (mbps > 0) found = mbps;
  });
  return found;
}

}  // namespace ordo::bench
