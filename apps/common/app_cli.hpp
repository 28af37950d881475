// Shared command-line plumbing of the ordo apps: shape parsing ("NxM"), the one-line result
// format, and the exit-status policy (0 ok, 1 verification failed, 2 bad input).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <ordo/ordo.hpp>

namespace ordo::app {

// Parses "N", "NxM", "NxMxK"... into exactly `dims` positive extents. Throws ordo::Error.
inline std::vector<std::size_t> parse_shape(const std::string& text, std::size_t dims,
                                            const std::string& flag) {
  std::vector<std::size_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t x = text.find('x', pos);
    if (x == std::string::npos) x = text.size();
    std::string part = text.substr(pos, x - pos);
    std::size_t value = 0;
    bool ok = !part.empty() && part.size() < 19;
    for (char c : part) ok = ok && c >= '0' && c <= '9';
    if (ok) value = std::stoull(part);
    if (!ok || value == 0)
      throw Error(flag + " '" + text + "': expected " + std::to_string(dims) +
                  " positive integer(s) joined by 'x', e.g. " +
                  (dims == 1 ? std::string("1024") : dims == 2 ? "1024x768" : "128x128x128"));
    out.push_back(value);
    pos = x + 1;
  }
  if (out.size() != dims)
    throw Error(flag + " '" + text + "' has " + std::to_string(out.size()) +
                " extent(s); this app needs " + std::to_string(dims));
  return out;
}

inline std::string join_shape(const std::vector<std::size_t>& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// Runs an app's main body with the exit-status policy: ordo::Error and CLI errors print a
// message and return 2; other exceptions print and return 1.
inline int guarded_main(const char* app, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", app, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: failed: %s\n", app, e.what());
    return 1;
  }
}

// Parses the command line; returns -1 to go on, or the exit status to return now.
inline int parse_cli(CLI::App& cli, int argc, char** argv) {
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(cli.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\nRun with --help for the list of flags.\n",
                 cli.get_name().c_str(), e.what());
    return 2;
  }
  return -1;
}

}  // namespace ordo::app
