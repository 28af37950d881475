// The engine across ranks: placement, the GRANT/RELEASE protocol, control rounds (graph check,
// quiescence, votes) and failure propagation. The protocol and why it is correct are at the top
// of engine.hpp; this file is its implementation.
//
// Early read grants. The plain protocol makes a remote read cost its location a round trip:
// the home may not let the next writer in before the reader's RELEASE is back, although the
// reader works on its own replica. So a read phase of at most kEarlyMaxBytes (sent eagerly:
// the transport copies the bytes out at once) is granted to a remote rank *early*: the home
// sends the GRANT (flag kEarly) and counts that rank in the phase's `remaining` only until the
// transport no longer reads the location (Net::send's `sent`, early_sent()): the phase may end,
// and the writer overwrite the location, while the reader still reads its replica. Two rules
// keep it exact:
//   1. No GRANT of a location goes to a rank that holds an early version of it (`held`) until
//      that rank's RELEASE (flagged kEarly, counted nowhere) has come back. A phase that needs
//      the rank meanwhile counts it and parks in `pending`; the RELEASE sends it (early again
//      if it is a small read phase, then counted until sent). So a replica is never written
//      while its tasks read it, and a rank still holds one phase of a location at a time.
//   2. The writer cannot come in before the transport has the bytes: the rank stays counted
//      in the phase until `sent`. No copy is made (an earlier version copied the location to a
//      snapshot and sent from that: one more copy of every halo on the sender, its bottleneck).
// The FIFO order is the plan's, as before: every rank sees the same versions, bit for bit. At
// most one message per location is still in flight towards a rank, and every message is sent
// in reaction to a task's release, to a received message, or to a `sent` (which quiesce()
// waits for: early_unsent_).

// Wire format: every message starts with a Header. GRANT and RELEASE carry the location's bytes
// as the payload (RELEASE only after a write phase). CONTROL carries a round number and the
// round's bytes in the header (headers are copied by the transport, so the sender need not keep
// them). ABORT carries a message naming the failing rank.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <unistd.h>

#include "runtime/engine.hpp"

namespace ordo::rt {

namespace {

enum class Kind : std::uint8_t { grant = 1, release = 2, control = 3, abort = 4 };

struct Header {
  Kind kind;
  std::uint8_t initial;  // GRANT: the initial (partial) grant of the phase
  std::uint16_t flags;   // kEarly: an early read grant, or the release of one
  std::uint32_t location;
  std::uint32_t phase;
};
constexpr std::uint16_t kEarly = 1;
constexpr std::uint16_t kFatal = 2;  // ABORT: the sender has stopped (treat as its failure)
// GRANT or RELEASE between ranks that share the location's memory: no bytes, the proxy reads
// and writes the home's buffer in place.
constexpr std::uint16_t kShared = 4;
static_assert(sizeof(Header) == 12);

std::span<const std::byte> as_bytes(const Header& h) {
  return {reinterpret_cast<const std::byte*>(&h), sizeof h};
}

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

// resize + memcpy rather than vector::insert: GCC 12 warns falsely (-Wstringop-overflow) on
// inserting byte ranges.
void append(std::vector<std::byte>& out, const void* data, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(out.data() + at, data, n);
}
void put_u64(std::vector<std::byte>& out, std::uint64_t v) { append(out, &v, sizeof v); }
std::uint64_t get_u64(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v = 0;
  if (at + sizeof v <= in.size()) std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

// A rank's location memory as share_memory()'s first round describes it: its process id, then
// (when it has a SharedArena) the number of chunks plus one, each chunk's fd, size and inode,
// and per location its chunk plus one (0: private) and offset; without an arena, a 0.
struct PeerMemory {
  struct Chunk {
    int fd;
    std::uint64_t size, inode;
  };
  std::int64_t pid = 0;
  bool arena = false;
  std::vector<Chunk> chunks;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> slots;  // (chunk + 1, offset)
};

// `share` false: described as without an arena, so that no peer shares with this rank.
std::vector<std::byte> describe_memory(const Graph& graph, bool share) {
  std::vector<std::byte> out;
  put_u64(out, static_cast<std::uint64_t>(::getpid()));
  const SharedArena* arena = share ? graph.arena() : nullptr;
  put_u64(out, arena ? arena->chunks().size() + 1 : 0);
  if (!arena) return out;
  for (const SharedArena::Chunk& c : arena->chunks()) {
    put_u64(out, static_cast<std::uint64_t>(c.fd));
    put_u64(out, c.size);
    put_u64(out, c.inode);
  }
  for (std::uint32_t l = 0; l < graph.locations().size(); ++l) {
    const auto& slot = graph.shared_slot(l);
    put_u64(out, slot ? slot->chunk + std::uint64_t{1} : 0);
    put_u64(out, slot ? slot->offset : 0);
  }
  return out;
}

// Reads describe_memory()'s bytes of a peer with the same graph; nullopt when they do not
// describe it (wrong length, a location outside its chunk).
std::optional<PeerMemory> parse_memory(std::span<const std::byte> in,
                                       const std::vector<LocationDesc>& locs) {
  PeerMemory m;
  m.pid = static_cast<std::int64_t>(get_u64(in, 0));
  const std::uint64_t n = get_u64(in, 8);
  if (n == 0) return in.size() == 16 ? std::optional(m) : std::nullopt;
  if (in.size() != 16 + (n - 1) * 24 + locs.size() * 16) return std::nullopt;
  m.arena = true;
  for (std::uint64_t c = 0; c + 1 < n; ++c)
    m.chunks.push_back({static_cast<int>(get_u64(in, 16 + c * 24)), get_u64(in, 24 + c * 24),
                        get_u64(in, 32 + c * 24)});
  const std::size_t table = 16 + (n - 1) * 24;
  for (std::size_t l = 0; l < locs.size(); ++l) {
    const std::uint64_t chunk = get_u64(in, table + l * 16), offset = get_u64(in, table + l * 16 + 8);
    if (chunk > m.chunks.size() ||
        (chunk != 0 && offset + locs[l].elem_size * locs[l].count > m.chunks[chunk - 1].size))
      return std::nullopt;
    m.slots.emplace_back(chunk, offset);
  }
  return m;
}

}  // namespace

void Engine::distribute() {
  rank_ = net_->rank();
  nranks_ = net_->size();
  const auto& locs = graph_.locations();
  const std::size_t nl = locs.size(), nt = graph_.task_count();

  // Default placement: contiguous chunks of locations in declaration order (a decomposition
  // that declares each block's locations together gets one slab of blocks per rank);
  // reductions' locations follow what they serve (Graph::rank_homes).
  dist_.home = graph_.rank_homes(nranks_);
  // Owner computes: a task runs where the first location it writes lives.
  dist_.task_rank.resize(nt);
  local_tasks_ = 0;
  for (std::uint32_t t = 0; t < nt; ++t) {
    const auto acc = graph_.accesses(t);
    auto w = std::find_if(acc.begin(), acc.end(),
                          [](const AccessDesc& a) { return a.mode == Mode::write; });
    std::uint32_t r;
    if (w != acc.end())
      r = dist_.home[w->location];
    else if (!acc.empty())
      r = dist_.home[acc.front().location];
    else
      r = static_cast<std::uint32_t>(t * nranks_ / nt);
    dist_.task_rank[t] = r;
    if (r == rank_) ++local_tasks_;
  }

  dist_.phases.assign(nl, {});
  dist_.initial.assign(nl, {});
  auto split = [&](const LockPlan& lp, std::uint32_t begin, std::uint32_t end, bool at_home) {
    PhaseRanks pr;
    for (std::uint32_t m = begin; m < end; ++m) {
      std::uint32_t t = lp.members[m];
      std::uint32_t r = dist_.task_rank[t];
      if (r == rank_)
        pr.local.push_back(t);
      else if (at_home && std::find(pr.remote.begin(), pr.remote.end(), r) == pr.remote.end())
        pr.remote.push_back(r);
    }
    return pr;
  };
  for (std::size_t l = 0; l < nl; ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked) continue;
    const bool at_home = dist_.home[l] == rank_;
    const bool involved =
        at_home || std::any_of(lp.members.begin(), lp.members.end(),
                               [&](std::uint32_t t) { return dist_.task_rank[t] == rank_; });
    if (!involved) continue;
    for (const Phase& ph : lp.phases) dist_.phases[l].push_back(split(lp, ph.begin, ph.end, at_home));
    dist_.initial[l] = split(lp, lp.initial_begin, lp.initial_end, at_home);
  }

  early_ = std::vector<EarlyState>(nl * nranks_);
  early_mu_ = std::make_unique<std::mutex[]>(nl);
  grant_seq_.assign(nl * nranks_, 0);
  release_seq_.assign(nl * nranks_, 0);
  sent_.reset(new std::atomic<std::uint64_t>[nranks_]);
  recv_.reset(new std::atomic<std::uint64_t>[nranks_]);
  for (unsigned r = 0; r < nranks_; ++r) {
    sent_[r].store(0, std::memory_order_relaxed);
    recv_[r].store(0, std::memory_order_relaxed);
  }
  ctl_in_.assign(nranks_, {});
  // Large payloads land in the location's own buffer, not in a transport buffer copied over:
  // a GRANT's into this rank's replica, a write phase's RELEASE into the home's copy. Nothing
  // touches that buffer meanwhile, for the reason zero-copy sends are safe (engine.hpp: a rank
  // holds at most one phase of a location, and the home moves on only after its release).
  net_->set_placer(channel_, [this](unsigned, std::span<const std::byte> header,
                                    std::size_t size) -> std::span<std::byte> {
    Header h{};
    if (header.size() < sizeof h) return {};
    std::memcpy(&h, header.data(), sizeof h);
    const auto& locs = graph_.locations();
    if (h.location >= locs.size() || !plan_.locks[h.location].locked ||
        h.phase >= dist_.phases[h.location].size())
      return {};
    const LocationDesc& d = locs[h.location];
    if (size != d.elem_size * d.count) return {};  // on_message reports the mismatch
    const bool home = dist_.home[h.location] == rank_;
    const bool into = h.kind == Kind::grant ? !home
                      : h.kind == Kind::release
                          ? home && plan_.locks[h.location].phases[h.phase].mode == Mode::write
                          : false;
    if (!into) return {};
    return {graph_.data(h.location), size};
  });
  net_->attach(
      channel_,
      [this](unsigned from, std::span<const std::byte> h, std::span<const std::byte> p) {
        on_message(from, h, p);
      },
      [this](const std::string& what) { on_failure(what); });
}

void Engine::check_same_graph() {
  // One hash per location and per task, with its name for the message.
  const auto& locs = graph_.locations();
  std::vector<std::byte> mine;
  auto add_item = [&](std::uint64_t hash, const std::string& name) {
    put_u64(mine, hash);
    put_u64(mine, name.size());
    append(mine, name.data(), name.size());
  };
  put_u64(mine, locs.size());
  put_u64(mine, graph_.task_count());
  for (const LocationDesc& l : locs) {
    Hasher h;
    h.add(l.name);
    h.add(l.elem_size);
    h.add(l.count);
    h.add(l.home);
    add_item(h.h, l.name);
  }
  for (std::uint32_t t = 0; t < graph_.task_count(); ++t) {
    Hasher h;
    const std::string name = graph_.task_name(t);
    h.add(name);
    for (const AccessDesc& a : graph_.accesses(t)) {
      h.add(a.location);
      h.add(a.mode);
      h.add(a.has_position);
      h.add(a.position);
    }
    add_item(h.h, name);
  }
  auto theirs = exchange(mine);
  if (failed_) return;  // error_ already says which peer failed

  for (unsigned peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    std::span<const std::byte> other(theirs[peer]);
    if (other.size() == mine.size() && std::equal(other.begin(), other.end(), mine.begin()))
      continue;
    // Walk both descriptions to the first difference.
    auto describe = [&](unsigned lo, unsigned hi, const std::string& what) {
      note_error("ranks " + std::to_string(lo) + " and " + std::to_string(hi) +
                 " built different graphs: " + what +
                 ". Every rank must declare the same locations and tasks, in the same order and "
                 "with the same accesses (SPMD)");
    };
    unsigned lo = std::min(rank_, peer), hi = std::max(rank_, peer);
    std::uint64_t nl_other = get_u64(other, 0), nt_other = get_u64(other, 8);
    if (nl_other != locs.size() || nt_other != graph_.task_count()) {
      auto counts = [](std::uint64_t nl, std::uint64_t nt) {
        return std::to_string(nl) + " locations and " + std::to_string(nt) + " tasks";
      };
      describe(lo, hi,
               "rank " + std::to_string(rank_) + " has " + counts(locs.size(), graph_.task_count()) +
                   ", rank " + std::to_string(peer) + " has " + counts(nl_other, nt_other));
      return;
    }
    std::size_t at_mine = 16, at_other = 16;
    for (std::size_t i = 0; i < locs.size() + graph_.task_count(); ++i) {
      std::uint64_t hm = get_u64(mine, at_mine), ho = get_u64(other, at_other);
      std::uint64_t lm = get_u64(mine, at_mine + 8), lo_len = get_u64(other, at_other + 8);
      std::string name_other(reinterpret_cast<const char*>(other.data()) + at_other + 16,
                             std::min<std::size_t>(lo_len, other.size() - at_other - 16));
      if (hm != ho) {
        bool is_loc = i < locs.size();
        std::size_t idx = is_loc ? i : i - locs.size();
        const std::string name_mine =
            is_loc ? locs[idx].name : graph_.task_name(static_cast<std::uint32_t>(idx));
        describe(lo, hi,
                 std::string(is_loc ? "location" : "task") + " #" + std::to_string(idx) +
                     " differs ('" + name_mine + "' on rank " + std::to_string(rank_) + ", '" +
                     name_other + "' on rank " + std::to_string(peer) +
                     "; name, size, placement or accesses)");
        return;
      }
      at_mine += 16 + lm;
      at_other += 16 + lo_len;
    }
  }
}

// Shared memory (docs/distributed.md). Two control rounds at the first run, collective on
// every rank whatever it shares. Round 1: each rank's process id, the chunks of its graph's
// SharedArena and where each location lies in them. A rank maps the chunks of every peer on
// its host (Net::same_host) when both keep locations in shared memory. Round 2: which peers it
// mapped. Two ranks share when each mapped the other; then a location homed on one of them
// whose buffer is in the home's arena is shared: GRANTs and RELEASEs between them carry no
// bytes (kShared), and the proxy's tasks use the home's buffer. Both ends decide from the same
// data, and the home decides before it sends its first GRANT; the proxy needs no table to
// handle a message (the flag says), so a GRANT that overtakes its round 2 is handled right.
void Engine::share_memory() {
  const auto& locs = graph_.locations();
  share_peer_.assign(nranks_, 0);
  shared_view_.assign(locs.size(), nullptr);
  auto theirs = exchange(describe_memory(graph_, share_memory_));
  if (failed_) return;

  // Per peer of this host, when both keep locations in shared memory: its chunks mapped here.
  std::vector<PeerMemory> peers(nranks_);
  std::vector<std::vector<std::byte*>> bases(nranks_);
  std::vector<std::byte> mapped(nranks_, std::byte{0});
  for (unsigned h = 0; h < nranks_; ++h) {
    if (h == rank_ || !share_memory_ || !graph_.arena() || !net_->same_host(h)) continue;
    auto m = parse_memory(theirs[h], locs);
    if (!m) {
      protocol_error("rank " + std::to_string(h) + " described its shared memory in " +
                     std::to_string(theirs[h].size()) + " bytes that do not fit this graph: "
                     "the ranks' ordo versions differ");
      return;
    }
    if (!m->arena) continue;
    peers[h] = std::move(*m);
    mapped[h] = std::byte{1};
    for (const PeerMemory::Chunk& c : peers[h].chunks) {
      std::string error;
      PeerMapping pm = PeerMapping::map(peers[h].pid, c.fd, c.size, c.inode, error);
      if (pm.base() == nullptr) {
        std::fprintf(stderr,
                     "ordo: rank %u cannot share rank %u's location memory (%s); their "
                     "locations are copied instead\n",
                     rank_, h, error.c_str());
        mapped[h] = std::byte{0};
        break;
      }
      bases[h].push_back(pm.base());
      mappings_.push_back(std::move(pm));
    }
  }
  auto answers = exchange(mapped);
  if (failed_) return;

  for (unsigned h = 0; h < nranks_; ++h) {
    if (mapped[h] != std::byte{1} || answers[h].size() != nranks_ ||
        answers[h][rank_] != std::byte{1})
      continue;
    share_peer_[h] = 1;
    for (std::uint32_t l = 0; l < locs.size(); ++l) {
      const auto [chunk, offset] = peers[h].slots[l];
      if (dist_.home[l] == h && chunk != 0 && plan_.locks[l].locked)
        shared_view_[l] = bases[h][chunk - 1] + offset;
    }
  }
}

bool Engine::shared_with(std::uint32_t location, unsigned peer) const {
  return dist_.home[location] == rank_
             ? share_peer_[peer] != 0 && graph_.shared_slot(location).has_value()
             : shared_view_[location] != nullptr;
}

void Engine::start_initial_grants() {
  for (std::uint32_t t = 0; t < plan_.tasks; ++t)
    if (dist_.task_rank[t] == rank_ && (tasks_[t].requests == 0 || fiber_of(t))) ready(t);
  // Only home locations: a proxy's state is set by the GRANT it receives (possibly already).
  for (std::uint32_t l = 0; l < plan_.locks.size(); ++l) {
    const LockPlan& lp = plan_.locks[l];
    if (!lp.locked || dist_.home[l] != rank_) continue;
    const PhaseRanks& pr = dist_.initial[l];
    locks_[l].phase = lp.initial_phase;
    locks_[l].remaining.store(static_cast<std::uint32_t>(pr.local.size() + pr.remote.size()),
                              std::memory_order_relaxed);
    for (std::uint32_t r : pr.remote) send_grant_to(l, lp.initial_phase, r, true, false);
    for (std::uint32_t t : pr.local) grant(t, l);
  }
}

// Tag of the next GRANT (or RELEASE) of `location` between this rank and `peer`: kind, location
// and its sequence number between the two.
std::uint64_t Engine::trace_tag(bool grant, std::uint32_t location, unsigned peer) {
  std::uint32_t& seq = (grant ? grant_seq_ : release_seq_)[location * nranks_ + peer];
  return (std::uint64_t{grant} << 63) | (std::uint64_t{location} << 32) | seq++;
}

unsigned Engine::trace_buffer() const {
  const int w = sched::Pool::current_worker();
  return w >= 0 ? static_cast<unsigned>(w) : trace_->control();
}

// An early GRANT's rank is counted in its phase until the transport has the bytes: its `sent`
// releases the phase then. Call it without holding early_mu_ (`sent` may run inside).
void Engine::send_grant_to(std::uint32_t location, std::uint32_t phase, unsigned peer,
                           bool initial, bool early) {
  const LocationDesc& d = graph_.locations()[location];
  const bool shared = shared_with(location, peer);
  Header h{Kind::grant, static_cast<std::uint8_t>(initial),
           static_cast<std::uint16_t>((early ? kEarly : 0) | (shared ? kShared : 0)), location,
           phase};
  std::span<const std::byte> payload;
  if (!shared) payload = {graph_.data(location), d.elem_size * d.count};
  const std::uint64_t tag = trace_tag(true, location, peer);
  if (trace_) [[unlikely]]
    trace_->send(trace_buffer(), peer, location, trace::kNone, payload.size(), tag);
  sent_[peer].fetch_add(1, std::memory_order_relaxed);  // counted before it can be received
  Net::Sent sent;
  if (early) {
    early_unsent_.fetch_add(1, std::memory_order_relaxed);
    sent = [this, location] { early_sent(location); };
  }
  net_->send(peer, channel_, as_bytes(h), payload, std::move(sent));
}

void Engine::early_sent(std::uint32_t location) {
  // seq_cst pair with run()'s close: a call that saw the run open is counted before run()
  // reads sent_running_, so run() waits for it; a later one sees it closed.
  sent_running_.fetch_add(1);
  if (sent_open_.load()) release(location, kNoTask, 0, 0);
  sent_running_.fetch_sub(1);
  // release: pairs with quiesce()'s acquire; what the release sent is counted in sent_ by now.
  early_unsent_.fetch_sub(1, std::memory_order_release);
}

// A rank that shares the location reads the home's buffer: never early.
bool Engine::early_to(std::uint32_t location, std::uint32_t phase, unsigned peer) const {
  const LocationDesc& d = graph_.locations()[location];
  const std::size_t bytes = d.elem_size * d.count;
  return plan_.locks[location].phases[phase].mode == Mode::read && bytes > 0 &&
         bytes <= kEarlyMaxBytes && !shared_with(location, peer);
}

void Engine::enter_phase(std::uint32_t location, std::uint32_t phase, std::uint32_t releaser,
                         std::uint64_t iteration, unsigned worker) {
  LockState& ls = locks_[location];
  struct Send {
    unsigned peer;
    bool early;
  };
  // One list per nesting level: an early GRANT's `sent` may run inside the send and enter the
  // next phase of this location (re-entering this function) before the loop below is done.
  thread_local std::deque<std::vector<Send>> lists;
  thread_local std::size_t depth = 0;
  if (lists.size() == depth) lists.emplace_back();
  std::vector<Send>& sends = lists[depth];
  sends.clear();
  const PhaseRanks& pr = dist_.phases[location][phase];
  std::uint32_t counted = static_cast<std::uint32_t>(pr.local.size());
  if (pr.remote.empty()) {
    ls.remaining.store(counted, std::memory_order_relaxed);
  } else {
    std::lock_guard lock(early_mu_[location]);
    for (std::uint32_t r : pr.remote) {
      EarlyState& e = early_[location * nranks_ + r];
      ++counted;  // early or not: the phase waits for its RELEASE, or for its GRANT's `sent`
      if (e.held) {  // rule 1: sent when r's RELEASE comes back
        e.pending = phase;
      } else {
        e.held = early_to(location, phase, r);
        sends.push_back({r, e.held});
      }
    }
    // Stored before any grant or GRANT goes out (a holder may release at once), and before
    // a pending phase is visible to the thread that may send it.
    ls.remaining.store(counted, std::memory_order_relaxed);
  }
  // Local holders first: once the GRANTs are out, the phase may end inside this loop.
  for (std::uint32_t t : pr.local) grant_traced(t, location, releaser, iteration, worker);
  ++depth;
  for (const Send& x : sends) send_grant_to(location, phase, x.peer, false, x.early);
  --depth;
}

void Engine::proxy_release(std::uint32_t location) {
  LockState& ls = locks_[location];
  // acq_rel: the last local holder must see the others' writes before shipping the bytes.
  if (ls.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const LockPlan& lp = plan_.locks[location];
  const LocationDesc& d = graph_.locations()[location];
  const std::uint32_t home = dist_.home[location];
  const bool shared = shared_with(location, home);
  Header h{Kind::release, 0,
           static_cast<std::uint16_t>((ls.early ? kEarly : 0) | (shared ? kShared : 0)), location,
           ls.phase};
  std::span<const std::byte> payload;
  if (lp.phases[ls.phase].mode == Mode::write && !shared)
    payload = {graph_.data(location), d.elem_size * d.count};
  const std::uint64_t tag = trace_tag(false, location, home);
  if (trace_) [[unlikely]]
    trace_->send(trace_buffer(), home, location, trace::kNone, payload.size(), tag);
  sent_[home].fetch_add(1, std::memory_order_relaxed);
  net_->send(home, channel_, as_bytes(h), payload, {});
}

void Engine::on_message(unsigned from, std::span<const std::byte> header,
                        std::span<const std::byte> payload) {
  std::lock_guard trace_lock(trace_mu_);  // trace_ stays as it is while this message is handled
  if (stopped_) return;                   // a peer failed and the run has ended (run())
  Header h{};
  if (header.size() < sizeof h || from >= nranks_) {
    protocol_error("rank " + std::to_string(from) + " sent a malformed message (" +
                   std::to_string(header.size()) + " header bytes)");
    return;
  }
  std::memcpy(&h, header.data(), sizeof h);
  const auto& locs = graph_.locations();
  auto bad_location = [&] {
    return h.location >= locs.size() || !plan_.locks[h.location].locked ||
           dist_.phases[h.location].empty() || h.phase >= dist_.phases[h.location].size();
  };
  switch (h.kind) {
    case Kind::grant: {
      if (bad_location()) break;
      const LocationDesc& d = locs[h.location];
      const bool shared = (h.flags & kShared) != 0;  // the bytes are in the home's buffer
      if (payload.size() != (shared ? 0 : d.elem_size * d.count)) {
        protocol_error("rank " + std::to_string(from) + " sent " + std::to_string(payload.size()) +
                       " bytes for location '" + d.name + "', which " +
                       (shared ? std::string("it shares with this rank (none expected)")
                               : "has " + std::to_string(d.elem_size * d.count)));
        return;
      }
      if (!shared && payload.data() != graph_.data(h.location))  // else placed there already
        std::memcpy(graph_.data(h.location), payload.data(), payload.size());
      const std::uint64_t tag = trace_tag(true, h.location, from);
      // Initial grants are sent while the engine is built, before tracing is attached.
      if (trace_ && !h.initial) [[unlikely]]
        trace_->receive(trace_buffer(), from, h.location, trace::kNone, payload.size(), tag);
      LockState& ls = locks_[h.location];
      ls.phase = h.phase;
      ls.early = (h.flags & kEarly) != 0;
      const PhaseRanks& pr = h.initial ? dist_.initial[h.location] : dist_.phases[h.location][h.phase];
      ls.remaining.store(static_cast<std::uint32_t>(pr.local.size()), std::memory_order_relaxed);
      for (std::uint32_t t : pr.local) {
        if (trace_ && !h.initial) [[unlikely]]
          trace_->grant(trace_buffer(), t, h.location, granted_iteration(t, h.location), trace::kNone,
                        0);
        grant(t, h.location);
      }
      recv_[from].fetch_add(1, std::memory_order_release);  // pairs with quiesce()'s acquire
      return;
    }
    case Kind::release: {
      if (bad_location() || dist_.home[h.location] != rank_) break;
      const LocationDesc& d = locs[h.location];
      if (h.flags & kEarly) {  // an early read's release: counted nowhere, frees the rank
        const std::uint64_t tag = trace_tag(false, h.location, from);
        if (trace_) [[unlikely]]
          trace_->receive(trace_buffer(), from, h.location, trace::kNone, payload.size(), tag);
        std::uint32_t pending = kNoPhase;
        bool early = false;
        {
          std::lock_guard lock(early_mu_[h.location]);
          EarlyState& e = early_[h.location * nranks_ + from];
          if (!e.held || !payload.empty()) {
            protocol_error(
                "rank " + std::to_string(from) + " released location '" + d.name +
                "' early, which it did not hold early: the ranks' protocol versions differ");
            return;
          }
          // rule 1: the phase that waited for this release (counted there already) goes now.
          pending = std::exchange(e.pending, kNoPhase);
          early = pending != kNoPhase && early_to(h.location, pending, from);
          e.held = early;
        }
        if (pending != kNoPhase) send_grant_to(h.location, pending, from, false, early);
        recv_[from].fetch_add(1, std::memory_order_release);  // pairs with quiesce()'s acquire
        return;
      }
      if ((h.flags & kShared) && (!shared_with(h.location, from) || !payload.empty())) {
        protocol_error("rank " + std::to_string(from) + " released location '" + d.name +
                       "' as shared, which this rank does not share with it: the ranks' "
                       "protocol versions differ");
        return;
      }
      if (plan_.locks[h.location].phases[h.phase].mode == Mode::write && !(h.flags & kShared)) {
        if (payload.size() != d.elem_size * d.count) {
          protocol_error("rank " + std::to_string(from) + " released location '" + d.name +
                         "' with " + std::to_string(payload.size()) + " bytes instead of " +
                         std::to_string(d.elem_size * d.count));
          return;
        }
        if (payload.data() != graph_.data(h.location))  // else placed there already
          std::memcpy(graph_.data(h.location), payload.data(), payload.size());
      }
      const std::uint64_t tag = trace_tag(false, h.location, from);
      if (trace_) [[unlikely]]
        trace_->receive(trace_buffer(), from, h.location, trace::kNone, payload.size(), tag);
      release(h.location, kNoTask, 0, 0);
      recv_[from].fetch_add(1, std::memory_order_release);  // pairs with quiesce()'s acquire
      return;
    }
    case Kind::control: {
      std::uint64_t round = get_u64(header, sizeof h);
      std::vector<std::byte> data;
      if (header.size() > sizeof h + 8)
        append(data, header.data() + sizeof h + 8, header.size() - sizeof h - 8);
      std::lock_guard lock(ctl_mu_);
      ctl_in_[from].emplace_back(round, std::move(data));
      ctl_cv_.notify_all();
      return;
    }
    case Kind::abort: {
      const std::string what(reinterpret_cast<const char*>(header.data()) + sizeof h,
                             header.size() - sizeof h);
      if (h.flags & kFatal)
        on_failure(what);
      else
        note_error(what);
      return;
    }
  }
  protocol_error("rank " + std::to_string(from) + " sent a message for an unknown location or " +
                 "phase (location #" + std::to_string(h.location) + ", phase " +
                 std::to_string(h.phase) + "): the ranks' graphs or versions differ");
}

void Engine::note_error(const std::string& what) {
  {
    std::lock_guard lock(error_mu_);
    if (!error_) error_ = std::make_exception_ptr(std::runtime_error(what));
  }
  aborted_.store(true, std::memory_order_relaxed);
}

void Engine::on_failure(const std::string& what) {
  note_error(what);
  {
    std::lock_guard lock(ctl_mu_);
    failed_.store(true, std::memory_order_relaxed);
    ctl_cv_.notify_all();
  }
  std::lock_guard lock(done_mu_);
  done_cv_.notify_all();
}

// A message the protocol never sends: this rank stops, and so do the others (a fatal ABORT,
// taken as this rank's failure), rather than wait for a rank that no longer answers.
void Engine::protocol_error(const std::string& what) {
  const std::string text = "rank " + std::to_string(rank_) + " stopped: " + what;
  on_failure(text);
  abort_everywhere(text, true);
}

void Engine::abort_everywhere(const std::string& what, bool fatal) {
  std::vector<std::byte> msg;
  Header h{Kind::abort, 0, fatal ? kFatal : std::uint16_t{0}, 0, 0};
  append(msg, &h, sizeof h);
  append(msg, what.data(), what.size());
  for (unsigned r = 0; r < nranks_; ++r)
    if (r != rank_) net_->send(r, channel_, msg, {}, {});
}

std::vector<std::vector<std::byte>> Engine::exchange(const std::vector<std::byte>& mine) {
  const std::uint64_t round = ++ctl_seq_;
  std::vector<std::byte> msg;
  Header h{Kind::control, 0, 0, 0, 0};
  append(msg, &h, sizeof h);
  put_u64(msg, round);
  append(msg, mine.data(), mine.size());
  for (unsigned r = 0; r < nranks_; ++r)
    if (r != rank_) net_->send(r, channel_, msg, {}, {});

  std::vector<std::vector<std::byte>> out(nranks_);
  std::unique_lock lock(ctl_mu_);
  auto has = [&](unsigned r) {
    return std::any_of(ctl_in_[r].begin(), ctl_in_[r].end(),
                       [&](const auto& e) { return e.first == round; });
  };
  ctl_cv_.wait(lock, [&] {
    if (failed_.load(std::memory_order_relaxed)) return true;
    for (unsigned r = 0; r < nranks_; ++r)
      if (r != rank_ && !has(r)) return false;
    return true;
  });
  if (failed_.load(std::memory_order_relaxed)) return out;
  for (unsigned r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    auto it = std::find_if(ctl_in_[r].begin(), ctl_in_[r].end(),
                           [&](const auto& e) { return e.first == round; });
    out[r] = std::move(it->second);
    ctl_in_[r].erase(it);
  }
  return out;
}

// Rounds until no protocol message is in flight. In round r each rank sends, with the flag
// "my previous round was stable", how many protocol messages it has sent to every rank; it
// waits to have received as many from each, and calls the round stable if it then had received
// exactly that many and sent nothing since its snapshot. When every rank reports a stable round,
// every message sent was received and none can follow: after local completion a rank sends only
// in reaction to a message it receives.
void Engine::quiesce() {
  bool stable = false;
  for (;;) {
    std::vector<std::uint64_t> snapshot(nranks_);
    std::vector<std::byte> mine;
    put_u64(mine, stable ? 1 : 0);
    for (unsigned r = 0; r < nranks_; ++r) {
      snapshot[r] = sent_[r].load(std::memory_order_relaxed);
      put_u64(mine, snapshot[r]);
    }
    auto theirs = exchange(mine);
    if (failed_) return;
    bool all_stable = stable;
    for (unsigned r = 0; r < nranks_; ++r)
      if (r != rank_ && get_u64(theirs[r], 0) == 0) all_stable = false;
    if (all_stable) return;
    // Wait for what each peer says it sent us, then judge this round.
    for (unsigned r = 0; r < nranks_; ++r) {
      if (r == rank_) continue;
      const std::uint64_t want = get_u64(theirs[r], 8 + 8 * rank_);
      // acquire: pairs with the release increments in on_message().
      while (recv_[r].load(std::memory_order_acquire) < want) {
        if (failed_) return;
        std::this_thread::yield();
      }
    }
    // An early GRANT still being sent will release its phase, which may send more.
    // acquire: pairs with early_sent()'s release.
    stable = early_unsent_.load(std::memory_order_acquire) == 0;
    for (unsigned r = 0; r < nranks_; ++r) {
      if (r == rank_) continue;
      if (recv_[r].load(std::memory_order_acquire) != get_u64(theirs[r], 8 + 8 * rank_))
        stable = false;
      if (sent_[r].load(std::memory_order_relaxed) != snapshot[r]) stable = false;
    }
  }
}

bool Engine::vote(bool mine) {
  std::vector<std::byte> v;
  put_u64(v, mine ? 1 : 0);
  auto theirs = exchange(v);
  if (failed_) return true;  // stop: the run is over anyway
  bool all = mine;
  for (unsigned r = 0; r < nranks_; ++r)
    if (r != rank_ && get_u64(theirs[r], 0) == 0) all = false;
  return all;
}

}  // namespace ordo::rt
