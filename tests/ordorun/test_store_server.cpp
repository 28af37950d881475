// The store's protocol and its defences against clients that misbehave, served on loopback
// by a StoreServer on its own EventLoop, driven from the test's thread.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/store_protocol.hpp"
#include "store_server.hpp"

namespace store = ordo::comm::store;
using namespace std::chrono_literals;
using ordorun::EventLoop;
using ordorun::StoreLimits;
using ordorun::StoreServer;

namespace {

const std::string token = "0123456789abcdef0123456789abcdef";

std::vector<std::byte> bytes(const std::string& s) {
  return std::vector<std::byte>(reinterpret_cast<const std::byte*>(s.data()),
                                reinterpret_cast<const std::byte*>(s.data()) + s.size());
}

std::vector<std::byte> request(store::Op op, const std::string& key, const std::string& value = "") {
  return store::encode_request(op, key, reinterpret_cast<const std::byte*>(value.data()), value.size());
}

std::vector<std::byte> ok(const std::string& value = "") {
  return store::encode_response(store::Status::ok, bytes(value));
}

// Appends `n` bad_request answers to `out`.
void append_refusals(std::vector<std::byte>& out, int n) {
  for (int i = 0; i < n; ++i) {
    const auto r = store::encode_response(store::Status::bad_request, {});
    out.insert(out.end(), r.begin(), r.end());
  }
}

// A blocking-connect, non-blocking-read client of the store.
struct Client {
  int fd = -1;
  std::vector<std::byte> got;
  bool closed = false;

  // `from`: the local address to connect from (any of 127/8 is this host's), else the kernel's.
  explicit Client(const std::string& endpoint, const char* from = nullptr) {
    const auto colon = endpoint.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(std::uint16_t(std::stoi(endpoint.substr(colon + 1))));
    ::inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &a.sin_addr);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      ::inet_pton(AF_INET, from, &local.sin_addr);
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0);
    }
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~Client() {
    if (fd >= 0) ::close(fd);
  }
  // False when the server has closed the connection (or reset it).
  bool send(const std::vector<std::byte>& b) {
    return ::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == ssize_t(b.size());
  }
  void poll_in() {
    std::byte buf[4096];
    for (;;) {
      const ssize_t k = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k > 0) {
        got.insert(got.end(), buf, buf + k);
        continue;
      }
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) closed = true;
      return;
    }
  }
};

struct Fixture {
  EventLoop loop;
  std::vector<int> hellos;
  std::unique_ptr<StoreServer> server;
  explicit Fixture(StoreLimits limits = {}, int ranks = 2) {
    server = std::make_unique<StoreServer>(loop, token, ranks, std::vector<std::string>{"127.0.0.1"}, limits,
                                           [this](int r) { hellos.push_back(r); });
  }
  std::string at() const { return server->endpoint(0); }
  // `a` and `b` say hello as ranks 0 and 1; returns once both are answered, answers dropped.
  void say_hello(Client& a, Client& b) {
    REQUIRE(a.send(request(store::Op::hello, "0", token)));
    REQUIRE(b.send(request(store::Op::hello, "1", token)));
    REQUIRE(drive([&] { a.poll_in(); b.poll_in(); return a.got.size() >= 5 && b.got.size() >= 5; }));
    a.got.clear();
    b.got.clear();
  }
  // Runs the loop until done() or the time is up; returns done().
  bool drive(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    const auto end = EventLoop::Clock::now() + limit;
    while (!done() && EventLoop::Clock::now() < end) {
      loop.at(EventLoop::Clock::now() + 5ms, [] {});  // bounds each turn's wait
      loop.run_once();
    }
    return done();
  }
  // What `c` has been answered after the loop ran a while: a request the store parks must
  // leave it unchanged.
  const std::vector<std::byte>& settled(Client& c) {
    drive([] { return false; }, 50ms);
    c.poll_in();
    return c.got;
  }
};

}  // namespace

TEST_CASE("a rank that says hello may put and get; a get waits for its put", "[ordorun][store]") {
  Fixture f;
  Client a(f.at()), b(f.at());
  REQUIRE(a.send(request(store::Op::hello, "0", token)));
  REQUIRE(b.send(request(store::Op::hello, "1", token)));
  REQUIRE(b.send(request(store::Op::get, "k")));  // before the put: parked
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= 5; }));
  CHECK(f.settled(b) == ok());  // the hello's answer only: the get is parked
  REQUIRE(a.send(request(store::Op::put, "k", "value")));
  const auto want_b = [&] { auto w = ok(); auto v = ok("value"); w.insert(w.end(), v.begin(), v.end()); return w; }();
  REQUIRE(f.drive([&] { a.poll_in(); b.poll_in(); return b.got.size() >= want_b.size() && a.got.size() >= 10; }));
  CHECK(b.got == want_b);
  auto want_a = ok();
  auto put_ok = ok();
  want_a.insert(want_a.end(), put_ok.begin(), put_ok.end());
  CHECK(a.got == want_a);
  CHECK(f.hellos == std::vector<int>{0, 1});
  // A later put overwrites; gets are answered in the order they were asked.
  REQUIRE(a.send(request(store::Op::put, "k", "second")));
  REQUIRE(b.send(request(store::Op::get, "missing")));
  REQUIRE(b.send(request(store::Op::get, "k")));
  f.drive([&] { return false; }, 100ms);
  b.poll_in();
  CHECK(b.got == want_b);  // "k" waits behind "missing"
  REQUIRE(a.send(request(store::Op::put, "missing", "m")));
  auto want_more = want_b;
  for (const char* v : {"m", "second"}) {
    auto r = ok(v);
    want_more.insert(want_more.end(), r.begin(), r.end());
  }
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= want_more.size(); }));
  CHECK(b.got == want_more);
}

TEST_CASE("a get_range is answered once, with every key of the range, in its turn", "[ordorun][store]") {
  Fixture f({}, 3);
  Client a(f.at()), b(f.at());
  f.say_hello(a, b);
  auto range = [](const std::string& prefix, std::uint32_t first, std::uint32_t count) {
    const std::vector<std::byte> v = store::encode_range(first, count);
    return store::encode_request(store::Op::get_range, prefix, v.data(), v.size());
  };
  // Keys p/1 and p/2 of p/1..p/3 (the third rank never puts p/3 before the end): parked.
  REQUIRE(b.send(range("p/", 1, 3)));
  REQUIRE(a.send(request(store::Op::put, "p/1", "one")));
  REQUIRE(a.send(request(store::Op::put, "p/2", "")));
  REQUIRE(f.drive([&] { a.poll_in(); return a.got.size() >= 10; }));
  CHECK(f.settled(b).empty());
  REQUIRE(a.send(request(store::Op::put, "p/3", "three")));
  std::vector<std::byte> entries;
  for (const char* v : {"one", "", "three"}) store::append_entry(entries, bytes(v));
  const auto want = store::encode_response(store::Status::ok, entries);
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= want.size(); }));
  CHECK(b.got == want);
  const auto parsed = store::parse_entries(entries, 3);
  REQUIRE(parsed.has_value());
  CHECK((*parsed)[2] == bytes("three"));
  CHECK_FALSE(store::parse_entries(entries, 2).has_value());  // an entry left over
  CHECK_FALSE(store::parse_entries(entries, 4).has_value());  // one missing
  entries.pop_back();
  CHECK_FALSE(store::parse_entries(entries, 3).has_value());  // the last one cut short
  // Refused: more keys than the job's ranks, a range past the largest key, a value that is not
  // 8 bytes. Each answer comes in its turn: behind a get still parked.
  b.got.clear();
  REQUIRE(b.send(request(store::Op::get, "later")));
  REQUIRE(b.send(range("q/", 0, 4)));
  REQUIRE(b.send(range("q/", 0xffffffffu, 2)));
  REQUIRE(b.send(request(store::Op::get_range, "q/", "1234")));
  CHECK(f.settled(b).empty());
  REQUIRE(a.send(request(store::Op::put, "later", "x")));
  std::vector<std::byte> want_refusals = ok("x");
  append_refusals(want_refusals, 3);
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= want_refusals.size(); }));
  CHECK(b.got == want_refusals);
  CHECK(f.server->requests_per_rank() == std::vector<std::uint64_t>{4, 5, 0});
}

TEST_CASE("get_runs sends equal values of consecutive keys once; get_list answers at once, "
          "missing keys and indices past the ranks refused", "[ordorun][store]") {
  Fixture f({}, 4);
  Client a(f.at()), b(f.at());
  f.say_hello(a, b);
  const std::vector<std::byte> all4 = store::encode_range(0, 4);
  // Parked until the fourth key: runs "x" x1, "y" x2, "x" x1 (equal but not consecutive).
  REQUIRE(b.send(store::encode_request(store::Op::get_runs, "h/", all4.data(), all4.size())));
  for (const auto& [k, v] : {std::pair{"h/0", "x"}, {"h/1", "y"}, {"h/2", "y"}})
    REQUIRE(a.send(request(store::Op::put, k, v)));
  REQUIRE(f.drive([&] { a.poll_in(); return a.got.size() >= 15; }));
  CHECK(f.settled(b).empty());
  REQUIRE(a.send(request(store::Op::put, "h/3", "x")));
  std::vector<std::byte> runs;
  store::append_run(runs, 1, bytes("x"));
  store::append_run(runs, 2, bytes("y"));
  store::append_run(runs, 1, bytes("x"));
  const auto want_runs = store::encode_response(store::Status::ok, runs);
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= want_runs.size(); }));
  CHECK(b.got == want_runs);
  REQUIRE(store::parse_runs(runs, 4).has_value());

  auto list = [](const std::vector<std::uint32_t>& indices) {
    const std::vector<std::byte> v = store::encode_list(indices);
    return store::encode_request(store::Op::get_list, "h/", v.data(), v.size());
  };
  b.got.clear();
  // In the order asked; h/1 twice.
  REQUIRE(b.send(list({3, 1, 1})));
  std::vector<std::byte> entries;
  for (const char* v : {"x", "y", "y"}) store::append_entry(entries, bytes(v));
  const auto want_list = store::encode_response(store::Status::ok, entries);
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= want_list.size(); }));
  CHECK(b.got == want_list);
  // In its turn behind a parked get, and then at once: a key nobody put is answered missing
  // (naming it), never waited for; an index past the ranks, more indices than ranks, or a
  // count that lies about the indices that follow are refused.
  b.got.clear();
  REQUIRE(b.send(request(store::Op::get, "later")));
  const std::vector<std::byte> lying = store::encode_list({1, 2});
  REQUIRE(b.send(store::encode_request(store::Op::get_list, "h/", lying.data(), lying.size() - 4)));
  REQUIRE(b.send(list({0, 4})));
  REQUIRE(b.send(list({0, 0, 0, 0, 0})));
  REQUIRE(b.send(store::encode_request(store::Op::get_list, "none/", store::encode_list({2}).data(), 8)));
  CHECK(f.settled(b).empty());
  REQUIRE(a.send(request(store::Op::put, "later", "z")));
  std::vector<std::byte> want = ok("z");
  append_refusals(want, 3);
  const auto missing = store::encode_response(store::Status::missing, bytes("none/2"));
  want.insert(want.end(), missing.begin(), missing.end());
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= want.size(); }));
  CHECK(b.got == want);
  // What the store sent each rank, counted: b got every answer above, a its puts' (and each
  // its hello's).
  const auto& sent = f.server->bytes_sent_per_rank();
  CHECK(sent[0] == 5 * 6);
  CHECK(sent[1] == 5 + want_runs.size() + want_list.size() + want.size());
  CHECK(sent[2] == 0);
}

// Every rank of a collective parks the same get_runs (or get_range): the store looks its keys
// up and builds its answer once per pass, not once per rank. Before, each of N ranks' answers
// cost N lookups, and each parked rank looked the next key up again at every pass: O(N²) at
// start-up.
TEST_CASE("a collective's answer costs the store O(ranks) lookups, not one per key per rank",
          "[ordorun][store]") {
  constexpr int kRanks = 64;
  Fixture f({}, kRanks);
  std::vector<std::unique_ptr<Client>> clients;
  const std::vector<std::byte> range = store::encode_range(0, kRanks);
  // Each rank's put of the same value and its get_runs of every rank's, in one send.
  auto join = [&](int r) {
    std::vector<std::byte> both = request(store::Op::put, "ag/0/" + std::to_string(r), "host");
    const auto get = store::encode_request(store::Op::get_runs, "ag/0/", range.data(), range.size());
    both.insert(both.end(), get.begin(), get.end());
    REQUIRE(clients[std::size_t(r)]->send(both));
  };
  for (int r = 0; r < kRanks; ++r) {
    clients.push_back(std::make_unique<Client>(f.at()));
    REQUIRE(clients.back()->send(request(store::Op::hello, std::to_string(r), token)));
  }
  for (int r = 0; r + 1 < kRanks; ++r) join(r);
  // Every rank but the last has its hello and put answered, its get_runs parked.
  REQUIRE(f.drive([&] {
    for (int r = 0; r + 1 < kRanks; ++r) {
      clients[std::size_t(r)]->poll_in();
      if (clients[std::size_t(r)]->got.size() < 10) return false;
    }
    return true;
  }));
  const std::uint64_t parking = f.server->key_lookups();
  join(kRanks - 1);
  std::vector<std::byte> runs;
  store::append_run(runs, kRanks, bytes("host"));
  const auto answer = store::encode_response(store::Status::ok, runs);
  REQUIRE(f.drive([&] {
    for (auto& c : clients) {
      c->poll_in();
      if (c->got.size() < 10 + answer.size()) return false;
    }
    return true;
  }));
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    std::vector<std::byte> got(clients[std::size_t(r)]->got.begin() + 10, clients[std::size_t(r)]->got.end());
    CHECK(got == answer);
  }
  // While they park: each key found once, and one miss per pass (a pass per event). The pass
  // that answers: the last key and the answer's 64, for all 64 ranks. One lookup per key per
  // rank would be 4096 there alone.
  INFO("lookups while parking " << parking << ", answering " << f.server->key_lookups() - parking);
  CHECK(parking <= 8 * kRanks);
  CHECK(f.server->key_lookups() - parking <= 2 * kRanks);
}

// The ranks of a collective that ask only after its last put (each rank's put answered, then
// its get_runs, one pass each): the answer is built once, not once per rank.
TEST_CASE("a collective asked for after its last put is answered from one build, not one per rank",
          "[ordorun][store]") {
  constexpr int kRanks = 64;
  Fixture f({}, kRanks);
  std::vector<std::unique_ptr<Client>> clients;
  for (int r = 0; r < kRanks; ++r) {
    clients.push_back(std::make_unique<Client>(f.at()));
    REQUIRE(clients.back()->send(request(store::Op::hello, std::to_string(r), token)));
    REQUIRE(clients.back()->send(request(store::Op::put, "ag/0/" + std::to_string(r), "host")));
  }
  REQUIRE(f.drive([&] {
    for (auto& c : clients) {
      c->poll_in();
      if (c->got.size() < 10) return false;
    }
    return true;
  }));
  const std::uint64_t before = f.server->key_lookups();
  const std::vector<std::byte> range = store::encode_range(0, kRanks);
  std::vector<std::byte> runs;
  store::append_run(runs, kRanks, bytes("host"));
  const auto answer = store::encode_response(store::Status::ok, runs);
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    Client& c = *clients[std::size_t(r)];
    REQUIRE(c.send(store::encode_request(store::Op::get_runs, "ag/0/", range.data(), range.size())));
    REQUIRE(f.drive([&] { c.poll_in(); return c.got.size() >= 10 + answer.size(); }));
    CHECK(std::vector<std::byte>(c.got.begin() + 10, c.got.end()) == answer);
  }
  // Building the answer looks each key up twice (is it there, what is it); one build per rank
  // would be 2 * 64 * 64.
  INFO("lookups " << f.server->key_lookups() - before);
  CHECK(f.server->key_lookups() - before <= 3 * kRanks);
}

TEST_CASE("a put to a key of a range already answered changes the next answer", "[ordorun][store]") {
  Fixture f;
  Client a(f.at()), b(f.at());
  f.say_hello(a, b);
  const std::vector<std::byte> range = store::encode_range(0, 2);
  const auto ask = store::encode_request(store::Op::get_runs, "h/", range.data(), range.size());
  auto answer_of = [](std::vector<std::pair<std::uint32_t, std::string>> runs) {
    std::vector<std::byte> value;
    for (auto& [count, v] : runs) store::append_run(value, count, bytes(v));
    return store::encode_response(store::Status::ok, value);
  };
  REQUIRE(a.send(request(store::Op::put, "h/0", "x")));
  REQUIRE(b.send(request(store::Op::put, "h/1", "x")));
  REQUIRE(f.drive([&] { a.poll_in(); b.poll_in(); return a.got.size() >= 5 && b.got.size() >= 5; }));
  a.got.clear();
  REQUIRE(a.send(ask));
  const auto same = answer_of({{2, "x"}});
  REQUIRE(f.drive([&] { a.poll_in(); return a.got.size() >= same.size(); }));
  CHECK(a.got == same);
  // b overwrites its value; a asks again, then b.
  REQUIRE(b.send(request(store::Op::put, "h/1", "y")));
  REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= 10; }));
  const auto changed = answer_of({{1, "x"}, {1, "y"}});
  for (Client* c : {&a, &b}) {
    c->got.clear();
    REQUIRE(c->send(ask));
    REQUIRE(f.drive([&] { c->poll_in(); return c->got.size() >= changed.size(); }));
    CHECK(c->got == changed);
  }
}

// The ranges the store keeps are bounded: past max_ranges_kept, the one asked for least
// recently is forgotten, and asking for it again looks its keys up again.
TEST_CASE("the store keeps at most max_ranges_kept ranges, forgetting the least recently asked",
          "[ordorun][store]") {
  Fixture f;
  Client a(f.at()), b(f.at());
  f.say_hello(a, b);
  constexpr std::size_t kKept = StoreServer::max_ranges_kept;
  const std::vector<std::byte> one = store::encode_range(0, 1);
  std::vector<std::byte> runs;
  store::append_run(runs, 1, bytes("v"));
  const auto answer = store::encode_response(store::Status::ok, runs);
  auto prefix = [](std::size_t i) { return "r" + std::to_string(i) + "/"; };
  a.got.clear();
  for (std::size_t i = 0; i <= kKept; ++i) REQUIRE(a.send(request(store::Op::put, prefix(i) + "0", "v")));
  REQUIRE(f.drive([&] { a.poll_in(); return a.got.size() >= 5 * (kKept + 1); }));
  // Asks for range i; the key lookups its answer cost.
  auto ask = [&](std::size_t i) {
    INFO("range " << i);
    const std::uint64_t before = f.server->key_lookups();
    b.got.clear();
    REQUIRE(b.send(store::encode_request(store::Op::get_runs, prefix(i), one.data(), one.size())));
    REQUIRE(f.drive([&] { b.poll_in(); return b.got.size() >= answer.size(); }));
    CHECK(b.got == answer);
    return f.server->key_lookups() - before;
  };
  CHECK(ask(0) > 0);
  CHECK(ask(0) == 0);  // kept
  for (std::size_t i = 1; i <= kKept; ++i) CHECK(ask(i) > 0);
  CHECK(ask(kKept) == 0);  // the latest are kept
  CHECK(ask(0) > 0);       // range 0, asked for least recently, was forgotten
}

// A rank that dies before its put leaves its peers parked on a get or get_range that no put
// will answer: ordorun's stop answers them, and every later get for a missing key, with why.
// Before, they waited until their bootstrap timeout or ordorun's SIGKILL, whichever came first.
TEST_CASE("a stopping job answers the gets that wait, and later ones, with why", "[ordorun][store]") {
  Fixture f(StoreLimits{}, 3);
  Client a(f.at()), b(f.at());
  REQUIRE(a.send(request(store::Op::hello, "0", token)));
  REQUIRE(b.send(request(store::Op::hello, "2", token)));
  REQUIRE(a.send(request(store::Op::put, "ag/0/0", "mine")));
  REQUIRE(b.send(request(store::Op::get, "ag/0/1")));  // rank 1 never puts it
  const std::vector<std::byte> all = store::encode_range(0, 3);
  REQUIRE(b.send(store::encode_request(store::Op::get_range, "ag/0/", all.data(), all.size())));
  REQUIRE(f.drive([&] { a.poll_in(); b.poll_in(); return a.got.size() >= 10 && b.got.size() >= 5; }));
  REQUIRE(f.settled(b) == ok());  // parked
  const std::string why = "rank 1 (pid 4242 on host n1) exited with status 5";
  f.server->stop_job(why);
  f.server->stop_job("a later reason");  // the first one stays
  const auto stopping = store::encode_response(store::Status::job_stopping, bytes(why));
  auto want_b = ok();
  for (int i = 0; i < 2; ++i) want_b.insert(want_b.end(), stopping.begin(), stopping.end());
  CHECK(f.drive([&] { b.poll_in(); return b.got.size() >= want_b.size(); }));
  CHECK(b.got == want_b);
  // Later: a key with a value is still answered with it, one without at once with why.
  REQUIRE(b.send(request(store::Op::get, "ag/0/0")));
  REQUIRE(b.send(request(store::Op::get, "ag/1/1")));
  for (const auto& r : {ok("mine"), stopping}) want_b.insert(want_b.end(), r.begin(), r.end());
  CHECK(f.drive([&] { b.poll_in(); return b.got.size() >= want_b.size(); }));
  CHECK(b.got == want_b);
}

TEST_CASE("the store drops a client that does not say hello with the job's token and rank", "[ordorun][store]") {
  Fixture f;
  std::vector<std::pair<std::string, std::vector<std::vector<std::byte>>>> cases = {
      {"a put first", {request(store::Op::put, "k", "v")}},
      {"a get first", {request(store::Op::get, "k")}},
      {"a wrong token", {request(store::Op::hello, "0", "0123456789abcdef0123456789abcdee")}},
      {"a token prefix", {request(store::Op::hello, "0", token.substr(0, 31))}},
      {"a rank outside the job", {request(store::Op::hello, "2", token)}},
      {"a rank that is not a number", {request(store::Op::hello, "-1", token)}},
      {"an empty rank", {request(store::Op::hello, "", token)}},
      {"a rank with a leading zero", {request(store::Op::hello, "01", token)}},
      {"rank 0 spelt with two zeros", {request(store::Op::hello, "00", token)}},
      {"a rank padded to the longest hello key", {request(store::Op::hello, "0000000001", token)}},
      {"an unknown operation", {{std::byte{9}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                 std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}}}},
  };
  std::vector<std::byte> refusal;
  append_refusals(refusal, 1);
  for (auto& [what, msgs] : cases) {
    INFO(what);
    Client c(f.at());
    for (auto& m : msgs) c.send(m);
    c.send(request(store::Op::put, "k", "v"));
    CHECK(f.drive([&] { c.poll_in(); return c.closed; }));
    // A refused hello is answered so before the drop (a rank reports it rather than retrying);
    // anything else gets nothing.
    const bool is_hello = msgs.front().front() == std::byte(store::Op::hello);
    CHECK(c.got == (is_hello ? refusal : std::vector<std::byte>{}));
  }
  CHECK(f.hellos.empty());
  {
    INFO("a second hello on an authenticated connection");
    Client c(f.at());
    c.send(request(store::Op::hello, "0", token));
    REQUIRE(f.drive([&] { c.poll_in(); return c.got.size() >= 5; }));
    c.send(request(store::Op::hello, "1", token));
    CHECK(f.drive([&] { c.poll_in(); return c.closed; }));
    CHECK(c.got == ok());
  }
  CHECK(f.drive([&] { return f.server->client_count() == 0; }));
}

TEST_CASE("a stranger cannot make the store hold more than a hello", "[ordorun][store]") {
  Fixture f;
  const std::size_t hello_max = store::request_header_bytes + store::max_hello_key + store::max_token;
  std::vector<std::unique_ptr<Client>> strangers;
  // Forty strangers announce a hello of 1 MiB and send it: each is dropped after its header.
  std::vector<std::byte> big = request(store::Op::hello, "0", std::string(1 << 20, 'x'));
  for (int i = 0; i < 40; ++i) {
    strangers.push_back(std::make_unique<Client>(f.at()));
    ::send(strangers.back()->fd, big.data(), 64 * 1024, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  std::size_t most = 0;
  CHECK(f.drive([&] {
    most = std::max(most, f.server->buffered_bytes());
    bool all = true;
    for (auto& s : strangers) {
      s->poll_in();
      all = all && s->closed;
    }
    return all;
  }));
  CHECK(most <= 40 * hello_max);
  // Forty more send a plausible hello's first bytes and stop: held, but at most a hello each.
  strangers.clear();
  for (int i = 0; i < 40; ++i) {
    strangers.push_back(std::make_unique<Client>(f.at()));
    auto part = request(store::Op::hello, "0", std::string(store::max_token, 'y'));
    part.resize(100);
    strangers.back()->send(part);
  }
  f.drive([&] { return false; }, 200ms);
  CHECK(f.server->pending_count() == 40);
  CHECK(f.server->buffered_bytes() <= 40 * hello_max);
  CHECK(f.hellos.empty());
}

TEST_CASE("a client that does not authenticate in time is dropped", "[ordorun][store]") {
  StoreLimits limits;
  limits.auth_timeout = 200ms;
  Fixture f(limits);
  // One says nothing, the other stops in the middle of its hello.
  Client silent(f.at()), slow(f.at());
  auto hello = request(store::Op::hello, "1", token);
  hello.resize(12);
  slow.send(hello);
  const auto start = EventLoop::Clock::now();
  REQUIRE(f.drive([&] { silent.poll_in(); slow.poll_in(); return silent.closed && slow.closed; }));
  CHECK(EventLoop::Clock::now() - start >= 150ms);
  CHECK(f.hellos.empty());
  // An authenticated client is never timed out.
  Client good(f.at());
  good.send(request(store::Op::hello, "0", token));
  f.drive([&] { return false; }, 500ms);
  good.poll_in();
  CHECK_FALSE(good.closed);
  CHECK(f.hellos == std::vector<int>{0});
}

TEST_CASE(
    "pending connections are capped; a rank gets in at once, the oldest strangers making room",
    "[ordorun][store]") {
  StoreLimits limits;
  limits.max_pending = 4;
  limits.auth_timeout = 10s;  // longer than the test: no stranger leaves by its deadline
  Fixture f(limits);
  std::vector<std::unique_ptr<Client>> strangers;
  for (int i = 0; i < 12; ++i) strangers.push_back(std::make_unique<Client>(f.at()));
  std::size_t most = 0;
  f.drive([&] { most = std::max(most, f.server->pending_count()); return false; }, 200ms);
  CHECK(most == 4);
  Client rank(f.at());  // behind the strangers
  rank.send(request(store::Op::hello, "1", token));
  const auto start = EventLoop::Clock::now();
  REQUIRE(f.drive([&] {
    most = std::max(most, f.server->pending_count());
    rank.poll_in();
    return rank.got.size() >= 5;
  }, 10s));
  CHECK(EventLoop::Clock::now() - start < 2s);
  CHECK(rank.got == ok());
  CHECK(most <= 4);
  // The oldest strangers made room (8 for the strangers, one for the rank), the newest are
  // still held.
  int closed = 0;
  for (auto& s : strangers) {
    s->poll_in();
    closed += s->closed ? 1 : 0;
  }
  CHECK(closed == 9);
  CHECK_FALSE(strangers.back()->closed);
}

TEST_CASE("one address's flood pushes out its own pending connections, not another's",
          "[ordorun][store]") {
  StoreLimits limits;
  limits.max_pending = 8;
  limits.max_pending_per_address = 4;
  limits.auth_timeout = 10s;
  Fixture f(limits);
  // Two connections from 127.0.0.3, then a flood from 127.0.0.2 (loopback: both this host).
  Client quiet_a(f.at(), "127.0.0.3"), quiet_b(f.at(), "127.0.0.3");
  f.drive([&] { return f.server->pending_count() == 2; });
  std::vector<std::unique_ptr<Client>> flood;
  for (int i = 0; i < 20; ++i) flood.push_back(std::make_unique<Client>(f.at(), "127.0.0.2"));
  std::size_t most = 0;
  f.drive(
      [&] {
        most = std::max(most, f.server->pending_count());
        return false;
      },
      300ms);
  quiet_a.poll_in();
  quiet_b.poll_in();
  CHECK_FALSE(quiet_a.closed);
  CHECK_FALSE(quiet_b.closed);
  CHECK(most <= 2 + 4);
  CHECK(f.server->pending_count() == 6);
  // Past the cap in all, the address with the most pending gives one up.
  std::vector<std::unique_ptr<Client>> others;
  for (const char* from : {"127.0.0.4", "127.0.0.5", "127.0.0.6"})
    others.push_back(std::make_unique<Client>(f.at(), from));
  f.drive([&] { return false; }, 300ms);
  CHECK(f.server->pending_count() == 8);
  quiet_a.poll_in();
  CHECK_FALSE(quiet_a.closed);
  for (auto& o : others) {
    o->poll_in();
    CHECK_FALSE(o->closed);
  }
}

TEST_CASE("each rank may hold only a few authenticated connections", "[ordorun][store]") {
  StoreLimits limits;
  limits.connections_per_rank = 2;
  Fixture f(limits);
  Client a(f.at()), b(f.at()), c(f.at());
  for (Client* x : {&a, &b, &c}) {
    x->send(request(store::Op::hello, "0", token));
    REQUIRE(f.drive([&] { x->poll_in(); return x->got.size() >= 5 || x->closed; }));
  }
  CHECK(a.got == ok());
  CHECK(b.got == ok());
  CHECK(c.closed);
  std::vector<std::byte> refusal;
  append_refusals(refusal, 1);
  CHECK(c.got == refusal);
  // One of them gone, the rank may connect again.
  ::close(a.fd);
  a.fd = -1;
  REQUIRE(f.drive([&] { return f.server->client_count() == 1; }));  // the store saw a go
  Client d(f.at());
  d.send(request(store::Op::hello, "0", token));
  REQUIRE(f.drive([&] { d.poll_in(); return d.got.size() >= 5 || d.closed; }));
  CHECK(d.got == ok());
}

TEST_CASE("out of descriptors, the store backs off instead of spinning", "[ordorun][store]") {
  StoreLimits limits;
  limits.accept_backoff = 100ms;
  Fixture f(limits);
  // Connections wait in the kernel's backlog before the limit is lowered (a client's socket
  // needs a descriptor too).
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(std::make_unique<Client>(f.at()));
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  // Fill the holes below the highest open descriptor (earlier tests closed some), so that the
  // limit below leaves room for exactly two more.
  int highest = 0;
  for (int fd = 0; fd < 4096; ++fd)
    if (::fcntl(fd, F_GETFD) != -1) highest = fd;
  std::vector<int> fillers;
  for (;;) {
    const int fd = ::dup(0);
    REQUIRE(fd >= 0);
    if (fd > highest) {
      ::close(fd);
      break;
    }
    fillers.push_back(fd);
  }
  rlimit low = old;
  low.rlim_cur = rlim_t(highest + 3);  // room for two accepted connections
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  int turns = 0;
  const auto start = EventLoop::Clock::now();
  while (EventLoop::Clock::now() - start < 500ms) {
    f.loop.at(EventLoop::Clock::now() + 1s, [] {});  // only the store's own timers matter
    f.loop.run_once();
    ++turns;
  }
  const std::size_t held = f.server->client_count();
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  for (int fd : fillers) ::close(fd);
  // With the back-off: a turn per retry (about 5 in 500 ms); spinning: thousands.
  CHECK(turns < 50);
  CHECK(held <= 2);
  // With descriptors again, every client is accepted.
  // With descriptors again, the clients still connected are accepted (the store dropped the
  // oldest pending ones to make room while it could not).
  std::size_t alive = 0;
  CHECK(f.drive([&] {
    alive = 0;
    for (auto& c : clients) {
      c->poll_in();
      alive += c->closed ? 0 : 1;
    }
    return f.server->client_count() == alive;
  }));
  CHECK(alive >= 1);
}
