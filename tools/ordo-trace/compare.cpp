#include "compare.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/core.h>

namespace ordo::tracefile {

std::int64_t CompareRow::impact() const {
  return std::llabs(compute_b - compute_a) + std::llabs(wait_b - wait_a);
}

namespace {

double utilisation(const Summary& s) {
  std::int64_t busy = 0, span = 0;
  for (const WorkerRow& w : s.workers) {
    busy += w.busy_ns;
    span += w.span_ns;
  }
  return span ? double(busy) / double(span) : 0.0;
}

// Fills one side (`b` false: A) of the rows, keyed by task kind or location name.
void add_side(const Summary& s, const Trace& t, bool b, std::map<std::string, CompareRow>& kinds,
              std::map<std::string, CompareRow>& locations) {
  std::map<std::string, std::int64_t> on_path;
  std::int64_t path = 0;
  for (const InstanceRec* in : s.critical_path) {
    const std::int64_t d = in->end - in->begin;
    on_path[kind_of(t.ranks[in->rank].tasks[in->task].name)] += d;
    path += d;
  }
  for (const TaskRow& tr : s.tasks) {
    if (tr.internal) continue;
    CompareRow& r = kinds[kind_of(tr.name)];
    (b ? r.instances_b : r.instances_a) += tr.instances;
    (b ? r.compute_b : r.compute_a) += tr.compute_ns;
    (b ? r.wait_b : r.wait_a) += tr.wait_ns;
  }
  for (auto& [kind, d] : on_path) {
    CompareRow& r = kinds[kind];
    (b ? r.critical_b : r.critical_a) = path ? double(d) / double(path) : 0.0;
  }
  for (const LocationRow& l : s.locations) {
    if (l.internal) continue;
    CompareRow& r = locations[l.name];
    (b ? r.instances_b : r.instances_a) += l.grants;
    (b ? r.wait_b : r.wait_a) += l.wait_ns;
  }
}

std::vector<CompareRow> sorted(std::map<std::string, CompareRow>& rows) {
  std::vector<CompareRow> out;
  for (auto& [name, r] : rows) {
    r.name = name;
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const CompareRow& x, const CompareRow& y) {
    return x.impact() > y.impact();
  });
  return out;
}

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1e6); }
std::string delta_ms(std::int64_t a, std::int64_t b) {
  return fmt::format("{:+.3f}", double(b - a) / 1e6);
}
std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

}  // namespace

Comparison compare(const Summary& a, const Trace& ta, const Summary& b, const Trace& tb) {
  Comparison c;
  c.window_a = a.span_ns;
  c.window_b = b.span_ns;
  c.critical_a = a.critical_ns;
  c.critical_b = b.critical_ns;
  c.utilisation_a = utilisation(a);
  c.utilisation_b = utilisation(b);
  std::map<std::string, CompareRow> kinds, locations;
  add_side(a, ta, false, kinds, locations);
  add_side(b, tb, true, kinds, locations);
  c.kinds = sorted(kinds);
  c.locations = sorted(locations);
  return c;
}

std::string render_text(const Comparison& c, const std::string& name_a,
                        const std::string& name_b) {
  std::string out;
  out += fmt::format("A = {}\nB = {}\n\n", name_a, name_b);
  out += fmt::format("{:<22} {:>12} {:>12} {:>12}\n", "", "A", "B", "B - A");
  out += fmt::format("{:<22} {:>12} {:>12} {:>12}\n", "window ms", ms(c.window_a),
                     ms(c.window_b), delta_ms(c.window_a, c.window_b));
  out += fmt::format("{:<22} {:>12} {:>12} {:>12}\n", "critical path ms", ms(c.critical_a),
                     ms(c.critical_b), delta_ms(c.critical_a, c.critical_b));
  out += fmt::format("{:<22} {:>12} {:>12} {:>+11.1f}%\n", "utilisation", pct(c.utilisation_a),
                     pct(c.utilisation_b), 100 * (c.utilisation_b - c.utilisation_a));
  out += "\ntask kinds, by impact (|compute change| + |lock-wait change|); critical = share of "
         "the critical path's compute\n";
  out += fmt::format("{:<20} {:>9} {:>9} {:>11} {:>11} {:>10} {:>11} {:>11} {:>10} {:>9} "
                     "{:>9}\n",
                     "kind", "inst A", "inst B", "compute A", "compute B", "change", "wait A",
                     "wait B", "change", "crit A", "crit B");
  for (const CompareRow& r : c.kinds)
    out += fmt::format("{:<20} {:>9} {:>9} {:>11} {:>11} {:>10} {:>11} {:>11} {:>10} {:>9} "
                       "{:>9}\n",
                       r.name, r.instances_a, r.instances_b, ms(r.compute_a), ms(r.compute_b),
                       delta_ms(r.compute_a, r.compute_b), ms(r.wait_a), ms(r.wait_b),
                       delta_ms(r.wait_a, r.wait_b), pct(r.critical_a), pct(r.critical_b));
  out += "\nlocations, by impact (|lock-wait change|: the waits each location caused)\n";
  out += fmt::format("{:<24} {:>9} {:>9} {:>11} {:>11} {:>10}\n", "location", "grants A",
                     "grants B", "wait A", "wait B", "change");
  for (const CompareRow& r : c.locations)
    out += fmt::format("{:<24} {:>9} {:>9} {:>11} {:>11} {:>10}\n", r.name, r.instances_a,
                       r.instances_b, ms(r.wait_a), ms(r.wait_b), delta_ms(r.wait_a, r.wait_b));
  out += "\n(times in ms; a kind or location in one run only shows 0 for the other)\n";
  return out;
}

nlohmann::json render_json(const Comparison& c) {
  using nlohmann::json;
  json j;
  j["window_ns"] = {c.window_a, c.window_b};
  j["critical_ns"] = {c.critical_a, c.critical_b};
  j["utilisation"] = {c.utilisation_a, c.utilisation_b};
  auto rows = [](const std::vector<CompareRow>& rs, bool tasks) {
    json out = json::array();
    for (const CompareRow& r : rs) {
      json row = {{"name", r.name}, {"count", {r.instances_a, r.instances_b}},
                  {"wait_ns", {r.wait_a, r.wait_b}}, {"impact_ns", r.impact()}};
      if (tasks) {
        row["compute_ns"] = {r.compute_a, r.compute_b};
        row["critical_share"] = {r.critical_a, r.critical_b};
      }
      out.push_back(row);
    }
    return out;
  };
  j["kinds"] = rows(c.kinds, true);
  j["locations"] = rows(c.locations, false);
  return j;
}

}  // namespace ordo::tracefile
