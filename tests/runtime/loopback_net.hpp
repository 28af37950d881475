// An in-process rt::Net for tests: N ranks in one process, one delivery thread per rank,
// payloads copied at send and `sent` run inside send (like an eager transport), or, with
// `late_copy`, copied by the receiving thread just before delivery and `sent` run only then
// (like a zero-copy one: a sender that writes a payload too early sends the wrong bytes). It
// counts protocol traffic per pair of ranks and control messages per rank, and can simulate a
// rank's death.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <span>
#include <thread>
#include <vector>

#include "runtime/net.hpp"

namespace ordo::test {

class LoopbackHub;

class LoopbackNet final : public rt::Net {
 public:
  LoopbackNet(LoopbackHub& hub, unsigned rank);
  ~LoopbackNet() override;
  unsigned rank() const override { return rank_; }
  unsigned size() const override;
  bool same_host(unsigned peer) const override;
  void attach(std::uint32_t channel, Receiver on_message, Failure on_failure) override;
  void set_placer(std::uint32_t channel, Placer placer) override;
  std::vector<std::span<std::byte>> detach(std::uint32_t channel) override;
  // As CommNet: the first failure, replayed to channels attached later.
  void job_failed(unsigned rank, const std::string& what) override;
  std::optional<std::pair<unsigned, std::string>> job_failure() override;
  // As a transport that placed a rendezvous payload from `from` and cannot end that receive
  // (its peer died where it cannot tell): asks the channel's placer where the payload goes and
  // keeps that span in flight, so that detach() returns it.
  std::span<std::byte> place_stuck(std::uint32_t channel, unsigned from,
                                   std::span<const std::byte> header, std::size_t size);
  void send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
            std::span<const std::byte> payload, Sent sent) override;

 private:
  friend class LoopbackHub;
  struct Msg {
    unsigned from;
    std::uint32_t channel;
    std::vector<std::byte> header, payload;
    bool failure = false;  // a failure notice: header holds the text
    std::span<const std::byte> late;  // late_copy: the sender's payload, copied at delivery
    Sent sent;                        // late_copy: run once `late` is copied
  };
  void post(Msg m);
  void loop();

  LoopbackHub& hub_;
  unsigned rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Msg> queue_;
  std::map<std::uint32_t, std::pair<Receiver, Failure>> attached_;
  std::map<std::uint32_t, std::deque<Msg>> pending_;
  std::map<std::uint32_t, Placer> placers_;
  std::map<std::uint32_t, std::vector<std::span<std::byte>>> stuck_;
  std::string failure_;  // set once a peer failed
  unsigned failed_rank_ = 0;
  std::int64_t delivering_ = -1;  // channel being delivered to, or -1
  bool stop_ = false;
  std::thread thread_;
};

class LoopbackHub {
 public:
  // `same_host`: the ranks say they share a host (Net::same_host), so graphs with shared
  // storage map each other's location memory (all ranks are this one process).
  explicit LoopbackHub(unsigned ranks, bool late_copy = false, bool same_host = false)
      : late_copy_(late_copy), same_host_(same_host) {
    for (unsigned r = 0; r < ranks; ++r) nets_.push_back(std::make_unique<LoopbackNet>(*this, r));
    traffic_.reset(new std::atomic<std::uint64_t>[ranks * ranks]());
    handled_.reset(new std::atomic<std::uint64_t>[ranks * ranks]());
    bytes_.reset(new std::atomic<std::uint64_t>[ranks * ranks]());
    control_.reset(new std::atomic<std::uint64_t>[ranks]());
  }
  unsigned size() const { return static_cast<unsigned>(nets_.size()); }
  LoopbackNet& net(unsigned r) { return *nets_[r]; }

  // Protocol messages (GRANT, RELEASE) and their payload bytes from one rank to another.
  std::uint64_t messages(unsigned from, unsigned to) const { return traffic_[from * size() + to]; }
  std::uint64_t bytes(unsigned from, unsigned to) const { return bytes_[from * size() + to]; }
  // Protocol messages from one rank (injected ones included) whose receiver has returned.
  std::uint64_t handled(unsigned from, unsigned to) const { return handled_[from * size() + to]; }
  // Control-plane messages (CONTROL) a rank has sent.
  std::uint64_t control_messages(unsigned from) const { return control_[from]; }

  // Delivers a message to `to` as if `from` had sent it on `channel`: for tests of what a
  // rank does with messages its peers' protocol would never send.
  void inject(unsigned from, unsigned to, std::uint32_t channel, std::vector<std::byte> header,
              std::vector<std::byte> payload = {}) {
    nets_[to]->post(LoopbackNet::Msg{from, channel, std::move(header), std::move(payload), false, {}, {}});
  }

  // The rank dies: its messages are dropped and every rank (itself included, so that its
  // engine stops too) is told, or only the ranks in `noticed` and itself (as a transport
  // tells only the ranks that hold an endpoint to it).
  void kill(unsigned dead, const std::vector<unsigned>& noticed = {}) {
    dead_ = static_cast<int>(dead);
    for (auto& n : nets_) {
      if (!noticed.empty() && n->rank() != dead &&
          std::find(noticed.begin(), noticed.end(), n->rank()) == noticed.end())
        continue;
      LoopbackNet::Msg m{dead, 0, {}, {}, true, {}, {}};
      std::string text = "rank " + std::to_string(dead) + " died (killed by the test)";
      auto p = reinterpret_cast<const std::byte*>(text.data());
      m.header.assign(p, p + text.size());
      n->post(std::move(m));
    }
  }

 private:
  friend class LoopbackNet;
  std::vector<std::unique_ptr<LoopbackNet>> nets_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> traffic_, handled_, bytes_, control_;
  std::atomic<int> dead_{-1};
  bool late_copy_;
  bool same_host_;
};

inline LoopbackNet::LoopbackNet(LoopbackHub& hub, unsigned rank)
    : hub_(hub), rank_(rank), thread_([this] { loop(); }) {}

inline LoopbackNet::~LoopbackNet() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

inline unsigned LoopbackNet::size() const { return hub_.size(); }

inline bool LoopbackNet::same_host(unsigned peer) const { return hub_.same_host_ && peer != rank_; }

inline void LoopbackNet::attach(std::uint32_t channel, Receiver on_message, Failure on_failure) {
  std::lock_guard lock(mu_);
  attached_[channel] = {std::move(on_message), std::move(on_failure)};
  auto it = pending_.find(channel);
  if (it != pending_.end()) {
    for (auto m = it->second.rbegin(); m != it->second.rend(); ++m) queue_.push_front(std::move(*m));
    pending_.erase(it);
  }
  if (!failure_.empty()) queue_.push_back(Msg{0, channel, {}, {}, true, {}, {}});
  cv_.notify_all();
}

inline void LoopbackNet::job_failed(unsigned rank, const std::string& what) {
  std::lock_guard lock(mu_);
  if (!failure_.empty()) return;
  failure_ = what;
  failed_rank_ = rank;
}

inline std::optional<std::pair<unsigned, std::string>> LoopbackNet::job_failure() {
  std::lock_guard lock(mu_);
  if (failure_.empty()) return std::nullopt;
  return std::make_pair(failed_rank_, failure_);
}

inline void LoopbackNet::set_placer(std::uint32_t channel, Placer placer) {
  std::lock_guard lock(mu_);
  placers_[channel] = std::move(placer);
}

inline std::span<std::byte> LoopbackNet::place_stuck(std::uint32_t channel, unsigned from,
                                                     std::span<const std::byte> header,
                                                     std::size_t size) {
  Placer placer;
  {
    std::lock_guard lock(mu_);
    auto it = placers_.find(channel);
    if (it == placers_.end() || !attached_.count(channel)) return {};
    placer = it->second;
  }
  std::span<std::byte> dst = placer(from, header, size);
  std::lock_guard lock(mu_);
  if (dst.size() == size && size > 0) stuck_[channel].push_back(dst);
  return dst;
}

inline std::vector<std::span<std::byte>> LoopbackNet::detach(std::uint32_t channel) {
  std::unique_lock lock(mu_);
  attached_.erase(channel);
  placers_.erase(channel);
  cv_.wait(lock, [&] { return delivering_ != static_cast<std::int64_t>(channel); });
  std::vector<std::span<std::byte>> stuck = std::move(stuck_[channel]);
  stuck_.erase(channel);
  return stuck;
}

inline void LoopbackNet::send(unsigned peer, std::uint32_t channel,
                              std::span<const std::byte> header,
                              std::span<const std::byte> payload, Sent sent) {
  if (hub_.dead_ == static_cast<int>(rank_) || hub_.dead_ == static_cast<int>(peer)) {
    if (sent) sent();
    return;
  }
  auto kind = header.empty() ? 0 : static_cast<int>(header[0]);
  if (kind == 1 || kind == 2) {  // GRANT, RELEASE
    hub_.traffic_[rank_ * size() + peer].fetch_add(1);
    hub_.bytes_[rank_ * size() + peer].fetch_add(payload.size());
  }
  if (kind == 3) hub_.control_[rank_].fetch_add(1);  // CONTROL
  if (hub_.late_copy_) {
    hub_.net(peer).post(Msg{rank_, channel, {header.begin(), header.end()}, {}, false, payload,
                            std::move(sent)});
    return;
  }
  hub_.net(peer).post(Msg{rank_, channel, {header.begin(), header.end()},
                          {payload.begin(), payload.end()}, false, {}, {}});
  if (sent) sent();  // copied: inside send, as an eager transport may
}

inline void LoopbackNet::post(Msg m) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(m));
  cv_.notify_all();
}

inline void LoopbackNet::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Msg m = std::move(queue_.front());
    queue_.pop_front();
    if (m.failure) {
      if (!m.header.empty()) {
        failure_.assign(reinterpret_cast<const char*>(m.header.data()), m.header.size());
        failed_rank_ = m.from;
      }
      // Tell every attached channel (or, for a replayed notice, the one channel).
      std::vector<std::pair<std::uint32_t, Failure>> targets;
      for (auto& [ch, cb] : attached_)
        if (!m.header.empty() || ch == m.channel) targets.emplace_back(ch, cb.second);
      for (auto& [ch, fail] : targets) {
        delivering_ = ch;
        std::string text = failure_;
        const unsigned dead = failed_rank_;
        lock.unlock();
        fail(dead, text);
        lock.lock();
        delivering_ = -1;
        cv_.notify_all();
      }
      continue;
    }
    if (!m.late.empty() || m.sent) {  // late_copy: the bytes leave the sender now
      m.payload.assign(m.late.begin(), m.late.end());
      m.late = {};
      Sent sent = std::move(m.sent);
      m.sent = nullptr;
      if (sent) {
        lock.unlock();
        sent();
        lock.lock();
      }
    }
    auto it = attached_.find(m.channel);
    if (it == attached_.end()) {
      pending_[m.channel].push_back(std::move(m));
      continue;
    }
    Receiver recv = it->second.first;
    delivering_ = m.channel;
    lock.unlock();
    recv(m.from, m.header, m.payload);
    const auto kind = m.header.empty() ? 0 : static_cast<int>(m.header[0]);
    if (kind == 1 || kind == 2) hub_.handled_[m.from * size() + rank_].fetch_add(1);
    lock.lock();
    delivering_ = -1;
    cv_.notify_all();
  }
}

}  // namespace ordo::test
