#include "comm_net.hpp"

#include <cstring>
#include <future>

namespace ordo::rt {

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CommNet::CommNet(std::unique_ptr<comm::Bootstrap> bootstrap) : bootstrap_(std::move(bootstrap)) {
  transport_ = std::make_unique<comm::Transport>(*bootstrap_);
  transport_->on_message(kTag, [this](comm::Incoming& m) { on_incoming(m); });
  // Clock pings: rank 0 answers with its steady clock; the others take the answer.
  transport_->on_message(kClockTag, [this](comm::Incoming& m) {
    if (m.header().size() != sizeof(std::int64_t)) return;
    if (rank() == 0) {
      const std::int64_t now = steady_ns();
      transport_->send(m.peer(), kClockTag,
                       {reinterpret_cast<const std::byte*>(&now), sizeof now}, {},
                       [](comm::Status) {});
      return;
    }
    std::int64_t t = 0;
    std::memcpy(&t, m.header().data(), sizeof t);
    std::lock_guard lock(clock_mu_);
    clock_reply_ = t;
    clock_cv_.notify_all();
  });
  transport_->on_peer_failure([this](const comm::PeerFailure& f) {
    on_peer_failure("rank " + std::to_string(f.peer) + " failed (" + f.cause +
                    "); the job cannot go on without it");
  });
  transport_->connect();
  thread_ = std::thread([this] { progress_loop(); });
  measure_clock_offset();
}

// Cristian's method: a ping to rank 0 at t0, its clock t1 in the reply, received at t2; with
// symmetric delays rank 0's clock at t2 is t1 + (t2 - t0) / 2. The sample with the shortest
// round trip bounds the error best. Every rank other than 0 does this once, at start-up.
void CommNet::measure_clock_offset() {
  if (rank() == 0) return;
  std::int64_t best_rtt = -1;
  for (int i = 0; i < 8; ++i) {
    {
      std::lock_guard lock(clock_mu_);
      clock_reply_ = -1;
    }
    const std::int64_t t0 = steady_ns();
    transport_->post([this, t0] {
      transport_->send(0, kClockTag, {reinterpret_cast<const std::byte*>(&t0), sizeof t0}, {},
                       [](comm::Status) {});
    });
    std::unique_lock lock(clock_mu_);
    if (!clock_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return clock_reply_ >= 0; }))
      return;  // no answer: leave the offset at 0 (one host) rather than guess
    const std::int64_t t2 = steady_ns(), t1 = clock_reply_;
    if (best_rtt < 0 || t2 - t0 < best_rtt) {
      best_rtt = t2 - t0;
      clock_offset_ns_ = t1 + (t2 - t0) / 2 - t2;
    }
  }
}

CommNet::~CommNet() {
  // Sends this thread posted (the last control round's, say) must go out before the progress
  // thread stops: a post runs after every earlier post of the same thread, so once this one
  // has run, they all have. Bounded, in case the transport is wedged by a failure.
  auto flushed = std::make_shared<std::promise<void>>();
  auto done = flushed->get_future();
  transport_->post([flushed] { flushed->set_value(); });
  done.wait_for(std::chrono::seconds(10));
  stop_.store(true, std::memory_order_relaxed);
  transport_->wake();
  thread_.join();
  bool failed;
  {
    std::lock_guard lock(mu_);
    failed = !failure_.empty();
  }
  if (failed) return;  // the transport's destructor tears down locally
  try {
    transport_->close();
  } catch (const std::exception&) {
    // A rank that is already gone: nothing more to tell anyone.
  }
}

void CommNet::progress_loop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    try {
      transport_->wait_for_event(std::chrono::milliseconds(200));
    } catch (const std::exception& e) {
      on_peer_failure(std::string("transport error on rank ") + std::to_string(rank()) + ": " +
                      e.what());
    }
  }
}

void CommNet::attach(std::uint32_t channel, Receiver on_message, Failure on_failure) {
  std::string failed;
  {
    std::lock_guard lock(mu_);
    Channel& ch = channels_[channel];
    ch.receiver = std::move(on_message);
    ch.failure = std::move(on_failure);
    ch.attached = true;
    failed = failure_;
  }
  // Messages that came early are delivered on the progress thread, in arrival order.
  transport_->post([this, channel, failed] {
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
      f(failed);
      std::lock_guard lock(mu_);
      delivering_ = -1;
      cv_.notify_all();
    }
  });
}

void CommNet::detach(std::uint32_t channel) {
  std::unique_lock lock(mu_);
  channels_.erase(channel);
  cv_.wait(lock, [&] { return delivering_ != static_cast<std::int64_t>(channel); });
}

void CommNet::send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
                   std::span<const std::byte> payload) {
  if (sizeof channel + header.size() > transport_->max_header_size()) {
    // Header and payload together in one owned buffer, kept until the send completes.
    const std::uint64_t hlen = header.size();
    auto big = std::make_shared<std::vector<std::byte>>(sizeof hlen + header.size() +
                                                        payload.size());
    std::memcpy(big->data(), &hlen, sizeof hlen);
    std::memcpy(big->data() + sizeof hlen, header.data(), header.size());
    if (!payload.empty())
      std::memcpy(big->data() + sizeof hlen + header.size(), payload.data(), payload.size());
    const std::uint32_t flagged = channel | kBigHeader;
    std::vector<std::byte> wire(sizeof flagged);
    std::memcpy(wire.data(), &flagged, sizeof flagged);
    transport_->post([this, peer, wire = std::move(wire), big] {
      transport_->send(static_cast<int>(peer), kTag, wire, *big, [big](comm::Status) {});
    });
    return;
  }
  std::vector<std::byte> wire(sizeof channel + header.size());
  std::memcpy(wire.data(), &channel, sizeof channel);
  if (!header.empty()) std::memcpy(wire.data() + sizeof channel, header.data(), header.size());
  // safety: the payload stays valid until the peer answers (rt::Net's contract).
  transport_->post([this, peer, wire = std::move(wire), payload] {
    transport_->send(static_cast<int>(peer), kTag, wire, payload, [](comm::Status) {});
  });
}

void CommNet::on_incoming(comm::Incoming& m) {
  std::span<const std::byte> h = m.header();
  if (h.size() < sizeof(std::uint32_t)) {
    on_peer_failure("rank " + std::to_string(m.peer()) + " sent a runtime message without a "
                    "channel; are all ranks the same ordo version?");
    return;
  }
  std::uint32_t channel;
  std::memcpy(&channel, h.data(), sizeof channel);
  const unsigned from = static_cast<unsigned>(m.peer());
  std::vector<std::byte> header(h.begin() + sizeof channel, h.end());
  if (auto eager = m.eager_payload()) {
    deliver(channel, from, header, *eager);
    return;
  }
  // Rendezvous: pull the bytes into a buffer, deliver when they are in.
  auto buffer = std::make_shared<std::vector<std::byte>>(m.payload_size());
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
      on_peer_failure("rank " + std::to_string(from) + " sent a malformed large-header message");
      return;
    }
    const std::vector<std::byte> big_header(payload.begin() + sizeof hlen,
                                            payload.begin() + static_cast<std::ptrdiff_t>(sizeof hlen + hlen));
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

void CommNet::on_peer_failure(const std::string& what) {
  std::vector<std::pair<std::uint32_t, Failure>> targets;
  {
    std::lock_guard lock(mu_);
    if (!failure_.empty()) return;
    failure_ = what;
    for (auto& [id, ch] : channels_)
      if (ch.attached) targets.emplace_back(id, ch.failure);
  }
  for (auto& [id, f] : targets) {
    {
      std::lock_guard lock(mu_);
      if (!channels_.count(id)) continue;
      delivering_ = id;
    }
    f(what);
    std::lock_guard lock(mu_);
    delivering_ = -1;
    cv_.notify_all();
  }
}

}  // namespace ordo::rt
