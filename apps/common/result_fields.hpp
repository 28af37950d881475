// The one-line `key=value` results that ordo's apps, baselines and benchmark helpers print, as
// the benchmark drivers read them back: fields of a line, numbers, lines of an output.
// Header-only and free of I/O (tests/apps/test_result_line.cpp checks it).
#pragma once

#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ordo::bench {

// The key=value fields of one line, split at spaces; tokens without '=' are ignored.
inline std::map<std::string, std::string> parse_fields(std::string_view line) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    std::size_t end = pos;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    std::string_view token = line.substr(pos, end - pos);
    if (std::size_t eq = token.find('='); eq != std::string_view::npos && eq > 0)
      out[std::string(token.substr(0, eq))] = std::string(token.substr(eq + 1));
    pos = end;
  }
  return out;
}

// A finite, non-negative number, or nothing.
inline std::optional<double> parse_number(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || !std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

// Calls f(line) for every line of `output`, without its newline.
template <class F>
void for_each_line(std::string_view output, F&& f) {
  std::size_t pos = 0;
  while (pos < output.size()) {
    std::size_t nl = output.find('\n', pos);
    if (nl == std::string_view::npos) nl = output.size();
    f(output.substr(pos, nl - pos));
    pos = nl + 1;
  }
}

}  // namespace ordo::bench
