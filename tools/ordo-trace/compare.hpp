// `ordo-trace compare A B`: what changed between two runs of the same graph (a block size, a
// temporal-blocking depth): a verdict (which run was faster, by how much, the two largest
// reasons), then per task kind and per location, compute, lock-wait and critical-path share
// in each run and the change, sorted by impact. Per iteration when the iteration counts
// differ; a loud warning when the graphs differ.
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
  // What sorts the rows: |compute change| + |wait change|, per iteration when normalised.
  std::int64_t impact() const;
  double scale_a = 1, scale_b = 1;  // 1 / iterations when per iteration, else 1
};

struct Comparison {
  std::int64_t window_a = 0, window_b = 0, critical_a = 0, critical_b = 0;
  // The critical path's waits (analysis.hpp, CriticalPath).
  std::int64_t dependency_a = 0, dependency_b = 0, worker_a = 0, worker_b = 0;
  std::int64_t between_a = 0, between_b = 0;
  double utilisation_a = 0, utilisation_b = 0;  // busy / window, all workers
  std::uint64_t iterations_a = 0, iterations_b = 0;
  // Every figure in ns is divided by its run's iterations when the counts differ.
  bool per_iteration = false;
  // The user's tasks (name and accesses) differ: the figures compare different work.
  bool different_graphs = false;
  std::uint64_t tasks_a = 0, tasks_b = 0;    // user tasks in each trace's tables
  std::vector<std::string> only_a, only_b;   // task names in one trace only (first few)
  std::vector<CompareRow> kinds, locations;  // sorted by impact, largest first
  // The verdict: the first line of the text, and its two largest reasons.
  std::string verdict;
  std::vector<std::string> reasons;
};

Comparison compare(const Summary& a, const Trace& ta, const Summary& b, const Trace& tb);
std::string render_text(const Comparison& c, const std::string& name_a, const std::string& name_b);
nlohmann::json render_json(const Comparison& c);

}  // namespace ordo::tracefile
