// Shared command-line plumbing of the ordo apps: strict numbers (cli_number.hpp), shape parsing
// ("NxM"), the grid's size against the machine's memory, and the exit-status policy (0 ok,
// 1 verification failed, 2 bad input, running out of memory included).
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli_main.hpp"
#include "cli_number.hpp"

#include <fmt/core.h>
#include <ordo/ordo.hpp>

namespace ordo::app {

// The largest --iters an app takes: a billion steps of even a tiny grid run for hours, and
// more is a typo (or "-1" read as 2^64-1, which CLI11 alone would run for ever).
inline constexpr std::uint64_t max_iters = 1'000'000'000;
// --workers beyond this is refused while parsing; the runtime refuses fewer (more than 4
// workers per processing unit, at least 256) when it starts.
inline constexpr std::uint64_t max_workers = 65536;
// One extent of a grid (a grid's total size is checked against the memory: check_grid_fits).
inline constexpr std::uint64_t max_extent = std::uint64_t{1} << 40;

// Parses "N", "NxM", "NxMxK"... into exactly `dims` positive extents. Throws ordo::Error.
inline std::vector<std::size_t> parse_shape(const std::string& text, std::size_t dims,
                                            const std::string& flag) {
  std::vector<std::size_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t x = text.find('x', pos);
    if (x == std::string::npos) x = text.size();
    const std::string part = text.substr(pos, x - pos);
    const std::string problem = cli::integer_problem(part, 1, max_extent);
    if (!problem.empty())
      throw Error(flag + " '" + text + "': expected " + std::to_string(dims) +
                  " positive integer(s) joined by 'x', e.g. " +
                  (dims == 1 ? std::string("1024") : dims == 2 ? "1024x768" : "128x128x128") +
                  " (" + (part.empty() ? "an extent is missing" : problem) + ")");
    const std::size_t value = std::stoull(part);
    out.push_back(value);
    pos = x + 1;
  }
  if (out.size() != dims)
    throw Error(flag + " '" + text + "' has " + std::to_string(out.size()) +
                " extent(s); this app needs " + std::to_string(dims));
  return out;
}

// The bytes of `copies` float64 grids of `shape`; throws Error (naming `flag_and_value`) when
// they exceed 2^64.
inline std::uint64_t grid_bytes(const std::vector<std::size_t>& shape, std::uint64_t copies,
                                const std::string& flag_and_value) {
  std::uint64_t bytes = sizeof(double) * copies;
  bool overflow = false;
  for (std::size_t e : shape) {
    if (e != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / e) overflow = true;
    if (!overflow) bytes *= e;
  }
  if (overflow)
    throw Error(flag_and_value + " is too large: its " + std::to_string(copies) +
                " grid(s) of 8-byte values need more than 2^64 bytes; use a smaller grid");
  return bytes;
}

// Refuses, before anything is allocated, a grid of `shape` of which the app keeps `copies`
// float64 arrays when this process cannot get them from the system (or their size overflows):
// an exit-2 message in a millisecond instead of std::bad_alloc after a minute of swapping. The
// library's probe (ordo::check_memory_available), which also judges the graph's locations at
// its first run.
inline void check_grid_fits(const std::vector<std::size_t>& shape, std::uint64_t copies,
                            const std::string& flag_and_value) {
  check_memory_available(grid_bytes(shape, copies, flag_and_value),
                         flag_and_value + " is too large: its " + std::to_string(copies) +
                             " grid(s) of 8-byte values");
}

// --verify's rule beside the reference: a result that holds a NaN or an infinity fails, whatever
// the reference says, since a reference with the same flaw agrees with it bit for bit.
inline bool is_finite_result(std::span<const double> values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

inline std::string join_shape(const std::vector<std::size_t>& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// Refuses a block grid with more blocks than points along a dimension (an empty block).
inline void check_blocks_fit(const std::vector<std::size_t>& size,
                             const std::vector<std::size_t>& blocks, const std::string& size_text,
                             const std::string& blocks_text) {
  for (std::size_t d = 0; d < size.size() && d < blocks.size(); ++d)
    if (blocks[d] > size[d])
      throw Error("--blocks " + blocks_text + " has more blocks than points in dimension " +
                  std::to_string(d) + " of --size " + size_text + " (" +
                  std::to_string(blocks[d]) + " > " + std::to_string(size[d]) +
                  "): give at most " + std::to_string(size[d]) + " blocks there");
}

// Refuses more ranks than blocks (block b goes to rank b * ranks / blocks): every rank reaches
// the same verdict before any rank runs, so none waits for a rank that gave up.
inline void check_every_rank_has_a_block(unsigned ranks, const std::vector<std::size_t>& blocks,
                                         const std::string& blocks_text) {
  std::size_t count = 1;
  for (std::size_t b : blocks) count *= b;
  if (ranks > count)
    throw Error("--blocks " + blocks_text + " gives " + std::to_string(count) + " block(s) for " +
                std::to_string(ranks) + " ranks: every rank needs at least one block; give at "
                "least " + std::to_string(ranks) + " blocks (e.g. " + std::to_string(ranks) +
                " along the first dimension) or start fewer ranks");
}

// What an app says when it stopped because another rank failed: which rank, where to look (this
// rank only knows that it stopped), and, when the run wrote checkpoints into `restart_dir`, how
// to go on from the last one.
inline std::string peer_failure_message(const PeerFailure& e, const std::string& restart_dir = "") {
  const std::string r = std::to_string(e.rank());
  return std::string(e.what()) + "; this rank stopped because rank " + r + " failed: rank " + r +
         "'s own message (or the launcher's) says why; mend that and run the job again" +
         (restart_dir.empty() ? std::string()
                              : " with --restart " + restart_dir +
                                    ", which goes on from its newest complete checkpoint");
}

// Runs an app's main body with the exit-status policy (cli_main.hpp): ordo::Error and running
// out of memory print a message and return 2 (1 means "verification failed"); other exceptions
// print and return 1. Another rank's failure (PeerFailure) is an ordo::Error too: exit 2, and
// the message says which rank and where to look, since this rank only knows that it stopped.
inline std::optional<std::string> bad_input(const std::exception& e, const char* app) {
  if (dynamic_cast<const ProtocolError*>(&e) != nullptr)
    return std::string(e.what()) + "; every rank must run the same build of " + app +
           " and of ordo, on a network only the job uses";
  if (const auto* peer = dynamic_cast<const PeerFailure*>(&e)) return peer_failure_message(*peer);
  if (dynamic_cast<const Error*>(&e) != nullptr) return std::string(e.what());
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr)
    return "out of memory; use a smaller --size (or fewer ranks per host)";
  return std::nullopt;
}

inline int guarded_main(const char* app, const std::function<int()>& body) {
  return cli::guarded_main(app, body, [app](const std::exception& e) { return bad_input(e, app); });
}

// What guarded_main says about `e`, in the apps' words, for a program that catches for itself
// (an MPI baseline, which ends the job after a failure of its own); returns the exit status.
inline int report(const char* app, const std::exception& e) {
  return cli::report(app, e, [app](const std::exception& x) { return bad_input(x, app); });
}

}  // namespace ordo::app
