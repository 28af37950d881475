#include "runtime/comm_net.hpp"
#include "runtime/tree.hpp"
#include "runtime/wire.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <string>
#include <utility>

namespace ordo::rt {

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CommNet::CommNet(std::unique_ptr<comm::Bootstrap> bootstrap, comm::TransportOptions options)
    : bootstrap_(std::move(bootstrap)),
      transport_(std::make_unique<comm::Transport>(*bootstrap_, std::move(options))),
      clock_sync_(
          rank(), size(),
          [this](unsigned peer) { return transport_->shares_clock_with(static_cast<int>(peer)); },
          [this](unsigned peer, const ClockSync::Message& m) {
            transport_->post([this, peer, m] {
              transport_->send(static_cast<int>(peer), kClockTag, m, {}, [](comm::Status) {});
            });
          },
          steady_ns) {
  transport_->on_message(kTag, [this](comm::Incoming& m) { on_incoming(m); });
  // Clock offsets over the tree (clock_sync.hpp): a ping is answered at once, on this thread.
  transport_->on_message(kClockTag, [this](comm::Incoming& m) {
    if (auto answer = clock_sync_.deliver(static_cast<unsigned>(m.peer()), m.header()))
      transport_->send(m.peer(), kClockTag, *answer, {}, [](comm::Status) {});
  });
  // Another rank called Runtime::abort: this rank ends now, on the transport's thread, with
  // that rank's message and status (nothing else of this process can be trusted to return).
  transport_->on_message(kAbortTag, [](comm::Incoming& m) {
    const std::span<const std::byte> h = m.header();
    std::int32_t status = 1;
    if (h.size() >= 4) std::memcpy(&status, h.data(), 4);
    if (status < 1 || status > 125) status = 1;
    const std::string text =
        "ordo: rank " + std::to_string(m.peer()) + " aborted the job: " +
        std::string(reinterpret_cast<const char*>(h.data()) + std::min<std::size_t>(4, h.size()),
                    h.size() - std::min<std::size_t>(4, h.size())) +
        "\n";
    std::fflush(nullptr);
    [[maybe_unused]] const ssize_t w = ::write(2, text.data(), text.size());
    std::_Exit(status);
  });
  transport_->on_message(kLeaveTag, [this](comm::Incoming& m) {
    on_leave(static_cast<unsigned>(m.peer()), m.header());
  });
  transport_->on_peer_failure([this](const comm::PeerFailure& f) {
    on_peer_failure(static_cast<unsigned>(f.peer), "rank " + std::to_string(f.peer) + " failed (" +
                                                       f.cause + "); the job cannot go on without it");
  });
  transport_->connect();
  // The control plane talks to the tree neighbours from the first collective on (the clock
  // measurement below included): their addresses in one request.
  std::vector<unsigned> tree_peers = tree::children(rank(), size());
  if (rank() != 0) tree_peers.push_back(tree::parent(rank()));
  will_talk_to(tree_peers);
  thread_ = std::thread([this] { progress_loop(); });
  clock_offset_ = clock_sync_.measure();
}

CommNet::~CommNet() {
  const auto deadline = std::chrono::steady_clock::now() + kCloseBound;
  leave();
  // Work posted to the transport (a late attach's deliveries, the leave's sends) runs before
  // the progress thread stops. Bounded, in case the transport is wedged by a failure.
  auto flushed = std::make_shared<std::promise<void>>();
  auto done = flushed->get_future();
  transport_->post([flushed] { flushed->set_value(); });
  done.wait_until(deadline);
  {
    std::lock_guard lock(standby_mu_);
    stop_.store(true, std::memory_order_relaxed);
  }
  standby_cv_.notify_all();
  transport_->wake();
  thread_.join();
  // Messages queued by a thread that found the turn taken (the last control round's, say) are
  // sent by the holder when it gives the turn back; the workers have stopped (the pool goes
  // first) and the progress thread has given it back: anything left goes now.
  if (take_turn()) release_turn();
  bool failed;
  {
    std::lock_guard lock(mu_);
    failed = !failure_.empty();
  }
  if (!failed)
    transport_->close_within(std::max(std::chrono::milliseconds(0),
                                      std::chrono::duration_cast<std::chrono::milliseconds>(
                                          deadline - std::chrono::steady_clock::now())));
  // Torn down here, not after the members below it: tearing down (after a failure, locally)
  // completes the sends still in flight, whose completions use this object's state.
  transport_.reset();
}

void CommNet::will_talk_to(std::span<const unsigned> peers) {
  {
    std::lock_guard lock(mu_);
    graph_peers_.insert(peers.begin(), peers.end());
  }
  std::vector<int> ranks(peers.begin(), peers.end());
  try {
    transport_->learn_addresses(ranks);
  } catch (const comm::CommError&) {
    // A hint only: the first send to such a peer fetches its address again and reports why
    // it cannot (Net::will_talk_to).
  }
}

namespace {
thread_local const CommNet* tls_turn = nullptr;  // the CommNet whose turn this thread holds
}  // namespace

bool CommNet::take_turn() {
  if (turn_.load(std::memory_order_relaxed) || turn_.exchange(true)) return false;
  tls_turn = this;
  return true;
}

// Gives the turn back, after sending what was queued. A sender that found the turn taken
// queued its message before its exchange failed, and that exchange came before this store
// (seq_cst), so the load of queued_ below sees the message: it is sent by this thread, or by
// whichever thread takes the turn next.
void CommNet::release_turn() {
  for (;;) {
    if (queued_.load() != 0) guarded([this] { drain_outbox(); });
    tls_turn = nullptr;
    turn_.store(false);
    if (queued_.load() == 0 || !take_turn()) return;
  }
}

// Runs `work` (transport calls); an error ends the job, as a peer's failure would.
template <class F>
void CommNet::guarded(F&& work) {
  try {
    work();
  } catch (const std::exception& e) {
    on_peer_failure(rank(), std::string("transport error on rank ") + std::to_string(rank()) +
                                ": " + e.what());
  }
}

// Runs `work` with the turn, if it can be had: false when another thread holds it.
template <class F>
bool CommNet::with_turn(F&& work) {
  if (!take_turn()) return false;
  guarded(std::forward<F>(work));
  release_turn();
  return true;
}

sched::Poller::Result CommNet::poll(unsigned worker) {
  if (stop_.load(std::memory_order_relaxed)) return Result::idle;
  bool did = false;
  if (!with_turn([&] {
        poll_stamp_.store(steady_ns(), std::memory_order_relaxed);
        poll_worker_.store(worker, std::memory_order_relaxed);
        did = transport_->progress();
      }))
    return Result::taken;
  return did ? Result::work : Result::idle;
}

void CommNet::parking(unsigned worker) {
  if (poll_worker_.load(std::memory_order_relaxed) != worker) return;  // not the one polling
  poll_stamp_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard lock(standby_mu_);
    handoff_ = true;
  }
  standby_cv_.notify_one();
}

bool CommNet::workers_polling() const {
  const std::int64_t stamp = poll_stamp_.load(std::memory_order_relaxed);
  return stamp != 0 && steady_ns() - stamp < std::chrono::nanoseconds(kStandby).count();
}

// Sleeps while workers poll, until one parks or none has polled for kStandby.
void CommNet::standby() {
  std::unique_lock lock(standby_mu_);
  while (!handoff_ && !stop_.load(std::memory_order_relaxed)) {
    const std::int64_t stamp = poll_stamp_.load(std::memory_order_relaxed);
    const std::int64_t left =
        stamp + std::chrono::nanoseconds(kStandby).count() - steady_ns();
    if (stamp == 0 || left <= 0) break;
    standby_cv_.wait_for(lock, std::chrono::nanoseconds(left));
  }
  handoff_ = false;
}

// The transport's busy phase, each poll under the turn. True when something happened or
// workers took over.
bool CommNet::finds_work_while_spinning() {
  return transport_->spin_until([&] {
    if (stop_.load(std::memory_order_relaxed) || workers_polling()) return true;
    bool did = false;
    return with_turn([&] { did = transport_->progress(); }) && did;
  });
}

void CommNet::progress_loop() {
  bool handed_over = false;  // the workers polled through a busy phase before parking
  while (!stop_.load(std::memory_order_relaxed)) {
    if (workers_polling()) {
      standby();
      handed_over = true;
      continue;
    }
    bool did = false;
    if (!with_turn([&] { did = transport_->progress(); })) {
      std::this_thread::yield();  // a worker or a sender has the turn
      continue;
    }
    if (did) {
      handed_over = false;
      continue;
    }
    if (!handed_over && finds_work_while_spinning()) continue;
    handed_over = false;
    bool armed = false;
    if (!with_turn([&] { armed = transport_->prepare_sleep(); }) || !armed) continue;
    pollfd pfd{transport_->event_fd(), POLLIN, 0};
    ::poll(&pfd, 1, 200);
    // The turn may be held by a worker for a while: after_sleep must still run (it reports
    // exited peers, whose pidfds would otherwise wake every sleep at once).
    while (!with_turn([&] { transport_->after_sleep(); }) &&
           !stop_.load(std::memory_order_relaxed))
      std::this_thread::yield();
  }
}

void CommNet::attach(std::uint32_t channel, Receiver on_message, Failure on_failure) {
  std::string failed;
  unsigned failed_rank = 0;
  {
    std::lock_guard lock(mu_);
    Channel& ch = channels_[channel];
    ch.receiver = std::move(on_message);
    ch.failure = std::move(on_failure);
    ch.attached = true;
    failed = failure_;
    failed_rank = failure_rank_;
  }
  // Messages that came early are delivered on the progress thread, in arrival order.
  transport_->post([this, channel, failed, failed_rank] {
    std::deque<Pending> early;
    {
      std::lock_guard lock(mu_);
      auto it = channels_.find(channel);
      if (it == channels_.end() || !it->second.attached) return;
      early.swap(it->second.pending);
    }
    for (Pending& p : early) deliver(channel, p.from, p.header, p.payload);
    if (!failed.empty()) {
      Failure f;
      {
        std::lock_guard lock(mu_);
        auto it = channels_.find(channel);
        if (it == channels_.end() || !it->second.attached) return;
        f = it->second.failure;
        delivering_ = channel;
      }
      f(failed_rank, failed);
      std::lock_guard lock(mu_);
      delivering_ = -1;
      cv_.notify_all();
    }
  });
}

void CommNet::set_placer(std::uint32_t channel, Placer placer) {
  std::lock_guard lock(mu_);
  channels_[channel].placer = std::move(placer);
}

std::vector<std::span<std::byte>> CommNet::detach(std::uint32_t channel) {
  std::unique_lock lock(mu_);
  channels_.erase(channel);
  cv_.wait(lock, [&] { return delivering_ != static_cast<std::int64_t>(channel); });
  // Placed receives end with their data or with the peer's failure; bounded all the same, for
  // a peer that died where UCX cannot tell (shared memory). UCX cannot cancel such a receive,
  // so its destination is handed back to stay allocated for good.
  cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !placing_.count(channel); });
  std::vector<std::span<std::byte>> abandoned;
  if (auto it = placing_.find(channel); it != placing_.end()) {
    abandoned = std::move(it->second);
    placing_.erase(it);
  }
  return abandoned;
}

void CommNet::send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
                   std::span<const std::byte> payload, Sent sent) {
  if (!header.empty() && header[0] == static_cast<std::byte>(wire::Kind::control))
    control_sent_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(outbox_mu_);
    if (outbox_used_ == outbox_.size()) outbox_.emplace_back();
    Outgoing& o = outbox_[outbox_used_++];
    o.peer = peer;
    o.channel = channel;
    o.sent = std::move(sent);
    if (sizeof channel + header.size() > transport_->max_header_size()) {
      // Header and payload together in one owned buffer, kept until the send completes.
      const std::uint64_t hlen = header.size();
      o.owned = std::make_shared<std::vector<std::byte>>(sizeof hlen + header.size() +
                                                         payload.size());
      std::memcpy(o.owned->data(), &hlen, sizeof hlen);
      std::memcpy(o.owned->data() + sizeof hlen, header.data(), header.size());
      if (!payload.empty())
        std::memcpy(o.owned->data() + sizeof hlen + header.size(), payload.data(), payload.size());
      const std::uint32_t flagged = channel | kBigHeader;
      o.wire.resize(sizeof flagged);
      std::memcpy(o.wire.data(), &flagged, sizeof flagged);
      o.payload = *o.owned;
    } else {
      o.wire.resize(sizeof channel + header.size());
      std::memcpy(o.wire.data(), &channel, sizeof channel);
      if (!header.empty())
        std::memcpy(o.wire.data() + sizeof channel, header.data(), header.size());
      // safety: the payload stays valid until the peer answers (rt::Net's contract).
      o.payload = payload;
    }
    queued_.fetch_add(1);
  }
  // Inside a callback (this thread holds the turn) the message goes when the turn is given
  // back; else now, or by the thread that holds the turn when it gives it back.
  if (tls_turn != this && take_turn()) release_turn();
}

// With the turn: sends everything in the outbox. The transport copies each header, so the
// records are free again when send returns.
void CommNet::drain_outbox() {
  std::size_t n;
  {
    std::lock_guard lock(outbox_mu_);
    n = outbox_used_;
    outbox_used_ = 0;
    queued_.store(0);
    outbox_.swap(sending_);  // sending_'s records of the last batch become the spare outbox
  }
  // A send that throws (a header over the transport's limit) must not drop the rest of the
  // batch: the first error is rethrown after it, into progress_loop's failure report.
  std::exception_ptr error;
  for (std::size_t i = 0; i < n; ++i) {
    try {
      Outgoing& o = sending_[i];
      if (o.sent || o.owned) {
        // What the completion needs (an owned buffer to keep alive, `sent` to run, on the
        // thread with the turn: sends that `sent` makes are queued, not nested) waits in a
        // recycled record, so that the completion captures two pointers and allocates nothing.
        Completed* c = take_completed();
        c->channel = o.channel;
        c->sent = std::move(o.sent);
        c->owned = std::move(o.owned);
        transport_->send(static_cast<int>(o.peer), kTag, o.wire, o.payload,
                         [this, c](comm::Status) { finish(c); });
      } else {
        transport_->send(static_cast<int>(o.peer), kTag, o.wire, o.payload, [](comm::Status) {});
      }
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void CommNet::on_incoming(comm::Incoming& m) {
  std::span<const std::byte> h = m.header();
  if (h.size() < sizeof(std::uint32_t)) {
    on_peer_failure(static_cast<unsigned>(m.peer()),
                    "rank " + std::to_string(m.peer()) +
                        " sent a runtime message without a channel; are all ranks the same ordo "
                        "version?");
    return;
  }
  std::uint32_t channel;
  std::memcpy(&channel, h.data(), sizeof channel);
  const unsigned from = static_cast<unsigned>(m.peer());
  if (auto eager = m.eager_payload()) {  // delivered now: the header is read in place
    deliver(channel, from, h.subspan(sizeof channel), *eager);
    return;
  }
  // Delivered when the bytes are in: the header is kept until then.
  std::vector<std::byte> header(h.begin() + sizeof channel, h.end());
  // Rendezvous: pull the bytes where the channel's placer says, if it says so. It runs under
  // the delivering_ mark, like a receiver, so detach() cannot return while it does; and the
  // receive counts as placing only if the channel is still attached when the placer returns.
  const std::size_t size = m.payload_size();
  Placer placer;
  {
    std::lock_guard lock(mu_);
    auto it = channels_.find(channel);
    if (it != channels_.end() && it->second.attached && it->second.pending.empty() &&
        it->second.placer) {
      placer = it->second.placer;
      delivering_ = channel;
    }
  }
  if (placer) {
    std::span<std::byte> dst = placer(from, header, size);
    bool placing = false;
    {
      std::lock_guard lock(mu_);
      delivering_ = -1;
      auto it = channels_.find(channel);
      if (dst.size() == size && it != channels_.end() && it->second.attached) {
        placing_[channel].push_back(dst);
        placing = true;
      }
      cv_.notify_all();
    }
    if (placing) {
      m.receive_into(dst, [this, channel, from, header = std::move(header), dst](comm::Status s) {
        // Delivered while still counted, so that detach() waits for it (if detach() gave up
        // on it, the channel is gone and the bytes wait unread, as for any detached channel).
        if (s == comm::Status::ok) deliver(channel, from, header, dst);
        // else: the peer failure callback reports it
        std::lock_guard lock(mu_);
        if (auto it = placing_.find(channel); it != placing_.end()) {
          auto& spans = it->second;
          auto at = std::find_if(spans.begin(), spans.end(),
                                 [&](std::span<std::byte> p) { return p.data() == dst.data(); });
          if (at != spans.end()) spans.erase(at);
          if (spans.empty()) placing_.erase(it);
        }
        cv_.notify_all();
      });
      return;
    }
  }
  // Else into a buffer, delivered when the bytes are in.
  auto buffer = std::make_shared<std::vector<std::byte>>(size);
  m.receive_into(*buffer, [this, channel, from, header = std::move(header), buffer](comm::Status s) {
    if (s != comm::Status::ok) return;  // the peer failure callback reports it
    deliver(channel, from, header, *buffer);
  });
}

void CommNet::deliver(std::uint32_t channel, unsigned from, std::span<const std::byte> header,
                      std::span<const std::byte> payload) {
  if (channel & kBigHeader) {  // [header length][header][payload] (send())
    std::uint64_t hlen = ~std::uint64_t{0};
    if (payload.size() >= sizeof hlen) std::memcpy(&hlen, payload.data(), sizeof hlen);
    if (payload.size() < sizeof hlen || payload.size() - sizeof hlen < hlen) {
      on_peer_failure(from, "rank " + std::to_string(from) + " sent a malformed large-header message");
      return;
    }
    const std::vector<std::byte> big_header(
        payload.begin() + sizeof hlen, payload.begin() + static_cast<std::ptrdiff_t>(sizeof hlen + hlen));
    deliver(channel & ~kBigHeader, from, big_header, payload.subspan(sizeof hlen + hlen));
    return;
  }
  Receiver receiver;
  {
    std::lock_guard lock(mu_);
    Channel& ch = channels_[channel];
    if (!ch.attached || !ch.pending.empty()) {
      ch.pending.push_back({from, {header.begin(), header.end()}, {payload.begin(), payload.end()}});
      return;
    }
    receiver = ch.receiver;
    delivering_ = channel;
  }
  receiver(from, header, payload);
  std::lock_guard lock(mu_);
  delivering_ = -1;
  cv_.notify_all();
}

CommNet::Completed* CommNet::take_completed() {
  if (free_completed_.empty()) {
    completed_.push_back(std::make_unique<Completed>());
    return completed_.back().get();
  }
  Completed* c = free_completed_.back();
  free_completed_.pop_back();
  return c;
}

// A send has completed: its owned buffer goes, and its `sent` runs unless its channel has
// been detached, marked as delivering, like a receiver, so that detach() waits for it.
void CommNet::finish(Completed* c) {
  Sent sent = std::move(c->sent);
  const std::uint32_t channel = c->channel;
  c->owned.reset();
  free_completed_.push_back(c);
  if (!sent) return;
  {
    std::lock_guard lock(mu_);
    auto it = channels_.find(channel);
    if (it == channels_.end() || !it->second.attached) return;
    delivering_ = channel;
  }
  sent();
  std::lock_guard lock(mu_);
  delivering_ = -1;
  cv_.notify_all();
}

void CommNet::job_failed(unsigned rank, const std::string& what) {
  std::lock_guard lock(mu_);
  if (!failure_.empty()) return;
  failure_ = what;
  failure_rank_ = rank;
}

std::optional<std::pair<unsigned, std::string>> CommNet::job_failure() {
  std::lock_guard lock(mu_);
  if (failure_.empty()) return std::nullopt;
  return std::make_pair(failure_rank_, failure_);
}

void CommNet::leave() {
  std::optional<std::pair<unsigned, std::string>> cause;
  bool leaving;
  {
    std::lock_guard lock(mu_);
    if (!cause_told_) {
      cause_told_ = true;
      if (!failure_.empty())
        cause.emplace(failure_rank_, failure_);
      else
        cause = departure_;
    }
    leaving = !left_ && failure_.empty();
    left_ = left_ || leaving;
  }
  // Before the leave below, whose messages end the others: the launcher then has the cause
  // by the time it reaps the first of them.
  if (cause) bootstrap_->caused_by(cause->first, cause->second);
  if (!leaving) return;
  std::vector<std::byte> record(12);
  const std::uint32_t me = rank();
  const std::uint64_t rounds = rounds_begun();
  std::memcpy(record.data(), &me, 4);
  std::memcpy(record.data() + 4, &rounds, 8);
  transport_->post([this, record] { pass_leave(record, rank(), rank()); });
  if (!cause) bootstrap_->finished();
}

void CommNet::abort_job(const std::string& message, int status) {
  // The launcher first: it names this rank as the cause when the others' exits reach it.
  bootstrap_->aborted(message, status);
  std::vector<int> others;
  for (unsigned r = 0; r < size(); ++r)
    if (r != rank()) others.push_back(static_cast<int>(r));
  try {
    transport_->learn_addresses(others);
  } catch (const comm::CommError&) {
    // Their sends below fail alone; the launcher stops them in any case.
  }
  std::vector<std::byte> record(4 + message.size());
  const std::int32_t code = status;
  std::memcpy(record.data(), &code, 4);
  if (!message.empty()) std::memcpy(record.data() + 4, message.data(), message.size());
  auto left = std::make_shared<std::atomic<std::size_t>>(others.size());
  auto all_sent = std::make_shared<std::promise<void>>();
  auto done = all_sent->get_future();
  if (others.empty()) all_sent->set_value();
  transport_->post([this, record, others, left, all_sent] {
    for (int r : others)
      transport_->send(r, kAbortTag, record, {}, [left, all_sent](comm::Status) {
        if (left->fetch_sub(1) == 1) all_sent->set_value();
      });
  });
  done.wait_for(kAbortBound);
}

void CommNet::pass_leave(std::span<const std::byte> record, unsigned leaver, unsigned except) {
  std::vector<unsigned> to = tree::children(rank(), size());
  if (rank() != 0) to.push_back(tree::parent(rank()));
  // The leaver tells its graph peers directly too: each would otherwise learn of the leave
  // along the tree, and could see this process exit first (its own endpoint to it failing),
  // which it would take for a failure: "rank 2 failed (Endpoint timeout)" for a rank that
  // returned from main. The others drop the record they hear twice (on_leave).
  if (leaver == rank()) {
    std::lock_guard lock(mu_);
    to.insert(to.end(), graph_peers_.begin(), graph_peers_.end());
  }
  std::sort(to.begin(), to.end());
  to.erase(std::unique(to.begin(), to.end()), to.end());
  for (unsigned r : to)
    if (r != except && r != leaver)
      transport_->send(static_cast<int>(r), kLeaveTag, record, {}, [](comm::Status) {});
}

void CommNet::on_leave(unsigned from, std::span<const std::byte> header) {
  std::uint32_t leaver = 0;
  std::uint64_t rounds = 0;
  if (header.size() == 12) {
    std::memcpy(&leaver, header.data(), 4);
    std::memcpy(&rounds, header.data() + 4, 8);
  }
  if (header.size() != 12 || leaver >= size() || leaver == rank()) {
    on_peer_failure(from, "rank " + std::to_string(from) +
                              " sent a malformed leave message; are all ranks the same ordo "
                              "version?");
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (!departed_.emplace(leaver, rounds).second) return;
  }
  pass_leave(header, leaver, from);
}

std::optional<std::pair<unsigned, std::string>> CommNet::departed_before(
    std::uint64_t round) const {
  std::lock_guard lock(mu_);
  for (const auto& [leaver, rounds] : departed_)
    if (rounds < round) {
      auto gone = std::make_pair(
          leaver, "rank " + std::to_string(leaver) +
                      " left the job: its Runtime ended (its program returned or stopped) "
                      "while this rank still expected it in a collective call (a run, "
                      "run_until, gather or restart) that rank " +
                      std::to_string(leaver) +
                      " did not make; every rank must make the same collective calls, in the "
                      "same order");
      if (!departure_) departure_ = gone;
      return gone;
    }
  return std::nullopt;
}

void CommNet::on_peer_failure(unsigned rank, const std::string& what) {
  std::vector<std::pair<std::uint32_t, Failure>> targets;
  {
    std::lock_guard lock(mu_);
    if (!failure_.empty()) return;
    // A rank that left exits next: that is no failure (a collective that needs it finds it
    // gone through departed_before).
    if (rank != this->rank() && departed_.count(rank)) return;
    failure_ = what;
    failure_rank_ = rank;
    clock_sync_.stop();
    for (auto& [id, ch] : channels_)
      if (ch.attached) targets.emplace_back(id, ch.failure);
  }
  for (auto& [id, f] : targets) {
    {
      std::lock_guard lock(mu_);
      if (!channels_.count(id)) continue;
      delivering_ = id;
    }
    f(rank, what);
    std::lock_guard lock(mu_);
    delivering_ = -1;
    cv_.notify_all();
  }
}

}  // namespace ordo::rt
