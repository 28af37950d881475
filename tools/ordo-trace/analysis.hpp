// What `ordo-trace summary` reports, computed from a loaded trace (docs/tracing.md defines
// each figure). Exporters reuse the instance matching done here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace_file.hpp"

namespace ordo::tracefile {

// One executed task instance.
struct InstanceRec {
  std::uint32_t rank = 0, task = 0, worker = 0;
  std::uint64_t iteration = 0;
  std::int64_t begin = 0, end = 0;  // aligned ns
  std::int64_t requested = -1;      // request time of its locks, -1: no recorded grant
  std::int64_t ready = -1;          // its last grant
};

struct WorkerRow {
  std::uint32_t rank = 0, worker = 0;
  std::uint64_t instances = 0, steals = 0, flushes = 0;
  std::int64_t busy_ns = 0, idle_ns = 0, flush_ns = 0, span_ns = 0;
  double utilisation() const { return span_ns ? double(busy_ns) / double(span_ns) : 0.0; }
};

struct TaskRow {
  std::string name;
  std::uint64_t instances = 0;
  std::int64_t compute_ns = 0, wait_ns = 0;
  double compute_share() const {
    return compute_ns + wait_ns ? double(compute_ns) / double(compute_ns + wait_ns) : 0.0;
  }
};

struct LocationRow {
  std::string name;
  std::uint64_t grants = 0;
  std::int64_t wait_ns = 0;
  std::uint64_t bytes = 0, messages = 0, min_bytes = 0;
};

struct PeerRow {
  std::uint32_t from = 0, to = 0;
  std::uint64_t bytes = 0, messages = 0, min_bytes = 0;
};

struct Summary {
  std::uint32_t ranks = 0;
  std::uint64_t iterations = 0;  // most instances of any one task
  std::int64_t span_ns = 0;      // the analysed window, summed over ranks' windows' union
  std::vector<WorkerRow> workers;
  std::vector<TaskRow> tasks;          // by name, first-seen order
  std::vector<LocationRow> locations;  // by name
  std::vector<PeerRow> peers;
  std::uint64_t unmatched_messages = 0;  // sends without receive or receives without send
  // Critical path: the heaviest chain of instances along release -> grant edges.
  std::int64_t critical_ns = 0;
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
std::vector<MessagePair> match_messages(const Trace& t, std::uint64_t* unmatched = nullptr);
// [begin, end) of the analysed window of a rank: its first run start to its last run end, or
// its first to last event.
std::pair<std::int64_t, std::int64_t> window(const Trace& t, const RankTrace& r);

Summary summarize(const Trace& t);
std::string render_text(const Summary& s, const Trace& t);
nlohmann::json render_json(const Summary& s, const Trace& t);

}  // namespace ordo::tracefile
