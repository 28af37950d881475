// Reading ordo trace files (docs/trace-format.md) and merging the files of a multi-rank run.
//
// The layouts below restate the format the runtime writes (runtime/trace.hpp); the format
// document is the contract between the two, and tests/trace checks that a file the runtime
// writes reads back exactly. The tool itself links nothing of the runtime.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ordo::tracefile {

inline constexpr std::uint32_t kFormatVersion = 1;
inline constexpr std::uint32_t kNone = 0xffffffffu;

enum class Kind : std::uint8_t {
  task_begin = 1,
  task_end = 2,
  grant = 3,
  steal = 4,
  park = 5,
  unpark = 6,
  fiber_suspend = 7,
  fiber_resume = 8,
  send = 9,
  receive = 10,
  flush = 11,
  run_begin = 12,
  run_end = 13,
};
inline constexpr std::uint8_t kMaxKind = 13;
inline constexpr std::uint8_t kPrevIteration = 1;
const char* kind_name(Kind kind);

struct Event {
  std::uint64_t time;
  std::uint64_t arg0;
  std::uint64_t arg1;
  std::uint32_t task;
  std::uint32_t location;
  std::uint32_t peer;
  std::uint16_t worker;
  std::uint8_t kind;
  std::uint8_t flags;

  Kind k() const { return static_cast<Kind>(kind); }
};
static_assert(sizeof(Event) == 40);

struct FileHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint32_t event_size;
  std::uint32_t rank;
  std::uint32_t ranks;
  std::uint32_t workers;
  std::int64_t clock_offset_ns;
  std::uint64_t epoch_ns;
  std::uint8_t reserved[16];
};
static_assert(sizeof(FileHeader) == 64);

struct RecordHeader {
  std::uint32_t type;
  std::uint32_t arg;
  std::uint64_t bytes;
};
static_assert(sizeof(RecordHeader) == 16);

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

RankTrace read_rank(const std::string& path);

// Loads a run from per-rank files, or from a base path whose files are BASE.rank0, ... (a
// single-rank trace is the base path itself). Checks that every rank is there exactly once.
// `align` false ignores the clock offsets (for tests that show why they matter).
Trace load(const std::vector<std::string>& inputs, bool align = true);

}  // namespace ordo::tracefile
