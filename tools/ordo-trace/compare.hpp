// `ordo-trace compare A B`: what changed between two runs of the same graph (a block size, a
// temporal-blocking depth): per task kind and per location, compute, lock-wait and
// critical-path share in each run and the change, sorted by impact.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.hpp"

namespace ordo::tracefile {

struct CompareRow {
  std::string name;  // a task kind, or a location
  std::uint64_t instances_a = 0, instances_b = 0;  // instances (tasks) or grants (locations)
  std::int64_t compute_a = 0, compute_b = 0;       // tasks only
  std::int64_t wait_a = 0, wait_b = 0;
  double critical_a = 0, critical_b = 0;  // share of the critical path's compute (tasks)
  // What sorts the rows: |compute change| + |wait change|.
  std::int64_t impact() const;
};

struct Comparison {
  std::int64_t window_a = 0, window_b = 0, critical_a = 0, critical_b = 0;
  double utilisation_a = 0, utilisation_b = 0;  // busy / window, all workers
  std::vector<CompareRow> kinds, locations;     // sorted by impact, largest first
};

Comparison compare(const Summary& a, const Trace& ta, const Summary& b, const Trace& tb);
std::string render_text(const Comparison& c, const std::string& name_a, const std::string& name_b);
nlohmann::json render_json(const Comparison& c);

}  // namespace ordo::tracefile
