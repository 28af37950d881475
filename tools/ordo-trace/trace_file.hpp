// Reading ordo trace files (docs/trace-format.md) and merging the files of a multi-rank run.
//
// The layouts are the runtime's own (runtime/trace_format.hpp, standard headers only): the tool
// links nothing of the runtime, and tests/trace checks that a file the runtime writes reads
// back exactly.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/trace_format.hpp"

namespace ordo::tracefile {

using rt::trace::Event;
using rt::trace::FileHeader;
using rt::trace::Kind;
using rt::trace::kFormatVersion;
using rt::trace::kMaxKind;
using rt::trace::kNone;
using rt::trace::kOldestVersion;
using rt::trace::kPrevIteration;
using rt::trace::RecordHeader;
const char* kind_name(Kind kind);

struct Access {
  std::uint32_t location;  // file-global id
  bool write;
};

struct TaskInfo {
  std::string name;
  std::uint32_t graph = 0;
  std::uint32_t rank = 0;  // where the task runs
  std::vector<Access> accesses;
};

struct LocationInfo {
  std::string name;
  std::uint32_t graph = 0;
  std::uint32_t home = 0;  // rank holding the master copy
  std::uint64_t bytes = 0;
};

// One rank's file.
struct RankTrace {
  std::string path;
  std::uint32_t version = 0, rank = 0, ranks = 1, workers = 0;
  std::int64_t clock_offset_ns = 0;
  std::uint64_t epoch_ns = 0;
  std::uint64_t run_id = 0;  // 0: a single-rank run or a version 1 file
  std::vector<TaskInfo> tasks;
  std::vector<LocationInfo> locations;
  // Every event, sorted by time (stable: a buffer's order is kept for equal times).
  std::vector<Event> events;
};

// A whole run: every rank's file, ranks[r].rank == r.
struct Trace {
  std::vector<RankTrace> ranks;
  std::int64_t origin = 0;  // smallest aligned time of any event

  // Event time on the common clock, in ns from the origin (clock offsets applied).
  std::int64_t aligned(const RankTrace& r, const Event& e) const {
    return static_cast<std::int64_t>(e.time) + r.clock_offset_ns - origin;
  }
};

// Bad, truncated, corrupt or too new input; the message names the file and what is wrong.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses one rank's file from its bytes; `name` stands for the file in messages. Throws
// TraceError for anything that is not a well-formed trace; allocates no more than the bytes
// given can fill (fuzzers call this directly).
RankTrace parse_rank(std::span<const std::uint8_t> data, const std::string& name);
RankTrace read_rank(const std::string& path);

// Loads a run from per-rank files, or from a base path whose files are BASE.rank0, ... (a
// single-rank trace is the base path itself). Checks that every rank is there exactly once.
// `align` false ignores the clock offsets (for tests that show why they matter).
Trace load(const std::vector<std::string>& inputs, bool align = true);

}  // namespace ordo::tracefile
