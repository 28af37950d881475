// The failure relay: how the ranks of a graph learn of a failure (failure.hpp), in ABORT
// messages on the graph's channel. Engine::fail records a failure and decides whether it
// stops the run; this part words it, tells the other ranks, and reads the ABORTs that come in.
//
// What is sent, for a failure `f` that this rank records (pass_on):
//   A. This rank's own failure, or a loss its transport saw (`tell` not empty): to every other
//      rank, directly (N - 1 messages; the one place the control plane's O(log N) bound does
//      not hold, endpoints created as needed). A body exception: a plain ABORT, and only when
//      it is the first failure here. A protocol error: a fatal ABORT (the receivers take this
//      rank for lost). A lost peer, or this rank's transport failing: a relayed fatal ABORT
//      naming that rank (the lost rank itself is not told).
//   B. A failure heard of in an ABORT (peer_body, peer_lost with a teller), when it is the first
//      failure here: passed on, relayed as it came, to this rank's neighbours in the control
//      plane's tree, back to its teller, and for a peer_body to the rank it names.
//   C. A peer taken for lost, when it is the first failure here: that peer is told that this
//      rank stops (a fatal ABORT).
// What an ABORT received does (on_abort): it always becomes a stopping failure of this rank --
// peer_lost when fatal, peer_body when not, naming the sender or, relayed, the rank in the
// header -- except a relayed plain ABORT naming this rank, which is this rank's own body
// failure coming back when this rank told one (told_own_body_), and otherwise a forgery or a
// version mismatch: a protocol failure of the sender, like any ABORT that is malformed (unknown
// flags, a rank outside the job, a fatal relay naming this rank).
//
// Why every rank stops, whatever the first failure and wherever it is found, as long as the
// live ranks' messages are delivered (a rank that dies is seen by the transports that talk to
// it, and is itself a failure found there):
//   1. Every stopping failure a rank records makes it send A or B: its own failures go to
//      every rank (A), and a heard one, if first, to all its tree neighbours (B); if not first,
//      the rank already sent A or B at its first failure. (Two exceptions send nothing: a
//      graph mismatch, found by every rank in the same collective, and a job that failed
//      before the engine was built, which every rank's net already knows of.)
//   2. So the set of ranks that have recorded a failure is closed under the tree's edges: a
//      rank in it has told each tree neighbour, directly or through A's broadcast, and the
//      neighbour records that ABORT as a failure (on_abort never ignores one, but the echo of
//      the neighbour's own body failure, when it is in the set already). The tree spans every
//      rank, hence every rank records one, and every recorded failure across ranks stops the
//      run (Engine::fail).
//   3. A forged or mistaken ABORT stops its teller too: B sends it back, and a teller that did
//      not fail takes it as a failure it heard (peer_body: the named rank refuses it as a
//      protocol error unless it told one, which then goes to every rank by A; peer_lost: C
//      tells the rank taken for lost that this rank stops, in case it did not).
//   4. No echo grows without bound: B and C are sent once per rank (with its first failure),
//      A once per failure this rank finds itself, and a body's A only with the first; so a
//      failure costs O(N) messages per rank that finds one, and a relay coming back is
//      ignored or taken as a later failure, which sends nothing more.
// Every wait of a run returns once a stopping failure is recorded (Engine::stop_run), so
// "every rank records one" is "every rank's run ends". Tests: tests/runtime/test_failures.cpp,
// and the api's multiprocess suite.
//
// Threads: pass_on on any thread that fails (a worker, the transport's thread, the caller);
// on_abort on the transport's thread. told_own_body_ is stored before the ABORTs it announces
// are sent, and their relays come back on the transport's thread after those sends.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/failure.hpp"
#include "runtime/net.hpp"
#include "runtime/wire.hpp"

namespace ordo::rt {

class FailureRelay {
 public:
  // This rank (`rank` of `ranks`) talks on `channel` of `net`; `tree` lists its neighbours in
  // the control plane's tree (ControlPlane::tree_neighbours).
  FailureRelay(Net& net, std::uint32_t channel, unsigned rank, unsigned ranks,
               std::vector<unsigned> tree);
  FailureRelay(const FailureRelay&) = delete;
  FailureRelay& operator=(const FailureRelay&) = delete;

  // Words `f`, found or heard on rank `rank`, for the user (a protocol error: "rank R stopped:
  // ...", this rank's own: "rank R (this rank) failed: ..."), and returns what the other ranks
  // are told of it (A above; empty: nothing). Also in one process, where nothing is sent.
  static std::string word(Failure& f, unsigned rank);
  // Tells the other ranks of `f`, worded by word() (`tell`: what it returned); `first`: the
  // first failure this rank records. Any thread; never blocks on the run.
  void pass_on(const Failure& f, const std::string& tell, bool first);
  // An ABORT from `from` (`h` its header, `text` what follows it): the failure it is for this
  // rank, or nullopt for this rank's own body failure coming back.
  std::optional<Failure> on_abort(unsigned from, const wire::Header& h,
                                  const std::string& text) const;

 private:
  void send(unsigned to, std::uint16_t flags, std::uint32_t named, const std::string& text);

  Net& net_;
  std::uint32_t channel_;
  unsigned rank_, ranks_;
  std::vector<unsigned> tree_;
  // This rank told the others that one of its bodies threw: their relays of it come back.
  std::atomic<bool> told_own_body_{false};
};

}  // namespace ordo::rt
