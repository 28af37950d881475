#include "analysis.hpp"

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>

#include <fmt/core.h>

namespace ordo::tracefile {

namespace {

struct Key {
  std::uint32_t rank, task;
  std::uint64_t iteration;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    return std::hash<std::uint64_t>()(k.iteration * 1000003u ^ (std::uint64_t(k.task) << 20) ^
                                      k.rank);
  }
};

// Name-keyed rows in first-seen order.
template <class Row>
Row& row(std::vector<Row>& rows, std::unordered_map<std::string, std::size_t>& index,
         const std::string& name) {
  auto [it, fresh] = index.try_emplace(name, rows.size());
  if (fresh) {
    rows.emplace_back();
    rows.back().name = name;
  }
  return rows[it->second];
}

}  // namespace

std::pair<std::int64_t, std::int64_t> window(const Trace& t, const RankTrace& r) {
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
  for (const Event& e : r.events) {
    if (e.k() == Kind::run_begin) lo = std::min(lo, t.aligned(r, e));
    if (e.k() == Kind::run_end) hi = std::max(hi, t.aligned(r, e));
  }
  if (lo > hi) {
    lo = std::numeric_limits<std::int64_t>::max();
    hi = std::numeric_limits<std::int64_t>::min();
    for (const Event& e : r.events) {
      lo = std::min(lo, t.aligned(r, e));
      hi = std::max(hi, t.aligned(r, e));
    }
  }
  if (lo > hi) return {0, 0};
  return {lo, hi};
}

std::vector<InstanceRec> collect_instances(const Trace& t) {
  std::vector<InstanceRec> out;
  for (const RankTrace& r : t.ranks) {
    std::unordered_map<Key, std::size_t, KeyHash> open;
    std::unordered_map<Key, std::pair<std::int64_t, std::int64_t>, KeyHash> grants;
    std::unordered_map<Key, std::int64_t, KeyHash> suspend_at;
    for (const Event& e : r.events) {
      Key k{r.rank, e.task, e.arg0};
      if (e.k() == Kind::task_begin) {
        InstanceRec in;
        in.rank = r.rank;
        in.task = e.task;
        in.worker = e.worker;
        in.iteration = e.arg0;
        in.begin = in.end = t.aligned(r, e);
        open[k] = out.size();
        out.push_back(in);
      } else if (e.k() == Kind::task_end) {
        auto it = open.find(k);
        if (it == open.end()) continue;  // its begin was before the trace (cannot happen)
        out[it->second].end = t.aligned(r, e);
        open.erase(it);
      } else if (e.k() == Kind::fiber_suspend) {
        suspend_at[k] = t.aligned(r, e);
      } else if (e.k() == Kind::fiber_resume) {
        auto s = suspend_at.find(k);
        auto it = open.find(k);
        if (s == suspend_at.end() || it == open.end()) continue;
        InstanceRec& in = out[it->second];
        in.suspended = std::max<std::int64_t>(in.suspended, 0) + (t.aligned(r, e) - s->second);
        suspend_at.erase(s);
      } else if (e.k() == Kind::grant) {
        auto& g = grants.try_emplace(k, std::numeric_limits<std::int64_t>::max(), -1).first->second;
        g.first = std::min<std::int64_t>(g.first, static_cast<std::int64_t>(e.arg1) + r.clock_offset_ns - t.origin);
        g.second = std::max(g.second, t.aligned(r, e));
      }
    }
    for (InstanceRec& in : out) {
      if (in.rank != r.rank) continue;
      auto it = grants.find(Key{in.rank, in.task, in.iteration});
      if (it == grants.end()) continue;
      in.requested = it->second.first;
      in.ready = it->second.second;
    }
  }
  return out;
}

std::vector<MessagePair> match_messages(const Trace& t, std::uint64_t* unmatched) {
  // (from, to, tag) -> send
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>, const Event*> sends;
  std::uint64_t lost = 0;
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events)
      if (e.k() == Kind::send && !sends.emplace(std::make_tuple(r.rank, e.peer, e.arg1), &e).second)
        ++lost;
  std::vector<MessagePair> out;
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events) {
      if (e.k() != Kind::receive) continue;
      auto it = sends.find(std::make_tuple(e.peer, r.rank, e.arg1));
      if (it == sends.end()) {
        ++lost;
        continue;
      }
      out.push_back({e.peer, r.rank, it->second, &e});
      sends.erase(it);
    }
  lost += sends.size();
  if (unmatched) *unmatched = lost;
  return out;
}

Summary summarize(const Trace& t) {
  Summary s;
  s.ranks = static_cast<std::uint32_t>(t.ranks.size());
  s.instances = collect_instances(t);

  // Workers: busy from instances, idle from park/unpark, both clipped to the window.
  std::int64_t lo_all = std::numeric_limits<std::int64_t>::max(), hi_all = std::numeric_limits<std::int64_t>::min();
  for (const RankTrace& r : t.ranks) {
    auto [lo, hi] = window(t, r);
    lo_all = std::min(lo_all, lo);
    hi_all = std::max(hi_all, hi);
    std::size_t first = s.workers.size();
    for (std::uint32_t w = 0; w < r.workers; ++w) {
      WorkerRow wr;
      wr.rank = r.rank;
      wr.worker = w;
      wr.span_ns = hi - lo;
      s.workers.push_back(wr);
    }
    std::vector<std::int64_t> parked(r.workers, lo);  // start of the current park, or -1
    std::vector<bool> seen(r.workers, false);
    auto clip = [&](std::int64_t a, std::int64_t b) {
      return std::max<std::int64_t>(0, std::min(b, hi) - std::max(a, lo));
    };
    for (const Event& e : r.events) {
      if (e.worker >= r.workers) continue;  // the caller's thread
      WorkerRow& wr = s.workers[first + e.worker];
      std::int64_t at = t.aligned(r, e);
      switch (e.k()) {
        case Kind::park:
          parked[e.worker] = at;
          seen[e.worker] = true;
          break;
        case Kind::unpark:
          // An unpark without a park: the worker slept since before the trace began.
          if (parked[e.worker] >= 0) wr.idle_ns += clip(parked[e.worker], at);
          parked[e.worker] = -1;
          seen[e.worker] = true;
          break;
        case Kind::task_begin:
          if (!seen[e.worker]) parked[e.worker] = -1;  // it was awake from the start
          seen[e.worker] = true;
          break;
        case Kind::steal: ++wr.steals; break;
        case Kind::flush:
          ++wr.flushes;
          wr.flush_ns += static_cast<std::int64_t>(e.arg1);
          break;
        default: break;
      }
    }
    // A worker with no event at all slept through the window (its park predates the trace).
    for (std::uint32_t w = 0; w < r.workers; ++w)
      if (!seen[w] || parked[w] >= 0) s.workers[first + w].idle_ns += clip(parked[w], hi);
    for (const InstanceRec& in : s.instances) {
      if (in.rank != r.rank) continue;
      WorkerRow& wr = s.workers[first + in.worker];
      ++wr.instances;
      wr.busy_ns += clip(in.begin, in.end);
    }
  }
  s.span_ns = lo_all <= hi_all ? hi_all - lo_all : 0;

  // Tasks.
  std::unordered_map<std::string, std::size_t> task_index, loc_index;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> per_task_count;
  for (const InstanceRec& in : s.instances) {
    const RankTrace& r = t.ranks[in.rank];
    TaskRow& tr = row(s.tasks, task_index, r.tasks[in.task].name);
    ++tr.instances;
    tr.compute_ns += in.end - in.begin - std::max<std::int64_t>(0, in.suspended);
    // A fiber task waits where it suspends; a dataflow task from its request to its last grant.
    if (in.suspended >= 0)
      tr.wait_ns += in.suspended;
    else if (in.requested >= 0)
      tr.wait_ns += std::max<std::int64_t>(0, in.ready - in.requested);
    s.iterations = std::max(s.iterations, ++per_task_count[{in.rank, in.task}]);
  }

  std::unordered_map<Key, std::size_t, KeyHash> by_key;  // instance index by (rank, task, it)
  for (std::size_t i = 0; i < s.instances.size(); ++i) {
    const InstanceRec& in = s.instances[i];
    by_key[{in.rank, in.task, in.iteration}] = i;
  }

  // Locations: every location of the graphs appears, in table order. Grants count for the
  // instances that ran: a location's phases may move on into the next step's iteration for
  // instances the iteration gate holds, and how far they get before a run ends is timing (a
  // remote read granted early ends its phase at once, distributed.cpp).
  const RankTrace& r0 = t.ranks.front();
  for (const LocationInfo& l : r0.locations) row(s.locations, loc_index, l.name);
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events) {
      if (e.k() == Kind::grant) {
        if (!by_key.count({r.rank, e.task, e.arg0})) continue;
        LocationRow& lr = row(s.locations, loc_index, r.locations[e.location].name);
        ++lr.grants;
        lr.wait_ns += std::max<std::int64_t>(
            0, static_cast<std::int64_t>(e.time) - static_cast<std::int64_t>(e.arg1));
      } else if (e.k() == Kind::send && e.location != kNone) {
        LocationRow& lr = row(s.locations, loc_index, r.locations[e.location].name);
        lr.bytes += e.arg0;
        ++lr.messages;
      }
    }

  // Peers: bytes sent, and the minimum: per iteration, one copy of each location to every
  // other rank that runs a task accessing it (a remote writer also sends it home). Iterations
  // are counted per location (the most instances of a task accessing it): a trace may hold
  // several graphs run for different numbers of iterations (an app's and its all_gather's).
  std::vector<std::uint64_t> task_runs(r0.tasks.size(), 0);
  for (const auto& [key, n] : per_task_count)
    if (key.second < task_runs.size()) task_runs[key.second] = std::max(task_runs[key.second], n);
  std::map<std::pair<std::uint32_t, std::uint32_t>, PeerRow> peers;
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events)
      if (e.k() == Kind::send) {
        PeerRow& p = peers[{r.rank, e.peer}];
        p.from = r.rank;
        p.to = e.peer;
        p.bytes += e.arg0;
        ++p.messages;
      }
  for (std::size_t l = 0; l < r0.locations.size(); ++l) {
    const LocationInfo& li = r0.locations[l];
    std::vector<bool> reads(s.ranks, false), writes(s.ranks, false);
    std::uint64_t iterations = 0;
    for (std::size_t ti = 0; ti < r0.tasks.size(); ++ti)
      for (const Access& a : r0.tasks[ti].accesses)
        if (a.location == l) {
          iterations = std::max(iterations, task_runs[ti]);
          if (r0.tasks[ti].rank < s.ranks) (a.write ? writes : reads)[r0.tasks[ti].rank] = true;
        }
    std::uint64_t min = 0;
    for (std::uint32_t q = 0; q < s.ranks; ++q) {
      if (q == li.home) continue;
      std::uint64_t out = (reads[q] || writes[q]) ? li.bytes * iterations : 0;
      std::uint64_t back = writes[q] ? li.bytes * iterations : 0;
      min += out + back;
      if (out) {
        PeerRow& p = peers[{li.home, q}];
        p.from = li.home;
        p.to = q;
        p.min_bytes += out;
      }
      if (back) {
        PeerRow& p = peers[{q, li.home}];
        p.from = q;
        p.to = li.home;
        p.min_bytes += back;
      }
    }
    row(s.locations, loc_index, li.name).min_bytes += min;
  }
  for (auto& [k, p] : peers) s.peers.push_back(p);
  for (const MessagePair& m : match_messages(t, &s.unmatched_messages))
    s.inverted_messages += t.aligned(t.ranks[m.from], *m.send) > t.aligned(t.ranks[m.to], *m.receive);

  // Critical path, over the instance graph: an instance depends on every holder of the phase
  // before its own at each of its locations. The grants tell the phases: one release grants a
  // whole phase, so the grants of a location made by one releasing instance are one phase, and
  // the phase before it is the one that granted the releaser. (Iteration 0's first phases are
  // granted before the run and not recorded: there the releaser alone is the predecessor.)
  // Every predecessor ended before the instance began, so begin order is a topological order;
  // the heaviest chain by compute time is the critical path.
  constexpr std::size_t kAbsent = SIZE_MAX;
  auto find = [&](std::uint32_t rank, std::uint32_t task, std::uint64_t it) {
    auto f = by_key.find({rank, task, it});
    return f == by_key.end() ? kAbsent : f->second;
  };
  // (rank, location, releasing instance) -> the phase it granted: its members' instances.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::size_t>, std::vector<std::size_t>> phases;
  // (rank, location, instance) -> the releasing instance of the phase that granted it.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::size_t>, std::size_t> granted_by;
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events) {
      if (e.k() != Kind::grant || e.peer == kNone) continue;
      const std::uint64_t rel_iter = (e.flags & kPrevIteration) ? e.arg0 - 1 : e.arg0;
      const std::size_t from = find(r.rank, e.peer, rel_iter), to = find(r.rank, e.task, e.arg0);
      if (from == kAbsent || to == kAbsent || from == to) continue;
      phases[{r.rank, e.location, from}].push_back(to);
      granted_by[{r.rank, e.location, to}] = from;
    }
  std::vector<std::vector<std::size_t>> preds(s.instances.size());
  for (const auto& [key, members] : phases) {
    const auto [rank, location, releaser] = key;
    std::vector<std::size_t> before{releaser};
    auto g = granted_by.find({rank, location, releaser});
    if (g != granted_by.end()) {
      auto p = phases.find({rank, location, g->second});
      if (p != phases.end()) before = p->second;  // the releaser's whole phase
    }
    for (std::size_t m : members)
      for (std::size_t b : before)
        if (b != m) preds[m].push_back(b);
  }
  std::vector<std::size_t> order(s.instances.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return s.instances[a].begin < s.instances[b].begin;
  });
  std::vector<std::int64_t> dist(s.instances.size(), 0);
  std::vector<std::size_t> via(s.instances.size(), kAbsent);
  std::size_t best = kAbsent;
  for (std::size_t i : order) {
    std::int64_t base = 0;
    for (std::size_t p : preds[i])
      if (s.instances[p].begin <= s.instances[i].begin && dist[p] > base) {
        base = dist[p];
        via[i] = p;
      }
    dist[i] = base + (s.instances[i].end - s.instances[i].begin);
    if (best == kAbsent || dist[i] > dist[best]) best = i;
  }
  if (best != kAbsent) {
    s.critical_ns = dist[best];
    for (std::size_t i = best; i != kAbsent; i = via[i]) s.critical_path.push_back(&s.instances[i]);
    std::reverse(s.critical_path.begin(), s.critical_path.end());
  }
  return s;
}

namespace {

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1e6); }
std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

}  // namespace

std::string render_text(const Summary& s, const Trace& t) {
  std::string out;
  out += fmt::format("ranks {}  iterations {}  window {} ms  instances {}\n\n", s.ranks,
                     s.iterations, ms(s.span_ns), s.instances.size());
  out += "workers (busy = in task bodies, idle = parked, other = scheduling and tracing)\n";
  out += fmt::format("{:>5} {:>6} {:>9} {:>11} {:>11} {:>11} {:>7} {:>7} {:>8}\n", "rank",
                     "worker", "instances", "busy ms", "idle ms", "other ms", "util", "steals",
                     "flushes");
  for (const WorkerRow& w : s.workers)
    out += fmt::format("{:>5} {:>6} {:>9} {:>11} {:>11} {:>11} {:>7} {:>7} {:>8}\n", w.rank,
                       w.worker, w.instances, ms(w.busy_ns), ms(w.idle_ns),
                       ms(std::max<std::int64_t>(0, w.span_ns - w.busy_ns - w.idle_ns)),
                       pct(w.utilisation()), w.steals, w.flushes);
  out += "\ntasks (wait = request -> last grant of each instance; compute % = compute / "
         "(compute + wait))\n";
  out += fmt::format("{:<24} {:>9} {:>12} {:>11} {:>12} {:>9}\n", "task", "instances",
                     "compute ms", "mean us", "lock-wait ms", "compute%");
  for (const TaskRow& tr : s.tasks)
    out += fmt::format("{:<24} {:>9} {:>12} {:>11.1f} {:>12} {:>9}\n", tr.name, tr.instances,
                       ms(tr.compute_ns),
                       tr.instances ? double(tr.compute_ns) / double(tr.instances) / 1e3 : 0.0,
                       ms(tr.wait_ns), pct(tr.compute_share()));
  out += "\nlocations (wait = request -> grant, summed over grants; bytes sent vs the minimum "
         "the graph needs)\n";
  out += fmt::format("{:<24} {:>8} {:>12} {:>12} {:>12}\n", "location", "grants", "wait ms",
                     "bytes", "min bytes");
  for (const LocationRow& l : s.locations)
    out += fmt::format("{:<24} {:>8} {:>12} {:>12} {:>12}\n", l.name, l.grants, ms(l.wait_ns),
                       l.bytes, l.min_bytes);
  out += "\npeers (bytes sent from -> to, vs the minimum)\n";
  if (s.peers.empty()) out += "  none: every location is local to its rank\n";
  for (const PeerRow& p : s.peers)
    out += fmt::format("  {} -> {}: {} bytes in {} messages, minimum {}{}\n", p.from, p.to,
                       p.bytes, p.messages, p.min_bytes,
                       // Ranks of one host share their locations' memory (docs/distributed.md).
                       p.bytes == 0 && p.messages > 0 && p.min_bytes > 0
                           ? " if copied (the ranks share the locations' memory)"
                           : "");
  if (s.unmatched_messages)
    out += fmt::format("  {} sends or receives without their other end\n", s.unmatched_messages);
  if (s.inverted_messages)
    out += fmt::format("  warning: {} messages arrive before they were sent on the aligned clock; "
                       "the ranks' clock offsets are wrong\n",
                       s.inverted_messages);
  out += fmt::format("\ncritical path: {} ms of compute in {} instances ({} of the {} ms window)\n",
                     ms(s.critical_ns), s.critical_path.size(),
                     pct(s.span_ns ? double(s.critical_ns) / double(s.span_ns) : 0.0),
                     ms(s.span_ns));
  std::map<std::string, std::uint64_t> on_path;
  for (const InstanceRec* in : s.critical_path) ++on_path[t.ranks[in->rank].tasks[in->task].name];
  std::vector<std::pair<std::uint64_t, std::string>> top;
  for (auto& [name, n] : on_path) top.emplace_back(n, name);
  std::sort(top.rbegin(), top.rend());
  for (std::size_t i = 0; i < top.size() && i < 8; ++i)
    out += fmt::format("  {:<24} {} instances\n", top[i].second, top[i].first);
  return out;
}

nlohmann::json render_json(const Summary& s, const Trace& t) {
  using nlohmann::json;
  json j;
  j["ranks"] = s.ranks;
  j["iterations"] = s.iterations;
  j["window_ns"] = s.span_ns;
  j["instances"] = s.instances.size();
  for (const WorkerRow& w : s.workers)
    j["workers"].push_back({{"rank", w.rank}, {"worker", w.worker}, {"instances", w.instances},
                            {"busy_ns", w.busy_ns}, {"idle_ns", w.idle_ns},
                            {"span_ns", w.span_ns}, {"utilisation", w.utilisation()},
                            {"steals", w.steals}, {"flushes", w.flushes},
                            {"flush_ns", w.flush_ns}});
  for (const TaskRow& tr : s.tasks)
    j["tasks"].push_back({{"name", tr.name}, {"instances", tr.instances},
                          {"compute_ns", tr.compute_ns}, {"wait_ns", tr.wait_ns},
                          {"compute_share", tr.compute_share()}});
  for (const LocationRow& l : s.locations)
    j["locations"].push_back({{"name", l.name}, {"grants", l.grants}, {"wait_ns", l.wait_ns},
                              {"bytes", l.bytes}, {"messages", l.messages},
                              {"min_bytes", l.min_bytes}});
  j["peers"] = json::array();
  for (const PeerRow& p : s.peers)
    j["peers"].push_back({{"from", p.from}, {"to", p.to}, {"bytes", p.bytes},
                          {"messages", p.messages}, {"min_bytes", p.min_bytes}});
  j["unmatched_messages"] = s.unmatched_messages;
  j["inverted_messages"] = s.inverted_messages;
  j["critical_path"]["compute_ns"] = s.critical_ns;
  j["critical_path"]["instances"] = json::array();
  for (const InstanceRec* in : s.critical_path)
    j["critical_path"]["instances"].push_back(
        {{"rank", in->rank}, {"task", t.ranks[in->rank].tasks[in->task].name},
         {"iteration", in->iteration}});
  return j;
}

}  // namespace ordo::tracefile
