// Parsing of the one-line results the ordo apps and the baselines print
// ("app=heat2d size=NxM blocks=BxC iters=I workers=W seconds=S gstencils=G verify=V [system=S]")
// and of --help texts, for ordo-bench-stencil. Header-only and free of I/O, so the unit test
// (tests/apps/test_result_line.cpp) checks exactly what the benchmark runs.
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

struct AppResult {
  std::map<std::string, std::string> fields;
  double gstencils = 0;
  double seconds = 0;  // 0 when the line has none
};

// The last result line of `app` in a program's output: a line whose first field is app=<app>
// and that carries a valid gstencils. Other lines (logs, mpirun banners) are skipped.
inline std::optional<AppResult> find_result(std::string_view output, std::string_view app) {
  std::optional<AppResult> found;
  std::size_t pos = 0;
  while (pos < output.size()) {
    std::size_t nl = output.find('\n', pos);
    if (nl == std::string_view::npos) nl = output.size();
    std::string_view line = output.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string head = "app=" + std::string(app);
    if (line.substr(0, head.size()) != head ||
        (line.size() > head.size() && line[head.size()] != ' '))
      continue;
    AppResult r;
    r.fields = parse_fields(line);
    auto g = r.fields.count("gstencils") ? parse_number(r.fields["gstencils"]) : std::nullopt;
    if (!g) continue;
    r.gstencils = *g;
    if (auto s = r.fields.count("seconds") ? parse_number(r.fields["seconds"]) : std::nullopt)
      r.seconds = *s;
    found = std::move(r);
  }
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

}  // namespace ordo::bench
