// What the runtime needs from a transport to spread a graph over several processes (ranks):
// reliable delivery of byte messages between ranks, multiplexed by channel (one channel per
// distributed graph; every rank numbers its graphs in the same SPMD order). comm/ provides the
// real transport (UCX); tests use an in-process one.
//
// The runtime's protocol needs no ordering between messages (a location has at most one
// protocol message in flight towards any rank), only that every message sent is delivered
// exactly once, and that a message for a channel nobody has attached yet waits until it is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ordo::rt {

class Net {
 public:
  virtual ~Net() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;

  // Delivery callback: runs on the transport's progress thread, one message at a time.
  using Receiver = std::function<void(unsigned from, std::span<const std::byte> header,
                                      std::span<const std::byte> payload)>;
  // Failure callback: a peer died or became unreachable (or this rank's transport broke:
  // `rank` is this rank); `what` names the rank and the cause. Runs at most once per channel
  // (at once on attach if a peer already failed).
  using Failure = std::function<void(unsigned rank, const std::string& what)>;

  // Where a message's payload of `size` bytes should land, asked on the transport's thread
  // before the bytes arrive when the transport can place them itself (rendezvous): a span of
  // exactly `size` bytes that nothing reads or writes until the message is delivered, or an
  // empty span to let the transport buffer them. When given, the Receiver's `payload` is that
  // span, the bytes already in place (no copy needed). Called only while `channel` is attached.
  using Placer = std::function<std::span<std::byte>(
      unsigned from, std::span<const std::byte> header, std::size_t size)>;

  // Sets the placer of `channel`, before attach. Transports that always buffer ignore it.
  virtual void set_placer(std::uint32_t channel, Placer placer) {
    (void)channel;
    (void)placer;
  }
  // Starts delivery for `channel`, including the messages that arrived for it before.
  virtual void attach(std::uint32_t channel, Receiver on_message, Failure on_failure) = 0;
  // Stops delivery for `channel`: when it returns, no callback for it runs or will run.
  // Returns the spans its placer gave whose receives the transport could not end (a peer that
  // failed where it cannot cancel them): the transport may still write into them, so their
  // memory must never be freed or reused. Empty when no payload is being placed.
  virtual std::vector<std::span<std::byte>> detach(std::uint32_t channel) = 0;

  // The job failed: a run stopped on `rank`'s failure (`what`), which this rank may have
  // learned from a message rather than from its own transport. The net then takes leave of its
  // peers without waiting for them (a rank that is gone never answers), and a channel
  // attached later fails at once. Default: nothing to do.
  virtual void job_failed(unsigned rank, const std::string& what) {
    (void)rank;
    (void)what;
  }
  // The job's first failure as this net knows it (job_failed's, or a peer its transport lost):
  // (rank, what), or nullopt. An engine built after it asks first and fails at once, without
  // attaching or sending (every rank already knows), naming its own rank's failure as its own.
  // Default: none known.
  virtual std::optional<std::pair<unsigned, std::string>> job_failure() {
    return std::nullopt;
  }

  // Whether `peer` runs on this host, in this process's PID namespace, so that this process can
  // map its shared location memory (Graph's SharedArena, through /proc/<pid>/fd). Default: no,
  // and locations are copied.
  virtual bool same_host(unsigned peer) const {
    (void)peer;
    return false;
  }

  // The ranks this one is about to send to (a graph's peers, before its first run): a net that
  // looks peers up on demand fetches those it does not know in one batch now, rather than one
  // at a time at first sends (CommNet: their addresses, docs/distributed.md "Start-up"). A
  // hint: a failure to fetch shows at the first send instead. Any thread. Default: nothing.
  virtual void will_talk_to(std::span<const unsigned> peers) { (void)peers; }

  // Rounds of the control plane this rank has begun, over every channel (ControlPlane calls
  // begin_round at the start of each collective, on the thread that runs it). Every rank
  // begins the same rounds in the same order (SPMD), so a count names one point of the
  // program on every rank: what a rank that leaves tells the others (departed_before).
  std::uint64_t begin_round() { return rounds_begun_.fetch_add(1, std::memory_order_relaxed) + 1; }
  std::uint64_t rounds_begun() const { return rounds_begun_.load(std::memory_order_relaxed); }
  // A rank that left the job (its Runtime ended) having begun fewer rounds than `round`, so
  // that it will never take part in round `round`: (that rank, the words for the user), or
  // nullopt. Any thread. Default: no rank ever leaves.
  virtual std::optional<std::pair<unsigned, std::string>> departed_before(
      std::uint64_t round) const {
    (void)round;
    return std::nullopt;
  }

  // Called once the transport no longer reads a payload (it was copied out or delivered).
  using Sent = std::function<void()>;

  // Sends `header` and `payload` to `peer` (never to self), from any thread. The header is
  // copied before send returns. The payload is read in place (zero copy) and must stay
  // unchanged until `sent` runs, or, without `sent`, until the peer has answered (the runtime
  // never writes a sent buffer before that). `sent` runs once, on any thread and possibly
  // inside this call (so the caller must not hold a lock that `sent` takes), also when the
  // peer failed; never after detach(channel) has returned.
  virtual void send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
                    std::span<const std::byte> payload, Sent sent) = 0;

 private:
  std::atomic<std::uint64_t> rounds_begun_{0};
};

}  // namespace ordo::rt
