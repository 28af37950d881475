// How a run fails. Every failure, wherever it is found -- a task body that throws, a peer
// that dies or becomes unreachable, a message the protocol never sends, ranks that built
// different graphs -- is described by a Failure and handed to Engine::fail(), the one path
// that records it, tells the other ranks when they must know, and wakes every waiter of the
// engine (the run's caller, the control plane's collectives, parked fibers). What the caller
// of Engine::run gets: a body's own exception, rethrown as it was; else a RunError carrying
// the failure's kind and rank (the api layer turns it into ordo::PeerFailure,
// ordo::ProtocolError or ordo::GraphMismatch).
//
// Two severities decide what the run does:
//   draining  (body in one process, mismatch): the current step still completes: bodies are
//             skipped, locks are released, quiescence ends the step; run() then throws. A
//             mismatch is found by every rank in the same collective, so all drain alike.
//   stopping  (peer_body, peer_lost, protocol, own, and a body across ranks): the control plane
//             stops, messages are dropped, parked fibers are woken (their acquires throw,
//             unwinding the body), and run() returns once no instance is queued or running.
//             A failure that one rank learns from a message must not drain: the others may
//             finish the step's quiescence before they hear of it and wait in the next step
//             or vote for a rank that has left the run, so every rank that hears of one stops,
//             and passes it on (Engine::fail).
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

namespace ordo::rt {

struct Failure {
  enum class Kind : std::uint8_t {
    body,       // a task body on this rank threw (`error` holds the exception)
    peer_body,  // a task body on another rank threw (an ABORT said so)
    peer_lost,  // another rank died, became unreachable, or stopped (a fatal ABORT)
    protocol,   // another rank sent a message the protocol never sends: this rank stops
    mismatch,   // the ranks did not all build the same graph
    // This rank's own failure where there is no peer to blame: its transport failed during
    // the run (seen_here: the others are told), or the job had failed before this graph's
    // engine was built by this rank's failure (a body of another graph threw, it stopped on
    // an error).
    own,
  };
  Kind kind;
  unsigned rank;             // the rank at fault: this one for `body`, the sender for `protocol`
  std::string what;          // for the user; for `body`, the exception's what()
  std::exception_ptr error;  // `body` only
  // peer_lost: this rank's transport saw it. It tells the other ranks (a relayed fatal ABORT
  // naming the lost rank), which may hold no endpoint to that rank and so never see it
  // themselves (the transport creates endpoints on first use). own: this rank's transport
  // failed now; told the same way, naming this rank.
  bool seen_here = false;
  // The rank whose message reported it (an ABORT's sender), or kNoRank: this rank found it.
  static constexpr unsigned kNoRank = ~0u;
  unsigned told_by = kNoRank;
  // The job had failed before this engine was built (Net::job_failure): every rank knows of it,
  // so nothing is sent.
  bool earlier = false;

  // Across ranks a `body` stops as well (Engine::fail).
  bool stops_run() const {
    return kind == Kind::peer_body || kind == Kind::peer_lost || kind == Kind::protocol ||
           kind == Kind::own;
  }
};

// What Engine::run throws for a failure other than this rank's own body exception.
class RunError : public std::runtime_error {
 public:
  RunError(Failure::Kind kind, unsigned rank, const std::string& what)
      : std::runtime_error(what), kind_(kind), rank_(rank) {}
  Failure::Kind kind() const { return kind_; }
  unsigned rank() const { return rank_; }

 private:
  Failure::Kind kind_;
  unsigned rank_;
};

}  // namespace ordo::rt
