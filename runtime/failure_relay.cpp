// The failure relay (what it sends and why every rank stops: failure_relay.hpp).
#include "runtime/failure_relay.hpp"

#include <algorithm>
#include <utility>

namespace ordo::rt {

FailureRelay::FailureRelay(Net& net, std::uint32_t channel, unsigned rank, unsigned ranks,
                           std::vector<unsigned> tree)
    : net_(net), channel_(channel), rank_(rank), ranks_(ranks), tree_(std::move(tree)) {}

std::string FailureRelay::word(Failure& f, unsigned rank) {
  // What the other ranks are told: this rank's body exception (an ABORT: they stop and report
  // it as this rank's failure), or its stop on a message it cannot handle (a fatal ABORT: they
  // take it as this rank's loss, rather than wait for a rank that no longer answers), or a
  // peer its own transport lost (relayed: the others may hold no endpoint to it).
  std::string tell;
  if (f.kind == Failure::Kind::body) {
    tell = "rank " + std::to_string(rank) + " failed: " + f.what;
  } else if (f.kind == Failure::Kind::protocol) {
    f.what = "rank " + std::to_string(rank) + " stopped: " + f.what;
    tell = f.what;
  } else if (f.kind == Failure::Kind::peer_lost && f.seen_here) {
    tell = f.what;
  } else if (f.kind == Failure::Kind::own) {
    // Found now (its transport failed), the others are told as of a lost rank, relayed and
    // naming this one: what they saw before this rank called it its own.
    if (f.seen_here) tell = f.what;
    f.what = "rank " + std::to_string(rank) + " (this rank) failed: " + f.what;
  }
  return tell;
}

void FailureRelay::send(unsigned to, std::uint16_t flags, std::uint32_t named,
                        const std::string& text) {
  std::vector<std::byte> msg;
  const wire::Header h{wire::Kind::abort, 0, flags, named, 0};
  wire::append(msg, &h, sizeof h);
  wire::append(msg, text.data(), text.size());
  net_.send(to, channel_, msg, {}, {});
}

void FailureRelay::pass_on(const Failure& f, const std::string& tell, bool first) {
  const Failure::Kind kind = f.kind;
  const std::uint32_t at_fault = f.rank;
  const bool relayed =
      kind == Failure::Kind::peer_lost || (kind == Failure::Kind::own && f.seen_here);
  // A: to every rank. A body exception is told only when it is the first failure, so that a
  // rank named in a relayed body failure knows it told one.
  if (!tell.empty() && (first || kind != Failure::Kind::body)) {
    if (kind == Failure::Kind::body) told_own_body_.store(true, std::memory_order_relaxed);
    // Not fatal for a body: its receivers stop too, but report it as that rank's failure
    // (peer_body), not its loss.
    const auto flags = static_cast<std::uint16_t>((kind == Failure::Kind::body ? 0 : wire::kFatal) |
                                                  (relayed ? wire::kRelayed : 0));
    for (unsigned r = 0; r < ranks_; ++r)
      if (r != rank_ && !(relayed && r == at_fault)) send(r, flags, relayed ? at_fault : 0, tell);
  }
  // B: a failure heard of in a message (an ABORT, relayed or not) is passed on, relayed as it
  // came, along the tree and back to its teller: were the message forged, or its teller's own
  // ABORTs lost, only this rank would stop and the others would wait for it for ever. A
  // peer_body goes to the rank it names as well: that rank refuses it unless it did fail
  // (on_abort), so a forged one stops it too. Once, with the first failure: the tree reaches
  // every rank without echoes.
  const bool heard = f.told_by != Failure::kNoRank &&
                     (kind == Failure::Kind::peer_body || kind == Failure::Kind::peer_lost);
  if (heard && first) {
    const bool lost = kind == Failure::Kind::peer_lost;
    const auto flags = static_cast<std::uint16_t>(wire::kRelayed | (lost ? wire::kFatal : 0));
    std::vector<unsigned> to = tree_;
    to.push_back(f.told_by);
    if (!lost) to.push_back(at_fault);
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
    for (unsigned r : to)
      if (r != rank_ && r < ranks_ && !(lost && r == at_fault)) send(r, flags, at_fault, f.what);
  }
  // C: a rank this one takes for lost is told that this rank stops, in case it is not: its own
  // transport may not have seen a failure, or the fatal ABORT "from" it was forged. Told once
  // (the first failure), so that two ranks that each take the other for lost do not echo.
  if (kind == Failure::Kind::peer_lost && first && at_fault != rank_ && at_fault < ranks_)
    send(at_fault, wire::kFatal, 0, "rank " + std::to_string(rank_) + " stopped: " + f.what);
}

std::optional<Failure> FailureRelay::on_abort(unsigned from, const wire::Header& h,
                                              const std::string& text) const {
  // The sender failed: it stopped (kFatal), or a body threw there; or, relayed, the sender
  // heard that the rank the header names did.
  const bool fatal = (h.flags & wire::kFatal) != 0;
  const bool relayed = (h.flags & wire::kRelayed) != 0;
  const std::string sender = "rank " + std::to_string(from);
  auto refused = [from](std::string what) {
    return Failure{Failure::Kind::protocol, from, std::move(what), nullptr};
  };
  if ((h.flags & ~(wire::kFatal | wire::kRelayed)) != 0)
    return refused(sender + " sent an ABORT with flags " + std::to_string(h.flags) +
                   " this rank does not know: the ranks' protocol versions differ");
  if (relayed && h.location >= ranks_)
    return refused(sender + " relayed the failure of rank " + std::to_string(h.location) +
                   " in a job of " + std::to_string(ranks_) + " ranks");
  if (relayed && h.location == rank_) {
    // This rank's own body failure, passed back by a rank it told (B).
    if (!fatal && told_own_body_.load(std::memory_order_relaxed)) return std::nullopt;
    // Else it never happened: taken as this rank's own failure, nobody would be told.
    return refused(sender +
                   (fatal ? " relayed the loss of this rank"
                          : " relayed a body failure of this rank, which none of its bodies had") +
                   ": the ranks' protocol versions differ, or the message is forged (" + text +
                   ")");
  }
  Failure f{fatal ? Failure::Kind::peer_lost : Failure::Kind::peer_body,
            relayed ? h.location : from, text, nullptr};
  f.told_by = from;
  return f;
}

}  // namespace ordo::rt
