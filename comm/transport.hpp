// Transport: moves bytes between the ranks of a job. Knows nothing of locks or tasks.
//
// A message is (tag, header bytes, payload bytes) sent to a peer rank. Small messages travel
// eagerly; large payloads use rendezvous so they go zero-copy from the sender's buffer into a
// buffer the receiving handler provides. See transport.cpp for the protocol, threading rules
// and shutdown order, and docs/comm.md for the design.
//
// Example (every rank sends "hi" to rank 0):
//   auto boot = ordo::comm::Bootstrap::create(launch, std::chrono::seconds(30));
//   ordo::comm::Transport t(*boot);
//   t.on_message(1, [&](ordo::comm::Incoming& m) { /* m.peer(), m.header() */ });
//   t.connect();
//   t.send(0, 1, as_bytes("hi"), {}, [](ordo::comm::Status) {});
//   while (!done) t.wait_for_event(std::chrono::milliseconds(100));
//   t.close();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "comm/bootstrap.hpp"

namespace ordo::comm {

// How an operation ended. Peer failures are grouped by blast radius, as the caller's reaction
// differs: `endpoint_failed` means this connection is unusable (the peer may live on),
// `process_failed` means the peer process is gone or unreachable for good.
enum class Status { ok, endpoint_failed, process_failed, canceled, error };

const char* to_string(Status s);

enum class FailureScope { endpoint, process };

struct PeerFailure {
  int peer;
  FailureScope scope;
  std::string cause;  // UCX's words, e.g. "Connection reset by remote peer"
};

using Tag = std::uint16_t;
using Completion = std::function<void(Status)>;

// A message being delivered to a handler. Valid only during the handler call.
class Incoming {
 public:
  int peer() const { return peer_; }
  Tag tag() const { return tag_; }
  std::span<const std::byte> header() const { return header_; }
  std::size_t payload_size() const { return payload_size_; }
  // True when the payload waits on the sender (rendezvous): only receive_into() gets it.
  bool is_rendezvous() const { return eager_ == nullptr && payload_size_ > 0; }
  // The payload, already here (eager): read it during the handler, no copy made.
  std::optional<std::span<const std::byte>> eager_payload() const {
    if (is_rendezvous()) return std::nullopt;
    return std::span<const std::byte>(eager_, payload_size_);
  }
  // Places the payload into `dst` (at least payload_size() bytes; must stay valid until `done`
  // runs). `done` runs on the transport's thread, possibly before receive_into returns. Call it
  // during the handler or never: a payload not received is dropped (and the sender's send
  // completes normally).
  void receive_into(std::span<std::byte> dst, Completion done);

 private:
  friend class Transport;
  int peer_ = -1;
  Tag tag_ = 0;
  std::span<const std::byte> header_;
  std::size_t payload_size_ = 0;
  const std::byte* eager_ = nullptr;
  void* rndv_desc_ = nullptr;  // the UCX data descriptor for rendezvous
  void* owner_ = nullptr;      // Transport::Impl
  bool taken_ = false;
};

using Handler = std::function<void(Incoming&)>;

class Transport;
namespace detail {
// For tests of what a receiver refuses only: sends an active message whose UCX header is
// `wire` (in place of the wire header Transport::send writes: tag, reserved, source rank)
// followed by `header`, as a rank of another build or a stranger could.
void send_with_wire_header(Transport& t, int peer, std::span<const std::byte> wire,
                           std::span<const std::byte> header);
}  // namespace detail

// The rendezvous threshold when neither the options nor UCX_RNDV_THRESH set one. UCX 1.13's
// "auto" picks rendezvous for 64 KiB active messages, whose RTS/RTR round trip costs more than
// the copy it saves below a few hundred KiB (docs/benchmarks.md, "Figures behind defaults");
// from 256 KiB on, rendezvous still places payloads straight into their destination.
inline constexpr std::size_t kDefaultRndvThreshold = 256 * 1024;

// How long wait_for_event() keeps polling, yielding the core between polls, after the last
// event before it sleeps: a halo rarely comes alone, and a receiver that sleeps after each one
// pays a wake-up per message (docs/benchmarks.md, "Figures behind defaults"). Idle, the thread
// still sleeps.
inline constexpr std::chrono::microseconds kDefaultProgressSpin{100};

struct TransportOptions {
  // Payloads of at least this many bytes always use rendezvous (tests lower it to exercise
  // both paths). 0: kDefaultRndvThreshold, unless keep_ucx_rndv_threshold.
  std::size_t rndv_threshold = 0;
  // With rndv_threshold 0: leave UCX's own threshold (UCX_RNDV_THRESH, which the user set) alone.
  bool keep_ucx_rndv_threshold = false;
  // Detect failed peers. A peer in this process's host, PID and network namespaces (same
  // kernel boot id) is watched through a pidfd: its death is seen at once, and its endpoint
  // needs no UCX peer failure handling, so UCX may use shared memory to it (UCX 1.13's shared
  // memory has no such handling). Every other peer's endpoint asks UCX for peer failure
  // handling (UCP_ERR_HANDLING_MODE_PEER): TCP or another network transport, and UCX's
  // detection. false: no detection at all (the launcher's job).
  bool detect_peer_failure = true;
  // With detect_peer_failure: watch local peers through UCX's peer failure handling too, not a
  // pidfd. UCX then avoids transports without it: with the default UCX_TLS, ranks on one host
  // talk TCP instead of shared memory (the behaviour before pidfds; kept for comparison).
  bool ucx_detection_for_local_peers = false;
  // Polling after the last event before sleeping (wait_for_event). Negative:
  // kDefaultProgressSpin; 0: sleep at once.
  std::chrono::microseconds spin{-1};
  // The network devices UCX may use (its NET_DEVICES setting: "lo", "eth0,mlx5_0:1", "all").
  // Empty: UCX's own choice (UCX_NET_DEVICES, else every device). Each device a rank uses is
  // one it listens on (docs/comm.md, "What a rank exposes").
  std::string net_devices{};
  // Bound on close()'s wait for outstanding sends.
  std::chrono::milliseconds close_timeout{10000};
};

class Transport {
 public:
  // Creates the UCX context and worker. Collective only in connect().
  explicit Transport(Bootstrap& bootstrap, TransportOptions options = {});
  // Without close(): a local teardown (endpoints force-closed, nothing waited for).
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const;
  int size() const;

  // Registers the handler for `tag` (replacing any). Register every tag before connect():
  // connect() is what tells peers that this rank is ready to receive.
  void on_message(Tag tag, Handler handler);
  // Called once per failed peer, on the transport's thread, from progress.
  void on_peer_failure(std::function<void(const PeerFailure&)> handler);

  // Collective: the start-up exchange through the bootstrap (every rank's host; addresses
  // stay with the launcher, comm/address_book.hpp). The endpoint to a peer is created at the
  // first send to it, from its address: learned in a batch by learn_addresses(), else fetched
  // then, alone; a local peer is watched from then on. Throws CommError on failure.
  void connect();
  // Fetches in one request the addresses of those of `peers` not known yet (the ranks this
  // one is about to talk to). Any thread, after connect(). Throws CommError as
  // Bootstrap::fetch does.
  void learn_addresses(std::span<const int> peers);
  // The other ranks' addresses this rank holds: O(the ranks it talks to), not O(ranks). And
  // the runs of host records connect() received (one per host and rank 0's, ranks placed in
  // blocks). Any thread.
  std::size_t addresses_held() const;
  std::size_t host_runs() const;

  // Sends header + payload to `peer`. `header` is copied; `payload` is not: it must stay valid
  // and unchanged until `done` runs (large payloads are read from it directly). `done` runs on
  // the transport's thread, possibly before send returns (then with ok for eager data, or with
  // a failure status when the peer already failed). Throws CommError for a rank out of range
  // or a header over max_header_size().
  void send(int peer, Tag tag, std::span<const std::byte> header,
            std::span<const std::byte> payload, Completion done);

  std::size_t max_header_size() const;

  // Makes progress without blocking; runs handlers and completions. True when anything
  // happened. An exception thrown by a handler, completion or failure callback is rethrown
  // here (after UCX's frames are left), the first one if several.
  bool progress();
  // Progresses; when nothing is pending, arms the worker and sleeps on its event file
  // descriptor up to `timeout` (no CPU while idle). True when anything happened.
  bool wait_for_event(std::chrono::milliseconds timeout);
  // wait_for_event() in two halves, for a caller whose threads take turns at the transport
  // (one at a time, under the caller's lock) and that sleeps outside that lock:
  // prepare_sleep() reports exited local peers (at most every 10 ms), runs
  // posted work and arms the worker: true when the caller may now sleep on event_fd(), false
  // when something is pending (progress again). after_sleep() then reports the peers whose
  // exit woke it and progresses (true when anything happened). Another thread may progress
  // while the caller sleeps: the fd is then readable for events already handled, harmlessly.
  bool prepare_sleep();
  bool after_sleep();
  // How long wait_for_event() keeps polling before it sleeps (TransportOptions::spin).
  std::chrono::microseconds spin_duration() const;
  // The busy phase before a sleep, for wait_for_event() and for callers that sleep through
  // prepare_sleep(): calls `poll` after yielding the core, until it returns true (then true) or
  // spin_duration() has passed (then false). With a spin of 0, false at once.
  template <class Poll>
  bool spin_until(Poll&& poll) const {
    const std::chrono::microseconds spin = spin_duration();
    if (spin.count() <= 0) return false;
    const auto until = std::chrono::steady_clock::now() + spin;
    do {
      std::this_thread::yield();
      if (poll()) return true;
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }
  // Wakes a wait_for_event() in progress (or the next one). May be called from any thread.
  void wake();
  // Runs `work` on the transport thread, inside its next progress(), and wakes it. May be called
  // from any thread: this is how other threads send (post a closure that calls send()). Works
  // run in the order posted by one thread; one lock per post.
  void post(std::function<void()> work);
  // The file descriptor wait_for_event() sleeps on (an epoll set of UCX's event fd and the
  // pidfds of local peers), for callers with their own poll loop: when it polls readable, call
  // wait_for_event() with a zero timeout, which also reports peers that exited.
  int event_fd() const;

  // Whether this transport reports the failure of `peer`: through a pidfd for a local peer, or
  // through UCX (UCP_ERR_HANDLING_MODE_PEER). False where neither can (detect_peer_failure off,
  // or no transport to a remote peer supports it): there only the launcher, which stops every
  // rank when one dies, bounds the job. Valid after the first send to `peer` (a remote peer's
  // endpoint, created then, says whether UCX can watch it).
  bool detects_peer_failure(int peer) const;
  // Whether `peer` reads this process's CLOCK_MONOTONIC: it runs on this kernel (same boot id,
  // as connect() exchanged it) in this time namespace. Valid after connect(); any thread.
  bool shares_clock_with(int peer) const;
  // The endpoints created so far (one per peer sent to, on first use): O(the ranks this rank
  // talks to), not O(ranks). Any thread.
  std::size_t endpoint_count() const;
  // A number that every rank of this job got from rank 0 in connect()'s exchange, drawn at
  // random, so it differs between jobs (traces use it to tell runs apart). Valid after connect().
  std::uint64_t job_id() const;
  // Whether `peer` runs on this host in this process's PID and network namespaces (the peers
  // watched through a pidfd): it can map this process's memory through /proc/<pid>/fd. Valid
  // after connect().
  bool same_host(int peer) const;

  // Number of sends whose completion has not run yet.
  std::size_t outstanding_sends() const;
  std::optional<PeerFailure> first_failure() const;

  // Collective clean shutdown: waits for this rank's sends to complete, then a bootstrap
  // barrier, then closes endpoints and the worker. Messages that no protocol above has waited
  // for may be dropped. Throws CommError when sends do not complete within close_timeout.
  void close();
  // close() bounded as a whole by `bound`: past it the rank stops waiting for its sends or for
  // the barrier (Bootstrap::barrier_within) and tears down locally, as the destructor does.
  // Never throws. For a rank whose peers may no longer come to the barrier (they stopped on
  // its leaving, rt::CommNet).
  void close_within(std::chrono::milliseconds bound);

 private:
  friend class Incoming;
  friend void detail::send_with_wire_header(Transport&, int, std::span<const std::byte>,
                                            std::span<const std::byte>);
  // send() with `wire` as the wire header.
  void send_as_is(int peer, std::span<const std::byte> wire, std::span<const std::byte> header,
                  std::span<const std::byte> payload, Completion done);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ordo::comm
