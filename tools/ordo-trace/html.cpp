#include <fmt/core.h>

#include <cstring>
#include <iterator>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "export.hpp"

namespace ordo::tracefile {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  return out;
}

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1e6); }
std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

std::string tables(const Summary& s, const Trace& t) {
  std::string h;
  h += "<pre class=\"explain\">" + escape(figure_explanations()) + "</pre>\n";
  h += "<h2>Workers</h2>\n<table><tr><th>rank</th><th>worker</th><th>instances</th><th>busy "
       "ms</th><th>idle ms</th><th>other ms</th><th>utilisation</th><th>steals</th>"
       "<th>flushes</th></tr>\n";
  for (const WorkerRow& w : s.workers)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     w.rank, w.worker, w.instances, ms(w.busy_ns), ms(w.idle_ns),
                     ms(std::max<std::int64_t>(0, w.span_ns - w.busy_ns - w.idle_ns)),
                     pct(w.utilisation()), w.steals, w.flushes);
  h += "</table>\n<h2>Tasks</h2>\n<table><tr><th>task</th><th>instances</th><th>compute "
       "ms</th><th>lock-wait ms</th><th>compute %</th></tr>\n";
  for (const TaskRow& tr : s.tasks)
    h += fmt::format("<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     escape(tr.name), tr.internal ? " (helper)" : "", tr.instances,
                     ms(tr.compute_ns), ms(tr.wait_ns), pct(tr.compute_share()));
  h += "</table>\n<h2>Locations</h2>\n<table><tr><th>location</th><th>grants</th><th>held "
       "up</th><th>wait ms</th><th>bytes sent</th><th>minimum bytes</th></tr>\n";
  for (const LocationRow& l : s.locations)
    h += fmt::format("<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     escape(l.name), l.internal ? " (helper)" : "", l.grants, l.held_up,
                     ms(l.wait_ns), l.bytes, l.min_bytes);
  h += "</table>\n<h2>Peers</h2>\n<table><tr><th>from</th><th>to</th><th>bytes</th>"
       "<th>messages</th><th>minimum bytes</th></tr>\n";
  for (const PeerRow& p : s.peers)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     p.from, p.to, p.bytes, p.messages, p.min_bytes);
  h += "</table>\n";
  (void)t;
  return h;
}

template <class T>
void append_numbers(std::string& out, const std::vector<T>& v) {
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i)
    fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", v[i]);
  out += ']';
}

// A group of equally long numeric columns, written as {"name":[...],...}: a trace may hold
// hundreds of thousands of instances, and arrays of numbers parse fastest in the browser.
class Columns {
 public:
  Columns(std::initializer_list<const char*> names)
      : names_(names), values_(names.size()) {}
  // One value per column, in the order of the names.
  void add(std::initializer_list<std::int64_t> row) {
    std::size_t c = 0;
    for (std::int64_t v : row) values_[c++].push_back(v);
  }
  std::string json() const {
    std::string out = "{";
    for (std::size_t c = 0; c < names_.size(); ++c) {
      out += fmt::format("{}\"{}\":", c ? "," : "", names_[c]);
      append_numbers(out, values_[c]);
    }
    return out + "}";
  }

 private:
  std::vector<const char*> names_;
  std::vector<std::vector<std::int64_t>> values_;
};

std::string numbers(const std::vector<int>& v) {
  std::string out;
  append_numbers(out, v);
  return out;
}

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_string(v[i]);
  return out + "]";
}

}  // namespace

extern const std::string_view kViewerPage;

std::string export_html(const Trace& t, const Summary& s) {
  // Lanes: one per worker per rank, then the rank's caller thread (where the runtime's
  // progress and its messages run); names and locations are numbered across ranks.
  std::vector<std::uint32_t> lane_base, name_base, loc_base;
  std::vector<std::string> names, kinds, locs;
  std::vector<int> kind_of_name, internal_name, internal_loc;
  std::unordered_map<std::string, int> kind_index, loc_index;
  std::vector<std::vector<int>> loc_of;  // per rank: location id -> unique location name index
  std::uint32_t lanes = 0;
  std::string ranks = "[";
  for (const RankTrace& r : t.ranks) {
    lane_base.push_back(lanes);
    name_base.push_back(static_cast<std::uint32_t>(names.size()));
    ranks += fmt::format("{}{{\"rank\":{},\"workers\":{}}}", r.rank ? "," : "", r.rank, r.workers);
    lanes += r.workers + 1;
    for (const TaskInfo& ti : r.tasks) {
      names.push_back(ti.name);
      auto [it, fresh] = kind_index.try_emplace(kind_of(ti.name), static_cast<int>(kinds.size()));
      if (fresh) kinds.push_back(it->first);
      kind_of_name.push_back(it->second);
      internal_name.push_back(is_internal_name(ti.name));
    }
    loc_of.emplace_back();
    for (const LocationInfo& li : r.locations) {
      auto [it, fresh] = loc_index.try_emplace(li.name, static_cast<int>(locs.size()));
      if (fresh) {
        locs.push_back(li.name);
        internal_loc.push_back(is_internal_name(li.name));
      }
      loc_of.back().push_back(it->second);
    }
  }
  ranks += "]";
  auto lane_of = [&](std::uint32_t rank, std::uint32_t worker) {
    const RankTrace& r = t.ranks[rank];
    return lane_base[rank] + std::min<std::uint32_t>(worker, r.workers);
  };

  // The page opens on the user's runs (helper graphs' runs may follow them); the whole trace is
  // a double-click away.
  std::int64_t end = 0, view_lo = std::numeric_limits<std::int64_t>::max(), view_hi = 0;
  for (const Coverage& c : s.runs)
    if (!c.intervals().empty()) {
      view_lo = std::min(view_lo, c.intervals().front().first);
      view_hi = std::max(view_hi, c.intervals().back().second);
    }
  for (const InstanceRec& in : s.instances) end = std::max(end, in.end);
  // The end-of-run flushes come after the last instance: the timeline reaches them too.
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events)
      if (e.k() == Kind::flush || e.k() == Kind::steal)
        end = std::max(end, t.aligned(r, e) + (e.k() == Kind::flush ? std::int64_t(e.arg1) : 0));
  end = std::max(end, view_hi);
  if (view_lo > view_hi) view_lo = view_hi = 0;
  std::string data = fmt::format("{{\"span\":{},\"view\":[{},{}],\"ranks\":{},", end, view_lo,
                                 view_hi, ranks);
  data += "\"names\":" + strings(names) + ",\"kinds\":" + strings(kinds) +
          ",\"locs\":" + strings(locs) + ",\"kind_of_name\":" + numbers(kind_of_name) +
          ",\"internal_name\":" + numbers(internal_name) +
          ",\"internal_loc\":" + numbers(internal_loc);
  // Each location's lock-wait as the summary has it (the union of the waits it held up), for
  // the location view's first choice.
  std::vector<std::int64_t> loc_wait(locs.size(), 0);
  for (const LocationRow& l : s.locations)
    if (auto it = loc_index.find(l.name); it != loc_index.end()) loc_wait[it->second] = l.wait_ns;
  data += ",\"loc_wait\":";
  append_numbers(data, loc_wait);

  std::unordered_map<InstanceKey, std::size_t, InstanceKeyHash> index;
  Columns inst{"lane", "begin", "dur", "name", "iter", "wait", "otherwise", "blocker"};
  for (std::size_t i = 0; i < s.instances.size(); ++i) {
    const InstanceRec& in = s.instances[i];
    index[{in.rank, in.task, in.iteration}] = i;
    inst.add({lane_of(in.rank, in.worker), in.begin, in.end - in.begin, name_base[in.rank] + in.task,
              static_cast<std::int64_t>(in.iteration), in.wait_ns,
              in.wait_ns > 0 && in.suspended < 0 ? in.otherwise : -1,
              in.blocker == kNone ? -1 : loc_of[in.rank][in.blocker]});
  }
  // Idle (parked) periods of the workers; grants to instances that ran, for the location view
  // (request, grant, and whether the access writes).
  Columns idle{"lane", "begin", "dur"};
  Columns grants{"loc", "inst", "requested", "at", "write"};
  // Trace flushes (the recorder's own cost, on the thread that wrote) and steals (the thief's
  // lane, the victim's).
  Columns flushes{"lane", "begin", "dur", "bytes"};
  Columns steals{"lane", "victim", "at"};
  for (const RankTrace& r : t.ranks) {
    std::vector<std::int64_t> parked(r.workers + 1, -1);
    for (const Event& e : r.events) {
      const std::int64_t at = t.aligned(r, e);
      if (e.k() == Kind::park) {
        parked[e.worker] = at;
      } else if (e.k() == Kind::unpark) {
        if (parked[e.worker] >= 0 && e.worker < r.workers)
          idle.add({lane_of(r.rank, e.worker), parked[e.worker], at - parked[e.worker]});
        parked[e.worker] = -1;
      } else if (e.k() == Kind::flush) {
        flushes.add({lane_of(r.rank, e.worker), at, static_cast<std::int64_t>(e.arg1),
                     static_cast<std::int64_t>(e.arg0)});
      } else if (e.k() == Kind::steal) {
        steals.add({lane_of(r.rank, e.worker),
                    e.peer == kNone ? -1 : std::int64_t{lane_of(r.rank, e.peer)}, at});
      } else if (e.k() == Kind::grant) {
        auto it = index.find({r.rank, e.task, e.arg0});
        if (it == index.end()) continue;
        bool write = false;
        for (const Access& a : r.tasks[e.task].accesses) write |= a.location == e.location && a.write;
        grants.add({loc_of[r.rank][e.location], static_cast<std::int64_t>(it->second),
                    static_cast<std::int64_t>(e.arg1) + r.clock_offset_ns - t.origin, at, write});
      }
    }
  }
  Columns msgs{"from", "to", "t0", "t1", "bytes"};
  for (const MessagePair& m : match_messages(t))
    msgs.add({lane_of(m.from, m.send->worker), lane_of(m.to, m.receive->worker),
              t.aligned(t.ranks[m.from], *m.send), t.aligned(t.ranks[m.to], *m.receive),
              static_cast<std::int64_t>(m.send->arg0)});
  std::vector<int> critical;
  for (const InstanceRec* in : s.critical_path)
    critical.push_back(static_cast<int>(in - s.instances.data()));
  data += ",\"inst\":" + inst.json() + ",\"idle\":" + idle.json() + ",\"grants\":" + grants.json() +
          ",\"flushes\":" + flushes.json() + ",\"steals\":" + steals.json() +
          ",\"msgs\":" + msgs.json() + ",\"critical\":" + numbers(critical) + "}";

  // Inside <script>, "</" would end the element early.
  for (std::size_t p = 0; (p = data.find("</", p)) != std::string::npos; p += 3)
    data.replace(p, 2, "<\\/");

  std::uint64_t helper_instances = 0;
  for (const InstanceRec& in : s.instances) helper_instances += in.internal;
  const std::string summary = fmt::format(
      "{} rank(s), {} iteration(s), window {} ms (the runs), {} task instances{}; {}.",
      s.ranks, s.iterations, ms(s.span_ns), s.instances.size(),
      helper_instances ? fmt::format(" ({} of helper graphs)", helper_instances) : "",
      critical_path_line(s));
  std::string page(kViewerPage);
  // The markers' places in the template, filled from the last one back, so that nothing a
  // trace holds (a task named "@DATA@") is taken for a marker.
  const std::pair<const char*, std::string> fills[] = {
      {"@SUMMARY@", escape(summary)}, {"@TABLES@", tables(s, t)}, {"@DATA@", std::move(data)}};
  std::size_t at[3];
  for (int i = 0; i < 3; ++i) at[i] = page.find(fills[i].first);
  for (int i = 2; i >= 0; --i)
    if (at[i] != std::string::npos) page.replace(at[i], std::strlen(fills[i].first), fills[i].second);
  return page;
}

}  // namespace ordo::tracefile
