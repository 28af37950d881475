// The control plane of an engine spread over ranks: what every rank must agree on besides the
// locks themselves. Four collectives, each called by every rank in the same order:
//   exchange   every rank's bytes to every rank (the graph check, shared memory's set-up);
//   barrier    returns once every rank has called it;
//   all        a vote: true on every rank iff every rank said true (run_until's stop);
//   quiesce    returns once no protocol message is in flight anywhere (the end of a step).
// They travel as CONTROL messages on the engine's channel (wire.hpp), numbered by round, so a
// round's message that arrives before the round has started here waits for it.
//
// The algorithm behind the collectives is private to control_plane.cpp: today every round is
// all-to-all (each rank sends its bytes to every other rank, N - 1 messages per rank). Trees or
// dissemination (O(log N) rounds, DESIGN.md §3) replace it there without touching the protocol
// (remote_locks.hpp), which sees only Traffic, or the engine, which sees only these calls.
//
// Quiescence (Mattern's counting, over rounds): in round r each rank sends, with the flag "my
// previous round was stable", how many protocol messages it has sent to every rank; it waits
// to have received as many from each, and calls the round stable if it then had received
// exactly that many, sent nothing since its snapshot, and has no early GRANT still being sent
// (whose `sent` may send more). When every rank reports a stable round, every message sent was
// received and none can follow: after local completion a rank sends only in reaction to a
// message it receives (or to such a `sent`).
//
// Threads. The collectives run on the thread that runs the graph (one per rank, one at a
// time); deliver() on the transport's thread; stop() on any (the failure path). Pairs:
//   deliver() pushes a round's bytes under mu_ and notifies  <->  a collective's wait on cv_;
//   stop() sets stopped_ under mu_ and notifies              <->  every wait, which returns;
//   Traffic's release increments (remote_locks.cpp)          <->  quiesce()'s acquire loads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/graph.hpp"
#include "runtime/net.hpp"

namespace ordo::rt {

// This rank's protocol traffic, as the remote-lock protocol counts it for quiesce().
struct Traffic {
  explicit Traffic(unsigned ranks);
  // Per peer: GRANTs and RELEASEs sent to it (counted before the send, so never received
  // before they are counted), and received from it and handled (counted after, with release).
  std::unique_ptr<std::atomic<std::uint64_t>[]> sent, received;
  // Early GRANTs whose bytes the transport still reads: their `sent` releases a phase, which
  // may send more (decremented with release).
  std::atomic<std::uint64_t> unsent{0};
};

class ControlPlane {
 public:
  ControlPlane(Net& net, std::uint32_t channel, unsigned rank, unsigned ranks);
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Every rank's bytes, indexed by rank (this rank's entry empty); nullopt when stopped.
  std::optional<std::vector<std::vector<std::byte>>> exchange(std::span<const std::byte> mine);
  // False when stopped.
  bool barrier();
  // Whether every rank said true; nullopt when stopped.
  std::optional<bool> all(bool mine);
  // Returns true once no protocol message is in flight; false when stopped.
  bool quiesce(const Traffic& traffic);

  // A CONTROL message's header (transport's thread).
  void deliver(unsigned from, std::span<const std::byte> header);
  // Ends every collective in progress or to come (any thread): a peer failed, so none could
  // complete. Idempotent.
  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  unsigned rank() const { return rank_; }
  unsigned ranks() const { return ranks_; }

 private:
  Net& net_;
  std::uint32_t channel_;
  unsigned rank_, ranks_;
  std::uint64_t round_ = 0;  // rounds started by this rank (the collectives' thread only)
  std::mutex mu_;
  std::condition_variable cv_;
  // Per peer, the rounds' bytes received and not yet taken, keyed by round; guarded by mu_.
  std::vector<std::vector<std::pair<std::uint64_t, std::vector<std::byte>>>> in_;
  std::atomic<bool> stopped_{false};  // written under mu_
};

// The first difference between this rank's graph and another rank's, worded for the user
// ("ranks 0 and 1 built different graphs: task #5 differs ..."), or nullopt when every rank
// built the same graph or the plane was stopped. Collective: one exchange of a hash per
// location and per task, with its name.
std::optional<std::string> graph_difference(ControlPlane& control, const Graph& graph);

}  // namespace ordo::rt
