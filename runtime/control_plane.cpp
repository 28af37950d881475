// The control plane's collectives (the algorithm and the argument are in control_plane.hpp).
#include "runtime/control_plane.hpp"

#include <algorithm>
#include <thread>

#include "runtime/wire.hpp"

namespace ordo::rt {

using wire::append;
using wire::get_u64;
using wire::put_u64;

Traffic::Traffic(unsigned ranks)
    : sent(new std::atomic<std::uint64_t>[ranks]), received(new std::atomic<std::uint64_t>[ranks]) {
  for (unsigned r = 0; r < ranks; ++r) {
    sent[r].store(0, std::memory_order_relaxed);
    received[r].store(0, std::memory_order_relaxed);
  }
}

ControlPlane::ControlPlane(Net& net, std::uint32_t channel, unsigned rank, unsigned ranks)
    : net_(net), channel_(channel), rank_(rank), ranks_(ranks), in_(ranks) {}

void ControlPlane::deliver(unsigned from, std::span<const std::byte> header) {
  const std::uint64_t round = get_u64(header, sizeof(wire::Header));
  std::vector<std::byte> data;
  if (header.size() > sizeof(wire::Header) + 8)
    append(data, header.data() + sizeof(wire::Header) + 8, header.size() - sizeof(wire::Header) - 8);
  std::lock_guard lock(mu_);
  in_[from].emplace_back(round, std::move(data));
  cv_.notify_all();
}

void ControlPlane::stop() {
  std::lock_guard lock(mu_);
  stopped_.store(true, std::memory_order_release);
  cv_.notify_all();
}

std::optional<std::vector<std::vector<std::byte>>> ControlPlane::exchange(
    std::span<const std::byte> mine) {
  const std::uint64_t round = ++round_;
  std::vector<std::byte> msg;
  const wire::Header h{wire::Kind::control, 0, 0, 0, 0};
  append(msg, &h, sizeof h);
  put_u64(msg, round);
  append(msg, mine.data(), mine.size());
  for (unsigned r = 0; r < ranks_; ++r)
    if (r != rank_) net_.send(r, channel_, msg, {}, {});

  std::unique_lock lock(mu_);
  auto has = [&](unsigned r) {
    return std::any_of(in_[r].begin(), in_[r].end(), [&](const auto& e) { return e.first == round; });
  };
  cv_.wait(lock, [&] {
    if (stopped_.load(std::memory_order_relaxed)) return true;
    for (unsigned r = 0; r < ranks_; ++r)
      if (r != rank_ && !has(r)) return false;
    return true;
  });
  if (stopped_.load(std::memory_order_relaxed)) return std::nullopt;
  std::vector<std::vector<std::byte>> out(ranks_);
  for (unsigned r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    auto it = std::find_if(in_[r].begin(), in_[r].end(), [&](const auto& e) { return e.first == round; });
    out[r] = std::move(it->second);
    in_[r].erase(it);
  }
  return out;
}

bool ControlPlane::barrier() { return exchange({}).has_value(); }

std::optional<bool> ControlPlane::all(bool mine) {
  std::vector<std::byte> v;
  put_u64(v, mine ? 1 : 0);
  auto theirs = exchange(v);
  if (!theirs) return std::nullopt;
  bool every = mine;
  for (unsigned r = 0; r < ranks_; ++r)
    if (r != rank_ && get_u64((*theirs)[r], 0) == 0) every = false;
  return every;
}

bool ControlPlane::quiesce(const Traffic& traffic) {
  bool stable = false;
  for (;;) {
    std::vector<std::uint64_t> snapshot(ranks_);
    std::vector<std::byte> mine;
    put_u64(mine, stable ? 1 : 0);
    for (unsigned r = 0; r < ranks_; ++r) {
      snapshot[r] = traffic.sent[r].load(std::memory_order_relaxed);
      put_u64(mine, snapshot[r]);
    }
    auto theirs = exchange(mine);
    if (!theirs) return false;
    bool all_stable = stable;
    for (unsigned r = 0; r < ranks_; ++r)
      if (r != rank_ && get_u64((*theirs)[r], 0) == 0) all_stable = false;
    if (all_stable) return true;
    // Wait for what each peer says it sent us, then judge this round.
    for (unsigned r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      const std::uint64_t want = get_u64((*theirs)[r], 8 + 8 * rank_);
      // acquire: pairs with the release increments of the protocol (remote_locks.cpp).
      while (traffic.received[r].load(std::memory_order_acquire) < want) {
        if (stopped()) return false;
        std::this_thread::yield();
      }
    }
    // acquire: pairs with the release decrement when an early GRANT's bytes are sent.
    stable = traffic.unsent.load(std::memory_order_acquire) == 0;
    for (unsigned r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      if (traffic.received[r].load(std::memory_order_acquire) != get_u64((*theirs)[r], 8 + 8 * rank_))
        stable = false;
      if (traffic.sent[r].load(std::memory_order_relaxed) != snapshot[r]) stable = false;
    }
  }
}

namespace {

// FNV-1a, enough to tell two declarations apart.
struct Hasher {
  std::uint64_t h = 1469598103934665603ULL;
  void add(const void* p, std::size_t n) {
    auto b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  }
  template <class T>
  void add(const T& v) {
    add(&v, sizeof v);
  }
  void add(const std::string& s) {
    add(s.size());
    add(s.data(), s.size());
  }
};

}  // namespace

std::optional<std::string> graph_difference(ControlPlane& control, const Graph& graph) {
  // One hash per location and per task, with its name for the message.
  const auto& locs = graph.locations();
  const unsigned rank = control.rank();
  std::vector<std::byte> mine;
  auto add_item = [&](std::uint64_t hash, const std::string& name) {
    put_u64(mine, hash);
    put_u64(mine, name.size());
    append(mine, name.data(), name.size());
  };
  put_u64(mine, locs.size());
  put_u64(mine, graph.task_count());
  for (const LocationDesc& l : locs) {
    Hasher h;
    h.add(l.name);
    h.add(l.elem_size);
    h.add(l.count);
    h.add(l.home);
    add_item(h.h, l.name);
  }
  for (std::uint32_t t = 0; t < graph.task_count(); ++t) {
    Hasher h;
    const std::string name = graph.task_name(t);
    h.add(name);
    for (const AccessDesc& a : graph.accesses(t)) {
      h.add(a.location);
      h.add(a.mode);
      h.add(a.has_position);
      h.add(a.position);
    }
    add_item(h.h, name);
  }
  auto theirs = control.exchange(mine);
  if (!theirs) return std::nullopt;  // the failure already says which peer failed

  for (unsigned peer = 0; peer < control.ranks(); ++peer) {
    if (peer == rank) continue;
    std::span<const std::byte> other((*theirs)[peer]);
    if (other.size() == mine.size() && std::equal(other.begin(), other.end(), mine.begin()))
      continue;
    // Walk both descriptions to the first difference.
    const unsigned lo = std::min(rank, peer), hi = std::max(rank, peer);
    auto describe = [&](const std::string& what) {
      return "ranks " + std::to_string(lo) + " and " + std::to_string(hi) +
             " built different graphs: " + what +
             ". Every rank must declare the same locations and tasks, in the same order and "
             "with the same accesses (SPMD)";
    };
    const std::uint64_t nl_other = get_u64(other, 0), nt_other = get_u64(other, 8);
    if (nl_other != locs.size() || nt_other != graph.task_count()) {
      auto counts = [](std::uint64_t nl, std::uint64_t nt) {
        return std::to_string(nl) + " locations and " + std::to_string(nt) + " tasks";
      };
      return describe("rank " + std::to_string(rank) + " has " +
                      counts(locs.size(), graph.task_count()) + ", rank " + std::to_string(peer) +
                      " has " + counts(nl_other, nt_other));
    }
    std::size_t at_mine = 16, at_other = 16;
    for (std::size_t i = 0; i < locs.size() + graph.task_count(); ++i) {
      const std::uint64_t hm = get_u64(mine, at_mine), ho = get_u64(other, at_other);
      const std::uint64_t lm = get_u64(mine, at_mine + 8), lo_len = get_u64(other, at_other + 8);
      const std::string name_other(
          reinterpret_cast<const char*>(other.data()) + at_other + 16,
          std::min<std::size_t>(lo_len, other.size() - at_other - 16));
      if (hm != ho) {
        const bool is_loc = i < locs.size();
        const std::size_t idx = is_loc ? i : i - locs.size();
        const std::string name_mine =
            is_loc ? locs[idx].name : graph.task_name(static_cast<std::uint32_t>(idx));
        return describe(std::string(is_loc ? "location" : "task") + " #" + std::to_string(idx) +
                        " differs ('" + name_mine + "' on rank " + std::to_string(rank) + ", '" +
                        name_other + "' on rank " + std::to_string(peer) +
                        "; name, size, placement or accesses)");
      }
      at_mine += 16 + lm;
      at_other += 16 + lo_len;
    }
  }
  return std::nullopt;
}

}  // namespace ordo::rt
