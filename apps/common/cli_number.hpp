// Strict numbers on the command line, shared by every app and tool. CLI11 (2.1) reads "-1"
// into an unsigned as 2^64-1, saturates "18446744073709551616", reads "0x10" as 16 and "010"
// as 8, and takes "nan" and "inf" as reals. These validators look at the text before CLI11
// converts it and let through only plain decimal numbers inside the option's range, so that a
// typo is refused with exit 2 instead of running (for ever, or out of memory):
//
//   cli.add_option("--iters", iters, "time steps")->check(ordo::cli::Integer(1, 1'000'000'000));
//   cli.add_option("--timeout", seconds, "...")->check(ordo::cli::Real(0, 1e7));
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ordo::cli {

// Why `text` is not a decimal integer in [min, max]; empty when it is.
inline std::string integer_problem(const std::string& text, std::uint64_t min, std::uint64_t max) {
  const std::string range = "give a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (text.empty()) return "is empty; " + range;
  if (text.find_first_not_of("0123456789") != std::string::npos)
    return "'" + text + "' is not a plain decimal number (digits only: no sign, no 0x, no spaces); " + range;
  if (text.size() > 1 && text[0] == '0')
    return "'" + text + "' has a leading zero (octal is not read); " + range;
  std::uint64_t v = 0;
  for (char c : text) {
    const auto d = std::uint64_t(c - '0');
    if (v > (max - d) / 10) return "'" + text + "' is too large; " + range;
    v = v * 10 + d;
  }
  if (v < min) return "'" + text + "' is too small; " + range;
  return "";
}

// Why `text` is not a finite decimal real in [min, max]; empty when it is.
inline std::string real_problem(const std::string& text, double min, double max) {
  const std::string range = "give a number from " + CLI::detail::to_string(min) + " to " + CLI::detail::to_string(max);
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string::npos ||
      text.find_first_of("0123456789") == std::string::npos)
    return "'" + text + "' is not a decimal number; " + range;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    return "'" + text + "' is not a usable number; " + range;
  if (v < min || v > max) return "'" + text + "' is out of range; " + range;
  return "";
}

inline CLI::Validator Integer(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator([min, max](std::string& text) { return integer_problem(text, min, max); },
                        "INT in [" + std::to_string(min) + ", " + std::to_string(max) + "]", "Integer");
}

inline CLI::Validator Real(double min, double max) {
  return CLI::Validator([min, max](std::string& text) { return real_problem(text, min, max); },
                        "NUMBER in [" + CLI::detail::to_string(min) + ", " + CLI::detail::to_string(max) + "]",
                        "Real");
}

// A path option's value: an empty one (`--output ""`, a variable that was not set) names no
// file, and is refused rather than taken as "no --output".
inline CLI::Validator Path() {
  return CLI::Validator(
      [](std::string& text) {
        return text.empty() ? std::string("is empty; give a path") : std::string();
      },
      "PATH", "Path");
}

}  // namespace ordo::cli
