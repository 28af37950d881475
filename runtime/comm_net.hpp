// rt::Net over the UCX transport (comm/): what a Runtime uses when it is one rank of several.
//
// Threads. The transport is driven by whichever thread holds its turn (turn_, taken without
// blocking; UCX's worker is serialized, not single-threaded):
// * Idle scheduler workers poll it (sched::Poller): a message is then handled on the worker
//   that runs the task it enables, and the task's answer is sent by that worker, with no
//   hand-off between threads. A rank with one worker and one core to itself runs its whole
//   halo exchange on that one thread.
// * The progress thread is the fallback. While workers poll (one did within kStandby) it
//   stands by on a condition variable, *not* armed on the transport, so peers need not signal
//   it; it takes over when the polling worker parks (parking()) or has not polled for
//   kStandby (it is running a task). Active, it progresses, keeps polling for the transport's
//   busy phase, then arms the transport and sleeps on its event descriptor outside the turn.
// * Any thread sends: send() queues the message in the outbox, then takes the turn and drains
//   it if it is free; a thread that gives the turn back drains what was queued meanwhile
//   (release_turn), so a send never waits for a sleeping thread and makes no system call.
//   A warm CommNet sends without allocating (records keep their header capacity).
// Wire: comm tag kTag; the comm header is [channel (4 bytes)][runtime header]; the payload goes
// as it is (zero copy; rendezvous for large ones). A rendezvous payload lands where the
// channel's placer says (the engine's replica: no copy), else in a buffer, then is delivered.
// detach() waits for the placed receives of its channel; those it gives up on (a peer that died
// where UCX cannot tell, which UCX cannot cancel either) it returns, and the engine's graph
// never frees that memory, so the transport never writes into memory that was given back.
// A runtime header larger than the transport's limit (the graph check's hashes of a graph with
// hundreds of locations: jacobi3d27 across ranks) travels in the payload instead: channel |
// kBigHeader, then [header length (8 bytes)][header][payload] in one buffer the send owns until
// it completes. Rare (control rounds), so the copy does not matter; the receiver unwraps it
// in deliver() (never placed: no channel has the flag).
//
// Leaving (leave(), from the Runtime's destructor, or the destructor here): a rank tells its
// tree neighbours that it leaves and how many control rounds it began (Net::begin_round);
// each rank that hears it passes it on to its own tree neighbours, so every live rank learns
// it in O(N) messages without new endpoints. A rank that waits for a round beyond that count
// then fails naming the leaver (ControlPlane), within ControlPlane::kDepartureCheck; one that
// never needs it again is not disturbed, and the leaver's exit, which its transport sees
// next, is not taken for a failure. The store is told too (Bootstrap::finished).
// Shutdown (destructor): leave, stop and join the progress thread, then the transport's close,
// bounded by kCloseBound as a whole (Transport::close_within): the ranks that are closing too
// pass the barrier together, a rank the others do not follow (they stopped on its leaving,
// or have more to do) leaves alone. After a failure the close is local only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "comm/bootstrap.hpp"
#include "runtime/clock_sync.hpp"
#include "runtime/net.hpp"
#include "scheduler/pool.hpp"
#include "comm/transport.hpp"

namespace ordo::rt {

class CommNet final : public Net, public sched::Poller {
 public:
  // The comm tag of the runtime's messages (Wire, above).
  static constexpr comm::Tag kTag = 7;

  // Connects every rank (collective). Throws comm::CommError when that fails.
  explicit CommNet(std::unique_ptr<comm::Bootstrap> bootstrap, comm::TransportOptions options = {});
  ~CommNet() override;

  unsigned rank() const override { return static_cast<unsigned>(transport_->rank()); }
  unsigned size() const override { return static_cast<unsigned>(transport_->size()); }
  bool same_host(unsigned peer) const override { return transport_->same_host(static_cast<int>(peer)); }
  const char* bootstrap_kind() const { return bootstrap_->kind(); }
  // Rank 0's steady clock minus this rank's, measured at start-up over the control plane's
  // tree (clock_sync.hpp; 0 on rank 0 and where the clock is rank 0's): add it to a local
  // steady-clock time to get rank 0's. With its error bound, and whether it is known.
  ClockOffset clock_offset() const { return clock_offset_; }
  std::int64_t clock_offset_ns() const { return clock_offset_.ns; }
  // The endpoints this rank has opened (comm::Transport::endpoint_count).
  std::size_t endpoint_count() const { return transport_->endpoint_count(); }
  // The other ranks' addresses this rank holds (comm::Transport::addresses_held): its tree
  // neighbours' from start-up, its graphs' peers', and any fetched at a first send.
  std::size_t addresses_held() const { return transport_->addresses_held(); }
  // Fetches the addresses of `peers` this rank does not hold, in one request.
  void will_talk_to(std::span<const unsigned> peers) override;
  // This rank leaves the job (its Runtime ends): see Leaving above. Idempotent; nothing after
  // the job failed (every rank knows then). Any thread; returns once the leave is queued.
  void leave();
  // Runtime::abort across ranks: tells every other rank (each prints `message`, naming this
  // rank, and exits with `status` at once, on its transport's thread), and the launcher
  // (Bootstrap::aborted); returns once the messages are sent or kAbortBound has passed. The
  // caller then exits itself.
  void abort_job(const std::string& message, int status);
  std::optional<std::pair<unsigned, std::string>> departed_before(
      std::uint64_t round) const override;
  // The same on every rank of this job, different between jobs (comm::Transport::job_id).
  std::uint64_t job_id() const { return transport_->job_id(); }
  // The control plane's messages this rank has sent, on every channel (engines' graph checks,
  // barriers, votes and quiescence rounds): what a scaling benchmark counts.
  std::uint64_t control_messages_sent() const {
    return control_sent_.load(std::memory_order_relaxed);
  }

  void set_placer(std::uint32_t channel, Placer placer) override;
  void attach(std::uint32_t channel, Receiver on_message, Failure on_failure) override;
  std::vector<std::span<std::byte>> detach(std::uint32_t channel) override;
  void send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
            std::span<const std::byte> payload, Sent sent) override;

  // sched::Poller: idle workers drive the transport (see Threads above).
  Result poll(unsigned worker) override;
  std::chrono::nanoseconds idle_spin() const override { return transport_->spin_duration(); }
  void parking(unsigned worker) override;

 private:
  // How long after a worker's last poll the progress thread stands by.
  static constexpr std::chrono::microseconds kStandby{200};
  static constexpr comm::Tag kClockTag = 8;  // start-up clock messages (ClockSync)
  // A rank's leave: [leaving rank (4 bytes)][rounds it began (8 bytes)].
  static constexpr comm::Tag kLeaveTag = 9;
  // Runtime::abort: [exit status (4 bytes)][the message].
  static constexpr comm::Tag kAbortTag = 10;
  static constexpr std::chrono::milliseconds kAbortBound{1000};
  // The most the destructor waits for the other ranks' close (and its own sends).
  static constexpr std::chrono::milliseconds kCloseBound{800};
  static constexpr std::uint32_t kBigHeader = 1u << 31;  // channel flag: header in the payload
  struct Pending {
    unsigned from;
    std::vector<std::byte> header, payload;
  };
  struct Outgoing {
    unsigned peer = 0;
    std::uint32_t channel = 0;
    std::vector<std::byte> wire;  // [channel][runtime header]; capacity reused
    std::span<const std::byte> payload;
    Sent sent;  // run by the transport's completion
    // A header over the transport's limit: [length][header][payload], payload points into it.
    std::shared_ptr<std::vector<std::byte>> owned;
  };
  struct Channel {
    Receiver receiver;
    Failure failure;
    Placer placer;
    bool attached = false;
    std::deque<Pending> pending;  // arrived before attach
  };

  bool take_turn();
  void release_turn();
  template <class F>
  void guarded(F&& work);
  template <class F>
  bool with_turn(F&& work);
  bool workers_polling() const;
  void standby();
  bool finds_work_while_spinning();
  void drain_outbox();
  void on_incoming(comm::Incoming& m);
  void deliver(std::uint32_t channel, unsigned from, std::span<const std::byte> header,
               std::span<const std::byte> payload);
  void on_peer_failure(unsigned rank, const std::string& what);
  // A leave, from `from` (a tree neighbour): recorded, and passed on along the tree.
  void on_leave(unsigned from, std::span<const std::byte> header);
  // Sends a leave record to this rank's tree neighbours but `except` and the leaver
  // (transport's thread).
  void pass_leave(std::span<const std::byte> record, unsigned leaver, unsigned except);
  // Net: remembers the failure (as a peer failure of the transport's own, without telling the
  // channels: their engines know), so that ~CommNet skips the close barrier, which waits for
  // every rank through the store and would wait for ever for a dead one.
  void job_failed(unsigned rank, const std::string& what) override;
  std::optional<std::pair<unsigned, std::string>> job_failure() override;
  // A send's completion state beyond its record (Outgoing is reused at once).
  struct Completed {
    std::uint32_t channel = 0;
    Sent sent;
    std::shared_ptr<std::vector<std::byte>> owned;
  };
  Completed* take_completed();
  void finish(Completed* c);
  void progress_loop();

  std::unique_ptr<comm::Bootstrap> bootstrap_;
  std::unique_ptr<comm::Transport> transport_;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  // The turn: whoever set it (exchange) may call the transport. seq_cst with queued_, which
  // is what lets release_turn() see every message queued by a thread that found it taken.
  std::atomic<bool> turn_{false};
  std::atomic<std::size_t> queued_{0};  // messages in the outbox
  std::atomic<std::uint64_t> control_sent_{0};  // control_messages_sent()
  // steady-clock ns of the last poll by a worker that had the turn (0: none since it parked),
  // and that worker.
  std::atomic<std::int64_t> poll_stamp_{0};
  std::atomic<unsigned> poll_worker_{~0u};
  std::mutex standby_mu_;
  std::condition_variable standby_cv_;
  bool handoff_ = false;  // a polling worker parked; guarded by standby_mu_

  // Outbox: records [0, outbox_used_) wait to be sent; those past it are spare (their header
  // buffers keep their capacity). The turn's holder swaps the whole vector with sending_.
  std::mutex outbox_mu_;
  std::vector<Outgoing> outbox_;  // guarded by outbox_mu_
  std::size_t outbox_used_ = 0;   // guarded by outbox_mu_
  std::vector<Outgoing> sending_;  // the turn's holder only
  // Completion records: all of them, and those free (the turn's holder only: completions run
  // with the turn).
  std::vector<std::unique_ptr<Completed>> completed_;
  std::vector<Completed*> free_completed_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint32_t, Channel> channels_;  // guarded by mu_
  std::string failure_;                        // first peer failure, guarded by mu_
  std::map<unsigned, std::uint64_t> departed_;  // rank that left -> rounds it began, guarded by mu_
  bool left_ = false;                           // leave() ran, guarded by mu_
  // The first departure departed_before reported (a collective failed on it), and whether
  // leave() told the store what this rank stops on; guarded by mu_.
  mutable std::optional<std::pair<unsigned, std::string>> departure_;
  bool cause_told_ = false;
  // The graphs' peers (will_talk_to), guarded by mu_: a rank that leaves tells them itself as
  // well as its tree neighbours, since their transports are the ones to see it exit.
  std::set<unsigned> graph_peers_;
  unsigned failure_rank_ = 0;                  // its rank, guarded by mu_
  std::int64_t delivering_ = -1;               // channel in a callback, guarded by mu_
  // Per channel, the destinations of placed receives in flight, guarded by mu_.
  std::map<std::uint32_t, std::vector<std::span<std::byte>>> placing_;

  ClockSync clock_sync_;     // messages on the transport's thread, stop() on the failure path
  ClockOffset clock_offset_;  // set by the constructor
};

}  // namespace ordo::rt
