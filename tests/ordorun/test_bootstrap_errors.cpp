// How a rank's store bootstrap (comm/bootstrap.cpp) ends when the store's answer is not the
// one it waits for: ordorun stopping the job while the rank waits in a later collective (no
// start-up deadline bounds that wait: without job_stopping it would wait for ever), and
// replies that do not add up (a collective's without one entry per rank, the start-up
// exchange's runs, a get_list's entries). Ranks are threads, the store is ordorun's
// (tools/ordorun) or, for the replies no ordorun sends, a scripted one.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap.hpp"
#include "comm/store_protocol.hpp"
#include "event_loop.hpp"
#include "store_server.hpp"

using namespace std::chrono_literals;
namespace store = ordo::comm::store;

namespace {

const std::string token = "0123456789abcdef0123456789abcdef";

ordo::comm::Blob blob(const std::string& s) {
  ordo::comm::Blob out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// A store that answers every request of `op` with `answer` and `status` (what no ordorun
// sends), and any other request with ok and nothing. Serves each connection on a thread of its
// own until the client closes it; the first `drop_first` connections it closes at once, as
// ordorun's store does to make room under a stranger's flood.
class ScriptedStore {
 public:
  ScriptedStore(store::Op op, std::vector<std::byte> answer, int drop_first = 0,
                store::Status status = store::Status::ok)
      : op_(op), answer_(std::move(answer)), drop_first_(drop_first), status_(status) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 8) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    endpoint_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    acceptor_ = std::thread([this] {
      for (;;) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;  // the listener was shut down
        if (drop_first_ > 0) {
          --drop_first_;
          ::close(fd);
          continue;
        }
        connections_.emplace_back([this, fd] { serve(fd); });
      }
    });
  }
  ~ScriptedStore() {
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    ::close(listener_);
    for (auto& t : connections_) t.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void serve(int fd) {
    std::vector<std::byte> in;
    std::byte chunk[4096];
    for (;;) {
      const ssize_t k = ::recv(fd, chunk, sizeof chunk, 0);
      if (k <= 0) break;
      in.insert(in.end(), chunk, chunk + k);
      std::size_t used = 0;
      bool bad = false;
      while (std::optional<store::Request> r = store::parse_request(in, used, bad)) {
        in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(used));
        const auto reply =
            store::encode_response(r->op == op_ ? status_ : store::Status::ok,
                                   r->op == op_ ? answer_ : std::vector<std::byte>{});
        if (::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) != ssize_t(reply.size())) break;
      }
      if (bad) break;
    }
    ::close(fd);
  }

  store::Op op_;
  std::vector<std::byte> answer_;
  int drop_first_;  // the acceptor's only
  store::Status status_;
  int listener_ = -1;
  std::string endpoint_;
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // appended by the acceptor only, joined after it
};

}  // namespace

TEST_CASE("a rank waiting in a later collective ends with ordorun's reason when it stops the job",
          "[ordorun][store]") {
  ordorun::EventLoop loop;
  auto server = std::make_unique<ordorun::StoreServer>(loop, token, 2,
                                                       std::vector<std::string>{"127.0.0.1"},
                                                       ordorun::StoreLimits{}, nullptr);
  const std::string at = server->endpoint(0);
  std::atomic<int> done{0};
  std::string rank0_error, rank1_error;
  std::unique_ptr<ordo::comm::Bootstrap> boot1;
  std::thread rank0([&] {
    try {
      auto boot = ordo::comm::Bootstrap::store(0, 2, at, 20s, token);
      boot->allgather(blob("first"));
      boot->allgather(blob("second"));  // rank 1 never joins this one
      rank0_error = "the second collective completed";
    } catch (const std::exception& e) {
      rank0_error = e.what();
    }
    done.fetch_add(1);
  });
  std::thread rank1([&] {
    try {
      boot1 = ordo::comm::Bootstrap::store(1, 2, at, 20s, token);
      boot1->allgather(blob("first"));
    } catch (const std::exception& e) {
      rank1_error = e.what();
    }
    done.fetch_add(1);
  });
  // Once rank 0's get_range of the second collective is parked (its fourth request after its
  // hello: a put and a get_range per collective), ordorun stops the job; at the latest after
  // 60 s, so that the test ends either way.
  const auto end = ordorun::EventLoop::Clock::now() + 60s;
  std::optional<std::uint64_t> requests_at_stop;
  while (done.load() < 2 && ordorun::EventLoop::Clock::now() < end + 20s) {
    loop.at(ordorun::EventLoop::Clock::now() + 5ms, [] {});  // bounds each turn's wait
    loop.run_once();
    if (!requests_at_stop && (server->requests_per_rank()[0] == 4 ||
                              ordorun::EventLoop::Clock::now() >= end)) {
      requests_at_stop = server->requests_per_rank()[0];
      server->stop_job("rank 1 was killed by signal 9");
    }
  }
  if (done.load() < 2) server.reset();  // closes the connections: a rank still waiting ends
  rank0.join();
  rank1.join();
  CHECK(requests_at_stop == std::optional<std::uint64_t>(4));
  CHECK(rank1_error == "");
  CHECK(rank0_error ==
        "comm: rank 0 stopped waiting for every rank's part of collective 1: ordorun is "
        "stopping the job (rank 1 was killed by signal 9)");
  boot1.reset();
}

TEST_CASE("a collective's reply without one entry per rank is refused, naming the sizes",
          "[ordorun][store]") {
  // Rank 0 of 2 gets one well-formed entry, then 3 stray bytes.
  std::vector<std::byte> answer;
  store::append_entry(answer, blob("only one"));
  answer.resize(answer.size() + 3);
  const std::size_t size = answer.size();
  ScriptedStore fake(store::Op::get_range, std::move(answer));
  auto boot = ordo::comm::Bootstrap::store(0, 2, fake.endpoint(), 20s, token);
  CHECK_THROWS_WITH(boot->allgather(blob("mine")),
                    "comm: ordorun's store answered rank 0's collective with a malformed reply (" +
                        std::to_string(size) + " bytes for 2 ranks); is ordorun the same ordo "
                        "build as the program?");
}

TEST_CASE("a start-up exchange whose runs do not cover the ranks is refused, naming the sizes",
          "[ordorun][store]") {
  // One run of one rank, for a job of 2.
  std::vector<std::byte> answer;
  store::append_run(answer, 1, blob("host"));
  const std::size_t size = answer.size();
  ScriptedStore fake(store::Op::get_runs, std::move(answer));
  auto boot = ordo::comm::Bootstrap::store(0, 2, fake.endpoint(), 20s, token);
  const ordo::comm::Blob own[] = {blob("address")};
  CHECK_THROWS_WITH(boot->exchange(blob("host"), own),
                    "comm: ordorun's store answered rank 0's start-up exchange with a malformed "
                    "reply (" + std::to_string(size) + " bytes for 2 ranks); is ordorun the same "
                    "ordo build as the program?");
}

TEST_CASE("a get_list reply whose entry claims more bytes than it holds is refused",
          "[ordorun][store]") {
  std::vector<std::byte> answer(4 + 3, std::byte{0});
  answer[3] = std::byte{100};  // the entry's length (big-endian): 100 bytes claimed, 3 there
  ScriptedStore fake(store::Op::get_list, std::move(answer));
  auto boot = ordo::comm::Bootstrap::store(0, 2, fake.endpoint(), 20s, token);
  const int one = 1;
  CHECK_THROWS_WITH(boot->fetch(0, std::span(&one, 1)),
                    "comm: ordorun's store answered rank 0's request for 1 record(s) with a "
                    "malformed reply (7 bytes); is ordorun the same ordo build as the program?");
}

// A connection closed before its hello is answered is the store making room under a flood of
// strangers: the rank connects again (its request connection and its lifeline both), instead
// of giving up at the first drop.
TEST_CASE("a rank whose connection is dropped before its hello is answered connects again",
          "[ordorun][bootstrap]") {
  ScriptedStore s(store::Op::get_list, {}, 3);
  std::unique_ptr<ordo::comm::Bootstrap> b;
  REQUIRE_NOTHROW(b = ordo::comm::Bootstrap::store(0, 1, s.endpoint(), 10s, token));
  CHECK(b->rank() == 0);
}

// A refused hello (a wrong token, a rank outside the job) is said so at once: not retried until
// the bootstrap timeout, and not mistaken for a drop.
TEST_CASE("a hello the store refuses ends the rank at once, saying so", "[ordorun][bootstrap]") {
  ScriptedStore s(store::Op::hello, {}, 0, store::Status::bad_request);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(
      ordo::comm::Bootstrap::store(0, 2, s.endpoint(), 10s, token),
      Catch::Contains("refused rank 0's hello") && Catch::Contains("ORDO_STORE_TOKEN"));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

// A store whose backlog is full (a stranger holds every slot and the store does not accept):
// the kernel drops the rank's SYNs and a blocking connect would wait through its retries, two
// minutes, whatever the bootstrap timeout. The rank's connects are bounded by it.
TEST_CASE("connecting to a store that accepts nothing ends within the bootstrap timeout",
          "[ordorun][bootstrap]") {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener, 0) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  // The stranger: connections that fill the accept queue, never accepted.
  std::vector<int> stranger;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    stranger.push_back(fd);
  }
  std::this_thread::sleep_for(200ms);
  // On a thread, so that a connect that ignores the timeout fails the test instead of hanging it.
  struct Outcome {
    std::atomic<bool> done{false};
    std::string error;
  };
  auto outcome = std::make_shared<Outcome>();
  const auto start = std::chrono::steady_clock::now();
  std::thread([outcome, endpoint] {
    try {
      auto b = ordo::comm::Bootstrap::store(0, 2, endpoint, 1500ms, token);
    } catch (const std::exception& e) {
      outcome->error = e.what();
    }
    outcome->done.store(true, std::memory_order_release);  // pairs with the acquire load below
  }).detach();
  while (!outcome->done.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() - start < 20s)
    std::this_thread::sleep_for(10ms);
  const auto took = std::chrono::steady_clock::now() - start;
  for (int fd : stranger) ::close(fd);
  ::close(listener);
  REQUIRE(outcome->done.load(std::memory_order_acquire));
  CHECK(took < 6s);
  CHECK_THAT(outcome->error, Catch::Contains("rank 0") && Catch::Contains("1500 ms"));
}
