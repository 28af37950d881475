// Trace recording: per-worker buffers of fixed-size events, written to one file per rank.
//
// The file format is the contract between this recorder and tools/ordo-trace; it is specified
// in docs/trace-format.md and its layouts live in runtime/trace_format.hpp, which both include.
//
// Protocol:
//   open()          -- creates a temporary file beside the path (`<path>.tmp-<nonce>`) and
//                      writes its header. One Recorder per Runtime.
//   begin_run(g)    -- on the caller's thread before a run: writes g's name tables when g is
//                      new to this file (task and location ids in events are file-global:
//                      graph-local id + the graph's base), resets the request times.
//   hooks           -- on worker w, into buffer w; on the caller's thread, into buffer
//                      `control()` (= workers). A full buffer is written to the file by the
//                      thread that filled it, which then records a flush event (its duration)
//                      so the cost of tracing shows in the trace itself.
//   end_run()       -- on the caller's thread: flushes every buffer and appends an end record,
//                      so the file is complete after every run. The next write seeks back over
//                      the end record.
//   ~Recorder       -- a last flush (events recorded after the last run: parks, unparks), end
//                      record, header rewritten with the final clock offset; then the
//                      temporary is synced and renamed over the path (publish()).
// The file appears at its path whole or not at all, as an app's --output does: a process
// killed while it records (or a write that fails) leaves the previous file at the path as it
// was, and its temporary beside it, which nothing reads. Publishing once, at the end, rather
// than after every run: a file renamed into place could not be appended to without making it
// partial again, and a copy per run would cost the whole trace each time.
// Buffers are guarded by a per-buffer spin flag rather than owned outright by their worker:
// workers record park events after their last task, while the caller flushes at the end of a
// run. The flag is uncontended except at that moment (one exchange and one store per event).
//
// Off costs one predictable branch per hook: the engine holds a Recorder pointer that is null
// when tracing is off, and the pool's observer pointer is null.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/graph.hpp"
#include "runtime/trace_format.hpp"
#include "scheduler/pool.hpp"

namespace ordo::rt::trace {

struct RecorderConfig {
  std::string path;  // this rank's file (see rank_path)
  unsigned workers = 1;
  unsigned rank = 0;
  unsigned ranks = 1;
  std::size_t buffer_events = 1u << 16;  // per buffer; at least 2
  std::int64_t clock_offset_ns = 0;
  std::uint64_t run_id = 0;  // the same on every rank of one run (FileHeader::run_id)
};

// Placement of a graph over ranks, for the minimum-bytes figure. Empty: everything on rank 0.
struct Placement {
  std::vector<std::uint32_t> task_rank;      // per task
  std::vector<std::uint32_t> location_home;  // per location
};

class Recorder final : public sched::Observer {
 public:
  // File of `rank` for a trace at `base`: `base` itself for a single rank, otherwise
  // `base.rank<N>` (docs/trace-format.md).
  static std::string rank_path(const std::string& base, unsigned rank, unsigned ranks);

  // Opens the file and writes the header. On failure returns null and sets `error`.
  static std::unique_ptr<Recorder> open(const RecorderConfig& config, std::string& error);

  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  unsigned control() const { return workers_; }  // buffer of the runtime's caller thread

  // Nanoseconds since this file's epoch.
  std::uint64_t now() const {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count()) -
           epoch_ns_;
  }

  // Caller's thread, before and after a run (see the protocol above). `serial` identifies the
  // graph for the lifetime of the process (a graph's first run writes its tables).
  void begin_run(const Graph& graph, std::uint64_t serial, std::uint64_t iterations,
                 const Placement* placement = nullptr);
  void end_run(std::uint64_t iterations_run);

  std::uint64_t epoch_ns() const { return epoch_ns_; }  // steady clock at the epoch
  // Set by the transport after clock alignment; written to the header at every end_run.
  void set_clock_offset(std::int64_t ns) { clock_offset_ns_ = ns; }

  // Hooks. `worker` is the buffer of the calling thread; task and location ids are those of
  // the graph of the current run.
  void task_begin(unsigned worker, std::uint32_t task, std::uint64_t iteration) {
    Event e;
    e.time = now();
    e.kind = static_cast<std::uint8_t>(Kind::task_begin);
    e.task = task + task_base_;
    e.arg0 = iteration;
    append(worker, e);
  }
  // Also the request time of the task's next instance (its handles re-request now).
  void task_end(unsigned worker, std::uint32_t task, std::uint64_t iteration) {
    Event e;
    e.time = now();
    requested_[task].store(e.time, std::memory_order_relaxed);
    e.kind = static_cast<std::uint8_t>(Kind::task_end);
    e.task = task + task_base_;
    e.arg0 = iteration;
    append(worker, e);
  }
  // Instance `iteration` of `task` is granted `location` by the release of instance
  // `releaser_iteration` of `releaser`. Call before the grant takes effect.
  void grant(unsigned worker, std::uint32_t task, std::uint32_t location, std::uint64_t iteration,
             std::uint32_t releaser, std::uint64_t releaser_iteration) {
    Event e;
    e.time = now();
    e.kind = static_cast<std::uint8_t>(Kind::grant);
    e.task = task + task_base_;
    e.location = location + location_base_;
    e.arg0 = iteration;
    e.arg1 = requested_[task].load(std::memory_order_relaxed);
    // kNone: granted by a release on another rank (the GRANT message's receive event links it).
    e.peer = releaser == kNone ? kNone : releaser + task_base_;
    e.flags = releaser != kNone && releaser_iteration + 1 == iteration ? kPrevIteration : 0;
    append(worker, e);
  }
  // For fiber tasks (scheduler/fiber): the fiber of instance `iteration` of `task` suspends
  // waiting for `location`, and resumes once granted.
  void fiber_suspend(unsigned worker, std::uint32_t task, std::uint32_t location,
                     std::uint64_t iteration) {
    fiber_event(Kind::fiber_suspend, worker, task, location, iteration);
  }
  void fiber_resume(unsigned worker, std::uint32_t task, std::uint32_t location,
                    std::uint64_t iteration) {
    fiber_event(Kind::fiber_resume, worker, task, location, iteration);
  }
  // For the transport (not wired yet): a message of `bytes` about `location` to / from
  // `peer`. `tag` identifies the message among those between the two ranks; the send and its
  // receive carry the same tag. `task` may be kNone.
  void send(unsigned worker, std::uint32_t peer, std::uint32_t location, std::uint32_t task,
            std::uint64_t bytes, std::uint64_t tag) {
    message(Kind::send, worker, peer, location, task, bytes, tag);
  }
  void receive(unsigned worker, std::uint32_t peer, std::uint32_t location, std::uint32_t task,
               std::uint64_t bytes, std::uint64_t tag) {
    message(Kind::receive, worker, peer, location, task, bytes, tag);
  }

  // sched::Observer
  void on_park(unsigned worker) override { simple(Kind::park, worker, kNone); }
  void on_unpark(unsigned worker) override { simple(Kind::unpark, worker, kNone); }
  void on_steal(unsigned thief, unsigned victim) override { simple(Kind::steal, thief, victim); }

  // Appends a complete event (its time already set) to buffer `buffer`; ids are file-global.
  // The hooks above go through here; tests use it to write synthetic traces.
  void append(unsigned buffer, Event e);

 private:
  struct alignas(64) Buffer {
    std::atomic<bool> busy{false};
    std::uint32_t count = 0;
    std::unique_ptr<Event[]> events;
  };

  Recorder(const RecorderConfig& config, std::FILE* file, std::string temporary);
  void fiber_event(Kind kind, unsigned worker, std::uint32_t task, std::uint32_t location,
                   std::uint64_t iteration);
  void message(Kind kind, unsigned worker, std::uint32_t peer, std::uint32_t location,
               std::uint32_t task, std::uint64_t bytes, std::uint64_t tag);
  void simple(Kind kind, unsigned worker, std::uint32_t peer);
  // Writes buffer b's events (b locked by the caller) and empties it; returns the bytes
  // written and sets `start`/`duration`.
  std::uint64_t write_buffer(unsigned index, Buffer& b, std::uint64_t& start,
                             std::uint64_t& duration);
  std::uint64_t flush_all();  // returns the bytes written
  void write_record(Record type, std::uint32_t arg, const void* data, std::uint64_t bytes);
  void write_end();
  void write_header();

  // Syncs and closes the temporary and renames it over path_ (then syncs the directory); on
  // any failure removes it and says so on stderr (a destructor cannot throw): path_ is left
  // as it was.
  void publish();

  std::FILE* file_;
  std::string path_;
  std::string temporary_;  // where the file is written until publish()
  unsigned workers_;
  unsigned rank_;
  unsigned ranks_;
  std::size_t capacity_;
  std::uint64_t epoch_ns_;
  std::int64_t clock_offset_ns_;
  std::uint64_t run_id_;
  std::unique_ptr<Buffer[]> buffers_;  // workers_ + 1

  // Request time of each task's next instance: stored at its task_end, loaded by the grants
  // of that instance. For a dataflow task the release chain orders the two (engine.hpp); a
  // fiber task can be granted while its instance still runs (it released early), so the
  // slots are atomics (relaxed: a time stamp, nothing is published through it) and such a
  // grant sees the end of an earlier instance. Fiber waits are read from the fiber
  // suspend/resume events instead (ordo-trace does).
  std::unique_ptr<std::atomic<std::uint64_t>[]> requested_;
  std::uint32_t task_base_ = 0;
  std::uint32_t location_base_ = 0;

  std::mutex file_mu_;  // guards the file and everything below
  long end_offset_ = -1;  // position of the end record, -1 when none is written
  std::uint64_t events_written_ = 0;
  std::vector<std::uint64_t> graph_serials_;
  std::vector<std::uint32_t> graph_task_base_, graph_location_base_;
  std::uint32_t next_task_base_ = 0;
  std::uint32_t next_location_base_ = 0;
};

}  // namespace ordo::rt::trace
