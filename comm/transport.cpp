// UCX transport. The only file that includes UCX headers.
// Longer than 600 lines on purpose: every UCX call, type and status stays in this one file
// (tests/layering.py allows UCX headers nowhere else), so that comm/'s other files and the
// layers above never see UCX; the sections below are its protocol, threading, progress,
// failure and shutdown.
//
// Protocol. One UCX context (feature AM + WAKEUP), one worker, one endpoint per peer this rank
// sends to, created at the first send from the peer's worker address, which the rank fetches
// from the launcher only for the ranks it talks to (AddressBook): it holds endpoints and
// addresses for those, not for every rank. Every message is one UCX active message with the
// single UCX AM id 0; the UCX header is our wire header followed by the caller's header:
//   wire header = tag:u16  reserved:u16  source rank:u32      (host byte order: UCX does not
//                                                            cross endianness either)
// and the UCX data is the payload. UCX picks eager or rendezvous per message, with ordo's
// threshold (kDefaultRndvThreshold) unless the user's UCX_RNDV_THRESH is kept
// (options.keep_ucx_rndv_threshold; forced to rendezvous from options.rndv_threshold on);
// rendezvous sends read the payload straight from the caller's buffer (zero copy) and the receiver
// pulls it into the buffer its handler gives to Incoming::receive_into (ucp_am_recv_data_nbx). One
// AM id and our own dispatch by tag mean a rank is ready for every tag as soon as its worker
// exists: the address exchange in connect() then doubles as the "everyone is listening" barrier.
// The reserved field is 0. A message whose header is shorter than the wire header, names a sender
// outside the job, has another reserved value or a tag nothing listens for (every tag is registered
// before connect()) is no message of this job's ranks: the receiving rank stops with a CommError
// saying so and naming the sender the header gives, rather than drop it silently.
//
// Threading. The worker runs in UCS_THREAD_MODE_SERIALIZED: one thread at a time (call it the
// transport thread; the caller serializes, and several threads may take turns) makes every
// call; handlers, completions and failure callbacks run on it, inside progress(),
// wait_for_event(), prepare_sleep(), after_sleep(), send() or close(). wake() and post() are the
// exceptions: any thread may call them (ucp_worker_signal is documented as safe from any thread;
// posted work sits in a mutex-protected queue that progress() drains on the transport thread).
// No lost wake-up: post() pushes, then signals; wait_for_event() checks the queue before
// ucp_worker_arm(), and a signal that lands before the arm makes the arm return UCS_ERR_BUSY,
// one after it makes the event fd readable. Handlers and
// completions must not call progress(), wait_for_event() or close() (UCX forbids progress from
// a callback); they may call send(). An exception a callback throws must not unwind through
// UCX's C frames: it is caught at the callback's edge and rethrown by progress().
//
// Progress and idle. wait_for_event() progresses until nothing happens, keeps polling for the
// busy phase (options.spin, yielding between polls), then ucp_worker_arm(); UCS_ERR_BUSY means
// events arrived meanwhile (progress again), UCS_OK means the worker's event fd will be
// signalled by the next event: epoll_wait() on it (and on the local peers' pidfds) sleeps
// without CPU. The hot path (progress, send) makes no system call of its own.
//
// Failure. Two detectors, chosen per peer in connect() from what the start-up exchange tells
// (kernel boot id, PID and network namespace inodes; the pids of the ranks on this host; see
// HostRecord in address_book.hpp):
// * A local peer (same boot id and namespaces) is watched through a pidfd (pidfd_open), which
//   becomes readable when the process ends; its endpoint has no UCX error handling
//   (UCP_ERR_HANDLING_MODE_NONE), which leaves UCX free to use shared memory (UCX 1.13's shm
//   transports cannot handle peer failure, so asking for it meant TCP between local ranks).
//   wait_for_event() sleeps on one epoll set holding UCX's event fd and the pidfds: watching
//   costs no CPU and nothing on the hot path, and a death is seen as soon as the thread would
//   sleep.
// * Any other peer's endpoint uses UCP_ERR_HANDLING_MODE_PEER: when the peer dies or becomes
//   unreachable UCX completes that endpoint's requests with an error and calls the error
//   handler. Detection latency is UCX's (a reset TCP connection is immediate; a silent peer
//   needs UCX keepalive), and needs the endpoint: a remote peer this rank never sent to is not
//   watched (the ranks that talk to it tell the others, docs/distributed.md). Where no
//   transport to such a peer supports it, the endpoint's creation falls back to one without it
//   (detects_peer_failure() says so).
// Either way the peer is marked failed (later sends to it complete at once with the failure
// status) and a PeerFailure is reported once per peer, scoped by the UCX status (scope_of) or
// `process` for an exit. UCX statuses are translated here and never leave this file. ordorun
// bounds the whole job in any case by killing every rank when one dies.
//
// Shutdown order (close()): 1. wait until this rank's sends completed (bounded); 2. set
// closing_, so errors caused by peers tearing down are not reported as failures; 3. bootstrap
// barrier: every rank has finished sending; 4. force-close every endpoint (no flush handshake
// that a dead peer could stall) and progress until the close requests finish (bounded);
// 5. destroy the worker, 6. clean up the context. The destructor without close() does 4-6
// without the barrier: it is the error path, and it must not wait on anyone. close_within()
// is close() with one bound over 1-3: a rank that reaches it long before the others (or
// while they wait for it elsewhere) leaves without them, through 4-6.
#include "comm/transport.hpp"

#include "comm/address_book.hpp"

#include <sys/epoll.h>
#include <sys/syscall.h>
#include <ucp/api/ucp.h>
#include <unistd.h>
#include <ucs/debug/log_def.h>

#include <cerrno>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ordo::comm {
namespace {

constexpr unsigned am_id = 0;

struct WireHeader {
  std::uint16_t tag;
  std::uint16_t reserved;
  std::uint32_t source;
};
static_assert(sizeof(WireHeader) == 8);

using Clock = std::chrono::steady_clock;

Status status_of(ucs_status_t s) {
  switch (s) {
    case UCS_OK:
      return Status::ok;
    case UCS_ERR_CANCELED:
      return Status::canceled;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
      return Status::process_failed;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_TIMED_OUT:
      return Status::endpoint_failed;
    default:
      return Status::error;
  }
}

// A reset connection or a keepalive timeout means the process at the other end is gone; an
// unreachable address or an I/O error concerns the path to it.
FailureScope scope_of(ucs_status_t s) {
  return status_of(s) == Status::process_failed ? FailureScope::process : FailureScope::endpoint;
}

// Set while probing whether an endpoint can have peer failure handling: UCX logs an error for
// the transports that cannot (shared memory in UCX 1.13), and the fallback makes it moot.
thread_local bool probing_err_mode = false;

ucs_log_func_rc_t quiet_probe(const char*, unsigned, const char*, ucs_log_level_t,
                              const ucs_log_component_config_t*, const char*, va_list) {
  return probing_err_mode ? UCS_LOG_FUNC_RC_STOP : UCS_LOG_FUNC_RC_CONTINUE;
}

[[noreturn]] void fail(const std::string& what, ucs_status_t s) {
  throw CommError("comm: UCX " + what + " failed: " + ucs_status_string(s));
}

// A pidfd for `pid`, or -1 (kernel before 5.3, or the process is already gone).
int open_pidfd(std::int64_t pid) {
#ifdef SYS_pidfd_open
  return int(::syscall(SYS_pidfd_open, pid_t(pid), 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::endpoint_failed:
      return "endpoint failed";
    case Status::process_failed:
      return "peer process failed";
    case Status::canceled:
      return "canceled";
    case Status::error:
      return "error";
  }
  return "?";
}

struct Transport::Impl {
  struct Peer {
    Impl* impl = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    bool failed = false;
    bool detects_failure = true;  // endpoint has UCX peer failure handling, or a pidfd
    Status failure = Status::ok;
    int pidfd = -1;  // a local peer's process, while watched
    bool ucx_detects = false;          // the endpoint asks UCX for peer failure handling
  };
  // One per send in flight: owns the wire header (UCX 1.13 reads it until completion) and the
  // caller's completion. Recycled through free_sends, so that a warm transport sends without
  // allocating (the header buffer keeps its capacity).
  struct SendOp {
    Impl* impl;
    std::vector<std::byte> header;
    Completion done;
  };
  std::vector<SendOp*> free_sends;  // transport thread only

  SendOp* acquire_send() {
    if (free_sends.empty()) return new SendOp{this, {}, {}};
    SendOp* op = free_sends.back();
    free_sends.pop_back();
    return op;
  }
  void release_send(SendOp* op) {
    op->done = nullptr;
    free_sends.push_back(op);
  }
  struct RecvOp {
    Impl* impl;
    Completion done;
  };

  Bootstrap& boot;
  // boot.size(), read once: on_am checks every message's sender against it, and it is set
  // before the handler is registered, so before any message.
  const int ranks;
  TransportOptions options;
  std::chrono::microseconds spin;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int efd = -1;
  int wait_fd = -1;   // epoll set wait_for_event() sleeps on: efd and watch_fd
  int watch_fd = -1;  // epoll set of the pidfds of local peers (data: rank)
  std::size_t watched = 0;
  Clock::time_point next_watch_check{};
  std::vector<Peer> peers;
  std::unique_ptr<AddressBook> book;  // set by connect()
  std::unordered_map<Tag, Handler> handlers;
  std::function<void(const PeerFailure&)> failure_handler;
  std::optional<PeerFailure> first_failure;
  std::size_t outstanding = 0;
  std::size_t max_header = 0;
  bool connected = false;
  std::uint64_t job_id = 0;  // rank 0's HostRecord::job_nonce
  std::atomic<std::size_t> endpoints{0};  // created so far (endpoint_count(): any thread)
  bool closing = false;
  bool closed = false;

  // The first exception thrown by a handler or completion. Callbacks run inside UCX's C code,
  // which an exception must not cross: it is caught there and rethrown by progress().
  std::exception_ptr pending_error;
  std::mutex posted_mu;
  std::vector<std::function<void()>> posted;  // guarded by posted_mu
  std::vector<std::function<void()>> running;  // transport thread only
  std::atomic<bool> has_posted{false};
  // The transport thread is in (or about to enter) poll(): post() must signal the worker. Set
  // and read seq_cst against has_posted (post() stores has_posted, then reads this; the
  // transport thread stores this, then reads has_posted), so one of them sees the other: no
  // post is left unseen, and posts to a busy transport thread make no system call.
  std::atomic<bool> sleeping{false};

  // Runs the work posted so far. True when there was any.
  bool run_posted() {
    // Pairs with the release store in post(): the work pushed before it is visible under the lock.
    if (!has_posted.load(std::memory_order_acquire)) return false;
    {
      std::lock_guard lock(posted_mu);
      running.swap(posted);
      has_posted.store(false, std::memory_order_relaxed);
    }
    for (auto& w : running) guarded(w);
    running.clear();
    return true;
  }

  Impl(Bootstrap& b, TransportOptions o) : boot(b), ranks(b.size()), options(o), spin(spin_of(o)) {}

  static std::chrono::microseconds spin_of(const TransportOptions& o) {
    return o.spin.count() >= 0 ? o.spin : kDefaultProgressSpin;
  }
  ~Impl() {
    for (SendOp* op : free_sends) delete op;
    for (Peer& p : peers) stop_watching(p);
    if (wait_fd >= 0) ::close(wait_fd);
    if (watch_fd >= 0) ::close(watch_fd);
  }

  void stop_watching(Peer& p) {
    if (p.pidfd < 0) return;
    if (watch_fd >= 0) ::epoll_ctl(watch_fd, EPOLL_CTL_DEL, p.pidfd, nullptr);
    ::close(p.pidfd);
    p.pidfd = -1;
    --watched;
  }

  // Reports the watched peers that have exited. A system call: wait_for_event() makes it when
  // its epoll set says so, and at most every kWatchPeriod while it never sleeps (a busy worker,
  // or sends retried against a dead peer's full shared-memory queue, keep it from sleeping).
  static constexpr auto kWatchPeriod = std::chrono::milliseconds(10);
  void check_watched() {
    if (watched == 0) return;
    epoll_event ev[8];
    int n;
    while ((n = ::epoll_wait(watch_fd, ev, 8, 0)) > 0)
      for (int i = 0; i < n; ++i) peer_exited(peers[ev[i].data.u64]);
  }

  // check_watched() at most every kWatchPeriod (or now: `force`), rethrowing what the
  // failure callback threw.
  void check_watched_every(bool force) {
    if (watched == 0) return;
    if (const auto now = Clock::now(); force || now >= next_watch_check) {
      next_watch_check = now + kWatchPeriod;
      check_watched();
      rethrow_pending();
    }
  }

  // A watched local peer's process ended.
  void peer_exited(Peer& p) {
    stop_watching(p);
    if (p.failed) return;
    p.failed = true;
    p.failure = Status::process_failed;
    if (closing) return;  // peers exit after the close barrier: expected
    PeerFailure f{p.rank, FailureScope::process, "process exited (pid watched on this host)"};
    if (!first_failure) first_failure = f;
    if (failure_handler) guarded([&] { failure_handler(f); });
  }

  template <class F>
  void guarded(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      if (!pending_error) pending_error = std::current_exception();
    }
  }

  void rethrow_pending() {
    if (pending_error) std::rethrow_exception(std::exchange(pending_error, nullptr));
  }

  static void on_send_done(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<SendOp*>(user_data);
    Impl* impl = op->impl;
    --impl->outstanding;
    Completion done = std::move(op->done);
    impl->release_send(op);
    ucp_request_free(request);
    if (done) impl->guarded([&] { done(impl->closing && status != UCS_OK ? Status::canceled : status_of(status)); });
  }

  static void on_recv_done(void* request, ucs_status_t status, std::size_t, void* user_data) {
    auto* op = static_cast<RecvOp*>(user_data);
    Impl* impl = op->impl;
    Completion done = std::move(op->done);
    delete op;
    ucp_request_free(request);
    if (done) impl->guarded([&] { done(status_of(status)); });
  }

  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* peer = static_cast<Peer*>(arg);
    Impl* impl = peer->impl;
    if (peer->failed) return;
    peer->failed = true;
    peer->failure = status_of(status) == Status::ok ? Status::error : status_of(status);
    if (impl->closing) return;  // peers tearing down after the close barrier: expected
    PeerFailure f{peer->rank, scope_of(status), ucs_status_string(status)};
    if (!impl->first_failure) impl->first_failure = f;
    if (impl->failure_handler) impl->guarded([&] { impl->failure_handler(f); });
  }

  // Stops this rank with CommError "comm: rank R received <what>", which progress()
  // rethrows: a message that no rank of this job, built from this ordo, sends.
  void refuse(const std::string& what) {
    guarded([&] { throw CommError("comm: rank " + std::to_string(boot.rank()) + " received " + what); });
  }

  static ucs_status_t on_am(void* arg, const void* header, std::size_t header_length, void* data,
                            std::size_t length, const ucp_am_recv_param_t* param) {
    auto* impl = static_cast<Impl*>(arg);
    // Every message on this AM id is ordo's. One that is not cannot be told from a corrupt one,
    // and dropping it would leave the rank that sent it waiting, so each is a stop with what
    // was wrong. Who really sent it is unknown (UCX names no sender): the header's word.
    if (header_length < sizeof(WireHeader)) {
      impl->refuse("a message with " + std::to_string(header_length) +
                   " header bytes, fewer than the " + std::to_string(sizeof(WireHeader)) +
                   " of ordo's wire header, from an unknown sender: a process of another job "
                   "or program on this network; keep the ranks' network to the job");
      return UCS_OK;
    }
    WireHeader wire;
    std::memcpy(&wire, header, sizeof wire);
    // Every layer above indexes per-rank state by the sender, so a sender outside the job is
    // refused here.
    if (const int ranks = impl->ranks; wire.source >= std::uint32_t(ranks)) {
      impl->refuse("a message (tag " + std::to_string(wire.tag) + ") that names rank " +
                   std::to_string(wire.source) + " as its sender, but the job has ranks 0.." +
                   std::to_string(ranks - 1) +
                   ": a corrupt or forged header, or a process of another job on this "
                   "network; keep the ranks' network to the job");
      return UCS_OK;
    }
    // Room for a later protocol: a rank that sets it speaks one this rank does not know.
    if (wire.reserved != 0) {
      impl->refuse("a message from rank " + std::to_string(wire.source) + " (tag " +
                   std::to_string(wire.tag) +
                   ") whose wire header has " + std::to_string(wire.reserved) +
                   " in its reserved field, where ordo sends 0: rank " +
                   std::to_string(wire.source) +
                   " runs another version of ordo, or the header is corrupt; run every rank "
                   "from one build");
      return UCS_OK;
    }
    const auto handler = impl->handlers.find(wire.tag);
    if (handler == impl->handlers.end()) {
      impl->refuse("a message from rank " + std::to_string(wire.source) + " with tag " +
                   std::to_string(wire.tag) +
                   ", which nothing on this rank listens for: rank " +
                   std::to_string(wire.source) +
                   " runs another version of ordo or another program, or the header is "
                   "corrupt; run every rank from one build");
      return UCS_OK;
    }
    Incoming in;
    in.peer_ = int(wire.source);
    in.tag_ = wire.tag;
    in.header_ = std::span<const std::byte>(
        static_cast<const std::byte*>(header) + sizeof(WireHeader), header_length - sizeof(WireHeader));
    in.payload_size_ = length;
    in.owner_ = impl;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
      in.rndv_desc_ = data;
    else
      in.eager_ = static_cast<const std::byte*>(data);
    impl->guarded([&] { handler->second(in); });
    // A rendezvous payload nobody received is dropped by returning UCS_OK (UCX then completes
    // the sender's request normally); eager data is not kept past the callback either.
    return UCS_OK;
  }

  void receive(Incoming& in, std::span<std::byte> dst, Completion done) {
    if (in.taken_) throw CommError("comm: Incoming::receive_into called twice for one message");
    if (dst.size() < in.payload_size_)
      throw CommError("comm: receive buffer of " + std::to_string(dst.size()) +
                      " bytes is smaller than the payload of " + std::to_string(in.payload_size_));
    in.taken_ = true;
    if (!in.is_rendezvous()) {
      if (in.payload_size_ > 0) std::memcpy(dst.data(), in.eager_, in.payload_size_);
      if (done) done(Status::ok);
      return;
    }
    auto* op = new RecvOp{this, std::move(done)};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = &Impl::on_recv_done;
    p.user_data = op;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker, in.rndv_desc_, dst.data(), in.payload_size_, &p);
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
      Completion d = std::move(op->done);
      delete op;
      if (d) d(r == nullptr ? Status::ok : status_of(UCS_PTR_STATUS(r)));
    }
  }

  // The endpoint to `p`, created at the first send to it from its address in the book
  // (fetched now if no batch brought it): with UCX's peer failure handling where the
  // transports to it support it, else without (UCX 1.13's shared memory cannot; a local peer
  // is watched through its pidfd anyway). A peer whose endpoint cannot be created is reported
  // failed, as one that died. Throws CommError when the address cannot be had.
  void create_endpoint(Peer& p) {
    const std::vector<std::byte>& address = book->address(p.rank);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    // safety: the blob is the byte image of the peer's ucp_address_t, as UCX documents.
    ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
    ep.err_mode = p.ucx_detects ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = &Impl::on_ep_error;
    ep.err_handler.arg = &p;
    ucs_log_push_handler(&quiet_probe);
    probing_err_mode = p.ucx_detects;
    ucs_status_t s = ucp_ep_create(worker, &ep, &p.ep);
    probing_err_mode = false;
    ucs_log_pop_handler();
    if (s == UCS_ERR_UNREACHABLE && p.ucx_detects) {
      ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      s = ucp_ep_create(worker, &ep, &p.ep);
      p.detects_failure = p.pidfd >= 0;
    }
    if (s == UCS_OK) {
      endpoints.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    p.ep = nullptr;
    p.failed = true;
    p.failure = Status::endpoint_failed;
    PeerFailure f{p.rank, FailureScope::endpoint,
                  std::string("cannot reach it: UCX endpoint creation failed: ") +
                      ucs_status_string(s) +
                      (s == UCS_ERR_UNREACHABLE
                           ? " (no transport UCX_TLS allows joins the two ranks on the devices "
                             "UCX_NET_DEVICES or ORDO_NET_DEVICES names: check both; a device "
                             "missing on a host leaves it none)"
                           : "")};
    if (!first_failure) first_failure = f;
    // Reported from the next progress(), as every failure is, not inside the caller's send.
    std::lock_guard lock(posted_mu);
    posted.push_back([this, f] {
      if (failure_handler && !closing) failure_handler(f);
    });
    has_posted.store(true);  // seq_cst, as in post()
  }

  void teardown(bool wait) {
    if (closed) return;
    closed = true;
    closing = true;
    std::vector<void*> pending;
    for (Peer& p : peers) {
      if (p.ep == nullptr) continue;
      ucp_request_param_t prm{};
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(p.ep, &prm);
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) pending.push_back(r);
      p.ep = nullptr;
    }
    const auto deadline = Clock::now() + (wait ? options.close_timeout : std::chrono::milliseconds(1000));
    for (void* r : pending) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline)
        ucp_worker_progress(worker);
      if (ucp_request_check_status(r) != UCS_INPROGRESS) ucp_request_free(r);
      // else: leaked on purpose; the worker is destroyed below and frees its requests.
    }
    if (worker != nullptr) ucp_worker_destroy(worker);
    worker = nullptr;
    if (context != nullptr) ucp_cleanup(context);
    context = nullptr;
  }
};

void Incoming::receive_into(std::span<std::byte> dst, Completion done) {
  static_cast<Transport::Impl*>(owner_)->receive(*this, dst, std::move(done));
}

Transport::Transport(Bootstrap& bootstrap, TransportOptions options)
    : impl_(std::make_unique<Impl>(bootstrap, options)) {
  Impl& m = *impl_;
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) fail("config read", s);
  if (options.rndv_threshold > 0) {
    const std::string v = std::to_string(options.rndv_threshold);
    ucp_config_modify(config, "RNDV_THRESH", v.c_str());
  } else if (!options.keep_ucx_rndv_threshold) {
    const std::string v = std::to_string(kDefaultRndvThreshold);
    ucp_config_modify(config, "RNDV_THRESH", v.c_str());
  }
  if (!options.net_devices.empty()) {
    if (ucs_status_t ms = ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str());
        ms != UCS_OK) {
      ucp_config_release(config);
      throw CommError("comm: '" + options.net_devices + "' is not a list of network devices UCX "
                      "accepts (" + ucs_status_string(ms) + "); give device names as "
                      "UCX_NET_DEVICES takes them, e.g. \"lo\" or \"eth0,mlx5_0:1\"");
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = std::size_t(bootstrap.size());
  const ucs_status_t s = ucp_init(&params, config, &m.context);
  ucp_config_release(config);
  // No device: one that UCX_NET_DEVICES (or ORDO_NET_DEVICES) names is missing here, or none
  // of those present carries a transport UCX_TLS allows.
  if (s == UCS_ERR_NO_DEVICE)
    throw CommError(std::string("comm: UCX found no network device to use (") +
                    ucs_status_string(s) +
                    "): every device UCX_NET_DEVICES or ORDO_NET_DEVICES names must exist on this "
                    "host (`ucx_info -d` lists them), and UCX_TLS must allow a transport on one");
  if (s != UCS_OK) fail("context initialisation (check UCX_TLS and UCX_NET_DEVICES)", s);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  wp.events = UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  if (ucs_status_t ws = ucp_worker_create(m.context, &wp, &m.worker); ws != UCS_OK) {
    ucp_cleanup(m.context);
    fail("worker creation", ws);
  }
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucs_status_t as = ucp_worker_query(m.worker, &attr); as == UCS_OK)
    m.max_header = attr.max_am_header > sizeof(WireHeader) ? attr.max_am_header - sizeof(WireHeader) : 0;
  if (ucs_status_t es = ucp_worker_get_efd(m.worker, &m.efd); es != UCS_OK) {
    m.teardown(false);
    fail("event fd", es);
  }
  m.wait_fd = ::epoll_create1(EPOLL_CLOEXEC);
  m.watch_fd = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_event wev = ev;
  wev.data.u64 = 1;  // the watch set; efd's is 0
  if (m.wait_fd < 0 || m.watch_fd < 0 || ::epoll_ctl(m.wait_fd, EPOLL_CTL_ADD, m.efd, &ev) != 0 ||
      ::epoll_ctl(m.wait_fd, EPOLL_CTL_ADD, m.watch_fd, &wev) != 0) {
    const int e = errno;
    m.teardown(false);
    throw CommError(std::string("comm: epoll set for the event fd: ") + std::strerror(e));
  }
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = am_id;
  hp.cb = &Impl::on_am;
  hp.arg = &m;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  if (ucs_status_t hs = ucp_worker_set_am_recv_handler(m.worker, &hp); hs != UCS_OK) {
    m.teardown(false);
    fail("active message handler registration", hs);
  }
}

Transport::~Transport() { impl_->teardown(false); }

int Transport::rank() const { return impl_->boot.rank(); }
int Transport::size() const { return impl_->ranks; }
std::size_t Transport::max_header_size() const { return impl_->max_header; }
std::size_t Transport::outstanding_sends() const { return impl_->outstanding; }
std::optional<PeerFailure> Transport::first_failure() const { return impl_->first_failure; }
bool Transport::detects_peer_failure(int peer) const {
  return peer >= 0 && std::size_t(peer) < impl_->peers.size() && impl_->peers[std::size_t(peer)].detects_failure;
}

std::uint64_t Transport::job_id() const { return impl_->job_id; }

std::size_t Transport::endpoint_count() const {
  return impl_->endpoints.load(std::memory_order_relaxed);
}

bool Transport::shares_clock_with(int peer) const {
  return peer >= 0 && std::size_t(peer) < impl_->peers.size() && impl_->book->same_clock(peer);
}

bool Transport::same_host(int peer) const {
  return peer >= 0 && std::size_t(peer) < impl_->peers.size() && impl_->book->same_host(peer);
}

void Transport::learn_addresses(std::span<const int> peers) {
  if (!impl_->book) throw CommError("comm: learn_addresses before connect()");
  impl_->book->learn(peers);
}

std::size_t Transport::addresses_held() const {
  return impl_->book ? impl_->book->addresses_held() : 0;
}

std::size_t Transport::host_runs() const { return impl_->book ? impl_->book->host_runs() : 0; }

int Transport::event_fd() const { return impl_->wait_fd; }

void Transport::on_message(Tag tag, Handler handler) { impl_->handlers[tag] = std::move(handler); }

void Transport::on_peer_failure(std::function<void(const PeerFailure&)> handler) {
  impl_->failure_handler = std::move(handler);
}

void Transport::connect() {
  Impl& m = *impl_;
  if (m.connected) throw CommError("comm: Transport::connect called twice");
  ucp_address_t* addr = nullptr;
  std::size_t addr_len = 0;
  if (ucs_status_t s = ucp_worker_get_address(m.worker, &addr, &addr_len); s != UCS_OK)
    fail("worker address query", s);
  // The start-up exchange: hosts for every rank, compactly; addresses stay with the launcher
  // until a batch or a first send asks for them (address_book.hpp).
  const auto address = std::span(reinterpret_cast<const std::byte*>(addr), addr_len);
  try {
    m.book = std::make_unique<AddressBook>(m.boot, address);
  } catch (...) {
    ucp_worker_release_address(m.worker, addr);
    throw;
  }
  ucp_worker_release_address(m.worker, addr);
  m.job_id = m.book->job_id();
  // Peer records must not move once UCX holds pointers to them (error handler argument).
  m.peers.resize(std::size_t(m.boot.size()));
  for (std::size_t r = 0; r < m.peers.size(); ++r) {
    Impl::Peer& p = m.peers[r];
    p.impl = &m;
    p.rank = int(r);
    p.ucx_detects = m.options.detect_peer_failure && int(r) != m.boot.rank();
  }
  // The local peers are watched through their pidfds rather than by UCX (see the comment at
  // the top), from now on: a local peer's death is seen even by a rank that never talks to it.
  if (m.options.detect_peer_failure && !m.options.ucx_detection_for_local_peers) {
    for (const AddressBook::LocalPeer& local : m.book->local_peers()) {
      Impl::Peer& p = m.peers[std::size_t(local.rank)];
      const int fd = open_pidfd(local.pid);
      if (fd < 0) continue;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = std::uint64_t(local.rank);
      if (::epoll_ctl(m.watch_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        ::close(fd);
        continue;
      }
      p.pidfd = fd;
      ++m.watched;
      p.ucx_detects = false;
    }
  }
  for (Impl::Peer& p : m.peers) p.detects_failure = p.ucx_detects || p.pidfd >= 0;
  m.connected = true;
}

void Transport::send(int peer, Tag tag, std::span<const std::byte> header,
                     std::span<const std::byte> payload, Completion done) {
  const WireHeader wire{tag, 0, std::uint32_t(impl_->boot.rank())};
  send_as_is(peer, std::as_bytes(std::span(&wire, 1)), header, payload, std::move(done));
}

void detail::send_with_wire_header(Transport& t, int peer, std::span<const std::byte> wire,
                                   std::span<const std::byte> header) {
  t.send_as_is(peer, wire, header, {}, nullptr);
}

void Transport::send_as_is(int peer, std::span<const std::byte> wire, std::span<const std::byte> header,
                           std::span<const std::byte> payload, Completion done) {
  Impl& m = *impl_;
  if (!m.connected || m.closed) throw CommError("comm: send before connect() or after close()");
  if (peer < 0 || std::size_t(peer) >= m.peers.size())
    throw CommError("comm: send to rank " + std::to_string(peer) + ", but the job has ranks 0.." +
                    std::to_string(m.peers.size() - 1));
  if (header.size() > m.max_header)
    throw CommError("comm: message header of " + std::to_string(header.size()) +
                    " bytes exceeds the transport's limit of " + std::to_string(m.max_header));
  Impl::Peer& p = m.peers[std::size_t(peer)];
  if (!p.failed && p.ep == nullptr) m.create_endpoint(p);
  if (p.failed) {
    if (done) done(p.failure);
    return;
  }
  Impl::SendOp* op = m.acquire_send();
  op->header.resize(wire.size() + header.size());
  op->done = std::move(done);
  if (!wire.empty()) std::memcpy(op->header.data(), wire.data(), wire.size());
  if (!header.empty()) std::memcpy(op->header.data() + wire.size(), header.data(), header.size());
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  prm.cb.send = &Impl::on_send_done;
  prm.user_data = op;
  prm.flags = (m.options.rndv_threshold > 0 && payload.size() >= m.options.rndv_threshold)
                  ? UCP_AM_SEND_FLAG_RNDV
                  : 0;
  ucs_status_ptr_t r = ucp_am_send_nbx(p.ep, am_id, op->header.data(), op->header.size(),
                                       payload.data(), payload.size(), &prm);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {
    Completion d = std::move(op->done);
    m.release_send(op);
    if (d) d(r == nullptr ? Status::ok : status_of(UCS_PTR_STATUS(r)));
    return;
  }
  ++m.outstanding;
}

bool Transport::progress() {
  Impl& m = *impl_;
  if (m.closed) return false;
  bool any = m.run_posted();
  while (ucp_worker_progress(m.worker) != 0) any = true;
  m.rethrow_pending();
  return any;
}

bool Transport::wait_for_event(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  if (m.closed) return false;
  m.check_watched_every(false);
  if (progress()) return true;
  // Busy phase: a peer that just sent is likely to send again within microseconds, and a
  // sleeping receiver costs both sides a system call per message (UCX's shared memory signals
  // an armed peer through a socket) and a wake-up. Yielding between polls leaves the core to
  // runnable workers. Posted work ends the spin too: prepare_sleep() runs it.
  bool any = false;
  if (timeout.count() > 0 && spin_until([&] {
        any = progress();
        return any || m.has_posted.load(std::memory_order_acquire);
      }) && any)
    return true;
  if (!prepare_sleep()) return true;
  epoll_event ev[8];
  const int rc = ::epoll_wait(m.wait_fd, ev, 8, int(timeout.count()));
  if (rc < 0 && errno != EINTR) {
    m.sleeping.store(false, std::memory_order_relaxed);
    throw CommError(std::string("comm: epoll_wait failed: ") + std::strerror(errno));
  }
  return after_sleep() || rc > 0;
}

bool Transport::prepare_sleep() {
  Impl& m = *impl_;
  if (m.closed) return false;
  m.check_watched_every(false);
  if (m.has_posted.load(std::memory_order_acquire)) {  // pairs with post()
    progress();
    return false;
  }
  const ucs_status_t s = ucp_worker_arm(m.worker);
  if (s == UCS_ERR_BUSY) {  // events arrived between the last progress and the arm
    progress();
    return false;
  }
  if (s != UCS_OK) fail("worker arm", s);
  m.sleeping.store(true);
  if (m.has_posted.load()) {  // posted after the check above, maybe without a signal
    m.sleeping.store(false, std::memory_order_relaxed);
    progress();
    return false;
  }
  return true;
}

bool Transport::after_sleep() {
  Impl& m = *impl_;
  m.sleeping.store(false, std::memory_order_relaxed);
  if (m.closed) return false;
  // The pidfds are level-triggered: an exited peer must be reported (and unwatched) now, or
  // the next sleep returns at once.
  m.check_watched_every(true);
  return progress();
}

std::chrono::microseconds Transport::spin_duration() const { return impl_->spin; }

void Transport::wake() {
  if (impl_->worker != nullptr) ucp_worker_signal(impl_->worker);
}

void Transport::post(std::function<void()> work) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.posted_mu);
    m.posted.push_back(std::move(work));
    // seq_cst: also pairs with the acquire load in run_posted().
    m.has_posted.store(true);
  }
  if (m.sleeping.load()) wake();  // a busy transport thread runs it without being signalled
}

void Transport::close() {
  Impl& m = *impl_;
  if (m.closed) return;
  const auto deadline = Clock::now() + m.options.close_timeout;
  while (m.outstanding > 0 && Clock::now() < deadline) wait_for_event(std::chrono::milliseconds(10));
  if (m.outstanding > 0) {
    const std::size_t n = m.outstanding;
    m.teardown(false);
    throw CommError("comm: rank " + std::to_string(rank()) + ": " + std::to_string(n) +
                    " send(s) did not complete within the close timeout");
  }
  m.closing = true;
  if (m.connected) m.boot.barrier();
  m.teardown(true);
}

void Transport::close_within(std::chrono::milliseconds bound) {
  Impl& m = *impl_;
  if (m.closed) return;
  const auto deadline = Clock::now() + bound;
  while (m.outstanding > 0 && Clock::now() < deadline)
    wait_for_event(std::chrono::milliseconds(10));
  if (m.outstanding > 0) {
    m.teardown(false);
    return;
  }
  m.closing = true;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const bool together = !m.connected || (left.count() > 0 && m.boot.barrier_within(left));
  m.teardown(together);
}

}  // namespace ordo::comm
