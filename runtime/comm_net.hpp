// rt::Net over the UCX transport (comm/): what a Runtime uses when it is one rank of several.
//
// Threads: one progress thread owns the transport (UCX workers are single-threaded here). It
// sleeps on the transport's event descriptor when idle, runs the receive handlers, and calls
// the engines' receivers. Other threads send through an outbox: send() copies the header into a
// reused record under outbox_mu_ and, only when the outbox was empty, posts one drain to the
// progress thread (Transport::post: a lock and a wake-up). Sends that pile up while the progress
// thread is busy or asleep go out in one batch with one wake-up, and a warm CommNet sends
// without allocating (records keep their header capacity; the drain closure captures only
// `this`, which std::function stores inline).
//
// Wire: comm tag kTag; the comm header is [channel (4 bytes)][runtime header]; the payload goes
// as it is (zero copy; rendezvous for large ones). A rendezvous payload lands where the
// channel's placer says (the engine's replica: no copy), else in a buffer, then is delivered.
// detach() waits for the placed receives of its channel, so the transport never writes into
// memory an engine has given up.
// A runtime header larger than the transport's limit (the graph check's hashes of a graph with
// hundreds of locations: jacobi3d27 across ranks) travels in the payload instead: channel |
// kBigHeader, then [header length (8 bytes)][header][payload] in one buffer the send owns until
// it completes. Rare (control rounds), so the copy does not matter; the receiver unwraps it
// in deliver() (never placed: no channel has the flag).
//
// Shutdown (destructor): stop and join the progress thread, then the transport's collective
// close (every rank destroys its Runtime; after a peer failure the close is local only).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap.hpp"
#include "net.hpp"
#include "transport.hpp"

namespace ordo::rt {

class CommNet final : public Net {
 public:
  // Connects every rank (collective). Throws comm::CommError when that fails.
  explicit CommNet(std::unique_ptr<comm::Bootstrap> bootstrap);
  ~CommNet() override;

  unsigned rank() const override { return static_cast<unsigned>(transport_->rank()); }
  unsigned size() const override { return static_cast<unsigned>(transport_->size()); }
  const char* bootstrap_kind() const { return bootstrap_->kind(); }
  // Rank 0's steady clock minus this rank's, measured at start-up (0 on rank 0): add it to a
  // local steady-clock time to get rank 0's. Ranks on one host measure about 0.
  std::int64_t clock_offset_ns() const { return clock_offset_ns_; }

  void set_placer(std::uint32_t channel, Placer placer) override;
  void attach(std::uint32_t channel, Receiver on_message, Failure on_failure) override;
  void detach(std::uint32_t channel) override;
  void send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
            std::span<const std::byte> payload) override;

 private:
  static constexpr comm::Tag kTag = 7;
  static constexpr comm::Tag kClockTag = 8;  // start-up clock pings to rank 0 and replies
  static constexpr std::uint32_t kBigHeader = 1u << 31;  // channel flag: header in the payload
  struct Pending {
    unsigned from;
    std::vector<std::byte> header, payload;
  };
  struct Outgoing {
    unsigned peer = 0;
    std::vector<std::byte> wire;  // [channel][runtime header]; capacity reused
    std::span<const std::byte> payload;
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

  void drain_outbox();
  void on_incoming(comm::Incoming& m);
  void deliver(std::uint32_t channel, unsigned from, std::span<const std::byte> header,
               std::span<const std::byte> payload);
  void on_peer_failure(const std::string& what);
  void progress_loop();
  void measure_clock_offset();

  std::unique_ptr<comm::Bootstrap> bootstrap_;
  std::unique_ptr<comm::Transport> transport_;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  // Outbox: records [0, outbox_used_) wait to be sent; those past it are spare (their header
  // buffers keep their capacity). The progress thread swaps the whole vector with sending_.
  std::mutex outbox_mu_;
  std::vector<Outgoing> outbox_;  // guarded by outbox_mu_
  std::size_t outbox_used_ = 0;   // guarded by outbox_mu_
  std::vector<Outgoing> sending_;  // progress thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint32_t, Channel> channels_;  // guarded by mu_
  std::string failure_;                        // first peer failure, guarded by mu_
  std::int64_t delivering_ = -1;               // channel in a callback, guarded by mu_
  std::map<std::uint32_t, std::size_t> placing_;  // placed receives in flight, guarded by mu_

  std::int64_t clock_offset_ns_ = 0;
  std::mutex clock_mu_;
  std::condition_variable clock_cv_;
  std::int64_t clock_reply_ = -1;  // rank 0's time in the last reply, guarded by clock_mu_
};

}  // namespace ordo::rt
