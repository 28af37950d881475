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
  std::vector<char> used(nl, net_ ? 0 : 1);
  if (net_) {
    for (std::size_t l = 0; l < nl; ++l)
      if (dist_.home[l] == rank_) used[l] = 1;
    for (const Family& f : graph_.families()) {
      if (f.offsets == Graph::kNoAccesses) continue;
      for (std::uint32_t i = 0; i < f.count; ++i)
        if (dist_.task_rank[f.first + i] == rank_)
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
  if (net_) {
    std::vector<std::byte> need(sizeof mine.more);
    std::memcpy(need.data(), &mine.more, sizeof mine.more);
    const auto theirs = exchange(need);
    if (failed_) return;
    for (unsigned p = 0; p < nranks_; ++p) {
      std::uint64_t more = 0;
      if (p == rank_ || !net_->same_host(p) || theirs[p].size() != sizeof more) continue;
      std::memcpy(&more, theirs[p].data(), sizeof more);
      mine.host_more += more;
    }
  }
  if (mine.fits()) {
    // Home locations go where the ranks of this host can map them (the SharedArena, when the
    // graph keeps one); replicas stay private.
    for (std::uint32_t l = 0; l < nl && !mine.allocation_failed; ++l)
      if (used[l] && !graph_.provide_storage(l, !net_ || dist_.home[l] == rank_))
        mine.allocation_failed = true;
  }
  std::vector<StorageVerdict> all(nranks_);
  all[rank_] = mine;
  if (net_) {
    std::vector<std::byte> verdict(sizeof mine);
    std::memcpy(verdict.data(), &mine, sizeof mine);
    const auto theirs = exchange(verdict);
    if (failed_) return;
    for (unsigned p = 0; p < nranks_; ++p) {
      if (p == rank_) continue;
      if (theirs[p].size() != sizeof(StorageVerdict)) {
        protocol_error("rank " + std::to_string(p) + " sent a storage verdict of " +
                       std::to_string(theirs[p].size()) + " bytes: the ranks' ordo versions differ");
        return;
      }
      std::memcpy(&all[p], theirs[p].data(), sizeof(StorageVerdict));
    }
  }
  storage_error_ = storage_refusal(all);
  if (storage_error_.empty()) return;
  std::lock_guard lock(error_mu_);
  if (!error_) error_ = std::make_exception_ptr(std::runtime_error(storage_error_));
}

void Engine::release_shared_replicas() {
  for (std::uint32_t l = 0; l < shared_view_.size(); ++l)
    if (shared_view_[l] != nullptr) graph_.release_storage(l);
}

}  // namespace ordo::rt
