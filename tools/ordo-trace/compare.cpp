#include "compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/core.h>

namespace ordo::tracefile {

namespace {

double change(double a, double b) { return b - a; }

}  // namespace

std::int64_t CompareRow::impact() const {
  return std::llround(std::fabs(change(compute_a * scale_a, compute_b * scale_b)) +
                      std::fabs(change(wait_a * scale_a, wait_b * scale_b)));
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

// Fills one side (`b` false: A) of the rows, keyed by task kind or location name. A kind's
// lock-wait is the union over its tasks, as each task's is over its instances.
void add_side(const Summary& s, const Trace& t, bool b, std::map<std::string, CompareRow>& kinds,
              std::map<std::string, CompareRow>& locations) {
  std::map<std::string, std::int64_t> on_path;
  std::int64_t path = 0;
  for (const InstanceRec* in : s.critical_path) {
    const std::int64_t d = in->end - in->begin;
    on_path[kind_of(t.ranks[in->rank].tasks[in->task].name)] += d;
    path += d;
  }
  std::map<std::string, std::vector<Interval>> kind_waits;
  for (const TaskRow& tr : s.tasks) {
    if (tr.internal) continue;
    CompareRow& r = kinds[kind_of(tr.name)];
    (b ? r.instances_b : r.instances_a) += tr.instances;
    (b ? r.compute_b : r.compute_a) += tr.compute_ns;
    auto& w = kind_waits[kind_of(tr.name)];
    w.insert(w.end(), tr.wait_intervals.begin(), tr.wait_intervals.end());
  }
  for (auto& [kind, w] : kind_waits)
    (b ? kinds[kind].wait_b : kinds[kind].wait_a) = Coverage(std::move(w)).total();
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

std::vector<CompareRow> sorted(std::map<std::string, CompareRow>& rows, double sa, double sb) {
  std::vector<CompareRow> out;
  for (auto& [name, r] : rows) {
    r.name = name;
    r.scale_a = sa;
    r.scale_b = sb;
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const CompareRow& x, const CompareRow& y) {
    return x.impact() > y.impact();
  });
  return out;
}

// The user's tasks of a trace, each with its accesses (location name, mode): two traces of
// one graph have the same set.
std::set<std::string> graph_of(const Trace& t) {
  std::set<std::string> out;
  const RankTrace& r = t.ranks.front();
  for (const TaskInfo& ti : r.tasks) {
    if (is_internal_name(ti.name)) continue;
    std::string key = ti.name + "(";
    for (const Access& a : ti.accesses)
      key += (a.write ? "w:" : "r:") + r.locations[a.location].name + ",";
    out.insert(key + ")");
  }
  return out;
}

std::string ms(double ns) { return fmt::format("{:.3f}", ns / 1e6); }
std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }
// A change with its share of A: "+1.234 (+12.0%)"; "new" where A had none.
std::string delta(double a, double b) {
  if (a == 0) return fmt::format("{:+.3f} ({})", (b - a) / 1e6, b == 0 ? "=" : "new");
  return fmt::format("{:+.3f} ({:+.1f}%)", (b - a) / 1e6, 100 * (b - a) / a);
}

}  // namespace

Comparison compare(const Summary& a, const Trace& ta, const Summary& b, const Trace& tb) {
  Comparison c;
  c.window_a = a.span_ns;
  c.window_b = b.span_ns;
  c.critical_a = a.critical_ns;
  c.critical_b = b.critical_ns;
  c.dependency_a = a.critical_dependency_ns;
  c.dependency_b = b.critical_dependency_ns;
  c.worker_a = a.critical_worker_ns;
  c.worker_b = b.critical_worker_ns;
  c.between_a = a.critical_between_ns;
  c.between_b = b.critical_between_ns;
  c.utilisation_a = utilisation(a);
  c.utilisation_b = utilisation(b);
  c.iterations_a = a.iterations;
  c.iterations_b = b.iterations;
  c.per_iteration = a.iterations != b.iterations && a.iterations > 0 && b.iterations > 0;
  const double sa = c.per_iteration ? 1.0 / double(a.iterations) : 1.0;
  const double sb = c.per_iteration ? 1.0 / double(b.iterations) : 1.0;

  const std::set<std::string> ga = graph_of(ta), gb = graph_of(tb);
  c.tasks_a = ga.size();
  c.tasks_b = gb.size();
  c.different_graphs = ga != gb;
  auto name_of = [](const std::string& key) { return key.substr(0, key.rfind('(')); };
  for (const std::string& k : ga)
    if (!gb.count(k) && c.only_a.size() < 3) c.only_a.push_back(name_of(k));
  for (const std::string& k : gb)
    if (!ga.count(k) && c.only_b.size() < 3) c.only_b.push_back(name_of(k));

  std::map<std::string, CompareRow> kinds, locations;
  add_side(a, ta, false, kinds, locations);
  add_side(b, tb, true, kinds, locations);
  c.kinds = sorted(kinds, sa, sb);
  c.locations = sorted(locations, sa, sb);

  // The verdict, on the window (per iteration when normalised), and the two largest changes
  // among the kinds' compute and lock-wait and the critical path's waits.
  const double wa = c.window_a * sa, wb = c.window_b * sb;
  const std::string unit = c.per_iteration ? " per iteration" : "";
  if (wa == 0 || wb == 0 || std::fabs(wb - wa) <= 0.005 * std::max(wa, wb)) {
    c.verdict =
        fmt::format("A and B took the same time{} ({} and {} ms of window)", unit, ms(wa), ms(wb));
  } else {
    const bool b_faster = wb < wa;
    c.verdict = fmt::format("{} was faster{}: {} ms against {} ms of window ({:.1f}% less)",
                            b_faster ? "B" : "A", unit, ms(b_faster ? wb : wa),
                            ms(b_faster ? wa : wb), 100 * std::fabs(wb - wa) / std::max(wa, wb));
  }
  struct Reason {
    double a, b;
    std::string what;
  };
  std::vector<Reason> reasons;
  for (const CompareRow& r : c.kinds) {
    reasons.push_back({r.compute_a * sa, r.compute_b * sb, "compute of " + r.name});
    reasons.push_back({r.wait_a * sa, r.wait_b * sb, "lock-wait of " + r.name});
  }
  reasons.push_back(
      {c.dependency_a * sa, c.dependency_b * sb, "critical path waiting for a dependency"});
  reasons.push_back(
      {c.worker_a * sa, c.worker_b * sb, "critical path ready, waiting for a worker"});
  reasons.push_back({c.between_a * sa, c.between_b * sb, "critical path between runs"});
  std::stable_sort(reasons.begin(), reasons.end(), [](const Reason& x, const Reason& y) {
    return std::fabs(x.b - x.a) > std::fabs(y.b - y.a);
  });
  for (std::size_t i = 0; i < reasons.size() && c.reasons.size() < 2; ++i)
    if (reasons[i].b != reasons[i].a)
      c.reasons.push_back(fmt::format(
          "{} {:+.3f} ms{} ({})", reasons[i].what, (reasons[i].b - reasons[i].a) / 1e6, unit,
          reasons[i].a == 0
              ? std::string("new")
              : fmt::format("{:+.1f}%", 100 * (reasons[i].b - reasons[i].a) / reasons[i].a)));
  return c;
}

std::string render_text(const Comparison& c, const std::string& name_a,
                        const std::string& name_b) {
  std::string out = c.verdict;
  if (!c.reasons.empty()) {
    out += "; largest changes (B - A): " + c.reasons[0];
    if (c.reasons.size() > 1) out += "; " + c.reasons[1];
  }
  out += "\n";
  if (c.different_graphs) {
    out += fmt::format("WARNING: A and B are traces of different graphs ({} tasks against {}",
                       c.tasks_a, c.tasks_b);
    auto names = [](const std::vector<std::string>& v) {
      std::string s;
      for (const std::string& n : v) s += (s.empty() ? "" : ", ") + n;
      return s;
    };
    if (!c.only_a.empty()) out += "; only in A: " + names(c.only_a);
    if (!c.only_b.empty()) out += "; only in B: " + names(c.only_b);
    out += "): the figures below compare different work, kind by kind\n";
  }
  out += fmt::format("\nA = {} ({} iterations)\nB = {} ({} iterations)\n", name_a, c.iterations_a,
                     name_b, c.iterations_b);
  const double sa = c.per_iteration ? 1.0 / double(c.iterations_a) : 1.0;
  const double sb = c.per_iteration ? 1.0 / double(c.iterations_b) : 1.0;
  if (c.per_iteration)
    out +=
        "the iteration counts differ: every time below is per iteration (total / "
        "iterations)\n";
  out += "\n";
  out += fmt::format("{:<42} {:>12} {:>12} {:>20}\n", "", "A", "B", "B - A");
  auto line = [&](const char* what, std::int64_t a, std::int64_t b) {
    out += fmt::format("{:<42} {:>12} {:>12} {:>20}\n", what, ms(a * sa), ms(b * sb),
                       delta(a * sa, b * sb));
  };
  line("window ms", c.window_a, c.window_b);
  line("critical path ms", c.critical_a, c.critical_b);
  line("  waiting for a dependency ms", c.dependency_a, c.dependency_b);
  line("  ready, waiting for a worker ms", c.worker_a, c.worker_b);
  line("  between runs ms", c.between_a, c.between_b);
  out += fmt::format("{:<42} {:>12} {:>12} {:>+19.1f}%\n", "utilisation", pct(c.utilisation_a),
                     pct(c.utilisation_b), 100 * (c.utilisation_b - c.utilisation_a));
  out += "\ntask kinds, by impact (|compute change| + |lock-wait change|); critical = share of "
         "the critical path's compute\n";
  out += fmt::format(
      "{:<20} {:>9} {:>9} {:>11} {:>11} {:>20} {:>11} {:>11} {:>20} {:>9} "
      "{:>9}\n",
      "kind", "inst A", "inst B", "compute A", "compute B", "change", "wait A", "wait B", "change",
      "crit A", "crit B");
  for (const CompareRow& r : c.kinds)
    out += fmt::format(
        "{:<20} {:>9} {:>9} {:>11} {:>11} {:>20} {:>11} {:>11} {:>20} {:>9} "
        "{:>9}\n",
        r.name, r.instances_a, r.instances_b, ms(r.compute_a * sa), ms(r.compute_b * sb),
        delta(r.compute_a * sa, r.compute_b * sb), ms(r.wait_a * sa), ms(r.wait_b * sb),
        delta(r.wait_a * sa, r.wait_b * sb), pct(r.critical_a), pct(r.critical_b));
  out += "\nlocations, by impact (|lock-wait change|: the time some task waited on each)\n";
  out += fmt::format("{:<24} {:>9} {:>9} {:>11} {:>11} {:>20}\n", "location", "grants A",
                     "grants B", "wait A", "wait B", "change");
  for (const CompareRow& r : c.locations)
    out += fmt::format("{:<24} {:>9} {:>9} {:>11} {:>11} {:>20}\n", r.name, r.instances_a,
                       r.instances_b, ms(r.wait_a * sa), ms(r.wait_b * sb),
                       delta(r.wait_a * sa, r.wait_b * sb));
  out +=
      "\n(times in ms; instances and grants are totals; a kind or location in one run only "
      "shows 0 for the other)\n";
  return out;
}

nlohmann::json render_json(const Comparison& c) {
  using nlohmann::json;
  json j;
  j["verdict"] = c.verdict;
  j["reasons"] = c.reasons;
  j["different_graphs"] = c.different_graphs;
  j["tasks"] = {c.tasks_a, c.tasks_b};
  j["iterations"] = {c.iterations_a, c.iterations_b};
  j["per_iteration"] = c.per_iteration;
  j["window_ns"] = {c.window_a, c.window_b};
  j["critical_ns"] = {c.critical_a, c.critical_b};
  j["critical_dependency_ns"] = {c.dependency_a, c.dependency_b};
  j["critical_worker_ns"] = {c.worker_a, c.worker_b};
  j["critical_between_runs_ns"] = {c.between_a, c.between_b};
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
