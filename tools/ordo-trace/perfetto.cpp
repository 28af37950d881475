#include <unordered_map>

#include "export.hpp"

namespace ordo::tracefile {

namespace {

double us(std::int64_t ns) { return double(ns) / 1e3; }


}  // namespace

nlohmann::json export_perfetto(const Trace& t, const Summary& s) {
  using nlohmann::json;
  json events = json::array();
  for (const RankTrace& r : t.ranks) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r.rank}, {"tid", 0},
                      {"ts", 0}, {"args", {{"name", "rank " + std::to_string(r.rank)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r.rank}, {"tid", 0},
                      {"ts", 0}, {"args", {{"sort_index", r.rank}}}});
    for (std::uint32_t w = 0; w <= r.workers; ++w) {
      std::string name = w < r.workers ? "worker " + std::to_string(w) : "runtime (caller)";
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r.rank}, {"tid", w},
                        {"ts", 0}, {"args", {{"name", name}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", r.rank},
                        {"tid", w}, {"ts", 0}, {"args", {{"sort_index", w}}}});
    }
  }
  std::unordered_map<InstanceKey, const InstanceRec*, InstanceKeyHash> inst;
  for (const InstanceRec& in : s.instances) {
    const RankTrace& r = t.ranks[in.rank];
    inst[{in.rank, in.task, in.iteration}] = &in;
    events.push_back({{"ph", "X"}, {"cat", "task"}, {"name", r.tasks[in.task].name},
                      {"ts", us(in.begin)}, {"dur", us(in.end - in.begin)}, {"pid", in.rank},
                      {"tid", in.worker}, {"args", {{"iteration", in.iteration}}}});
  }
  std::uint64_t flow = 0, wait = 0;
  for (const RankTrace& r : t.ranks) {
    std::vector<std::int64_t> parked(r.workers + 1, -1);
    std::int64_t run_start = -1;
    for (const Event& e : r.events) {
      const std::int64_t at = t.aligned(r, e);
      switch (e.k()) {
        case Kind::park: parked[e.worker] = at; break;
        case Kind::unpark:
          if (parked[e.worker] >= 0)
            events.push_back({{"ph", "X"}, {"cat", "idle"}, {"name", "idle"},
                              {"ts", us(parked[e.worker])}, {"dur", us(at - parked[e.worker])},
                              {"pid", r.rank}, {"tid", e.worker}});
          parked[e.worker] = -1;
          break;
        case Kind::flush:
          events.push_back({{"ph", "X"}, {"cat", "trace"}, {"name", "trace flush"},
                            {"ts", us(at)}, {"dur", us(static_cast<std::int64_t>(e.arg1))},
                            {"pid", r.rank}, {"tid", e.worker},
                            {"args", {{"bytes", e.arg0}}}});
          break;
        case Kind::run_begin: run_start = at; break;
        case Kind::run_end:
          if (run_start >= 0)
            events.push_back({{"ph", "X"}, {"cat", "run"}, {"name", "run"}, {"ts", us(run_start)},
                              {"dur", us(at - run_start)}, {"pid", r.rank}, {"tid", r.workers},
                              {"args", {{"iterations", e.arg0}}}});
          run_start = -1;
          break;
        case Kind::steal:
          events.push_back({{"ph", "i"}, {"s", "t"}, {"cat", "steal"},
                            {"name", "steal from " + std::to_string(e.peer)}, {"ts", us(at)},
                            {"pid", r.rank}, {"tid", e.worker}});
          break;
        case Kind::fiber_suspend:
        case Kind::fiber_resume:
          events.push_back({{"ph", "i"}, {"s", "t"}, {"cat", "fiber"},
                            {"name", std::string(e.k() == Kind::fiber_suspend ? "suspend " : "resume ") +
                                         r.locations[e.location].name},
                            {"ts", us(at)}, {"pid", r.rank}, {"tid", e.worker},
                            {"args", {{"task", r.tasks[e.task].name}, {"iteration", e.arg0}}}});
          break;
        case Kind::grant: {
          // The wait, from the request to this grant, as an async slice of the granted task.
          const std::int64_t req = static_cast<std::int64_t>(e.arg1) + r.clock_offset_ns - t.origin;
          auto to = inst.find({r.rank, e.task, e.arg0});
          const std::uint32_t tid = to != inst.end() ? to->second->worker : e.worker;
          const std::string id = "w" + std::to_string(wait++);
          const std::string name = "wait " + r.locations[e.location].name;
          json args = {{"task", r.tasks[e.task].name}, {"iteration", e.arg0}};
          events.push_back({{"ph", "b"}, {"cat", "lock-wait"}, {"name", name}, {"id", id},
                            {"ts", us(req)}, {"pid", r.rank}, {"tid", tid}, {"args", args}});
          events.push_back({{"ph", "e"}, {"cat", "lock-wait"}, {"name", name}, {"id", id},
                            {"ts", us(at)}, {"pid", r.rank}, {"tid", tid}});
          // Flow from the releasing instance's end to the granted instance's start.
          if (e.peer == kNone || to == inst.end()) break;
          const std::uint64_t rel_iter = (e.flags & kPrevIteration) ? e.arg0 - 1 : e.arg0;
          auto from = inst.find({r.rank, e.peer, rel_iter});
          if (from == inst.end()) break;
          const InstanceRec& a = *from->second;
          const InstanceRec& b = *to->second;
          // Flow ends bind to the enclosing slice: stay strictly inside both instances.
          const double s_ts = us(a.end) - std::min(0.001, us(a.end - a.begin) / 2);
          const double f_ts = us(b.begin) + std::min(0.001, us(b.end - b.begin) / 2);
          ++flow;
          events.push_back({{"ph", "s"}, {"cat", "grant"}, {"name", "grant " + r.locations[e.location].name},
                            {"id", flow}, {"ts", s_ts}, {"pid", r.rank}, {"tid", a.worker}});
          events.push_back({{"ph", "f"}, {"bp", "e"}, {"cat", "grant"},
                            {"name", "grant " + r.locations[e.location].name}, {"id", flow},
                            {"ts", f_ts}, {"pid", r.rank}, {"tid", b.worker}});
          break;
        }
        default: break;
      }
    }
  }
  // Messages: a short slice at each end (flows bind to slices) and a flow between them.
  for (const MessagePair& m : match_messages(t)) {
    const RankTrace& a = t.ranks[m.from];
    const RankTrace& b = t.ranks[m.to];
    const std::string loc =
        m.send->location != kNone ? a.locations[m.send->location].name : std::string("message");
    json args = {{"bytes", m.send->arg0}, {"tag", m.send->arg1}, {"location", loc}};
    const double s_ts = us(t.aligned(a, *m.send));
    const double f_ts = us(t.aligned(b, *m.receive));
    ++flow;
    events.push_back({{"ph", "X"}, {"cat", "message"}, {"name", "send " + loc + " to " + std::to_string(m.to)},
                      {"ts", s_ts}, {"dur", 0.002}, {"pid", m.from}, {"tid", m.send->worker},
                      {"args", args}});
    events.push_back({{"ph", "X"}, {"cat", "message"},
                      {"name", "receive " + loc + " from " + std::to_string(m.from)},
                      {"ts", f_ts}, {"dur", 0.002}, {"pid", m.to}, {"tid", m.receive->worker},
                      {"args", args}});
    events.push_back({{"ph", "s"}, {"cat", "message"}, {"name", "message"}, {"id", flow},
                      {"ts", s_ts + 0.001}, {"pid", m.from}, {"tid", m.send->worker}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"cat", "message"}, {"name", "message"},
                      {"id", flow}, {"ts", f_ts + 0.001}, {"pid", m.to},
                      {"tid", m.receive->worker}});
  }
  json out;
  out["traceEvents"] = std::move(events);
  out["displayTimeUnit"] = "ns";
  out["otherData"] = {{"generator", "ordo-trace"}, {"ranks", t.ranks.size()},
                      {"format_version", t.ranks.front().version}};
  return out;
}

}  // namespace ordo::tracefile
