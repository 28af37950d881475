// What `ordo-trace summary` reports, computed from a loaded trace (docs/tracing.md defines
// each figure). Exporters reuse the instance matching done here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace_file.hpp"

namespace ordo::tracefile {

using Interval = std::pair<std::int64_t, std::int64_t>;  // [first, second), aligned ns

// An instance's identity, for maps from instances to what the tools know of them.
struct InstanceKey {
  std::uint32_t rank, task;
  std::uint64_t iteration;
  bool operator==(const InstanceKey&) const = default;
};
struct InstanceKeyHash {
  std::size_t operator()(const InstanceKey& k) const {
    return std::hash<std::uint64_t>()(k.iteration * 1000003u ^ (std::uint64_t(k.task) << 20) ^
                                      k.rank);
  }
};

// One executed task instance.
struct InstanceRec {
  std::uint32_t rank = 0, task = 0, worker = 0;
  std::uint64_t iteration = 0;
  std::int64_t begin = 0, end = 0;  // aligned ns
  std::int64_t requested = -1;      // request time of its locks, -1: no recorded grant
  std::int64_t ready = -1;          // its last grant
  const Event* last_grant = nullptr;  // that grant's event (the critical path follows it)
  std::int64_t suspended = -1;      // fiber tasks: time suspended in acquire, -1: never
  // When it could otherwise have run: its request and every lock but the last one granted.
  std::int64_t otherwise = -1;
  // The location that held it up: its last grant (a fiber task: where it suspended longest).
  std::uint32_t blocker = kNone;
  // Lock wait: from `otherwise` to its last grant, counted while a worker of its rank was out
  // of task bodies (so it could have run it); a fiber task: its suspensions, likewise.
  std::int64_t wait_ns = 0;
  // Where it waited: collect_instances sets [otherwise, last grant) (a fiber task: its
  // suspensions); measure_lock_waits keeps the parts that count (wait_ns is their length).
  std::vector<Interval> waits;
  bool internal = false;  // a task of a helper graph (is_internal_name)
};

// Task and location names beginning "ordo." belong to the runtime's and the apps' own helper
// graphs (the public gather, api/gather.cpp): the summary lists them apart and leaves their runs out
// of the window.
bool is_internal_name(const std::string& name);
// A task family's kind: its name without the trailing index ("step[1,2]" -> "step").
std::string kind_of(const std::string& name);

// A union of disjoint time intervals with the covered length up to any time, for clipping
// durations to the runs.
class Coverage {
 public:
  Coverage() = default;
  explicit Coverage(std::vector<std::pair<std::int64_t, std::int64_t>> intervals);
  std::int64_t overlap(std::int64_t a, std::int64_t b) const;  // covered length of [a, b)
  std::int64_t total() const { return prefix_.empty() ? 0 : prefix_.back(); }
  // The covered parts of [a, b), appended to `out`.
  void clip(std::int64_t a, std::int64_t b, std::vector<Interval>& out) const;
  const std::vector<std::pair<std::int64_t, std::int64_t>>& intervals() const { return iv_; }

 private:
  std::int64_t upto(std::int64_t x) const;
  std::vector<std::pair<std::int64_t, std::int64_t>> iv_;
  std::vector<std::int64_t> prefix_;  // covered length up to the end of each interval
};

struct WorkerRow {
  std::uint32_t rank = 0, worker = 0;
  std::uint64_t instances = 0, steals = 0, flushes = 0;
  std::int64_t busy_ns = 0, idle_ns = 0, flush_ns = 0, span_ns = 0;
  // Wall-clock time this worker lost to lock waits: out of task bodies while an instance of
  // its rank waited for a lock, at most one instance per free worker (lock_wait_by_worker).
  std::int64_t lock_wait_ns = 0;
  double utilisation() const { return span_ns ? double(busy_ns) / double(span_ns) : 0.0; }
};

struct TaskRow {
  std::string name;
  bool internal = false;
  std::uint64_t instances = 0;
  // wait_ns: the union of its instances' lock waits (time in which some instance waited),
  // so at most the window; wait_intervals are that union's intervals.
  std::int64_t compute_ns = 0, wait_ns = 0;
  std::vector<Interval> wait_intervals;
  double compute_share() const {
    return compute_ns + wait_ns ? double(compute_ns) / double(compute_ns + wait_ns) : 0.0;
  }
};

struct LocationRow {
  std::string name;
  bool internal = false;
  std::uint64_t grants = 0;
  std::uint64_t held_up = 0;  // instances whose lock wait it caused
  // Time in which some instance waited on it: the union of those instances' lock waits.
  std::int64_t wait_ns = 0;
  std::vector<Interval> wait_intervals;
  std::uint64_t bytes = 0, messages = 0, min_bytes = 0;
};

struct PeerRow {
  std::uint32_t from = 0, to = 0;
  std::uint64_t bytes = 0, messages = 0, min_bytes = 0;
};

struct Summary {
  std::uint32_t ranks = 0;
  std::uint64_t iterations = 0;  // most instances of any one task
  // The runs of the user's graphs on each rank (run_begin to run_end, on the common clock);
  // helper graphs' runs and the time between runs are left out.
  std::vector<Coverage> runs;
  std::int64_t span_ns = 0;  // the window: the union of every rank's runs
  std::vector<WorkerRow> workers;
  std::vector<TaskRow> tasks;          // by name, first-seen order
  std::vector<LocationRow> locations;  // by name
  std::vector<PeerRow> peers;
  std::uint64_t unmatched_messages = 0;  // sends without receive or receives without send
  std::uint64_t inverted_messages = 0;   // received before sent: the clock offsets are off
  // Critical path (critical_path()): its length (first begin to last end), the part of it in
  // task bodies, the messages between ranks on it, and its instances.
  std::int64_t critical_ns = 0, critical_compute_ns = 0;
  std::int64_t critical_dependency_ns = 0, critical_worker_ns = 0, critical_between_ns = 0;
  std::vector<Interval> critical_gaps;  // the path's gaps between runs
  std::uint64_t critical_messages = 0;
  std::int64_t lock_wait_ns = 0;  // wall-clock worker time lost to lock waits, all workers
  std::vector<const InstanceRec*> critical_path;  // first to last
  std::vector<InstanceRec> instances;             // every executed instance
};

// A send matched with its receive.
struct MessagePair {
  std::uint32_t from, to;
  const Event* send;
  const Event* receive;
};

std::vector<InstanceRec> collect_instances(const Trace& t);
// Sets each instance's lock wait and the location that held it up (docs/tracing.md), inside
// each rank's `runs` (user_runs).
void measure_lock_waits(const Trace& t, std::vector<InstanceRec>& instances,
                        const std::vector<Coverage>& runs);
// Per worker of rank `rank`, the wall-clock time it lost to lock waits inside `runs`: at each
// moment the rank loses min(free workers, instances waiting) workers, charged to its free
// workers lowest index first, so each worker's time is a set of intervals that do not overlap
// and the workers' times add up to the rank's.
std::vector<std::int64_t> lock_wait_by_worker(const Trace& t, std::uint32_t rank,
                                              const std::vector<InstanceRec>& instances,
                                              const Coverage& runs);
std::vector<MessagePair> match_messages(const Trace& t, std::uint64_t* unmatched = nullptr);
// The user's runs of one rank (see Summary::runs); a rank with no run: its first to last event.
Coverage user_runs(const Trace& t, const RankTrace& r, const std::vector<InstanceRec>& instances);

// The critical path through the timeline: from the user's instance that ended last, back
// through each instance's enabler (the instance whose release granted its last lock, on this
// rank or, through the messages, on another) until one has none in its run; then on from the
// instance that ended last in the run before (runs are sequential: that one decided when the
// next run could start), through the gap between the runs. Its length, from the first
// instance's begin to the last's end, is its slices plus the waits between them, which are
// split into waiting for a dependency (the enabler's end to the last grant: release, messages),
// ready and waiting for a worker (the last grant to the begin) and between runs (the end of
// the previous run's instance to the next run's start).
struct CriticalPath {
  std::vector<std::size_t> instances;  // indices, first to last
  std::int64_t length_ns = 0, compute_ns = 0;
  std::int64_t dependency_ns = 0, worker_ns = 0, between_runs_ns = 0;
  std::vector<Interval> gaps;  // between runs: [previous run's instance's end, run start)
  std::uint64_t messages = 0;  // messages between ranks along it
};
CriticalPath critical_path(const Trace& t, const std::vector<InstanceRec>& instances);

Summary summarize(const Trace& t);
std::string render_text(const Summary& s, const Trace& t);
// One line per figure of the summary: what it counts (summary --help and docs/tracing.md).
const char* figure_explanations();
std::string critical_path_line(const Summary& s);
nlohmann::json render_json(const Summary& s, const Trace& t);

}  // namespace ordo::tracefile
