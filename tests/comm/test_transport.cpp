// Single-process checks of comm/: the store wire format, the single bootstrap, and the
// transport over UCX's self transport (a rank sending to itself), including its misuse errors.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/address_book.hpp"
#include "comm/bootstrap.hpp"
#include "comm/store_protocol.hpp"
#include "comm/transport.hpp"

using namespace ordo::comm;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

}  // namespace

TEST_CASE("store requests round-trip and partial input waits", "[comm]") {
  const auto value = bytes_of("address-bytes");
  const auto wire = store::encode_request(store::Op::put, "ag/0/3", value.data(), value.size());
  std::size_t used = 0;
  bool bad = false;
  for (std::size_t cut = 0; cut < wire.size(); ++cut) {
    std::vector<std::byte> part(wire.begin(), wire.begin() + std::ptrdiff_t(cut));
    CHECK_FALSE(store::parse_request(part, used, bad).has_value());
    CHECK_FALSE(bad);
  }
  auto twice = wire;
  twice.insert(twice.end(), wire.begin(), wire.end());
  auto req = store::parse_request(twice, used, bad);
  REQUIRE(req.has_value());
  CHECK(used == wire.size());
  CHECK(req->op == store::Op::put);
  CHECK(req->key == "ag/0/3");
  CHECK(req->value == value);
}

TEST_CASE("store rejects malformed requests", "[comm]") {
  std::size_t used = 0;
  bool bad = false;
  auto wire = store::encode_request(store::Op::get, "k", nullptr, 0);
  wire[0] = std::byte{9};  // no such op
  CHECK_FALSE(store::parse_request(wire, used, bad).has_value());
  CHECK(bad);
  std::vector<std::byte> huge = {std::byte{2}, std::byte{0x7f}, std::byte{0}, std::byte{0}, std::byte{0},
                                 std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}};
  CHECK_FALSE(store::parse_request(huge, used, bad).has_value());
  CHECK(bad);
}

TEST_CASE("get_runs and get_list answers that lie about their sizes are refused", "[comm]") {
  const auto a = bytes_of("host-a"), b = bytes_of("host-b");
  std::vector<std::byte> good;
  store::append_run(good, 3, a);
  store::append_run(good, 1, b);
  auto runs = store::parse_runs(good, 4);
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 2);
  CHECK((*runs)[0].count == 3);
  CHECK((*runs)[0].value == a);
  CHECK((*runs)[1].count == 1);
  CHECK((*runs)[1].value == b);
  CHECK_FALSE(store::parse_runs(good, 5).has_value());  // covers 4 ranks, not 5
  CHECK_FALSE(store::parse_runs(good, 3).has_value());  // a run past the ranks asked for
  auto longer = good;
  longer.push_back(std::byte{0});  // a byte past the last run
  CHECK_FALSE(store::parse_runs(longer, 4).has_value());
  for (std::size_t cut = 0; cut < good.size(); ++cut)  // every truncation
    CHECK_FALSE(store::parse_runs(std::vector<std::byte>(good.begin(), good.begin() + std::ptrdiff_t(cut)), 4)
                    .has_value());
  std::vector<std::byte> lying;  // a length beyond what is there
  store::put_u32(lying, 1);
  store::put_u32(lying, 1000);
  CHECK_FALSE(store::parse_runs(lying, 1).has_value());
  std::vector<std::byte> empty_run;  // a run of no rank would never end
  store::append_run(empty_run, 0, a);
  CHECK_FALSE(store::parse_runs(empty_run, 1).has_value());

  const auto list = store::encode_list({4, 0, 7});
  CHECK(store::parse_list(list) == std::vector<std::uint32_t>{4, 0, 7});
  CHECK_FALSE(store::parse_list(std::vector<std::byte>(list.begin(), list.end() - 1)).has_value());
  auto more = list;
  store::put_u32(more, 9);  // one index more than the count says
  CHECK_FALSE(store::parse_list(more).has_value());
  CHECK_FALSE(store::parse_list({}).has_value());
}

TEST_CASE("single bootstrap is rank 0 of 1", "[comm]") {
  auto b = Bootstrap::single();
  CHECK(b->rank() == 0);
  CHECK(b->size() == 1);
  const auto mine = bytes_of("x");
  auto all = b->allgather(mine);
  REQUIRE(all.size() == 1);
  CHECK(all[0] == mine);
  b->barrier();
}

TEST_CASE("a fetch of a part of the start-up record that no rank gave is refused", "[comm]") {
  auto b = Bootstrap::single();
  const Blob own[] = {bytes_of("address")};
  const auto runs = b->exchange(bytes_of("host"), own);
  REQUIRE(runs.size() == 1);
  const int me = 0;
  CHECK(b->fetch(0, std::span(&me, 1)) == std::vector<Blob>{bytes_of("address")});
  CHECK_THROWS_WITH(b->fetch(1, std::span(&me, 1)),
                    "comm: rank 0 asked for part 1 of rank 0's start-up record, which it did not "
                    "give");
}

TEST_CASE("store bootstrap reports an unusable address", "[comm]") {
  CHECK_THROWS_AS(Bootstrap::store(0, 1, "no-port-here", std::chrono::milliseconds(100)), CommError);
  CHECK_THROWS_AS(Bootstrap::store(2, 2, "127.0.0.1:1", std::chrono::milliseconds(100)), CommError);
  // A local rank the launcher got wrong is refused before connecting, naming the variables.
  for (auto [local_rank, local_size] : {std::pair{2, 2}, {-1, 2}, {0, 0}, {0, 3}})
    CHECK_THROWS_WITH(Bootstrap::store(0, 2, "127.0.0.1:1", std::chrono::milliseconds(100), "",
                                       local_rank, local_size),
                      Catch::Contains("is not a valid rank of this host") &&
                          Catch::Contains("ORDO_LOCAL_RANK and ORDO_LOCAL_SIZE"));
  // Nothing listens on port 1: a clear error after the timeout, not a hang.
  CHECK_THROWS_WITH(Bootstrap::store(0, 2, "127.0.0.1:1", std::chrono::milliseconds(300)),
                    Catch::Contains("cannot reach ordorun's store"));
}

TEST_CASE("a rank sends to itself, eager and rendezvous", "[comm]") {
  auto boot = Bootstrap::single();
  TransportOptions opt;
  opt.rndv_threshold = 8192;
  Transport t(*boot, opt);
  std::vector<std::vector<std::byte>> got;
  std::size_t rendezvous = 0, done = 0;
  std::vector<std::unique_ptr<std::vector<std::byte>>> buffers;
  t.on_message(3, [&](Incoming& m) {
    CHECK(m.peer() == 0);
    CHECK(m.tag() == 3);
    REQUIRE(m.header().size() == sizeof(std::uint32_t));
    std::uint32_t n;
    std::memcpy(&n, m.header().data(), sizeof n);
    CHECK(m.payload_size() == n);
    if (m.is_rendezvous()) {
      ++rendezvous;
    } else if (n >= 8192) {
      FAIL_CHECK("a payload of " << n << " bytes, over the rendezvous threshold, came eagerly");
    }
    if (n <= 5) CHECK_FALSE(m.is_rendezvous());
    buffers.push_back(std::make_unique<std::vector<std::byte>>(m.payload_size()));
    auto* buf = buffers.back().get();
    m.receive_into(*buf, [&, buf](Status s) {
      CHECK(s == Status::ok);
      got.push_back(*buf);
    });
  });
  t.connect();
  const std::vector<std::uint32_t> sizes = {0, 5, 8191, 8192, 1u << 20};
  std::vector<std::vector<std::byte>> sent;
  std::vector<std::uint32_t> headers(sizes);
  for (std::uint32_t n : sizes) {
    std::vector<std::byte> p(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = std::byte((i * 7 + n) & 0xff);
    sent.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < sizes.size(); ++i)
    t.send(0, 3, std::as_bytes(std::span(&headers[i], 1)), sent[i], [&](Status s) {
      CHECK(s == Status::ok);
      ++done;
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((got.size() < sizes.size() || done < sizes.size()) && std::chrono::steady_clock::now() < deadline)
    t.wait_for_event(std::chrono::milliseconds(10));
  REQUIRE(got.size() == sizes.size());
  CHECK(done == sizes.size());
  // 8192 and 1 MiB are at or over the threshold; UCX may count its header against it for 8191.
  CHECK(rendezvous >= 2);
  // Self delivery keeps order; compare as multisets anyway so the check is about bytes only.
  auto key = [](const std::vector<std::byte>& v) { return v.size(); };
  std::sort(got.begin(), got.end(), [&](auto& a, auto& b) { return key(a) < key(b); });
  CHECK(got == sent);
  t.close();
}

TEST_CASE("transport misuse is reported, not crashed on", "[comm]") {
  auto boot = Bootstrap::single();
  Transport t(*boot);
  const std::byte one[1] = {std::byte{1}};
  CHECK_THROWS_AS(t.send(0, 1, {}, one, nullptr), CommError);  // before connect()
  t.connect();
  CHECK_THROWS_WITH(t.send(1, 1, {}, one, nullptr), Catch::Contains("ranks 0..0"));
  std::vector<std::byte> big(t.max_header_size() + 1);
  CHECK_THROWS_WITH(t.send(0, 1, big, {}, nullptr), Catch::Contains("exceeds"));
  bool small_buffer_threw = false;
  t.on_message(1, [&](Incoming& m) {
    std::byte tiny[1];
    try {
      m.receive_into(std::span(tiny, 0), nullptr);
    } catch (const CommError&) {
      small_buffer_threw = true;
    }
  });
  const std::vector<std::byte> payload(16, std::byte{2});
  bool sent = false;
  t.send(0, 1, {}, payload, [&](Status s) { sent = s == Status::ok; });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(small_buffer_threw && sent) && std::chrono::steady_clock::now() < deadline)
    t.wait_for_event(std::chrono::milliseconds(10));
  CHECK(small_buffer_threw);
  CHECK(sent);
  CHECK_THROWS_AS(t.connect(), CommError);
  t.close();
  t.close();  // idempotent
}

namespace {

// Rank 0 of 2 whose start-up exchange and fetches are what a rank of another ordo build, a
// corrupted store or a lying launcher would give: `runs` for the hosts (empty: rank 0's host
// record for both), `address` as rank 1's published address, and `extra` records more than
// asked for.
class ForgedPeer final : public Bootstrap {
 public:
  ForgedPeer(std::vector<Run> runs, Blob address, std::size_t extra = 0)
      : runs_(std::move(runs)), address_(std::move(address)), extra_(extra) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* kind() const override { return "forged"; }
  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    return {Blob(mine.begin(), mine.end()), Blob(mine.begin(), mine.end())};
  }
  std::vector<Run> exchange(std::span<const std::byte> shared, std::span<const Blob>) override {
    if (runs_.empty()) return {{2, Blob(shared.begin(), shared.end())}};
    return runs_;
  }
  // Rank 1's pid is rank 0's, as threads of one process (only a pid that is not 8 bytes is
  // malformed); its address is `address`.
  std::vector<Blob> fetch(std::size_t part, std::span<const int> ranks) override {
    check_ranks(ranks);
    Blob pid(sizeof(std::int64_t));
    const std::int64_t me = ::getpid();
    std::memcpy(pid.data(), &me, sizeof me);
    return std::vector<Blob>(ranks.size() + extra_, part == AddressBook::kPidPart ? pid : address_);
  }
  void barrier() override {}

 private:
  std::vector<Run> runs_;
  Blob address_;
  std::size_t extra_;
};

}  // namespace

TEST_CASE("a malformed start-up exchange is refused at connect, naming what is wrong", "[comm]") {
  {  // A host record of the wrong size.
    ForgedPeer boot({{2, bytes_of("short")}}, {});
    Transport t(boot);
    CHECK_THROWS_WITH(t.connect(), Catch::Contains("malformed host record for ranks from 0 (5 bytes") &&
                                       Catch::Contains("same ordo build"));
  }
  {  // Runs that cover one rank of two.
    const Blob host(sizeof(ordo::comm::HostRecord), std::byte{0});
    ForgedPeer boot({{1, host}}, {});
    Transport t(boot);
    CHECK_THROWS_WITH(t.connect(), Catch::Contains("host records for 1 of 2 ranks"));
  }
  {  // A run claiming more ranks than the job has.
    const Blob host(sizeof(ordo::comm::HostRecord), std::byte{0});
    ForgedPeer boot({{3, host}}, {});
    Transport t(boot);
    CHECK_THROWS_WITH(t.connect(), Catch::Contains("3 rank(s)"));
  }
}

TEST_CASE("an empty peer address, a lying fetch or a rank outside the job is refused",
          "[comm]") {
  {
    ForgedPeer boot({}, {});
    Transport t(boot);
    t.connect();
    CHECK(t.addresses_held() == 0);
    CHECK_THROWS_WITH(t.learn_addresses(std::vector<int>{1}),
                      Catch::Contains("rank 1 published an empty address"));
    CHECK_THROWS_WITH(t.learn_addresses(std::vector<int>{2}),
                      Catch::Contains("rank 2, but the job has ranks 0..1"));
    CHECK_THROWS_WITH(t.learn_addresses(std::vector<int>{-1}),
                      Catch::Contains("rank -1, but the job has ranks 0..1"));
    // The first send to rank 1 fetches its address (the last resort), and refuses it the same way.
    CHECK_THROWS_WITH(t.send(1, 1, {}, {}, nullptr), Catch::Contains("empty address"));
    CHECK(t.addresses_held() == 0);
  }
  {
    ForgedPeer boot({}, bytes_of("0123456789abcdef"), 1);
    Transport t(boot);
    // The pids of the ranks on this host come first: one more than asked for is refused too.
    CHECK_THROWS_WITH(t.connect(), Catch::Contains("asked for the pids of 1 rank(s) of its host and got 2"));
  }
}

TEST_CASE("wake interrupts an idle wait", "[comm]") {
  // A wait of a minute must end at once because of a wake: one made before the wait (it must
  // not be lost) and one from another thread while the wait sleeps. 20 s leaves room for a
  // loaded machine; a broken wake() waits the whole minute and fails here.
  using Clock = std::chrono::steady_clock;
  auto boot = Bootstrap::single();
  Transport t(*boot);
  t.connect();
  while (t.progress()) {
  }
  t.wake();
  auto start = Clock::now();
  t.wait_for_event(std::chrono::minutes(1));
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  while (t.progress()) {
  }
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the wait fall asleep
    t.wake();
  });
  start = Clock::now();
  t.wait_for_event(std::chrono::minutes(1));
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  waker.join();
  t.close();
}

TEST_CASE("an exception from a handler reaches the progress caller", "[comm]") {
  auto boot = Bootstrap::single();
  Transport t(*boot);
  t.on_message(2, [](Incoming&) { throw std::runtime_error("handler says no"); });
  t.connect();
  t.send(0, 2, {}, {}, nullptr);
  bool thrown = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!thrown && std::chrono::steady_clock::now() < deadline) {
    try {
      t.wait_for_event(std::chrono::milliseconds(10));
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "handler says no");
      thrown = true;
    }
  }
  CHECK(thrown);
  t.close();  // still usable after the rethrow
}

TEST_CASE("work posted from other threads runs on the transport thread, none lost", "[comm]") {
  auto boot = Bootstrap::single();
  Transport t(*boot);
  std::vector<std::uint32_t> seen;  // touched only on the transport thread
  t.on_message(4, [&](Incoming& m) {
    std::uint32_t v;
    std::memcpy(&v, m.header().data(), sizeof v);
    seen.push_back(v);
  });
  t.connect();
  constexpr int threads = 3, per_thread = 300;
  std::vector<std::thread> posters;
  for (int k = 0; k < threads; ++k)
    posters.emplace_back([&, k] {
      for (int i = 0; i < per_thread; ++i) {
        const std::uint32_t v = std::uint32_t(k * per_thread + i);
        // The pauses let the transport thread go to sleep between posts, so wake-ups matter.
        t.post([&t, v] { t.send(0, 4, std::as_bytes(std::span(&v, 1)), {}, nullptr); });
        if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  // A wait that runs out while posted work is pending is a lost wake-up.
  int idle_timeouts = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.size() < std::size_t(threads * per_thread) && std::chrono::steady_clock::now() < deadline)
    if (!t.wait_for_event(std::chrono::seconds(20))) ++idle_timeouts;
  for (auto& p : posters) p.join();
  CHECK(idle_timeouts == 0);
  REQUIRE(seen.size() == std::size_t(threads * per_thread));
  // Per poster, order is kept; and every value arrived exactly once.
  std::vector<std::uint32_t> last(threads, 0);
  std::vector<bool> got(threads * per_thread, false);
  for (std::uint32_t v : seen) {
    CHECK_FALSE(got[v]);
    got[v] = true;
    const std::uint32_t k = v / per_thread;
    CHECK(v >= last[k]);
    last[k] = v;
  }
  t.close();
}
