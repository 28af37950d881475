// The remote-lock protocol (its rules and why they hold are in remote_locks.hpp).
#include "runtime/remote_locks.hpp"

#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "runtime/assert.hpp"
#include "runtime/engine.hpp"
#include "runtime/wire.hpp"

namespace ordo::rt {

using wire::Header;
using wire::Kind;

RemoteLocks::RemoteLocks(Host& engine, Graph& graph, const Plan& plan, const Distribution& dist,
                         Net& net, std::uint32_t channel, ControlPlane& control,
                         const FailureRelay& relay, const SharedPeers& shared)
    : engine_(engine),
      graph_(graph),
      plan_(plan),
      dist_(dist),
      net_(net),
      channel_(channel),
      control_(control),
      relay_(relay),
      shared_(shared),
      proxies_(new ProxyLock[graph.locations().size()]),
      early_mu_(std::make_unique<std::mutex[]>(graph.locations().size())),
      early_(dist.slots()),
      grant_seq_(dist.slots(), 0),
      release_seq_(dist.slots(), 0) {
  // A proxy's first GRANT: the initial one where it has members in the initial grant, else
  // the first phase after the initial phase that has members here.
  for (std::uint32_t l = 0; l < plan.locks.size(); ++l) {
    if (!plan.locks[l].locked || dist.is_home(l) || dist.phases[l].empty()) continue;
    ProxyLock& pl = proxies_[l];
    pl.next_initial = !dist.initial[l].local.empty();
    pl.next_phase = pl.next_initial ? plan.locks[l].initial_phase
                                    : phase_after(l, plan.locks[l].initial_phase);
  }
}

void RemoteLocks::attach() {
  net_.set_placer(channel_,
                  [this](unsigned from, std::span<const std::byte> header, std::size_t size) {
                    return place(from, header, size);
                  });
  net_.attach(
      channel_,
      [this](unsigned from, std::span<const std::byte> h, std::span<const std::byte> p) {
        on_message(from, h, p);
      },
      [this](unsigned rank, const std::string& what) {
        // This rank's own transport failing (CommNet: "transport error on rank R") is its own
        // failure, not the loss of a peer that happens to be itself.
        engine_.fail({rank == dist_.rank ? Failure::Kind::own : Failure::Kind::peer_lost, rank,
                      what, nullptr, true});
      });
}

// Large payloads land in the location's own buffer, not in a transport buffer copied over:
// a GRANT's into this rank's replica, a write phase's RELEASE into the home's copy. Nothing
// touches that buffer meanwhile, for the reason zero-copy sends are safe (a rank holds at most
// one phase of a location, and the home moves on only after its release). A message this rank
// does not wait for is placed nowhere: on_message refuses it.
std::span<std::byte> RemoteLocks::place(unsigned from, std::span<const std::byte> header,
                                        std::size_t size) {
  Header h{};
  if (header.size() < sizeof h) return {};
  std::memcpy(&h, header.data(), sizeof h);
  const auto& locs = graph_.locations();
  if (h.location >= locs.size() || !plan_.locks[h.location].locked ||
      h.phase >= dist_.phases[h.location].size())
    return {};
  const LocationDesc& d = locs[h.location];
  if (size != d.elem_size * d.count) return {};  // on_message reports the mismatch
  const bool home = dist_.is_home(h.location);
  if (from >= dist_.ranks || from == dist_.rank) return {};
  bool into = false;
  if (h.kind == Kind::grant) {
    into = grant_problem(from, h) == GrantProblem::none;
  } else if (h.kind == Kind::release && home &&
             plan_.locks[h.location].phases[h.phase].mode == Mode::write) {
    std::lock_guard lock(early_mu_[h.location]);
    const std::size_t slot = dist_.slot(h.location, from);
    into = slot != Distribution::kNoSlot && early_[slot].granted == h.phase;
  }
  if (!into) return {};
  return {graph_.data(h.location), size};
}

std::uint32_t RemoteLocks::phase_after(std::uint32_t location, std::uint32_t phase) const {
  const auto& phases = dist_.phases[location];
  const auto n = static_cast<std::uint32_t>(phases.size());
  // Amortised: the phases skipped are those of one cycle without members here.
  for (std::uint32_t k = 1; k <= n; ++k) {
    const std::uint32_t q = (phase + k) % n;
    if (!phases[q].local.empty()) return q;
  }
  return kNoPhase;
}

RemoteLocks::GrantProblem RemoteLocks::grant_problem(unsigned from, const Header& h) const {
  if (dist_.is_home(h.location)) return GrantProblem::to_home;
  if (from != dist_.home[h.location]) return GrantProblem::not_from_home;
  const ProxyLock& pl = proxies_[h.location];
  if (pl.remaining.load(std::memory_order_relaxed) != 0) return GrantProblem::still_held;
  // The flags are not checked here: whether the two ranks share the location may not be known
  // yet when the initial GRANT arrives (SharedPeers), and a wrong kEarly comes back in the
  // RELEASE, which the home refuses.
  if (h.phase != pl.next_phase || (h.initial != 0) != pl.next_initial)
    return GrantProblem::wrong_phase;
  return GrantProblem::none;
}

std::string RemoteLocks::describe(GrantProblem problem, unsigned from, const Header& h) const {
  std::string what = "rank " + std::to_string(from) + " granted location '" +
                     graph_.locations()[h.location].name + "' (phase " + std::to_string(h.phase) +
                     (h.initial ? ", initial)" : ")");
  const ProxyLock& pl = proxies_[h.location];
  switch (problem) {
    case GrantProblem::none: break;
    case GrantProblem::to_home: what += ", whose home is this rank"; break;
    case GrantProblem::not_from_home:
      what += ", whose home is rank " + std::to_string(dist_.home[h.location]);
      break;
    case GrantProblem::still_held:
      what += " while this rank still holds phase " + std::to_string(pl.phase);
      break;
    case GrantProblem::wrong_phase:
      what += " where this rank waits for phase " + std::to_string(pl.next_phase) +
              (pl.next_initial ? " (initial)" : "");
      break;
  }
  return what + ": the ranks' graphs or protocol versions differ";
}

// Tag of the next GRANT (or RELEASE) of `location` between this rank and `peer`: kind, location
// and its sequence number between the two.
std::uint64_t RemoteLocks::trace_tag(bool grant, std::uint32_t location, unsigned peer) {
  const std::size_t slot = dist_.slot(location, peer);
  if (slot == Distribution::kNoSlot) return 0;  // a stray message, refused by its handler
  std::uint32_t& seq = (grant ? grant_seq_ : release_seq_)[slot];
  return (std::uint64_t{grant} << 63) | (std::uint64_t{location} << 32) | seq++;
}

void RemoteLocks::send_grant(std::uint32_t location, std::uint32_t phase, unsigned peer,
                             bool initial, bool early) {
  const LocationDesc& d = graph_.locations()[location];
  const bool shared = shared_.shared_with(location, peer);
  const Header h{Kind::grant, static_cast<std::uint8_t>(initial),
                 static_cast<std::uint16_t>((early ? wire::kEarly : 0) | (shared ? wire::kShared : 0)),
                 location, phase};
  std::span<const std::byte> payload;
  if (!shared) payload = {graph_.data(location), d.elem_size * d.count};
  count_payload(d, payload.size());
  const std::uint64_t tag = trace_tag(true, location, peer);
  if (trace::Recorder* const trace = engine_.trace()) [[unlikely]]
    trace->send(engine_.trace_buffer(), peer, location, trace::kNone, payload.size(), tag);
  traffic_.sent.fetch_add(1, std::memory_order_relaxed);  // counted before it can be received
  Net::Sent sent;
  if (early) {
    traffic_.early_started.fetch_add(1, std::memory_order_relaxed);
    sent = [this, location] { on_early_sent(location); };
  }
  net_.send(peer, channel_, wire::as_bytes(h), payload, std::move(sent));
}

void RemoteLocks::on_early_sent(std::uint32_t location) {
  // seq_cst pair with stop(): a call that saw the run open is counted before stop() reads
  // sent_running_, so stop() waits for it; a later one sees it closed.
  sent_running_.fetch_add(1);
  if (sent_open_.load()) engine_.release(location, Host::kFromPeer, 0, 0);
  sent_running_.fetch_sub(1);
  // release: pairs with quiesce()'s acquire; what the release sent is counted by now.
  [[maybe_unused]] const std::uint64_t finished =
      traffic_.early_finished.fetch_add(1, std::memory_order_release);
  ORDO_ASSERT(finished < traffic_.early_started.load(std::memory_order_relaxed));
}

// A rank that shares the location reads the home's buffer: never early.
bool RemoteLocks::is_early_read(std::uint32_t location, std::uint32_t phase, unsigned peer) const {
  const LocationDesc& d = graph_.locations()[location];
  const std::size_t bytes = d.elem_size * d.count;
  return plan_.locks[location].phases[phase].mode == Mode::read && bytes > 0 &&
         bytes <= kEarlyMaxBytes && !shared_.shared_with(location, peer);
}

void RemoteLocks::enter_phase(std::uint32_t location, std::uint32_t phase,
                              std::atomic<std::uint32_t>& remaining, std::uint32_t releaser,
                              std::uint64_t iteration, unsigned worker) {
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
    remaining.store(counted, std::memory_order_relaxed);
  } else {
    std::lock_guard lock(early_mu_[location]);
    for (std::uint32_t r : pr.remote) {
      EarlyState& e = early_[dist_.slot(location, r)];  // r has members: it has a slot
      ++counted;  // early or not: the phase waits for its RELEASE, or for its GRANT's `sent`
      if (e.held) {  // rule 1: sent when r's RELEASE comes back
        e.pending = phase;
      } else {
        e.held = is_early_read(location, phase, r);
        e.granted = phase;
        sends.push_back({r, e.held});
      }
    }
    // Stored before any grant or GRANT goes out (a holder may release at once), and before
    // a pending phase is visible to the thread that may send it.
    remaining.store(counted, std::memory_order_relaxed);
  }
  // Local holders first: once the GRANTs are out, the phase may end inside this loop.
  for (std::uint32_t t : pr.local) engine_.grant_traced(t, location, releaser, iteration, worker);
  ++depth;
  for (const Send& x : sends) send_grant(location, phase, x.peer, false, x.early);
  --depth;
}

void RemoteLocks::proxy_release(std::uint32_t location) {
  ProxyLock& pl = proxies_[location];
  // acq_rel: the last local holder must see the others' writes before shipping the bytes.
  const std::uint32_t holders = pl.remaining.fetch_sub(1, std::memory_order_acq_rel);
  ORDO_ASSERT(holders != 0);  // a release without a hold
  if (holders != 1) return;
  const LockPlan& lp = plan_.locks[location];
  const LocationDesc& d = graph_.locations()[location];
  const std::uint32_t home = dist_.home[location];
  const bool shared = shared_.shared_with(location, home);
  const Header h{Kind::release, 0,
                 static_cast<std::uint16_t>((pl.early ? wire::kEarly : 0) |
                                            (shared ? wire::kShared : 0)),
                 location, pl.phase};
  std::span<const std::byte> payload;
  if (lp.phases[pl.phase].mode == Mode::write && !shared)
    payload = {graph_.data(location), d.elem_size * d.count};
  count_payload(d, payload.size());
  const std::uint64_t tag = trace_tag(false, location, home);
  if (trace::Recorder* const trace = engine_.trace()) [[unlikely]]
    trace->send(engine_.trace_buffer(), home, location, trace::kNone, payload.size(), tag);
  traffic_.sent.fetch_add(1, std::memory_order_relaxed);
  net_.send(home, channel_, wire::as_bytes(h), payload, {});
}

void RemoteLocks::stop() {
  {
    std::lock_guard lock(message_mu_);
    stopped_ = true;
  }
  sent_open_.store(false);
  while (sent_running_.load() != 0) std::this_thread::yield();
}

void RemoteLocks::protocol_error(unsigned from, const std::string& what) {
  engine_.fail({Failure::Kind::protocol, from, what, nullptr});
}

void RemoteLocks::on_message(unsigned from, std::span<const std::byte> header,
                             std::span<const std::byte> payload) {
  std::lock_guard lock(message_mu_);  // the recorder stays as it is while this is handled
  if (stopped_) return;               // a peer failed and the run has ended
  Header h{};
  if (header.size() < sizeof h || from >= dist_.ranks) {
    protocol_error(from, "rank " + std::to_string(from) + " sent a malformed message (" +
                           std::to_string(header.size()) + " header bytes)");
    return;
  }
  std::memcpy(&h, header.data(), sizeof h);
  const auto& locs = graph_.locations();
  const bool bad_location = h.location >= locs.size() || !plan_.locks[h.location].locked ||
                            dist_.phases[h.location].empty() ||
                            h.phase >= dist_.phases[h.location].size();
  if ((h.kind == Kind::grant || h.kind == Kind::release) &&
      (h.flags & ~(wire::kEarly | wire::kShared)) != 0) {
    protocol_error(from, "rank " + std::to_string(from) + " sent flags " + std::to_string(h.flags) +
                           " this rank does not know: the ranks' protocol versions differ");
    return;
  }
  switch (h.kind) {
    case Kind::grant:
      if (bad_location) break;
      on_grant(from, h.flags, h.initial != 0, h.location, h.phase, payload);
      return;
    case Kind::release:
      if (bad_location || !dist_.is_home(h.location)) break;
      on_release(from, h.flags, h.location, h.phase, payload);
      return;
    case Kind::control:
      control_.deliver(from, header);
      return;
    case Kind::abort: {  // a failure elsewhere (failure_relay.hpp)
      const std::string text(reinterpret_cast<const char*>(header.data()) + sizeof h,
                             header.size() - sizeof h);
      if (auto f = relay_.on_abort(from, h, text)) engine_.fail(std::move(*f));
      return;
    }
  }
  protocol_error(from, "rank " + std::to_string(from) +
                         " sent a message for an unknown location or phase (location #" +
                         std::to_string(h.location) + ", phase " + std::to_string(h.phase) +
                         "): the ranks' graphs or versions differ");
}

void RemoteLocks::on_grant(unsigned from, std::uint16_t flags, bool initial,
                           std::uint32_t location, std::uint32_t phase,
                           std::span<const std::byte> payload) {
  const LocationDesc& d = graph_.locations()[location];
  const bool shared = (flags & wire::kShared) != 0;  // the bytes are in the home's buffer
  if (payload.size() != (shared ? 0 : d.elem_size * d.count)) {
    protocol_error(from, "rank " + std::to_string(from) + " sent " +
                           std::to_string(payload.size()) + " bytes for location '" + d.name +
                           "', which " +
                           (shared ? std::string("it shares with this rank (none expected)")
                                   : "has " + std::to_string(d.elem_size * d.count)));
    return;
  }
  const Header h{Kind::grant, static_cast<std::uint8_t>(initial), flags, location, phase};
  if (const GrantProblem problem = grant_problem(from, h); problem != GrantProblem::none) {
    protocol_error(from, describe(problem, from, h));
    return;
  }
  if (!shared && payload.data() != graph_.data(location))  // else placed there already
    std::memcpy(graph_.data(location), payload.data(), payload.size());
  const std::uint64_t tag = trace_tag(true, location, from);
  trace::Recorder* const trace = engine_.trace();
  // Initial grants are sent while the engine is built, before tracing is attached.
  if (trace && !initial) [[unlikely]]
    trace->receive(engine_.trace_buffer(), from, location, trace::kNone, payload.size(), tag);
  ProxyLock& pl = proxies_[location];
  // A proxy holds one phase of a location at a time (grant_problem checked it).
  pl.phase = phase;
  pl.next_initial = false;
  pl.next_phase = phase_after(location, phase);
  pl.early = (flags & wire::kEarly) != 0;
  const PhaseRanks& pr = initial ? dist_.initial[location] : dist_.phases[location][phase];
  pl.remaining.store(static_cast<std::uint32_t>(pr.local.size()), std::memory_order_relaxed);
  for (std::uint32_t t : pr.local) {
    if (initial)
      engine_.grant(t, location);
    else
      engine_.grant_traced(t, location, Host::kFromPeer, 0, 0);
  }
  traffic_.received.fetch_add(1, std::memory_order_release);  // pairs with quiesce()
}

void RemoteLocks::on_release(unsigned from, std::uint16_t flags, std::uint32_t location,
                             std::uint32_t phase, std::span<const std::byte> payload) {
  const LocationDesc& d = graph_.locations()[location];
  if (flags & wire::kEarly) {  // an early read's release: counted nowhere, frees the rank
    const std::uint64_t tag = trace_tag(false, location, from);
    if (trace::Recorder* const trace = engine_.trace()) [[unlikely]]
      trace->receive(engine_.trace_buffer(), from, location, trace::kNone, payload.size(), tag);
    std::uint32_t pending = kNoPhase;
    bool early = false;
    {
      std::lock_guard lock(early_mu_[location]);
      const std::size_t slot = dist_.slot(location, from);
      const std::string what = "rank " + std::to_string(from) + " released location '" + d.name +
                               "' early";
      const char* const versions = ": the ranks' protocol versions differ";
      if (slot == Distribution::kNoSlot || !early_[slot].held) {
        protocol_error(from, what + ", which it did not hold early (phase " +
                                 std::to_string(phase) + ")" + versions);
        return;
      }
      if (early_[slot].granted != phase) {
        protocol_error(from, what + " in phase " + std::to_string(phase) +
                                 ", which it holds early in phase " +
                                 std::to_string(early_[slot].granted) + versions);
        return;
      }
      if (!payload.empty()) {
        protocol_error(from, what + " with " + std::to_string(payload.size()) +
                                 " bytes (a read's release carries none)" + versions);
        return;
      }
      EarlyState& e = early_[slot];
      // rule 1: the phase that waited for this release (counted there already) goes now.
      pending = std::exchange(e.pending, kNoPhase);
      early = pending != kNoPhase && is_early_read(location, pending, from);
      e.held = early;
      e.granted = pending;
    }
    if (pending != kNoPhase) send_grant(location, pending, from, false, early);
    traffic_.received.fetch_add(1, std::memory_order_release);  // pairs with quiesce()
    return;
  }
  if ((flags & wire::kShared) && (!shared_.shared_with(location, from) || !payload.empty())) {
    protocol_error(from, "rank " + std::to_string(from) + " released location '" + d.name +
                           "' as shared, which this rank does not share with it: the ranks' "
                           "protocol versions differ");
    return;
  }
  {
    std::lock_guard lock(early_mu_[location]);
    const std::size_t slot = dist_.slot(location, from);
    if (slot == Distribution::kNoSlot || early_[slot].held || early_[slot].granted != phase) {
      const bool held_early = slot != Distribution::kNoSlot && early_[slot].held &&
                              early_[slot].granted == phase;
      protocol_error(from, "rank " + std::to_string(from) + " released location '" + d.name +
                               "' (phase " + std::to_string(phase) + "), which this rank had " +
                               (held_early ? "granted it early (its release must say so)"
                                           : "not granted it") +
                               ": the ranks' protocol versions differ");
      return;
    }
    early_[slot].granted = kNoPhase;
  }
  if (plan_.locks[location].phases[phase].mode == Mode::write && !(flags & wire::kShared)) {
    if (payload.size() != d.elem_size * d.count) {
      protocol_error(from, "rank " + std::to_string(from) + " released location '" + d.name +
                             "' with " + std::to_string(payload.size()) + " bytes instead of " +
                             std::to_string(d.elem_size * d.count));
      return;
    }
    if (payload.data() != graph_.data(location))  // else placed there already
      std::memcpy(graph_.data(location), payload.data(), payload.size());
  }
  const std::uint64_t tag = trace_tag(false, location, from);
  if (trace::Recorder* const trace = engine_.trace()) [[unlikely]]
    trace->receive(engine_.trace_buffer(), from, location, trace::kNone, payload.size(), tag);
  engine_.release(location, Host::kFromPeer, 0, 0);
  traffic_.received.fetch_add(1, std::memory_order_release);  // pairs with quiesce()
}

}  // namespace ordo::rt
