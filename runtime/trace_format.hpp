// The ordo trace file's layouts (docs/trace-format.md): the one definition that the recorder
// (runtime/trace.hpp) writes and ordo-trace (tools/ordo-trace) reads. Standard headers only, so
// that the tool includes it without the runtime (tests/layering.py allows exactly this file).
// Any change to a layout bumps kFormatVersion.
#pragma once

#include <cstdint>

namespace ordo::rt::trace {

inline constexpr std::uint32_t kFormatVersion = 2;
// The oldest version readers still take: version 1 lacks the run id.
inline constexpr std::uint32_t kOldestVersion = 1;
inline constexpr std::uint32_t kNone = 0xffffffffu;  // no task / location / peer
inline constexpr char kMagic[8] = {'O', 'R', 'D', 'O', 'T', 'R', 'C', '\0'};

enum class Kind : std::uint8_t {
  task_begin = 1,     // task, arg0 = iteration
  task_end = 2,       // task, arg0 = iteration
  grant = 3,          // task granted, location, arg0 = its iteration, arg1 = request time,
                      // peer = releasing task (kNone: none), flags & kPrevIteration
  steal = 4,          // peer = victim worker
  park = 5,           // the worker found no work and sleeps
  unpark = 6,         // it woke up
  fiber_suspend = 7,  // task, location it waits for, arg0 = iteration
  fiber_resume = 8,   // task, location, arg0 = iteration
  send = 9,           // peer = destination rank, location, task, arg0 = bytes, arg1 = tag
  receive = 10,       // peer = source rank, location, task, arg0 = bytes, arg1 = tag
  flush = 11,         // time = start, arg0 = bytes written, arg1 = duration (ns)
  run_begin = 12,     // arg0 = iterations requested
  run_end = 13,       // arg0 = iterations run
};
inline constexpr std::uint8_t kMaxKind = 13;
// grant: the releasing instance is of iteration arg0 - 1 (else of iteration arg0).
inline constexpr std::uint8_t kPrevIteration = 1;

// One event, 40 bytes, written to the file as is (little-endian hosts only).
struct Event {
  std::uint64_t time = 0;  // ns since the file's epoch, on this rank's clock
  std::uint64_t arg0 = 0;
  std::uint64_t arg1 = 0;
  std::uint32_t task = kNone;
  std::uint32_t location = kNone;
  std::uint32_t peer = kNone;
  std::uint16_t worker = 0;  // buffer index: worker, or workers for the caller's thread
  std::uint8_t kind = 0;
  std::uint8_t flags = 0;

  Kind k() const { return static_cast<Kind>(kind); }
};
static_assert(sizeof(Event) == 40, "Event is part of the file format");

struct FileHeader {
  char magic[8];  // kMagic
  std::uint32_t version;
  std::uint32_t header_size;  // sizeof(FileHeader)
  std::uint32_t event_size;   // sizeof(Event)
  std::uint32_t rank;
  std::uint32_t ranks;
  std::uint32_t workers;          // buffers = workers + 1 (the last: caller's thread)
  std::int64_t clock_offset_ns;   // add to an event time to get the job's common clock
  std::uint64_t epoch_ns;         // steady clock at the epoch (informational)
  // Version 2: the same number in every rank's file of one run, different between runs
  // (drawn by rank 0 at start-up); 0 in a single-rank run. Version 1: reserved (zero).
  std::uint64_t run_id;
  std::uint8_t reserved[8];
};
static_assert(sizeof(FileHeader) == 64, "FileHeader is part of the file format");

enum class Record : std::uint32_t { graph = 1, events = 2, end = 3 };

struct RecordHeader {
  std::uint32_t type;   // Record
  std::uint32_t arg;    // events: buffer index; graph: graph id
  std::uint64_t bytes;  // payload size
};
static_assert(sizeof(RecordHeader) == 16, "RecordHeader is part of the file format");

}  // namespace ordo::rt::trace
