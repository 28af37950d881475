// CommNet's threading on one rank (UCX's self transport): scheduler workers that poll the
// transport, the progress thread, and a thread outside the pool all send at once, some from
// inside a receiver; every message must arrive exactly once and every `sent` run exactly once.
// A message left in the outbox by a lost hand-off of the turn would never arrive (bounded
// wait). Under ThreadSanitizer (suite tsan) this also checks the turn's memory ordering.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "comm/address_book.hpp"
#include "comm/bootstrap.hpp"
#include "comm/transport.hpp"
#include "runtime/comm_net.hpp"
#include "scheduler/pool.hpp"
#include "test_support.hpp"

using namespace ordo;

namespace {

constexpr std::uint32_t kChannel = 3;

struct Counts {
  explicit Counts(std::size_t n)
      : received(new std::atomic<std::uint32_t>[n]), sent(new std::atomic<std::uint32_t>[n]),
        size(n) {
    for (std::size_t i = 0; i < n; ++i) received[i].store(0), sent[i].store(0);
  }
  std::unique_ptr<std::atomic<std::uint32_t>[]> received, sent;
  std::size_t size;
  std::atomic<std::uint64_t> total_received{0}, total_sent{0};
  std::uint64_t wrong() const {
    std::uint64_t bad = 0;
    for (std::size_t i = 0; i < size; ++i) bad += (received[i].load() != 1) + (sent[i].load() != 1);
    return bad;
  }
};

// Sends message `id` to rank 0 (itself) on kChannel: the id in the header, a payload of 64 KiB
// (eager) whose first word is the id, read in place until `sent`.
void send_id(rt::CommNet& net, Counts& c, std::vector<std::vector<std::uint64_t>>& payloads,
             std::uint64_t id) {
  payloads[id].assign(8192, 0);
  payloads[id][0] = id;
  net.send(0, kChannel, {reinterpret_cast<const std::byte*>(&id), sizeof id},
           {reinterpret_cast<const std::byte*>(payloads[id].data()), 8192 * sizeof(std::uint64_t)},
           [&c, id] {
             c.sent[id].fetch_add(1);
             c.total_sent.fetch_add(1);
           });
}

class SendExecutor final : public sched::Executor {
 public:
  SendExecutor(rt::CommNet& net, Counts& c, std::vector<std::vector<std::uint64_t>>& p)
      : net_(net), c_(c), p_(p) {}
  void execute(sched::Item item, unsigned) override {
    send_id(net_, c_, p_, item);
    done.fetch_add(1);  // last: detach() wants no item running
  }
  std::atomic<std::uint64_t> done{0};

 private:
  rt::CommNet& net_;
  Counts& c_;
  std::vector<std::vector<std::uint64_t>>& p_;
};

// Rank `rank` of a job of `size` ranks, all on this host, whose launcher answers every address
// fetch with `peer_address`: so that two transports of different jobs in this process reach
// each other. `published` is the address this rank gave the start-up exchange.
class OneHostJob final : public comm::Bootstrap {
 public:
  OneHostJob(int rank, int size, comm::Blob peer_address)
      : rank_(rank), size_(size), peer_address_(std::move(peer_address)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  const char* kind() const override { return "one-host test job"; }
  std::vector<comm::Blob> allgather(std::span<const std::byte> mine) override {
    return std::vector<comm::Blob>(static_cast<std::size_t>(size_), comm::Blob(mine.begin(), mine.end()));
  }
  std::vector<Run> exchange(std::span<const std::byte> shared, std::span<const comm::Blob> own) override {
    published = own[comm::AddressBook::kAddressPart];
    return {{static_cast<std::uint32_t>(size_), comm::Blob(shared.begin(), shared.end())}};
  }
  std::vector<comm::Blob> fetch(std::size_t part, std::span<const int> ranks) override {
    check_ranks(ranks);
    comm::Blob pid(sizeof(std::int64_t));
    const std::int64_t me = ::getpid();
    std::memcpy(pid.data(), &me, sizeof me);
    return std::vector<comm::Blob>(ranks.size(), part == comm::AddressBook::kPidPart ? pid : peer_address_);
  }
  void barrier() override {}
  comm::Blob published;

 private:
  int rank_, size_;
  comm::Blob peer_address_;
};

// Rank 0 of a 2-rank job on this host (OneHostJob, whose address fetches give the address
// `published` holds), listening on kChannel, and what reached it: the senders of the messages
// delivered, or the failure its CommNet reported.
struct RankZero {
  OneHostJob* job;  // owned by net
  rt::CommNet net;
  std::mutex mu;
  std::vector<unsigned> delivered_from;
  std::string failure;
  unsigned failed_rank = ~0u;

  RankZero() : RankZero(std::make_unique<OneHostJob>(0, 2, comm::Blob(8, std::byte{1}))) {}
  explicit RankZero(std::unique_ptr<OneHostJob> boot) : job(boot.get()), net(std::move(boot)) {
    net.attach(
        kChannel,
        [this](unsigned from, std::span<const std::byte>, std::span<const std::byte>) {
          std::lock_guard lock(mu);
          delivered_from.push_back(from);
        },
        [this](unsigned rank, const std::string& what) {
          std::lock_guard lock(mu);
          failed_rank = rank;
          failure = what;
        });
  }
  // Progresses `sender` until a message was delivered or this rank failed (at most 20 s), then
  // detaches: no callback runs after this.
  void wait_for(comm::Transport& sender) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      sender.wait_for_event(std::chrono::milliseconds(10));
      std::lock_guard lock(mu);
      if (!failure.empty() || !delivered_from.empty() || std::chrono::steady_clock::now() > deadline)
        break;
    }
    net.detach(kChannel);
  }
};

}  // namespace

TEST_CASE("a message naming a sender outside the job stops the rank that got it, naming that "
          "rank", "[comm_net]") {
  // Rank 0 of 2, and a transport of another job, as its rank 5 of 6, that reaches rank 0's
  // worker: its messages carry source rank 5, which rank 0's job does not have.
  RankZero rank0;
  OneHostJob stranger_job(5, 6, rank0.job->published);
  comm::Transport stranger(stranger_job, comm::TransportOptions{.detect_peer_failure = false});
  stranger.connect();
  // A runtime message as CommNet frames it: the channel, then a header.
  std::vector<std::byte> wire(sizeof kChannel + 8, std::byte{0});
  std::memcpy(wire.data(), &kChannel, sizeof kChannel);
  stranger.send(0, rt::CommNet::kTag, wire, {}, nullptr);
  rank0.wait_for(stranger);
  CHECK(rank0.delivered_from.empty());
  CHECK(rank0.failed_rank == 0);  // this rank's own failure: it cannot tell who sent the message
  CHECK_THAT(rank0.failure, Catch::Contains("transport error on rank 0") &&
                          Catch::Contains("names rank 5 as its sender, but the job has ranks 0..1"));
}

TEST_CASE("a message whose wire header has a tag nothing listens for, a reserved field set or "
          "too few bytes stops the rank that got it, naming the sender", "[comm_net]") {
  // Rank 0 of 2, and a transport standing in for its rank 1, which writes the wire header
  // itself (tag:u16 reserved:u16 source:u32): as a rank of another ordo build could.
  struct Case {
    const char* what;
    std::uint16_t tag, reserved;
    std::size_t wire_bytes;
    const char* says;  // empty: delivered
  };
  const Case cases[] = {
      {"a well-formed message", rt::CommNet::kTag, 0, 8, ""},
      {"a tag nothing listens for", 999, 0, 8,
       "received a message from rank 1 with tag 999, which nothing on this rank listens for"},
      {"a reserved field set", rt::CommNet::kTag, 7, 8,
       "received a message from rank 1 (tag 7) whose wire header has 7 in its reserved field"},
      {"a header shorter than the wire header", rt::CommNet::kTag, 0, 4,
       "received a message with 4 header bytes, fewer than the 8 of ordo's wire header"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    RankZero rank0;
    OneHostJob peer_job(1, 2, rank0.job->published);
    comm::Transport peer(peer_job, comm::TransportOptions{.detect_peer_failure = false});
    peer.connect();
    std::vector<std::byte> wire(8);
    const std::uint32_t source = 1;
    std::memcpy(wire.data(), &c.tag, 2);
    std::memcpy(wire.data() + 2, &c.reserved, 2);
    std::memcpy(wire.data() + 4, &source, 4);
    wire.resize(c.wire_bytes);
    // A runtime message as CommNet frames it: the channel, then a header; none after a short
    // wire header, whose message is then that short.
    std::vector<std::byte> header(sizeof kChannel + 8, std::byte{0});
    std::memcpy(header.data(), &kChannel, sizeof kChannel);
    if (wire.size() < 8) header.clear();
    comm::detail::send_with_wire_header(peer, 0, wire, header);
    rank0.wait_for(peer);
    if (*c.says == 0) {
      CHECK(rank0.delivered_from == std::vector<unsigned>{1});
      CHECK(rank0.failure.empty());
    } else {
      CHECK(rank0.delivered_from.empty());
      CHECK(rank0.failed_rank == 0);  // this rank's own failure, saying what the header claimed
      CHECK_THAT(rank0.failure, Catch::Contains("transport error on rank 0") && Catch::Contains(c.says));
    }
  }
}

TEST_CASE("messages sent by workers, receivers and other threads all arrive once", "[comm_net]") {
  const std::uint64_t n = ordo::test::kTsan ? 300 : 3000;  // ids [0, n): workers; [n, 2n): replies;
                                                         // [2n, 3n): the outside thread
  Counts c(3 * n);
  std::vector<std::vector<std::uint64_t>> payloads(3 * n);
  // Declared before the pool, so destroyed after it: workers poll it until they are joined.
  auto net = std::make_shared<rt::CommNet>(comm::Bootstrap::single());
  std::atomic<std::uint64_t> bad_payloads{0};
  net->attach(
      kChannel,
      [&](unsigned from, std::span<const std::byte> header, std::span<const std::byte> payload) {
        std::uint64_t id = ~0ull, first = ~0ull;
        if (from == 0 && header.size() == sizeof id && payload.size() >= sizeof first) {
          std::memcpy(&id, header.data(), sizeof id);
          std::memcpy(&first, payload.data(), sizeof first);
        }
        if (id >= 3 * n || first != id) {
          bad_payloads.fetch_add(1);
          return;
        }
        c.received[id].fetch_add(1);
        c.total_received.fetch_add(1);
        if (id < n) send_id(*net, c, payloads, id + n);  // from inside a receiver
      },
      [&](unsigned, const std::string&) { bad_payloads.fetch_add(1); });
  {
    sched::Pool pool(sched::PoolConfig{.workers = 2});
    SendExecutor exec(*net, c, payloads);
    pool.attach(exec);
    pool.set_poller(net.get());
    std::thread outside([&] {
      for (std::uint64_t id = 2 * n; id < 3 * n; ++id) send_id(*net, c, payloads, id);
    });
    for (std::uint64_t id = 0; id < n; ++id) pool.push(id);
    outside.join();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((c.total_received.load() < 3 * n || c.total_sent.load() < 3 * n ||
            exec.done.load() < n) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pool.set_poller(nullptr);
    pool.detach();
  }
  CHECK(net->detach(kChannel).empty());  // every placed receive ended
  CHECK(bad_payloads.load() == 0);
  CHECK(c.total_received.load() == 3 * n);
  CHECK(c.total_sent.load() == 3 * n);
  CHECK(c.wrong() == 0);
}
