// The critical path through the timeline (docs/tracing.md, "Critical path"): from the user's
// instance that ended last, back through what made each instance ready, on any rank.
#include <algorithm>
#include <iterator>
#include <limits>
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
  std::size_t last = kAbsent;
  for (std::size_t i = 0; i < instances.size(); ++i)
    if (!instances[i].internal && (last == kAbsent || instances[i].end > instances[last].end))
      last = i;
  if (last == kAbsent) return out;
  // Each rank's run starts: the path stays in the last instance's run. The release that ends
  // a run grants the next run's first phases; every rank records its run_begin before the
  // barrier that starts a run, so an enabler that ended before it belongs to an earlier run.
  std::vector<std::vector<std::int64_t>> run_starts(t.ranks.size());
  for (const RankTrace& r : t.ranks)
    for (const Event& e : r.events)
      if (e.k() == Kind::run_begin) run_starts[r.rank].push_back(t.aligned(r, e));
  auto run_start = [&](const InstanceRec& in) {
    const auto& starts = run_starts[in.rank];
    auto it = std::upper_bound(starts.begin(), starts.end(), in.begin);
    return it == starts.begin() ? std::numeric_limits<std::int64_t>::min() : *std::prev(it);
  };
  const Enablers enablers(t, instances);
  const std::int64_t started = run_start(instances[last]);
  out.instances.push_back(last);
  for (std::size_t i = last;;) {
    const InstanceRec& in = instances[i];
    if (in.last_grant == nullptr) break;  // ready before the trace recorded a grant
    unsigned messages = 0;
    const std::size_t p = enablers.of(in.rank, *in.last_grant, messages);
    // Each step goes back in time (which also bounds the walk); helper graphs are not the
    // user's path.
    if (p == kAbsent || instances[p].internal || instances[p].begin >= in.begin ||
        instances[p].end < started)
      break;
    out.messages += messages;
    out.instances.push_back(p);
    i = p;
  }
  std::reverse(out.instances.begin(), out.instances.end());
  out.length_ns = instances[last].end - instances[out.instances.front()].begin;
  for (std::size_t i : out.instances) out.compute_ns += instances[i].end - instances[i].begin;
  return out;
}

}  // namespace ordo::tracefile
