#include "runtime/distribution.hpp"

#include <algorithm>

namespace ordo::rt {

Distribution Distribution::compute(const Graph& graph, const Plan& plan, unsigned rank,
                                   unsigned ranks) {
  Distribution d;
  d.rank = rank;
  d.ranks = ranks;
  const auto& locs = graph.locations();
  const std::size_t nl = locs.size(), nt = graph.task_count();

  // Default placement: contiguous chunks of locations in declaration order; reductions'
  // locations follow what they serve (Graph::rank_homes).
  d.home = graph.rank_homes(ranks);
  d.task_rank.resize(nt);
  for (std::uint32_t t = 0; t < nt; ++t) {
    const auto acc = graph.accesses(t);
    auto w = std::find_if(acc.begin(), acc.end(),
                          [](const AccessDesc& a) { return a.mode == Mode::write; });
    std::uint32_t r;
    if (w != acc.end())
      r = d.home[w->location];
    else if (!acc.empty())
      r = d.home[acc.front().location];
    else
      r = static_cast<std::uint32_t>(t * ranks / nt);
    d.task_rank[t] = r;
    if (r == rank) ++d.local_tasks;
  }

  d.slot_begin.assign(nl + 1, 0);
  d.phases.assign(nl, {});
  d.initial.assign(nl, {});
  auto split = [&](const LockPlan& lp, std::uint32_t begin, std::uint32_t end, bool at_home) {
    PhaseRanks pr;
    for (std::uint32_t m = begin; m < end; ++m) {
      const std::uint32_t t = lp.members[m];
      const std::uint32_t r = d.task_rank[t];
      if (r == rank)
        pr.local.push_back(t);
      else if (at_home && std::find(pr.remote.begin(), pr.remote.end(), r) == pr.remote.end())
        pr.remote.push_back(r);
    }
    return pr;
  };
  for (std::size_t l = 0; l < nl; ++l) {
    const LockPlan& lp = plan.locks[l];
    if (!lp.locked) continue;
    const bool at_home = d.home[l] == rank;
    const bool involved =
        at_home || std::any_of(lp.members.begin(), lp.members.end(),
                               [&](std::uint32_t t) { return d.task_rank[t] == rank; });
    if (!involved) continue;
    for (const Phase& ph : lp.phases) d.phases[l].push_back(split(lp, ph.begin, ph.end, at_home));
    d.initial[l] = split(lp, lp.initial_begin, lp.initial_end, at_home);
    const std::size_t first = d.slot_peer.size();
    if (!at_home) {
      d.slot_peer.push_back(d.home[l]);
    } else {
      for (const PhaseRanks& pr : d.phases[l])
        d.slot_peer.insert(d.slot_peer.end(), pr.remote.begin(), pr.remote.end());
      std::sort(d.slot_peer.begin() + first, d.slot_peer.end());
      d.slot_peer.erase(std::unique(d.slot_peer.begin() + first, d.slot_peer.end()),
                        d.slot_peer.end());
    }
    d.neighbours.insert(d.neighbours.end(), d.slot_peer.begin() + first, d.slot_peer.end());
    d.slot_begin[l + 1] = static_cast<std::uint32_t>(d.slot_peer.size());
  }
  // Locations this rank takes no part in have empty slot ranges.
  for (std::size_t l = 0; l < nl; ++l)
    d.slot_begin[l + 1] = std::max(d.slot_begin[l + 1], d.slot_begin[l]);
  std::sort(d.neighbours.begin(), d.neighbours.end());
  d.neighbours.erase(std::unique(d.neighbours.begin(), d.neighbours.end()), d.neighbours.end());
  return d;
}

}  // namespace ordo::rt
