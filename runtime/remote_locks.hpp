// The remote-lock protocol: the engine's locks across ranks (docs/distributed.md).
//
// Every rank builds the same graph and compiles the same plan; Distribution says where each
// location's home is (its phase machine, in the engine) and where each task runs. At the home,
// a phase's `remaining` counts the local members plus one per remote rank with members in it.
// Entering a phase (enter_phase) grants the local members and sends one GRANT (location,
// phase, the bytes) to each such rank: one copy per destination process, however many of its
// tasks read. There the location's proxy copies the bytes into its replica, sets its own
// `remaining` to its local members and grants them; when the last one releases
// (proxy_release) it sends one RELEASE back (with the bytes after a write phase), which the
// home counts as one release. The cyclic plan makes the re-request implicit, so the FIFO order
// is the same on every rank by construction. A proxy holds at most one phase of a location at
// a time (the home waits for its release before it moves on), hence no ordering between
// messages is needed, and a sent buffer is never written before its receiver has answered
// (zero copy is safe). Large payloads are also received in place: the placer given to the Net
// names the replica (GRANT) or the home's buffer (a write phase's RELEASE), which nothing
// touches until the message is delivered, for the same reason.
//
// Early read grants. The plain protocol makes a remote read cost its location a round trip:
// the home may not let the next writer in before the reader's RELEASE is back, although the
// reader works on its own replica. So a read phase of at most kEarlyMaxBytes (sent eagerly:
// the transport copies the bytes out at once) is granted to a remote rank *early*: the home
// sends the GRANT (kEarly) and counts that rank in the phase's `remaining` only until the
// transport no longer reads the location (Net::send's `sent`, on_early_sent()): the phase may end,
// and the writer overwrite the location, while the reader still reads its replica. Two rules
// keep it exact:
//   1. No GRANT of a location goes to a rank that holds an early version of it (`held`) until
//      that rank's RELEASE (flagged kEarly, counted nowhere) has come back. A phase that needs
//      the rank meanwhile counts it and parks in `pending`; the RELEASE sends it (early again
//      if it is a small read phase, then counted until sent). So a replica is never written
//      while its tasks read it, and a rank still holds one phase of a location at a time.
//   2. The writer cannot come in before the transport has the bytes: the rank stays counted
//      in the phase until `sent`. No copy is made (an earlier version copied the location to a
//      snapshot and sent from that: one more copy of every halo on the sender, its bottleneck).
// The FIFO order is the plan's, as before: every rank sees the same versions, bit for bit. At
// most one message per location is still in flight towards a rank, and every message is sent
// in reaction to a task's release, to a received message, or to a `sent` (which quiescence
// waits for: Traffic::early_started/early_finished).
//
// Ranks of one host that share a location's memory (shared_peers.hpp) send GRANTs and
// RELEASEs without bytes (wire::kShared), and such reads are never granted early: the proxy
// reads the home's buffer, so the writer must wait for its RELEASE.
//
// Threads and what pairs across them:
//   - enter_phase() and proxy_release() run on the thread that releases (a worker, or the
//     transport's thread handling a RELEASE or a `sent`); on_message() on the transport's
//     thread, one message at a time (under message_mu_, which set_trace() also takes).
//   - A home's `remaining` is stored before any grant or GRANT of the phase goes out, and
//     under early_mu_[location] when a remote rank is counted, so the thread that sends a
//     pending phase (on_message, on an early RELEASE) sees it (enter_phase).
//   - A proxy's `remaining` (ProxyLock) is set by the GRANT's handler before it grants; the
//     local holders' acq_rel decrements order their writes before the RELEASE's bytes.
//   - Traffic: sent counted before each send, received counted (release) after each handled
//     message: pairs with the control plane's acquire loads (quiescence).
//   - on_early_sent() against stop(): seq_cst pair on sent_open_ / sent_running_.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/control_plane.hpp"
#include "runtime/distribution.hpp"
#include "runtime/failure_relay.hpp"
#include "runtime/graph.hpp"
#include "runtime/net.hpp"
#include "runtime/plan.hpp"
#include "runtime/shared_peers.hpp"
#include "runtime/trace.hpp"
#include "runtime/wire.hpp"

namespace ordo::rt {

class RemoteLocks {
 public:
  // Largest location granted early (the transport's eager range).
  static constexpr std::size_t kEarlyMaxBytes = std::size_t{256} << 10;

  // What the protocol needs of the engine, which implements it: the phase machine's grants and
  // releases, the failure path and the recorder. Virtual calls: a few per message.
  class Host {
   public:
    // The releaser of a release that came from another rank (no local task released).
    static constexpr std::uint32_t kFromPeer = ~std::uint32_t{0};
    // `task` is granted `location` (the initial GRANT's phase: not traced).
    virtual void grant(std::uint32_t task, std::uint32_t location) = 0;
    // The same, traced as the grant of `releaser`'s release of instance `iteration` on
    // `worker` (kFromPeer: of a release that came from another rank).
    virtual void grant_traced(std::uint32_t task, std::uint32_t location, std::uint32_t releaser,
                              std::uint64_t iteration, unsigned worker) = 0;
    // A release of `location`, whose home is this rank: pass kFromPeer, 0, 0 for a RELEASE
    // or an early GRANT's `sent`.
    virtual void release(std::uint32_t location, std::uint32_t releaser, std::uint64_t iteration,
                         unsigned worker) = 0;
    // The one failure path (Engine::fail).
    virtual void fail(Failure failure) = 0;
    // The recorder of this run, or null, and the calling thread's buffer in it.
    virtual trace::Recorder* trace() const = 0;
    virtual unsigned trace_buffer() const = 0;

   protected:
    ~Host() = default;
  };

  RemoteLocks(Host& engine, Graph& graph, const Plan& plan, const Distribution& dist, Net& net,
              std::uint32_t channel, ControlPlane& control, const FailureRelay& relay,
              const SharedPeers& shared);
  RemoteLocks(const RemoteLocks&) = delete;
  RemoteLocks& operator=(const RemoteLocks&) = delete;

  // Gives the Net this channel's placer and receiver: messages are delivered from here on
  // (those that came early too). Failures of peers go to the engine.
  void attach();

  // Home: the initial GRANT of `location`'s `phase` to `peer` (while the engine is built).
  void send_initial_grant(std::uint32_t location, std::uint32_t phase, unsigned peer) {
    {
      std::lock_guard lock(early_mu_[location]);
      early_[dist_.slot(location, peer)].granted = phase;  // peer has members: a slot
    }
    send_grant(location, phase, peer, true, false);
  }
  // Home: enters `phase` of `location`, whose lock's holder count is `remaining`: counts the
  // local members and the remote ranks, grants the local members (through the engine, traced
  // with `releaser`, `iteration`, `worker`) and sends the GRANTs.
  void enter_phase(std::uint32_t location, std::uint32_t phase,
                   std::atomic<std::uint32_t>& remaining, std::uint32_t releaser,
                   std::uint64_t iteration, unsigned worker);
  // Proxy: one of this rank's holders of `location` released it; the last sends the RELEASE.
  void proxy_release(std::uint32_t location);

  // Messages are dropped from now on, and early GRANTs' `sent` no longer act: a peer failed
  // and the run is over, so nothing may make an instance ready on the pool it leaves. Returns
  // once no message or `sent` is being handled.
  void stop();
  // Holds message handling (the trace recorder changes meanwhile: set_trace()).
  std::unique_lock<std::mutex> pause() { return std::unique_lock(message_mu_); }

  const Traffic& traffic() const { return traffic_; }
  // Bytes of location contents this rank's GRANTs and RELEASEs carried (their payloads), over
  // every run: program locations' and the runtime's own (reductions), apart. What the wire
  // moved, not what a plan says; shared locations travel as none.
  std::uint64_t payload_bytes(bool internal) const {
    return payload_bytes_[internal ? 1 : 0].load(std::memory_order_relaxed);
  }

 private:
  static constexpr std::uint32_t kNoPhase = ~std::uint32_t{0};
  struct alignas(64) ProxyLock {
    std::atomic<std::uint32_t> remaining{0};  // this rank's holders that have not released
    std::uint32_t phase = 0;                  // the phase held here
    bool early = false;  // granted early: its RELEASE says so (read by the last releaser)
    // The GRANT this rank waits for next (the message thread's alone): anything else from the
    // home, or from another rank, is a protocol error, never a grant.
    bool next_initial = false;
    std::uint32_t next_phase = kNoPhase;
  };
  // Home side, per location and remote rank with members (Distribution::slot), guarded by
  // early_mu_[location]: `held` while that rank holds an early version it has not released;
  // `pending`, a phase whose GRANT waits for that release; `granted`, the phase whose GRANT
  // that rank has, early or not, and whose RELEASE this rank waits for (kNoPhase: none): a
  // RELEASE must answer it.
  struct EarlyState {
    bool held = false;
    std::uint32_t granted = kNoPhase;
    std::uint32_t pending = kNoPhase;
  };

  void on_message(unsigned from, std::span<const std::byte> header,
                  std::span<const std::byte> payload);
  // `from` sent a message the protocol never sends: this rank stops (Engine::fail).
  void protocol_error(unsigned from, const std::string& what);
  void on_grant(unsigned from, std::uint16_t flags, bool initial, std::uint32_t location,
                std::uint32_t phase, std::span<const std::byte> payload);
  void on_release(unsigned from, std::uint16_t flags, std::uint32_t location,
                  std::uint32_t phase, std::span<const std::byte> payload);
  std::span<std::byte> place(unsigned from, std::span<const std::byte> header, std::size_t size);
  // Proxy: the first phase after `phase` (cyclically, `phase` itself last) with members here.
  std::uint32_t phase_after(std::uint32_t location, std::uint32_t phase) const;
  // Whether a GRANT from `from` is the one this rank waits for: from the location's home, to a
  // rank that holds none of it, for the phase the plan says comes next.
  enum class GrantProblem { none, to_home, not_from_home, still_held, wrong_phase };
  GrantProblem grant_problem(unsigned from, const wire::Header& h) const;
  std::string describe(GrantProblem problem, unsigned from, const wire::Header& h) const;
  // Sends a GRANT; an early one's rank is counted in its phase until the transport has the
  // bytes (its `sent` releases the phase then). Call it without holding early_mu_.
  void send_grant(std::uint32_t location, std::uint32_t phase, unsigned peer, bool initial,
                  bool early);
  // Net::send's `sent` callback of an early GRANT: the transport has the bytes, so the phase
  // no longer waits for that rank.
  void on_early_sent(std::uint32_t location);
  // Whether `phase` of `location` goes to `peer` as an early read grant.
  bool is_early_read(std::uint32_t location, std::uint32_t phase, unsigned peer) const;
  std::uint64_t trace_tag(bool grant, std::uint32_t location, unsigned peer);

  Host& engine_;
  Graph& graph_;
  const Plan& plan_;
  const Distribution& dist_;
  Net& net_;
  std::uint32_t channel_;
  ControlPlane& control_;
  const FailureRelay& relay_;  // reads the ABORTs
  const SharedPeers& shared_;
  std::unique_ptr<ProxyLock[]> proxies_;  // per location; used where this rank is no home
  std::unique_ptr<std::mutex[]> early_mu_;  // per location: phases of others never wait
  std::vector<EarlyState> early_;
  Traffic traffic_;
  std::atomic<std::uint64_t> payload_bytes_[2]{};  // payload_bytes(false), payload_bytes(true)
  void count_payload(const LocationDesc& d, std::size_t bytes) {
    if (bytes != 0) payload_bytes_[d.internal ? 1 : 0].fetch_add(bytes, std::memory_order_relaxed);
  }
  // Trace tags: per location and rank, the GRANTs and RELEASEs exchanged so far. A location has
  // at most one message in flight towards a rank, so sender and receiver count the same
  // sequence and a send and its receive get the same tag. Touched in protocol order only.
  std::vector<std::uint32_t> grant_seq_, release_seq_;  // per Distribution::slot
  std::mutex message_mu_;  // held while a message is handled (pause(), stop())
  bool stopped_ = false;   // messages are dropped (guarded by message_mu_)
  // on_early_sent() acts until stop(), which may leave GRANTs unsent: stop() closes it and waits
  // for those inside (seq_cst pair, see on_early_sent()).
  std::atomic<bool> sent_open_{true};
  std::atomic<unsigned> sent_running_{0};
};

}  // namespace ordo::rt
