#include "analysis.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/core.h>

namespace ordo::tracefile {

namespace {

using Key = InstanceKey;
using KeyHash = InstanceKeyHash;

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

bool is_internal_name(const std::string& name) { return name.rfind("ordo.", 0) == 0; }

std::string kind_of(const std::string& name) {
  if (!name.empty() && name.back() == ']') {
    const std::size_t open = name.rfind('[');
    if (open != std::string::npos && open > 0) return name.substr(0, open);
  }
  return name;
}

Coverage::Coverage(std::vector<std::pair<std::int64_t, std::int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  for (auto [a, b] : intervals) {
    if (b <= a) continue;
    if (!iv_.empty() && a <= iv_.back().second) {
      iv_.back().second = std::max(iv_.back().second, b);
    } else {
      iv_.emplace_back(a, b);
    }
  }
  std::int64_t sum = 0;
  for (auto [a, b] : iv_) prefix_.push_back(sum += b - a);
}

std::int64_t Coverage::upto(std::int64_t x) const {
  // The first interval ending after x: everything before it counts whole, it counts up to x.
  auto it = std::upper_bound(iv_.begin(), iv_.end(), x,
                             [](std::int64_t v, const auto& iv) { return v < iv.second; });
  const std::size_t k = static_cast<std::size_t>(it - iv_.begin());
  std::int64_t before = k == 0 ? 0 : prefix_[k - 1];
  if (it != iv_.end() && x > it->first) before += x - it->first;
  return before;
}

void Coverage::clip(std::int64_t a, std::int64_t b, std::vector<Interval>& out) const {
  auto it = std::upper_bound(iv_.begin(), iv_.end(), a,
                             [](std::int64_t v, const auto& iv) { return v < iv.second; });
  for (; it != iv_.end() && it->first < b; ++it) {
    const std::int64_t lo = std::max(a, it->first), hi = std::min(b, it->second);
    if (lo < hi) out.emplace_back(lo, hi);
  }
}

std::int64_t Coverage::overlap(std::int64_t a, std::int64_t b) const {
  return b <= a ? 0 : upto(b) - upto(a);
}

Coverage user_runs(const Trace& t, const RankTrace& r, const std::vector<InstanceRec>& instances) {
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  std::int64_t open = -1, first = std::numeric_limits<std::int64_t>::max(), last = 0;
  for (const Event& e : r.events) {
    const std::int64_t at = t.aligned(r, e);
    first = std::min(first, at);
    last = std::max(last, at);
    if (e.k() == Kind::run_begin) {
      open = at;
    } else if (e.k() == Kind::run_end && open >= 0) {
      runs.emplace_back(open, at);
      open = -1;
    }
  }
  if (open >= 0) runs.emplace_back(open, last);  // cut short: the run went on to the end
  if (runs.empty()) {
    if (first <= last) runs.emplace_back(first, last);
    return Coverage(std::move(runs));
  }
  // A run whose instances on this rank all belong to helper graphs is left out.
  std::vector<int> user(runs.size(), 0), helper(runs.size(), 0);
  for (const InstanceRec& in : instances) {
    if (in.rank != r.rank) continue;
    auto it = std::upper_bound(runs.begin(), runs.end(), in.begin,
                               [](std::int64_t v, const auto& run) { return v < run.first; });
    if (it == runs.begin()) continue;
    const std::size_t k = static_cast<std::size_t>(it - runs.begin()) - 1;
    ++(in.internal ? helper : user)[k];
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> kept;
  for (std::size_t k = 0; k < runs.size(); ++k)
    if (user[k] > 0 || helper[k] == 0) kept.push_back(runs[k]);
  return Coverage(std::move(kept));
}

std::vector<InstanceRec> collect_instances(const Trace& t) {
  std::vector<InstanceRec> out;
  // An instance's grants: its request, its last grant and that grant's location, and the
  // grant before the last (when it could otherwise have run).
  struct Grants {
    std::int64_t requested = std::numeric_limits<std::int64_t>::max();
    std::int64_t last = -1, before_last = -1;
    std::uint32_t location = kNone;
    const Event* event = nullptr;
  };
  for (const RankTrace& r : t.ranks) {
    std::unordered_map<Key, std::size_t, KeyHash> open;
    std::unordered_map<Key, Grants, KeyHash> grants;
    std::unordered_map<Key, std::pair<std::int64_t, std::uint32_t>, KeyHash> suspend_at;
    std::unordered_map<Key, std::int64_t, KeyHash> longest_suspension;
    const std::size_t first = out.size();
    for (const Event& e : r.events) {
      Key k{r.rank, e.task, e.arg0};
      if (e.k() == Kind::task_begin) {
        InstanceRec in;
        in.rank = r.rank;
        in.task = e.task;
        in.worker = e.worker;
        in.iteration = e.arg0;
        in.begin = in.end = t.aligned(r, e);
        in.internal = is_internal_name(r.tasks[e.task].name);
        open[k] = out.size();
        out.push_back(in);
      } else if (e.k() == Kind::task_end) {
        auto it = open.find(k);
        if (it == open.end()) continue;  // its begin was before the trace (cannot happen)
        out[it->second].end = t.aligned(r, e);
        open.erase(it);
      } else if (e.k() == Kind::fiber_suspend) {
        suspend_at[k] = {t.aligned(r, e), e.location};
      } else if (e.k() == Kind::fiber_resume) {
        auto s = suspend_at.find(k);
        auto it = open.find(k);
        if (s == suspend_at.end() || it == open.end()) continue;
        InstanceRec& in = out[it->second];
        const std::int64_t d = t.aligned(r, e) - s->second.first;
        in.suspended = std::max<std::int64_t>(in.suspended, 0) + d;
        in.waits.emplace_back(s->second.first, t.aligned(r, e));
        std::int64_t& longest = longest_suspension[k];
        if (d >= longest) {
          longest = d;
          in.blocker = s->second.second;
        }
        suspend_at.erase(s);
      } else if (e.k() == Kind::grant) {
        Grants& g = grants[k];
        g.requested = std::min<std::int64_t>(
            g.requested, static_cast<std::int64_t>(e.arg1) + r.clock_offset_ns - t.origin);
        const std::int64_t at = t.aligned(r, e);
        if (at >= g.last) {
          g.before_last = g.last;
          g.last = at;
          g.location = e.location;
          g.event = &e;
        } else {
          g.before_last = std::max(g.before_last, at);
        }
      }
    }
    for (std::size_t i = first; i < out.size(); ++i) {
      InstanceRec& in = out[i];
      auto it = grants.find(Key{in.rank, in.task, in.iteration});
      if (it == grants.end()) continue;
      const Grants& g = it->second;
      in.requested = g.requested;
      in.ready = g.last;
      in.last_grant = g.event;
      in.otherwise = std::max(g.requested, g.before_last);
      if (in.suspended < 0) in.blocker = g.location;
    }
  }
  return out;
}

void measure_lock_waits(const Trace& t, std::vector<InstanceRec>& instances,
                        const std::vector<Coverage>& runs) {
  for (const RankTrace& r : t.ranks) {
    // The times when some worker of the rank is out of task bodies (and so could run a granted
    // instance): the complement of "every worker busy", from the instances' begins and ends.
    std::vector<std::pair<std::int64_t, int>> steps;
    for (const InstanceRec& in : instances)
      if (in.rank == r.rank) {
        steps.emplace_back(in.begin, +1);
        steps.emplace_back(in.end, -1);
      }
    std::sort(steps.begin(), steps.end());
    std::vector<std::pair<std::int64_t, std::int64_t>> free;
    int busy = 0;
    std::int64_t free_since = std::numeric_limits<std::int64_t>::min() / 4;
    for (auto [at, d] : steps) {
      const bool was_free = busy < static_cast<int>(r.workers);
      busy += d;
      const bool is_free = busy < static_cast<int>(r.workers);
      if (was_free && !is_free) free.emplace_back(free_since, at);
      if (!was_free && is_free) free_since = at;
    }
    free.emplace_back(free_since, std::numeric_limits<std::int64_t>::max() / 4);
    // Waits count inside the user's runs only, as every other figure does.
    std::vector<Interval> free_in_runs;
    for (auto [a, b] : free) runs[r.rank].clip(a, b, free_in_runs);
    const Coverage can_run(std::move(free_in_runs));
    for (InstanceRec& in : instances) {
      if (in.rank != r.rank) continue;
      if (in.suspended >= 0) {
        // A fiber task's suspensions (already in `waits`): its worker ran other work meanwhile.
        std::vector<Interval> suspensions;
        for (auto [a, b] : in.waits) runs[r.rank].clip(a, b, suspensions);
        in.waits = std::move(suspensions);
        in.wait_ns = 0;
        for (auto [a, b] : in.waits) in.wait_ns += b - a;
      } else {
        in.waits.clear();
        if (in.otherwise >= 0 && in.ready > in.otherwise)
          can_run.clip(in.otherwise, in.ready, in.waits);
        in.wait_ns = 0;
        for (auto [a, b] : in.waits) in.wait_ns += b - a;
      }
      if (in.wait_ns == 0) in.blocker = kNone;
    }
  }
}

std::vector<std::int64_t> lock_wait_by_worker(const Trace& t, std::uint32_t rank,
                                              const std::vector<InstanceRec>& instances,
                                              const Coverage& runs) {
  const std::uint32_t workers = t.ranks[rank].workers;
  std::vector<std::int64_t> lost(workers, 0);
  // Steps: a worker enters (+1) or leaves (-1) a task body; an instance starts (+1) or stops
  // (-1) waiting. `who` is the worker, or `workers` for a wait.
  struct Step {
    std::int64_t at;
    int delta;
    std::uint32_t who;
  };
  std::vector<Step> steps;
  for (const InstanceRec& in : instances) {
    if (in.rank != rank) continue;
    if (in.worker < workers) {
      steps.push_back({in.begin, +1, in.worker});
      steps.push_back({in.end, -1, in.worker});
    }
    for (auto [a, b] : in.waits) {
      steps.push_back({a, +1, workers});
      steps.push_back({b, -1, workers});
    }
  }
  std::sort(steps.begin(), steps.end(), [](const Step& x, const Step& y) { return x.at < y.at; });
  std::vector<int> depth(workers, 0);  // task bodies a worker is in (a fiber's suspension nests)
  int waiting = 0;
  for (std::size_t i = 0; i < steps.size();) {
    const std::int64_t at = steps[i].at;
    for (; i < steps.size() && steps[i].at == at; ++i)
      (steps[i].who == workers ? waiting : depth[steps[i].who]) += steps[i].delta;
    if (i == steps.size() || waiting <= 0) continue;
    const std::int64_t d = runs.overlap(at, steps[i].at);
    if (d == 0) continue;
    int charge = waiting;
    for (std::uint32_t w = 0; w < workers && charge > 0; ++w)
      if (depth[w] <= 0) {
        lost[w] += d;
        --charge;
      }
  }
  return lost;
}

std::vector<MessagePair> match_messages(const Trace& t, std::uint64_t* unmatched) {
  // A tag is unique among one graph's messages from one rank to another; each graph numbers
  // its own (two of the apps' gathers reuse tags), so the graph of the message's
  // location is part of the key. Ranks number graphs and locations alike (SPMD).
  using MessageKey = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint64_t>;
  auto graph_of = [](const RankTrace& r, const Event& e) {
    return e.location == kNone ? kNone : r.locations[e.location].graph;
  };
  std::map<MessageKey, const Event*> sends;  // (from, to, graph, tag) -> send
  std::uint64_t lost = 0;
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events)
      if (e.k() == Kind::send &&
          !sends.emplace(MessageKey{r.rank, e.peer, graph_of(r, e), e.arg1}, &e).second)
        ++lost;
  std::vector<MessagePair> out;
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events) {
      if (e.k() != Kind::receive) continue;
      auto it = sends.find(MessageKey{e.peer, r.rank, graph_of(r, e), e.arg1});
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
  for (const RankTrace& r : t.ranks) s.runs.push_back(user_runs(t, r, s.instances));
  measure_lock_waits(t, s.instances, s.runs);

  // Workers: busy from instances, idle from park/unpark, both counted inside the user's runs.
  std::vector<std::pair<std::int64_t, std::int64_t>> all_runs;
  for (const RankTrace& r : t.ranks) {
    const Coverage& runs = s.runs[r.rank];
    all_runs.insert(all_runs.end(), runs.intervals().begin(), runs.intervals().end());
    const std::int64_t lo = runs.intervals().empty() ? 0 : runs.intervals().front().first;
    const std::int64_t hi = runs.intervals().empty() ? 0 : runs.intervals().back().second;
    std::size_t first = s.workers.size();
    for (std::uint32_t w = 0; w < r.workers; ++w) {
      WorkerRow wr;
      wr.rank = r.rank;
      wr.worker = w;
      wr.span_ns = runs.total();
      s.workers.push_back(wr);
    }
    std::vector<std::int64_t> parked(r.workers, lo);  // start of the current park, or -1
    std::vector<bool> seen(r.workers, false);
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
          if (parked[e.worker] >= 0) wr.idle_ns += runs.overlap(parked[e.worker], at);
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
      if (!seen[w] || parked[w] >= 0) s.workers[first + w].idle_ns += runs.overlap(parked[w], hi);
    for (const InstanceRec& in : s.instances) {
      if (in.rank != r.rank) continue;
      WorkerRow& wr = s.workers[first + in.worker];
      ++wr.instances;
      wr.busy_ns += runs.overlap(in.begin, in.end);
    }
    const std::vector<std::int64_t> lost = lock_wait_by_worker(t, r.rank, s.instances, runs);
    for (std::uint32_t w = 0; w < r.workers; ++w) {
      s.workers[first + w].lock_wait_ns = lost[w];
      s.lock_wait_ns += lost[w];
    }
  }
  s.span_ns = Coverage(std::move(all_runs)).total();

  // Tasks: the user's first, then the helpers' (each in first-seen order).
  std::unordered_map<std::string, std::size_t> task_index, loc_index;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> per_task_count;
  for (int helpers = 0; helpers < 2; ++helpers)
    for (const InstanceRec& in : s.instances) {
      if (in.internal != (helpers == 1)) continue;
      const RankTrace& r = t.ranks[in.rank];
      TaskRow& tr = row(s.tasks, task_index, r.tasks[in.task].name);
      tr.internal = in.internal;
      ++tr.instances;
      tr.compute_ns += in.end - in.begin - std::max<std::int64_t>(0, in.suspended);
      tr.wait_intervals.insert(tr.wait_intervals.end(), in.waits.begin(), in.waits.end());
      const std::uint64_t n = ++per_task_count[{in.rank, in.task}];
      if (!in.internal) s.iterations = std::max(s.iterations, n);
    }
  // Instances that wait at the same time count once: the union of their waits.
  auto unite = [](std::vector<Interval>& intervals, std::int64_t& total) {
    const Coverage u(std::move(intervals));
    intervals = u.intervals();
    total = u.total();
  };
  for (TaskRow& tr : s.tasks) unite(tr.wait_intervals, tr.wait_ns);

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
  for (int helpers = 0; helpers < 2; ++helpers)
    for (const LocationInfo& l : r0.locations)
      if (is_internal_name(l.name) == (helpers == 1))
        row(s.locations, loc_index, l.name).internal = helpers == 1;
  for (const InstanceRec& in : s.instances) {
    if (in.blocker == kNone) continue;
    LocationRow& lr = row(s.locations, loc_index, t.ranks[in.rank].locations[in.blocker].name);
    ++lr.held_up;
    lr.wait_intervals.insert(lr.wait_intervals.end(), in.waits.begin(), in.waits.end());
  }
  for (LocationRow& lr : s.locations) unite(lr.wait_intervals, lr.wait_ns);
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events) {
      if (e.k() == Kind::grant) {
        if (!by_key.count({r.rank, e.task, e.arg0})) continue;
        ++row(s.locations, loc_index, r.locations[e.location].name).grants;
      } else if (e.k() == Kind::send && e.location != kNone) {
        LocationRow& lr = row(s.locations, loc_index, r.locations[e.location].name);
        lr.bytes += e.arg0;
        ++lr.messages;
      }
    }

  // Peers: bytes sent, and the minimum: per iteration, one copy of each location to every
  // other rank that runs a task accessing it (a remote writer also sends it home). Iterations
  // are counted per location (the most instances of a task accessing it): a trace may hold
  // several graphs run for different numbers of iterations (an app's and its gathers').
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

  const CriticalPath path = critical_path(t, s.instances);
  s.critical_ns = path.length_ns;
  s.critical_compute_ns = path.compute_ns;
  s.critical_messages = path.messages;
  s.critical_dependency_ns = path.dependency_ns;
  s.critical_worker_ns = path.worker_ns;
  s.critical_between_ns = path.between_runs_ns;
  s.critical_gaps = path.gaps;
  for (std::size_t i : path.instances) s.critical_path.push_back(&s.instances[i]);
  return s;
}

namespace {

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1e6); }
std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

}  // namespace

const char* figure_explanations() {
  return R"(Figures (docs/tracing.md):
  iterations    the most instances of any one user task (the iterations run)
  window        the runs of the user's graphs, summed (union over ranks); the time between
                runs and the runs of helper graphs (names ordo.*) are left out
  instances     task instances executed (helpers' included)
  busy          time in task bodies, inside the window
  idle          time parked (no work found), inside the window
  other         window - busy - idle: scheduling, lock bookkeeping, polling, tracing, and
                the end-of-run quiescence rounds between ranks (not traced)
  util          busy / window of that worker's rank
  steals        tasks this worker took from another's queue
  flushes       trace buffer writes by this worker (tracing's own cost)
  compute       time in the task's bodies (a fiber task's suspensions excluded)
  mean us       compute / instances of the task
  lock-wait     (tasks) per instance from when it could otherwise have run (requested,
                every other lock granted) to its last grant, counted while a worker of its
                rank was out of task bodies (a fiber task: its suspensions); the task's is
                the union over its instances: time in which some instance of it waited
  compute%      compute / (compute + lock-wait)
  grants        grants of the location to instances that ran
  held up       instances whose lock-wait this location caused (it was their last grant)
  wait ms       time in which some of those instances waited: the union of their waits
  bytes         bytes sent about the location; min bytes: what the graph's placement needs
                (per iteration, one copy to each other rank that accesses it, and back from
                a remote writer)
  peers         bytes and messages sent from one rank to another, and that minimum
  unmatched     sends or receives whose other end is not in the trace (recorded by a rank
                outside its runs, before its recorder was attached or after its last flush)
  inverted      messages received before they were sent on the aligned clock: the ranks'
                clock offsets are wrong (printed only when there are some)
  lock-wait ms  (workers) wall-clock time the worker lost to lock waits: out of task bodies
                while an instance of its rank waited for a lock, one free worker per waiting
                instance, lowest worker index first (intervals never overlap; <= window)
  critical path from the user's instance that ended last, back through what made each one
                ready: the releaser of its last grant, on its rank or, through the messages,
                on another; at a run's start, on from the instance that ended last in the
                run before; length = first begin to last end = task bodies + waits between:
                waiting for a dependency (enabler's end to last grant), ready and waiting for
                a worker (last grant to begin), between runs (to the next run's start)
  on the path   the path's instances per task (most first)
)";
}

// The critical path's account (summary and HTML): its parts, then what the largest one says.
std::string critical_path_line(const Summary& s) {
  std::set<std::uint32_t> ranks;
  for (const InstanceRec* in : s.critical_path) ranks.insert(in->rank);
  std::string out = fmt::format(
      "critical path {} ms ({} of the window) over {} run(s): {} ms in {} task bodies on {} "
      "rank(s) + {} ms waiting for a dependency ({} messages between ranks) + {} ms ready, "
      "waiting for a worker",
      ms(s.critical_ns), pct(s.span_ns ? double(s.critical_ns) / double(s.span_ns) : 0.0),
      s.critical_gaps.size() + (s.critical_path.empty() ? 0 : 1), ms(s.critical_compute_ns),
      s.critical_path.size(), ranks.size(), ms(s.critical_dependency_ns), s.critical_messages,
      ms(s.critical_worker_ns));
  if (!s.critical_gaps.empty())
    out += fmt::format(" + {} ms between runs ({} gaps: the program between Runtime::run calls)",
                       ms(s.critical_between_ns), s.critical_gaps.size());
  if (s.critical_path.empty()) return out;
  // The advice follows from the largest part inside the runs.
  if (s.critical_worker_ns > s.critical_dependency_ns &&
      s.critical_worker_ns > s.critical_compute_ns)
    out +=
        "\n  mostly ready, waiting for a worker: the run is throughput-bound (its workers "
        "were busy with other ready work); more workers, or less work per instance, would "
        "shorten it";
  else if (s.critical_dependency_ns > s.critical_compute_ns)
    out +=
        "\n  mostly waiting for dependencies: the run is latency-bound; more workers would "
        "not shorten it, earlier releases, shorter messages or a graph with more "
        "parallelism would";
  else
    out += "\n  mostly task bodies: faster kernels on the path would shorten it";
  return out;
}

std::string render_text(const Summary& s, const Trace& t) {
  std::string out;
  std::uint64_t helper_instances = 0;
  for (const InstanceRec& in : s.instances) helper_instances += in.internal;
  out += fmt::format(
      "ranks {}  iterations {}  window {} ms (the runs)  instances {}{}\n", s.ranks, s.iterations,
      ms(s.span_ns), s.instances.size(),
      helper_instances ? fmt::format(" ({} of helper graphs)", helper_instances) : std::string());
  std::int64_t worker_time = 0;
  for (const WorkerRow& w : s.workers) worker_time += w.span_ns;
  out += fmt::format(
      "lock wait {} ms of worker time lost ({} of the workers' time in the "
      "window)\n\n",
      ms(s.lock_wait_ns), pct(worker_time ? double(s.lock_wait_ns) / double(worker_time) : 0.0));
  out += "workers (busy = in task bodies, idle = parked, other = scheduling and tracing; "
         "all inside the runs)\n";
  out += fmt::format("{:>5} {:>6} {:>9} {:>11} {:>11} {:>11} {:>12} {:>7} {:>7} {:>8}\n", "rank",
                     "worker", "instances", "busy ms", "idle ms", "other ms", "lock-wait ms",
                     "util", "steals", "flushes");
  for (const WorkerRow& w : s.workers)
    out += fmt::format("{:>5} {:>6} {:>9} {:>11} {:>11} {:>11} {:>12} {:>7} {:>7} {:>8}\n", w.rank,
                       w.worker, w.instances, ms(w.busy_ns), ms(w.idle_ns),
                       ms(std::max<std::int64_t>(0, w.span_ns - w.busy_ns - w.idle_ns)),
                       ms(w.lock_wait_ns), pct(w.utilisation()), w.steals, w.flushes);
  out +=
      "\ntasks (lock-wait = time in which some instance waited: from when it could "
      "otherwise have run to its last grant, while a worker was free; compute % = compute / "
      "(compute + lock-wait))\n";
  out += fmt::format("{:<24} {:>9} {:>12} {:>11} {:>12} {:>9}\n", "task", "instances",
                     "compute ms", "mean us", "lock-wait ms", "compute%");
  bool helpers = false;
  for (const TaskRow& tr : s.tasks) {
    if (tr.internal && !helpers) {
      out += "helper graphs' tasks (names ordo.*: the apps' and runtime's own, not in the window)\n";
      helpers = true;
    }
    out += fmt::format("{:<24} {:>9} {:>12} {:>11.1f} {:>12} {:>9}\n", tr.name, tr.instances,
                       ms(tr.compute_ns),
                       tr.instances ? double(tr.compute_ns) / double(tr.instances) / 1e3 : 0.0,
                       ms(tr.wait_ns), pct(tr.compute_share()));
  }
  out +=
      "\nlocations (held up = instances whose lock-wait it caused, being their last grant; "
      "wait = time in which some of them waited; bytes sent vs the minimum the graph "
      "needs)\n";
  out += fmt::format("{:<24} {:>8} {:>9} {:>12} {:>12} {:>12}\n", "location", "grants",
                     "held up", "wait ms", "bytes", "min bytes");
  for (const LocationRow& l : s.locations)
    out += fmt::format("{:<24} {:>8} {:>9} {:>12} {:>12} {:>12}{}\n", l.name, l.grants,
                       l.held_up, ms(l.wait_ns), l.bytes, l.min_bytes,
                       l.internal ? "  (helper)" : "");
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
    out += fmt::format("  {} sends or receives without their other end in the trace (the other "
                       "rank recorded it outside its runs: before its recorder was attached or "
                       "after its last flush)\n",
                       s.unmatched_messages);
  if (s.inverted_messages)
    out += fmt::format("  warning: {} messages arrive before they were sent on the aligned clock; "
                       "the ranks' clock offsets are wrong\n",
                       s.inverted_messages);
  out += "\n" + critical_path_line(s) + "\non the path:\n";
  std::map<std::string, std::uint64_t> on_path;
  for (const InstanceRec* in : s.critical_path) ++on_path[t.ranks[in->rank].tasks[in->task].name];
  std::vector<std::pair<std::uint64_t, std::string>> top;
  for (auto& [name, n] : on_path) top.emplace_back(n, name);
  std::sort(top.rbegin(), top.rend());
  for (std::size_t i = 0; i < top.size() && i < 8; ++i)
    out += fmt::format("  {:<24} {} instances\n", top[i].second, top[i].first);
  out += "\n(ordo-trace summary --help explains every figure)\n";
  return out;
}

nlohmann::json render_json(const Summary& s, const Trace& t) {
  using nlohmann::json;
  json j;
  j["ranks"] = s.ranks;
  j["iterations"] = s.iterations;
  j["window_ns"] = s.span_ns;
  j["instances"] = s.instances.size();
  std::size_t events = 0;
  for (const RankTrace& r : t.ranks) events += r.events.size();
  j["events"] = events;
  for (const WorkerRow& w : s.workers)
    j["workers"].push_back({{"rank", w.rank},
                            {"worker", w.worker},
                            {"instances", w.instances},
                            {"busy_ns", w.busy_ns},
                            {"idle_ns", w.idle_ns},
                            {"span_ns", w.span_ns},
                            {"utilisation", w.utilisation()},
                            {"steals", w.steals},
                            {"flushes", w.flushes},
                            {"flush_ns", w.flush_ns},
                            {"lock_wait_ns", w.lock_wait_ns}});
  j["lock_wait_ns"] = s.lock_wait_ns;
  for (const TaskRow& tr : s.tasks)
    j["tasks"].push_back({{"name", tr.name}, {"internal", tr.internal}, {"instances", tr.instances},
                          {"compute_ns", tr.compute_ns}, {"wait_ns", tr.wait_ns},
                          {"compute_share", tr.compute_share()}});
  for (const LocationRow& l : s.locations)
    j["locations"].push_back({{"name", l.name}, {"internal", l.internal}, {"grants", l.grants},
                              {"held_up", l.held_up}, {"wait_ns", l.wait_ns},
                              {"bytes", l.bytes}, {"messages", l.messages},
                              {"min_bytes", l.min_bytes}});
  j["peers"] = json::array();
  for (const PeerRow& p : s.peers)
    j["peers"].push_back({{"from", p.from}, {"to", p.to}, {"bytes", p.bytes},
                          {"messages", p.messages}, {"min_bytes", p.min_bytes}});
  j["unmatched_messages"] = s.unmatched_messages;
  j["inverted_messages"] = s.inverted_messages;
  j["critical_path"]["length_ns"] = s.critical_ns;
  j["critical_path"]["compute_ns"] = s.critical_compute_ns;
  j["critical_path"]["wait_ns"] = s.critical_ns - s.critical_compute_ns;
  j["critical_path"]["messages"] = s.critical_messages;
  j["critical_path"]["dependency_ns"] = s.critical_dependency_ns;
  j["critical_path"]["worker_ns"] = s.critical_worker_ns;
  j["critical_path"]["between_runs_ns"] = s.critical_between_ns;
  j["critical_path"]["gaps"] = json::array();
  for (auto [from, to] : s.critical_gaps)
    j["critical_path"]["gaps"].push_back({{"from_ns", from}, {"to_ns", to}});
  j["critical_path"]["instances"] = json::array();
  for (const InstanceRec* in : s.critical_path)
    j["critical_path"]["instances"].push_back(
        {{"rank", in->rank}, {"task", t.ranks[in->rank].tasks[in->task].name},
         {"iteration", in->iteration}});
  return j;
}

}  // namespace ordo::tracefile
