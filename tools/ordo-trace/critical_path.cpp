// The critical path through the timeline (docs/tracing.md, "Critical path"): from the user's
// instance that ended last, back through what made each instance ready, on any rank.
#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <unordered_map>

#include "analysis.hpp"

namespace ordo::tracefile {

namespace {

constexpr std::size_t kAbsent = SIZE_MAX;
// How far back a search looks on one thread's events, and how many messages it follows: a
// release records its grants and sends right after the releasing task's end, so a few events
// suffice; the bounds keep a corrupt trace from costing more than that.
constexpr std::size_t kWalk = 4096;
constexpr unsigned kHops = 16;

// Finds the instance whose release made a grant. A grant records its releaser when the release
// happened on its own rank. Otherwise a message brought it (docs/distributed.md): a proxy's
// grants follow the GRANT it received, the home's follow a RELEASE it received or its own early
// GRANT being sent. The recorder writes a thread's events in order and a release records its
// grants and messages right after the releasing task's end on the same thread, so the cause is
// the nearest earlier event of that thread about the same location: a grant with its releaser,
// the end of a task that accesses the location, or a message, which leads to its send on the
// other rank (matched as match_messages does), where the search goes on.
class Enablers {
 public:
  Enablers(const Trace& t, const std::vector<InstanceRec>& instances) : t_(t) {
    for (std::size_t i = 0; i < instances.size(); ++i)
      by_key_[{instances[i].rank, instances[i].task, instances[i].iteration}] = i;
    threads_.resize(t.ranks.size());
    position_.resize(t.ranks.size());
    for (const RankTrace& r : t.ranks) {
      auto& threads = threads_[r.rank];
      auto& position = position_[r.rank];
      threads.resize(r.workers + 1);
      position.resize(r.events.size());
      for (std::size_t i = 0; i < r.events.size(); ++i) {
        auto& thread = threads[std::min<std::uint32_t>(r.events[i].worker, r.workers)];
        position[i] = static_cast<std::uint32_t>(thread.size());
        thread.push_back(static_cast<std::uint32_t>(i));
      }
    }
    for (const MessagePair& m : match_messages(t)) sent_by_[m.receive] = {m.from, m.send};
  }

  // The instance whose release made `grant` (an event of rank `rank`), or kAbsent; `messages`
  // counts the messages between them.
  std::size_t of(std::uint32_t rank, const Event& grant, unsigned& messages) const {
    messages = 0;
    if (grant.peer != kNone) return releaser(rank, grant);
    const std::uint32_t location = grant.location;
    const Event* from = &grant;
    for (unsigned hop = 0; hop < kHops; ++hop) {
      const RankTrace& r = t_.ranks[rank];
      const std::size_t index = static_cast<std::size_t>(from - r.events.data());
      const auto& thread = threads_[rank][std::min<std::uint32_t>(from->worker, r.workers)];
      const Event* next = nullptr;
      for (std::size_t p = position_[rank][index], seen = 0; p-- > 0 && seen < kWalk; ++seen) {
        const Event& e = r.events[thread[p]];
        if (e.k() == Kind::task_begin) return kAbsent;  // before it, the thread ran a task
        if (e.k() == Kind::task_end) {
          if (accesses(r, e.task, location)) return find(rank, e.task, e.arg0);
          return kAbsent;  // the thread was in another task's body before this
        }
        if (e.location != location) continue;
        if (e.k() == Kind::grant && e.peer != kNone) return releaser(rank, e);
        if (e.k() == Kind::send) {  // an early GRANT: its release when sent, or a sibling
          next = &e;
          break;
        }
        if (e.k() == Kind::receive) {
          auto s = sent_by_.find(&e);
          if (s == sent_by_.end()) return kAbsent;  // its send is not in the trace
          ++messages;
          rank = s->second.first;
          next = s->second.second;
          break;
        }
      }
      if (next == nullptr) return kAbsent;
      from = next;
    }
    return kAbsent;
  }

 private:
  std::size_t find(std::uint32_t rank, std::uint32_t task, std::uint64_t iteration) const {
    auto f = by_key_.find({rank, task, iteration});
    return f == by_key_.end() ? kAbsent : f->second;
  }
  std::size_t releaser(std::uint32_t rank, const Event& grant) const {
    if ((grant.flags & kPrevIteration) && grant.arg0 == 0) return kAbsent;
    return find(rank, grant.peer, (grant.flags & kPrevIteration) ? grant.arg0 - 1 : grant.arg0);
  }
  static bool accesses(const RankTrace& r, std::uint32_t task, std::uint32_t location) {
    if (task >= r.tasks.size()) return false;
    const auto& a = r.tasks[task].accesses;
    return std::any_of(a.begin(), a.end(), [&](const Access& x) { return x.location == location; });
  }

  const Trace& t_;
  std::unordered_map<InstanceKey, std::size_t, InstanceKeyHash> by_key_;
  std::vector<std::vector<std::vector<std::uint32_t>>> threads_;  // rank, buffer: its events
  std::vector<std::vector<std::uint32_t>> position_;  // rank, event: its place in its buffer
  std::unordered_map<const Event*, std::pair<std::uint32_t, const Event*>> sent_by_;
};

}  // namespace

CriticalPath critical_path(const Trace& t, const std::vector<InstanceRec>& instances) {
  CriticalPath out;
  // Each rank's run starts. Every rank records its run_begin before the barrier that starts a
  // run, so the k-th run of every rank is one run, and an instance belongs to the last run
  // that began before it (the first run where none did: a trace without run records, or a
  // synthetic one whose run records came late).
  std::vector<std::vector<std::int64_t>> run_starts(t.ranks.size());
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events)
      if (e.k() == Kind::run_begin) run_starts[r.rank].push_back(t.aligned(r, e));
  auto run_of = [&](const InstanceRec& in) {
    const auto& starts = run_starts[in.rank];
    return std::max<long>(
        0, static_cast<long>(std::upper_bound(starts.begin(), starts.end(), in.begin) -
                             starts.begin()) -
               1);
  };
  // Per run, the user's instance that ended last: the one that decided when the run ended.
  std::map<long, std::size_t> last_of_run;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (instances[i].internal) continue;
    auto [it, fresh] = last_of_run.try_emplace(run_of(instances[i]), i);
    if (!fresh && instances[i].end > instances[it->second].end) it->second = i;
  }
  if (last_of_run.empty()) return out;
  std::size_t last = last_of_run.begin()->second;
  for (const auto& [run, i] : last_of_run)
    if (instances[i].end > instances[last].end) last = i;

  const Enablers enablers(t, instances);
  // Steps back, each marked whether it crosses into the run before.
  std::vector<std::pair<std::size_t, bool>> steps{{last, false}};
  long run = run_of(instances[last]);
  for (std::size_t i = last;;) {
    const InstanceRec& in = instances[i];
    std::size_t p = kAbsent;
    unsigned messages = 0;
    if (in.last_grant != nullptr) p = enablers.of(in.rank, *in.last_grant, messages);
    // Each step goes back in time (which also bounds the walk); helper graphs are not the
    // user's path; an enabler in an earlier run (the release that ends a run grants the next
    // run's first phases) did not decide when this run could start.
    if (p != kAbsent && !instances[p].internal && instances[p].begin < in.begin &&
        run_of(instances[p]) == run) {
      out.messages += messages;
      steps.emplace_back(p, false);
      i = p;
      continue;
    }
    auto before = last_of_run.find(run);
    if (before == last_of_run.begin() || before == last_of_run.end()) break;
    --before;
    p = before->second;
    if (instances[p].begin >= in.begin) break;
    steps.back().second = true;  // `i` begins its run's part of the path
    steps.emplace_back(p, false);
    run = before->first;
    i = p;
  }
  std::reverse(steps.begin(), steps.end());
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const InstanceRec& in = instances[steps[k].first];
    out.instances.push_back(steps[k].first);
    out.compute_ns += in.end - in.begin;
    if (k == 0) continue;
    const InstanceRec& prev = instances[steps[k - 1].first];
    const std::int64_t wait = std::max<std::int64_t>(0, in.begin - prev.end);
    // From when it could start: its enabler's end, or its run's start after a gap.
    std::int64_t from = prev.end;
    if (steps[k].second) {
      const auto& starts = run_starts[in.rank];
      const auto r = static_cast<std::size_t>(run_of(in));
      const std::int64_t start = r < starts.size() ? starts[r] : prev.end;
      from = std::clamp(start, prev.end, prev.end + wait);
      out.between_runs_ns += from - prev.end;
      out.gaps.emplace_back(prev.end, from);
    }
    const std::int64_t ready = std::clamp(in.ready, from, prev.end + wait);
    out.dependency_ns += ready - from;
    out.worker_ns += prev.end + wait - ready;
  }
  out.length_ns = instances[last].end - instances[out.instances.front()].begin;
  return out;
}

}  // namespace ordo::tracefile
