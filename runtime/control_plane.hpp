// The control plane of an engine spread over ranks: what every rank must agree on besides the
// locks themselves. Collectives, each called by every rank in the same order:
//   all_reduce  every rank's bytes combined in rank order, the result on every rank;
//   exchange    every rank's bytes to every rank;
//   exchange_with  bytes with the neighbours only (shared memory's set-up);
//   barrier     returns once every rank has called it;
//   all         a vote: true on every rank iff every rank said true (run_until's stop);
//   quiesce     returns once no protocol message is in flight anywhere (the end of a step);
//   broadcast, pass  rank 0's bytes to every rank; one rank's bytes to another (the graph
//               check's detail, on a mismatch only).
// They travel as CONTROL messages on the engine's channel (wire.hpp), keyed by round and
// sender, so a round's message that arrives before the round has started here waits for it.
//
// The algorithm (private to control_plane.cpp): the binomial tree of tree.hpp. Rank r's
// parent is r with its lowest set bit cleared; its children are r + 2^k for each 2^k below
// that bit (every k for rank 0) while r + 2^k < N, so r's subtree holds the ranks
// [r, r + lowbit(r)). A reduction goes up (each rank combines its own value with its children's
// in increasing k, which is increasing rank order), the result comes down. Per collective a
// rank sends one message up and one to each child: 2(N - 1) messages in all, at most
// ceil(log2 N) + 1 from any rank (rank 0 sends ceil(log2 N)), 2 ceil(log2 N) message latencies.
// It replaced all-to-all rounds (N - 1 messages per rank per round, O(N) memory per rank).
//
// Quiescence (Mattern's counting, as two waves of sums): each round all-reduces this rank's
// S = protocol messages sent + early GRANTs handed to the transport and R = messages received
// and handled + early GRANTs whose `sent` has acted. Every wave-k snapshot is taken after every
// wave-(k-1) snapshot (a rank starts wave k only once wave k-1's result reached it), and
// between the waves lies a moment T with S(T) <= S_k and R(T) >= R_(k-1). Counting a message
// sent before it can be received and received only after its handler has sent what it sends
// keeps R(T) <= S(T), so S_k == R_(k-1) means nothing is in flight, being handled or waiting
// for its `sent` at T. After local completion a rank sends only in reaction to one of those,
// so none can follow: every home location is final.
// By the same chain R_(k-1) <= R(T) <= S(T) <= S_k whenever every message handled was sent. A
// message that no rank sent (forged by a peer, or one the transport delivered twice) and that
// the protocol accepted breaks it: R stays ahead of S for good, and the waves would go on for
// ever, every rank spinning. So R_(k-1) > S_k ends the waves (overcounted), on every rank in
// the same wave, since all see the same sums.
//
// A rank that leaves the job (its Runtime ends) tells the others how many rounds it began,
// over every channel (Net::departed_before): a collective that waits for a round beyond that
// would wait for ever, so it fails instead, naming that rank, within kDepartureCheck. One in
// a round that rank did begin waits on: its messages of that round are on their way.
//
// Threads. The collectives run on the thread that runs the graph (one per rank, one at a
// time); deliver() on the transport's thread; stop() on any (the failure path). Pairs:
//   deliver() stores a round's bytes under mu_ and notifies  <->  a collective's wait on cv_;
//   stop() sets stopped_ under mu_ and notifies              <->  every wait, which returns;
//   Traffic's release increments (remote_locks.cpp)          <->  quiesce()'s acquire loads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
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

// This rank's protocol traffic, as the remote-lock protocol counts it for quiesce(): totals
// over every peer, so that its size does not grow with the ranks.
struct Traffic {
  // GRANTs and RELEASEs sent (counted before the send, so never received before they are
  // counted), and received and handled (counted after, with release).
  std::atomic<std::uint64_t> sent{0}, received{0};
  // Early GRANTs handed to the transport, and those whose `sent` has acted (with release): their
  // `sent` releases a phase, which may send more.
  std::atomic<std::uint64_t> early_started{0}, early_finished{0};
};

class ControlPlane {
 public:
  // Called (on the collective's thread, without the plane's lock) when a collective waits for
  // a round that a rank which left the job never begins (Net::departed_before): that rank
  // and the words for the user. The plane then returns as stopped; the handler records the
  // failure (the engine's fail()) and stops it. Empty: the plane only stops.
  using Departed = std::function<void(unsigned rank, const std::string& what)>;
  ControlPlane(Net& net, std::uint32_t channel, unsigned rank, unsigned ranks,
               Departed on_departed = {});
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // How often a waiting collective asks whether a rank it waits for left the job: departures
  // are rare, so a wait looks every so often rather than being woken by one.
  static constexpr std::chrono::milliseconds kDepartureCheck{50};

  using Bytes = std::vector<std::byte>;
  // Combines a value covering lower ranks with one covering the ranks just above them.
  using Combine = std::function<Bytes(std::span<const std::byte> lower,
                                      std::span<const std::byte> higher)>;

  // Every rank's `mine` combined in rank order (combine must be associative), on every rank;
  // nullopt when stopped.
  std::optional<Bytes> all_reduce(Bytes mine, const Combine& combine);
  // Rank 0's `mine` on every rank (the others' `mine` is ignored); nullopt when stopped.
  std::optional<Bytes> broadcast(Bytes mine);
  // `from`'s `mine` to `to`: what `to` receives, empty on the other ranks; nullopt when stopped.
  std::optional<Bytes> pass(unsigned from, unsigned to, std::span<const std::byte> mine);
  // mine[i] to peers[i] and theirs back, in one round: each rank calls it with the ranks that
  // call it with it (a symmetric relation, such as Distribution::neighbours), possibly none.
  // Returns what each of `peers` sent, in the same order; nullopt when stopped.
  std::optional<std::vector<Bytes>> exchange_with(std::span<const unsigned> peers,
                                                  const std::vector<Bytes>& mine);
  // Every rank's bytes, indexed by rank (this rank's entry empty); nullopt when stopped. Moves
  // the sum of every rank's bytes through rank 0: for small descriptions.
  std::optional<std::vector<Bytes>> exchange(std::span<const std::byte> mine);
  // False when stopped.
  bool barrier();
  // Whether every rank said true; nullopt when stopped.
  std::optional<bool> all(bool mine);
  // How quiesce() ended.
  enum class Quiescence {
    quiet,    // no protocol message is in flight anywhere
    stopped,  // the plane was stopped
    // The ranks handled more protocol messages than they sent: one was forged or duplicated
    // (counted received, never sent), so the counts could never agree again.
    overcounted,
  };
  // Returns once no protocol message is in flight, or stopped, or on every rank alike once
  // the counts show a message handled that no rank sent.
  Quiescence quiesce(const Traffic& traffic);

  // CONTROL messages this plane has sent.
  std::uint64_t messages_sent() const { return messages_sent_.load(std::memory_order_relaxed); }

  // A CONTROL message's header (transport's thread).
  void deliver(unsigned from, std::span<const std::byte> header);
  // Ends every collective in progress or to come (any thread): a peer failed, so none could
  // complete. Idempotent.
  void stop();

  unsigned rank() const { return rank_; }
  unsigned ranks() const { return ranks_; }
  // The latest collective's place among the rounds of every channel (Net::begin_round); the
  // collectives' thread only.
  std::uint64_t job_round() const { return job_round_; }
  // This rank's neighbours in the tree (parent first, then children): the failure path passes
  // a failure it heard of along the tree, so that it reaches every rank in O(N) messages.
  std::vector<unsigned> tree_neighbours() const;

 private:
  unsigned parent() const;
  std::vector<unsigned> children() const;  // in increasing rank order
  // Starts a collective: its round on this channel, and its place among the rounds of every
  // channel (Net::begin_round), which a rank that left is compared with.
  std::uint64_t begin_round();
  void send_to(unsigned peer, std::uint64_t round, std::span<const std::byte> bytes);
  // `peer`'s bytes of `round`, once they are here; nullopt when stopped.
  std::optional<Bytes> receive_from(unsigned peer, std::uint64_t round);

  Net& net_;
  std::uint32_t channel_;
  unsigned rank_, ranks_;
  std::uint64_t round_ = 0;  // rounds started by this rank (the collectives' thread only)
  std::uint64_t job_round_ = 0;  // the current round's Net::begin_round (likewise)
  Departed on_departed_;
  std::atomic<std::uint64_t> messages_sent_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  // The rounds' bytes received and not yet taken, keyed by (round, sender); guarded by mu_.
  // Only tree neighbours (and, on a mismatch, one rank) send to a rank.
  std::map<std::pair<std::uint64_t, unsigned>, Bytes> in_;
  bool stopped_ = false;  // guarded by mu_
};

// The first difference between this rank's graph and another rank's, worded for the user
// ("ranks 0 and 1 built different graphs: task #5 differs ..."), or nullopt when every rank
// built the same graph or the plane was stopped. Collective: one all-reduce of a hash of the
// whole graph; on a mismatch, the first rank whose graph differs from rank 0's sends rank 0
// its hash per location and per task (with names), and rank 0 broadcasts the difference it
// finds, so every rank reports the same words.
std::optional<std::string> graph_difference(ControlPlane& control, const Graph& graph);

// One number for the description graph_difference compares (names, sizes, placements and
// accesses of every location and task): checkpoints name the graph they belong to by it.
std::uint64_t graph_fingerprint(const Graph& graph);

}  // namespace ordo::rt
