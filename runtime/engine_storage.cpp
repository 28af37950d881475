// The engine's side of location storage (docs/distributed.md, "Memory"): at the first run,
// which locations this rank uses, whether they fit, and their storage.
#include <cstring>

#include "runtime/engine.hpp"
#include "runtime/storage.hpp"

namespace ordo::rt {

// A rank uses its home locations and the locations its own tasks access (replicas); it gives
// those storage and frees what the program gave any other (a Graph::data before the first
// run). Across ranks, two control rounds, collective on every rank: each rank's need, so that
// the ranks of one host judge what they need together against the host's memory, then each
// rank's verdict (after it allocated, which may still fail), so that every rank refuses alike,
// naming every rank that does not fit. Untouched storage costs no memory yet (Buffer): the
// verdict is about what the run will touch.
void Engine::provide_storage() {
  const std::size_t nl = graph_.locations().size();
  const Distribution* d = dist_ ? &dist_->dist : nullptr;
  const unsigned rank = d ? d->rank : 0, ranks = d ? d->ranks : 1;
  std::vector<char> used(nl, d ? 0 : 1);
  if (d) {
    for (std::size_t l = 0; l < nl; ++l)
      if (d->home[l] == rank) used[l] = 1;
    for (const Family& f : graph_.families()) {
      if (f.offsets == Graph::kNoAccesses) continue;
      for (std::uint32_t i = 0; i < f.count; ++i)
        if (d->task_rank[f.first + i] == rank)
          for (const AccessDesc& a : graph_.member_accesses(f, i)) used[a.location] = 1;
    }
  }
  StorageVerdict mine;
  for (std::uint32_t l = 0; l < nl; ++l) {
    if (!used[l]) {
      graph_.release_storage(l);
      continue;
    }
    mine.total += graph_.bytes_of(l);
    if (!graph_.has_storage(l)) mine.more += graph_.bytes_of(l);
  }
  mine.available = memory_available();
  mine.host_more = mine.more;
  if (d) {
    std::vector<std::byte> need(sizeof mine.more);
    std::memcpy(need.data(), &mine.more, sizeof mine.more);
    const auto theirs = dist_->control.exchange(need);
    if (!theirs) return;  // stopped: a peer failed
    for (unsigned p = 0; p < ranks; ++p) {
      std::uint64_t more = 0;
      if (p == rank || !net_->same_host(p) || (*theirs)[p].size() != sizeof more) continue;
      std::memcpy(&more, (*theirs)[p].data(), sizeof more);
      mine.host_more += more;
    }
  }
  if (mine.fits()) {
    // Home locations go where the ranks of this host can map them (the SharedArena, when the
    // graph keeps one); replicas stay private.
    for (std::uint32_t l = 0; l < nl && !mine.allocation_failed; ++l)
      if (used[l] && !graph_.provide_storage(l, !d || d->home[l] == rank))
        mine.allocation_failed = true;
  }
  std::vector<StorageVerdict> all(ranks);
  all[rank] = mine;
  if (d) {
    std::vector<std::byte> verdict(sizeof mine);
    std::memcpy(verdict.data(), &mine, sizeof mine);
    const auto theirs = dist_->control.exchange(verdict);
    if (!theirs) return;
    for (unsigned p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      if ((*theirs)[p].size() != sizeof(StorageVerdict)) {
        fail({Failure::Kind::protocol, p,
              "rank " + std::to_string(p) + " sent a storage verdict of " +
                  std::to_string((*theirs)[p].size()) + " bytes: the ranks' ordo versions differ",
              nullptr});
        return;
      }
      std::memcpy(&all[p], (*theirs)[p].data(), sizeof(StorageVerdict));
    }
  }
  storage_error_ = storage_refusal(all);  // run() throws it
}

void Engine::release_shared_replicas() {
  const Distributed& d = *dist_;
  for (std::uint32_t l = 0; l < graph_.locations().size(); ++l)
    if (!d.dist.is_home(l) && d.shared.shared_with(l, d.dist.home[l])) graph_.release_storage(l);
}

}  // namespace ordo::rt
