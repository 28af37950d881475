// The control plane's collectives (the algorithm and the argument are in control_plane.hpp).
#include "runtime/control_plane.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "runtime/tree.hpp"
#include "runtime/wire.hpp"

namespace ordo::rt {

using wire::append;
using wire::get_u64;
using wire::put_u64;

ControlPlane::ControlPlane(Net& net, std::uint32_t channel, unsigned rank, unsigned ranks,
                           Departed on_departed)
    : net_(net),
      channel_(channel),
      rank_(rank),
      ranks_(ranks),
      on_departed_(std::move(on_departed)) {}

std::uint64_t ControlPlane::begin_round() {
  job_round_ = net_.begin_round();
  return ++round_;
}

void ControlPlane::deliver(unsigned from, std::span<const std::byte> header) {
  const std::uint64_t round = get_u64(header, sizeof(wire::Header));
  Bytes data;
  if (header.size() > sizeof(wire::Header) + 8)
    append(data, header.data() + sizeof(wire::Header) + 8, header.size() - sizeof(wire::Header) - 8);
  std::lock_guard lock(mu_);
  in_.emplace(std::make_pair(round, from), std::move(data));
  cv_.notify_all();
}

void ControlPlane::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

unsigned ControlPlane::parent() const { return tree::parent(rank_); }

std::vector<unsigned> ControlPlane::children() const { return tree::children(rank_, ranks_); }

std::vector<unsigned> ControlPlane::tree_neighbours() const {
  std::vector<unsigned> out;
  if (rank_ != 0) out.push_back(parent());
  for (unsigned c : children()) out.push_back(c);
  return out;
}

void ControlPlane::send_to(unsigned peer, std::uint64_t round, std::span<const std::byte> bytes) {
  Bytes msg;
  const wire::Header h{wire::Kind::control, 0, 0, 0, 0};
  append(msg, &h, sizeof h);
  put_u64(msg, round);
  append(msg, bytes.data(), bytes.size());
  messages_sent_.fetch_add(1, std::memory_order_relaxed);
  net_.send(peer, channel_, msg, {}, {});
}

std::optional<ControlPlane::Bytes> ControlPlane::receive_from(unsigned peer, std::uint64_t round) {
  const auto key = std::make_pair(round, peer);
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, kDepartureCheck, [&] { return stopped_ || in_.count(key) != 0; })) {
    auto gone = net_.departed_before(job_round_);
    // A failure the net heard of without telling this channel: an engine that learned of a
    // peer's loss from another rank's ABORT records it in the net only, and this rank's own
    // sighting of the loss then finds it recorded and tells no one.
    if (!gone) gone = net_.job_failure();
    if (!gone) continue;
    lock.unlock();
    if (on_departed_) on_departed_(gone->first, gone->second);
    stop();
    lock.lock();
  }
  if (stopped_) return std::nullopt;
  auto node = in_.extract(key);
  return std::move(node.mapped());
}

std::optional<ControlPlane::Bytes> ControlPlane::all_reduce(Bytes mine, const Combine& combine) {
  const std::uint64_t round = begin_round();
  const std::vector<unsigned> kids = children();
  for (unsigned c : kids) {
    auto theirs = receive_from(c, round);
    if (!theirs) return std::nullopt;
    mine = combine(mine, *theirs);
  }
  if (rank_ != 0) {
    send_to(parent(), round, mine);
    auto total = receive_from(parent(), round);
    if (!total) return std::nullopt;
    mine = std::move(*total);
  }
  // The largest subtree first: it has the longest way down.
  for (auto c = kids.rbegin(); c != kids.rend(); ++c) send_to(*c, round, mine);
  return mine;
}

std::optional<ControlPlane::Bytes> ControlPlane::broadcast(Bytes mine) {
  const std::uint64_t round = begin_round();
  if (rank_ != 0) {
    auto root = receive_from(parent(), round);
    if (!root) return std::nullopt;
    mine = std::move(*root);
  }
  const std::vector<unsigned> kids = children();
  for (auto c = kids.rbegin(); c != kids.rend(); ++c) send_to(*c, round, mine);
  return mine;
}

std::optional<ControlPlane::Bytes> ControlPlane::pass(unsigned from, unsigned to,
                                                      std::span<const std::byte> mine) {
  const std::uint64_t round = begin_round();
  if (from == to) return rank_ == to ? Bytes(mine.begin(), mine.end()) : Bytes{};
  if (rank_ == from) send_to(to, round, mine);
  if (rank_ == to) return receive_from(from, round);
  return Bytes{};
}

std::optional<std::vector<ControlPlane::Bytes>> ControlPlane::exchange_with(
    std::span<const unsigned> peers, const std::vector<Bytes>& mine) {
  const std::uint64_t round = begin_round();
  for (std::size_t i = 0; i < peers.size(); ++i) send_to(peers[i], round, mine[i]);
  std::vector<Bytes> out;
  for (unsigned p : peers) {
    auto theirs = receive_from(p, round);
    if (!theirs) return std::nullopt;
    out.push_back(std::move(*theirs));
  }
  return out;
}

std::optional<std::vector<ControlPlane::Bytes>> ControlPlane::exchange(
    std::span<const std::byte> mine) {
  // Entries (rank, length, bytes), concatenated in rank order on the way up.
  Bytes entry;
  put_u64(entry, rank_);
  put_u64(entry, mine.size());
  append(entry, mine.data(), mine.size());
  auto all = all_reduce(std::move(entry), [](std::span<const std::byte> lower,
                                              std::span<const std::byte> higher) {
    Bytes out(lower.size() + higher.size());
    if (!lower.empty()) std::memcpy(out.data(), lower.data(), lower.size());
    if (!higher.empty()) std::memcpy(out.data() + lower.size(), higher.data(), higher.size());
    return out;
  });
  if (!all) return std::nullopt;
  std::vector<Bytes> out(ranks_);
  std::span<const std::byte> in(*all);
  for (std::size_t at = 0; at + 16 <= in.size();) {
    const std::uint64_t r = get_u64(in, at), n = get_u64(in, at + 8);
    if (n > in.size() - at - 16) break;  // the ranks' versions differ: their entries stay empty
    if (r < ranks_ && r != rank_) out[r].assign(in.begin() + at + 16, in.begin() + at + 16 + n);
    at += 16 + n;
  }
  return out;
}

bool ControlPlane::barrier() { return all_reduce({}, [](auto, auto) { return Bytes{}; }).has_value(); }

std::optional<bool> ControlPlane::all(bool mine) {
  auto every = all_reduce({std::byte{mine}}, [](std::span<const std::byte> lower,
                                                std::span<const std::byte> higher) {
    const bool both = lower.size() == 1 && higher.size() == 1 && lower[0] == std::byte{1} &&
                      higher[0] == std::byte{1};
    return Bytes{std::byte{both}};
  });
  if (!every) return std::nullopt;
  return every->size() == 1 && (*every)[0] == std::byte{1};
}

ControlPlane::Quiescence ControlPlane::quiesce(const Traffic& traffic) {
  auto sums = [](std::span<const std::byte> lower, std::span<const std::byte> higher) {
    Bytes out;
    put_u64(out, get_u64(lower, 0) + get_u64(higher, 0));
    put_u64(out, get_u64(lower, 8) + get_u64(higher, 8));
    return out;
  };
  std::optional<std::uint64_t> received_before;  // R of the previous wave
  for (;;) {
    // The received counts first (acquire): what their handlers and `sent`s sent is then
    // counted in the sent counts read after.
    const std::uint64_t received = traffic.received.load(std::memory_order_acquire) +
                                   traffic.early_finished.load(std::memory_order_acquire);
    const std::uint64_t sent = traffic.sent.load(std::memory_order_relaxed) +
                               traffic.early_started.load(std::memory_order_relaxed);
    Bytes mine;
    put_u64(mine, sent);
    put_u64(mine, received);
    auto total = all_reduce(std::move(mine), sums);
    if (!total) return Quiescence::stopped;
    const std::uint64_t s = get_u64(*total, 0), r = get_u64(*total, 8);
    if (received_before && s == *received_before) return Quiescence::quiet;
    // More handled than sent: a message that no rank sent (control_plane.hpp's top comment).
    if (received_before && s < *received_before) return Quiescence::overcounted;
    received_before = r;
    // Messages still in flight: leave the core to whoever handles them before the next wave.
    if (s != r) std::this_thread::yield();
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

namespace {

// One hash and name per location and per task, after the counts: what rank 0 compares on a
// mismatch.
ControlPlane::Bytes describe(const Graph& graph) {
  const auto& locs = graph.locations();
  ControlPlane::Bytes out;
  auto add_item = [&](std::uint64_t hash, const std::string& name) {
    put_u64(out, hash);
    put_u64(out, name.size());
    append(out, name.data(), name.size());
  };
  put_u64(out, locs.size());
  put_u64(out, graph.task_count());
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
  return out;
}

// The first difference between `mine` (this rank's description of `graph`) and `other`, rank
// `peer`'s, worded for the user.
std::string first_difference(const Graph& graph, unsigned rank, std::span<const std::byte> mine,
                             unsigned peer, std::span<const std::byte> other) {
  const auto& locs = graph.locations();
  const unsigned lo = std::min(rank, peer), hi = std::max(rank, peer);
  auto describe_as = [&](const std::string& what) {
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
    return describe_as("rank " + std::to_string(rank) + " has " +
                       counts(locs.size(), graph.task_count()) + ", rank " + std::to_string(peer) +
                       " has " + counts(nl_other, nt_other));
  }
  std::size_t at_mine = 16, at_other = 16;
  for (std::size_t i = 0; i < locs.size() + graph.task_count(); ++i) {
    if (at_other + 16 > other.size()) break;  // a short description: a version difference
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
      return describe_as(std::string(is_loc ? "location" : "task") + " #" + std::to_string(idx) +
                         " differs ('" + name_mine + "' on rank " + std::to_string(rank) + ", '" +
                         name_other + "' on rank " + std::to_string(peer) +
                         "; name, size, placement or accesses)");
    }
    at_mine += 16 + lm;
    at_other += 16 + std::min<std::size_t>(lo_len, other.size() - at_other - 16);
  }
  return describe_as("their descriptions differ (the ranks' ordo versions differ)");
}

constexpr std::uint64_t kNoRank = ~std::uint64_t{0};

}  // namespace

std::uint64_t graph_fingerprint(const Graph& graph) {
  const ControlPlane::Bytes d = describe(graph);
  Hasher whole;
  whole.add(d.data(), d.size());
  return whole.h;
}

std::optional<std::string> graph_difference(ControlPlane& control, const Graph& graph) {
  const ControlPlane::Bytes mine = describe(graph);
  Hasher whole;
  whole.add(mine.data(), mine.size());
  // (hash of the range's first rank, its first rank, the first rank of the range whose hash
  // differs from it or kNoRank): combined in rank order, the first rank that differs from 0.
  ControlPlane::Bytes digest;
  put_u64(digest, whole.h);
  put_u64(digest, control.rank());
  put_u64(digest, kNoRank);
  auto total = control.all_reduce(std::move(digest), [](std::span<const std::byte> lower,
                                                         std::span<const std::byte> higher) {
    ControlPlane::Bytes out;
    put_u64(out, get_u64(lower, 0));
    put_u64(out, get_u64(lower, 8));
    std::uint64_t differs = get_u64(lower, 16);
    if (differs == kNoRank)
      differs = get_u64(higher, 0) != get_u64(lower, 0) ? get_u64(higher, 8) : get_u64(higher, 16);
    put_u64(out, differs);
    return out;
  });
  if (!total) return std::nullopt;  // the failure already says which peer failed
  const std::uint64_t differs = get_u64(*total, 16);
  if (differs == kNoRank) return std::nullopt;
  if (differs >= control.ranks()) return "the ranks' graph checks disagree (their ordo versions differ)";
  // Only now the details: the differing rank's description to rank 0, which words the first
  // difference for every rank.
  const auto peer = static_cast<unsigned>(differs);
  auto other = control.pass(peer, 0, mine);
  if (!other) return std::nullopt;
  ControlPlane::Bytes words;
  if (control.rank() == 0) {
    const std::string text = first_difference(graph, 0, mine, peer, *other);
    append(words, text.data(), text.size());
  }
  auto told = control.broadcast(std::move(words));
  if (!told) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(told->data()), told->size());
}

}  // namespace ordo::rt
