// The remote-lock protocol (runtime/remote_locks.hpp) on simulated ranks: random graphs,
// placements and orders give the sequential interpreter's result (each location taken from its
// home rank), a version reaches a process once, and a message the protocol never sends, or a
// forged one it accepts, stops every rank.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "protocol_graph.hpp"
#include "runtime/wire.hpp"
#include "simulated_ranks.hpp"

using namespace ordo;
using namespace ordo::test;

TEST_CASE("random graphs give the sequential result on 1 to 4 ranks", "[distributed]") {
  check_random_graphs(1000, 40, 1, 4, false, false);
}

// The control plane's trees (control_plane.hpp) at rank counts past the all-to-all tests':
// larger graphs, each location homed on a random rank, so that most ranks hold some.
TEST_CASE("random graphs give the sequential result on 8 to 64 ranks", "[distributed]") {
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    GraphSpec spec = random_spec(seed + 3000, 40, 40);
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    auto want = interpret(spec, order, 5);
    for (unsigned ranks : {8u, 17u, 64u}) {
      INFO("seed " << seed << " ranks " << ranks);
      std::vector<std::int32_t> homes(spec.sizes.size());
      for (std::size_t l = 0; l < homes.size(); ++l)
        homes[l] = static_cast<std::int32_t>((l * 7 + seed * 13) % ranks);
      CHECK(run_ranks(spec, ranks, 1, 3, 2, homes) == want);
    }
  }
}

// An early GRANT is sent from the location itself: the writer must wait for its `sent`. With
// payloads copied only at delivery, a writer let in sooner changes what the reader gets.
TEST_CASE("random graphs give the sequential result when payloads are copied late",
          "[distributed]") {
  check_random_graphs(7000, 20, 2, 4, false, true);
}

TEST_CASE("random graphs declared as task families give the sequential result", "[distributed]") {
  check_random_graphs(3000, 15, 1, 3, true, false);
}

TEST_CASE("random placements and explicit orders give the sequential result", "[distributed]") {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    GraphSpec spec = random_spec(seed + 5000, 6, 10);
    SplitMix rng{seed};
    std::vector<std::uint32_t> order(spec.tasks.size());
    std::iota(order.begin(), order.end(), 0u);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<std::int64_t> rank_of(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) rank_of[order[i]] = static_cast<std::int64_t>(i);
    for (std::uint32_t t = 0; t < spec.tasks.size(); ++t)
      for (auto& a : spec.tasks[t].accesses) a.position = rank_of[t];
    auto want = interpret(spec, order, 4);
    for (unsigned ranks : {2u, 3u}) {
      std::vector<std::int32_t> homes(spec.sizes.size());
      for (auto& h : homes) h = static_cast<std::int32_t>(rng.below(ranks));
      INFO("seed " << seed << " ranks " << ranks);
      CHECK(run_ranks(spec, ranks, 2, 4, 0, homes) == want);
    }
  }
}

TEST_CASE("a version reaches each reading process once, however many tasks read it",
          "[distributed]") {
  // x (64 elements) lives on rank 0 and is written there by W; three readers live on rank 1
  // (each writes its own location there). Per iteration: one GRANT carrying x to rank 1 and one
  // RELEASE back without bytes.
  GraphSpec spec;
  spec.sizes = {64, 1, 1, 1};
  spec.tasks.resize(4);
  spec.tasks[0].accesses = {{0, true, std::nullopt}};
  for (std::uint32_t r = 1; r <= 3; ++r)
    spec.tasks[r].accesses = {{0, false, std::nullopt}, {r, true, std::nullopt}};
  std::vector<std::uint32_t> order{0, 1, 2, 3};
  LoopbackHub hub(2);
  const std::uint64_t iters = 10;
  auto got = run_ranks(spec, 2, 2, iters, 0, {0, 1, 1, 1}, &hub);
  CHECK(got == interpret(spec, order, iters));
  // x's read phase is granted once per iteration; iteration `iters` is granted too (the gate
  // holds those instances), hence iters + 1 grants at most, iters at least.
  CHECK(hub.messages(0, 1) >= iters);
  CHECK(hub.messages(0, 1) <= iters + 1);
  CHECK(hub.bytes(0, 1) == hub.messages(0, 1) * 64 * 8);
  CHECK(hub.messages(1, 0) == iters);  // one RELEASE per iteration, for all three readers
  CHECK(hub.bytes(1, 0) == 0);         // reads send no bytes back
}

namespace {

// A protocol message's header as a peer would forge it (runtime/wire.hpp): kind u8 (1 = GRANT,
// 2 = RELEASE, 4 = ABORT), initial u8, flags u16 (1 = early, 4 = shared), location u32,
// phase u32.
std::vector<std::byte> header(std::uint8_t kind, std::uint16_t flags, std::uint32_t location,
                              std::uint32_t phase = 0) {
  std::vector<std::byte> h(12);
  h[0] = std::byte{kind};
  std::memcpy(h.data() + 2, &flags, 2);
  std::memcpy(h.data() + 4, &location, 4);
  std::memcpy(h.data() + 8, &phase, 4);
  return h;
}

}  // namespace

// Messages the protocol never sends (a corrupt peer, or ranks of different ordo versions) stop
// the run on every rank with a message naming the sender, instead of corrupting locks.
TEST_CASE("a peer's malformed or impossible protocol message stops every rank, naming it",
          "[distributed]") {
  struct Case {
    std::vector<std::byte> message, payload;
    std::string error;
    unsigned from = 1;  // the sender; the other rank receives it and stops
  };
  // x's phases: 0 wx writes (rank 0), 1 wy reads (rank 1, early); z's: 0 wx writes.
  const std::vector<Case> cases = {
      {std::vector<std::byte>(3), {}, "rank 1 sent a malformed message (3 header bytes)"},
      {header(2, 0, 99), {}, "rank 1 sent a message for an unknown location"},
      // z (#2) is rank 0's own and rank 1 never reads it: it cannot hold an early version.
      {header(2, 1, 2), {}, "rank 1 released location 'z' early, which it did not hold early"},
      {header(1, 0, 0), std::vector<std::byte>(3),
       "rank 1 sent 3 bytes for location 'x', which has 32"},
      // The two ranks share no memory (the hub does not put them on one host).
      {header(2, 4, 2),
       {},
       "rank 1 released location 'z' as shared, which this rank does not share with it"},
      {header(1, 4, 0), std::vector<std::byte>(32),
       "rank 1 sent 32 bytes for location 'x', which it shares with this rank (none expected)"},
      // Only a location's home grants it, and only to a rank that waits for that phase: a GRANT
      // of its own location once made the home grant its tasks again, and the run hung.
      {header(1, 0, 0), std::vector<std::byte>(32),
       "rank 1 granted location 'x' (phase 0), whose home is this rank"},
      {header(1, 0, 0, 0), std::vector<std::byte>(32), "rank 0 granted location 'x' (phase 0)", 0},
      // A RELEASE answers a GRANT: rank 1 is never granted x's write phase.
      {header(2, 0, 0, 0), std::vector<std::byte>(32),
       "rank 1 released location 'x' (phase 0), which this rank had not granted it"},
      {header(2, 8, 0), {}, "rank 1 sent flags 8 this rank does not know"},
      // A fatal, relayed ABORT naming the receiver (location 0 = rank 0) was taken as the
      // receiver's own loss: it stopped without telling anyone, and rank 1 waited for ever.
      {header(4, 2 | 8, 0), {}, "rank 1 relayed the loss of this rank"},
      // An ABORT's unknown flags, and a relay naming a rank outside the job, are refused too.
      {header(4, 16, 0), {}, "rank 1 sent an ABORT with flags 16 this rank does not know"},
      {header(4, 8, 5), {}, "rank 1 relayed the failure of rank 5 in a job of 2 ranks"},
  };
  for (const Case& c : cases) {
    LoopbackHub hub(2);
    std::vector<Rank> rs(2);
    auto f = run_failing(hub, rs, 1, 1000000, [&hub, &c](rt::Graph& g, unsigned) {
      declare_protocol_graph(g, {.with_z = true, .wx_body = [&hub, &c](const rt::Instance& in) {
                                   if (in.iteration == 5)
                                     hub.inject(c.from, 1 - c.from, 1, c.message, c.payload);
                                 }});
    });
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        // A run that never returns cannot be joined: end the test program here.
        FAIL_CHECK("a rank's run did not return within 30 s of the message: " << c.error);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    // The receiver stops on the sender's message and tells it, which takes it as the
    // receiver's loss.
    const unsigned to = 1 - c.from;
    INFO(c.error);
    CHECK_THAT(f[to].get(),
               Catch::StartsWith("RunError(protocol, rank " + std::to_string(c.from) + ")") &&
                   Catch::Contains("rank " + std::to_string(to) + " stopped: " + c.error));
    CHECK_THAT(f[c.from].get(),
               Catch::StartsWith("RunError(peer_lost, rank " + std::to_string(to) + ")") &&
                   Catch::Contains(c.error));
  }
}

// The home's refusals of a RELEASE that does not match an early grant it sent. Rank 1 holds
// x's read phase early while its task of iteration 5 waits for rank 0's task of iteration 6
// (which an early grant lets run) to inject the message, so the home's state is known: it
// granted rank 1 phase 1 early and has not had its RELEASE back. Before, every such message was
// refused as a release of something rank 1 "did not hold early" or "had not been granted".
TEST_CASE("an early grant's release must say early, name its phase and carry no bytes",
          "[distributed]") {
  auto release = [](std::uint16_t flags, std::uint32_t phase) {
    return header(2, flags, 0, phase);
  };
  struct Case {
    std::vector<std::byte> message, payload;
    std::string error;
  };
  // x's phases: 0 wx writes (rank 0), 1 wy reads (rank 1, early).
  const std::vector<Case> cases = {
      {release(1, 0),
       {},
       "rank 1 released location 'x' early in phase 0, which it holds early "
       "in phase 1"},
      {release(1, 1), std::vector<std::byte>(32),
       "rank 1 released location 'x' early with 32 bytes (a read's release carries none)"},
      {release(0, 1),
       {},
       "rank 1 released location 'x' (phase 1), which this rank had granted it early (its "
       "release must say so)"},
  };
  for (const Case& c : cases) {
    LoopbackHub hub(2);
    std::vector<Rank> rs(2);
    std::atomic<bool> injected{false};
    auto f = run_failing(hub, rs, 1, 1000000, [&hub, &c, &injected](rt::Graph& g, unsigned) {
      declare_protocol_graph(
          g, {.wx_body =
                  [&](const rt::Instance& in) {
                    if (in.iteration != 6) return;
                    hub.inject(1, 0, 1, c.message, c.payload);
                    injected.store(true);
                  },
              .wy_body =
                  [&injected](const rt::Instance& in) {
                    if (in.iteration != 5) return;
                    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                    while (!injected.load() && std::chrono::steady_clock::now() < until)
                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  }});
    });
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        FAIL_CHECK("a rank's run did not return within 30 s of the message: " << c.error);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    INFO(c.error);
    CHECK(injected.load());  // else rank 0's task never ran ahead of rank 1's early read
    CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(protocol, rank 1)") &&
                               Catch::Contains("rank 0 stopped: " + c.error));
    CHECK_THAT(f[1].get(),
               Catch::StartsWith("RunError(peer_lost, rank 0)") && Catch::Contains(c.error));
  }
}

// A forged GRANT that a rank accepts (it came while the rank waited for that phase, with the
// right size) is handled as a real one: rank 1 runs one instance ahead on it, and the home
// takes its RELEASEs for those of the early grants it sends afterwards, so no check refuses
// anything and the run completes with one message more handled than sent. Every rank then
// spun in the step's quiescence waves for ever (the fuzz_remote_lock livelock); now each
// stops, saying so. The order of events that makes the forged GRANT pass is made certain by a
// blocker on each rank, a message on a channel of the test's own whose handler holds the
// rank's delivery thread:
//   - wy of kForgedAt on rank 1 queues blocker B0 at rank 0 before it releases x, so the home
//     handles that RELEASE only after B0;
//   - B0 waits until that RELEASE is sent (rank 1 holds x no longer), forges the early GRANT
//     of x's read phase to rank 1, queues B1 there, and waits until rank 1 has released the
//     forged phase (wy of kForgedAt + 1) and the home has entered the next read phase (rx of
//     kForgedAt + 1 runs), which waits for rank 1's RELEASE (rule 1: pending);
//   - the home then handles the real RELEASE (sending the pending GRANT) and the one of the
//     forged phase, taken for that GRANT's; B1 holds rank 1 until that GRANT is sent, so rank
//     1 takes it too, for the instance beyond the run.
// A task on each rank (`last`, on a second worker) waits until those messages are handled, so
// that quiescence starts with every count final: with one still in flight the extra count may
// make its waves end as if none were (nothing can tell a forged message from a real one).
TEST_CASE("a forged message that the protocol accepts stops the run instead of its quiescence",
          "[distributed]") {
  constexpr std::uint32_t kBlocker = 2;
  constexpr std::uint64_t kForgedAt = 2;
  LoopbackHub hub(2);
  auto wait_until = [](const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  // x is rank 1's only remote location: hub.messages(1, 0) counts its RELEASEs of x,
  // hub.messages(0, 1) the home's GRANTs of x to it (none initial: x starts with wx).
  std::atomic<bool> next_phase{false};
  const std::vector<std::byte> grant = header(1, 1, 0, 1);  // early GRANT of x, phase 1
  hub.net(0).attach(
      kBlocker,
      [&](unsigned, std::span<const std::byte>, std::span<const std::byte>) {
        wait_until([&] { return hub.messages(1, 0) >= kForgedAt + 1; });
        hub.inject(0, 1, 1, grant, std::vector<std::byte>(32));
        hub.inject(0, 1, kBlocker, {});
        wait_until([&] { return hub.messages(1, 0) >= kForgedAt + 2 && next_phase.load(); });
      },
      [](unsigned, const std::string&) {});
  hub.net(1).attach(
      kBlocker,
      [&](unsigned, std::span<const std::byte>, std::span<const std::byte>) {
        wait_until([&] { return hub.messages(0, 1) >= kForgedAt + 2; });
      },
      [](unsigned, const std::string&) {});
  std::vector<Rank> rs(2);
  // Iterations 0 .. kForgedAt + 1: the GRANT rank 1 takes last is for one beyond the run.
  auto f = run_failing(hub, rs, 2, kForgedAt + 2, [&](rt::Graph& g, unsigned) {
    auto x = g.add_location("x", 8, 4, typeid(long));
    auto y = g.add_location("y", 8, 4, typeid(long));
    auto v = g.add_location("v", 8, 4, typeid(long));
    g.set_home(x, 0);
    g.set_home(y, 1);
    g.set_home(v, 0);
    // Rank 0 handles rank 1's RELEASEs of iterations 0 .. kForgedAt and of the forged phase;
    // rank 1 the GRANTs of iterations 0 .. kForgedAt + 1 and the forged one.
    for (unsigned r = 0; r < 2; ++r) {
      auto u = g.add_location("u" + std::to_string(r), 8, 4, typeid(long));
      g.set_home(u, static_cast<std::int32_t>(r));
      g.add_task(
          {"last" + std::to_string(r), {{u, rt::Mode::write}}, [&, r](const rt::Instance& in) {
             if (in.iteration == kForgedAt + 1)
               wait_until([&] { return hub.handled(1 - r, r) >= kForgedAt + 2 + r; });
           }});
    }
    g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
    g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [&](const rt::Instance& in) {
                  if (in.iteration == kForgedAt) hub.inject(1, 0, kBlocker, {});
                }});
    // In wy's read phase of x, at the home.
    g.add_task({"rx", {{v, rt::Mode::write}, {x, rt::Mode::read}}, [&](const rt::Instance& in) {
                  if (in.iteration == kForgedAt + 1) next_phase.store(true);
                }});
  });
  for (auto& x : f)
    if (x.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      FAIL_CHECK("a rank's run did not return within 60 s of the forged GRANT");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  for (unsigned r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK_THAT(f[r].get(), Catch::StartsWith("RunError(p") &&
                               Catch::Contains("stopped: the ranks handled more protocol "
                                               "messages than they sent"));
  }
  for (unsigned r = 0; r < 2; ++r) hub.net(r).detach(kBlocker);
}

// A receive that the transport cannot end (its peer died where UCX cannot tell, and UCX cannot
// cancel it) may still write into the location its placer chose after the engine is gone: the
// graph keeps that memory for good, so the write lands in memory still allocated. Before, the
// engine's memory was freed after a bounded wait, and the write hit freed memory.
TEST_CASE("memory a transport may still write into outlives the engine and the graph",
          "[distributed]") {
  // 64 MiB: more than malloc's largest mmap threshold, so that freed memory is unmapped and a
  // write into it faults instead of corrupting the heap unseen.
  constexpr std::size_t kCount = std::size_t{8} << 20;
  constexpr std::uint32_t kChannel = 7;
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  std::vector<std::future<void>> f;
  for (unsigned r = 0; r < 2; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      rt::Graph& g = rs[r].graph;
      const std::uint32_t big = g.add_location("big", 8, kCount, typeid(std::uint64_t));
      const std::uint32_t out = g.add_location("out", 8, 1, typeid(std::uint64_t));
      g.set_home(big, 1);
      g.set_home(out, 0);
      g.add_task({"write", {{big, rt::Mode::write}}, [](const rt::Instance&) {}});
      g.add_task(
          {"read", {{big, rt::Mode::read}, {out, rt::Mode::write}}, [](const rt::Instance&) {}});
      auto c = rt::compile(g);
      if (!c.error.empty()) throw std::runtime_error(c.error);  // no Catch2 outside main
      rs[r].engine = std::make_unique<rt::Engine>(g, std::move(c.plan), &hub.net(r), kChannel);
    }));
  for (auto& x : f) x.get();
  // Rank 0 holds a replica of "big" (its task reads it in phase 1): the GRANT's bytes from the
  // home, rank 1, are placed straight into it.
  const rt::wire::Header grant{rt::wire::Kind::grant, 0, 0, 0, 1};
  const std::span<std::byte> dst =
      hub.net(0).place_stuck(kChannel, 1, rt::wire::as_bytes(grant), kCount * 8);
  REQUIRE(dst.size() == kCount * 8);
  REQUIRE(dst.data() == rs[0].graph.data(0));
  rs.clear();                                 // both engines, then both graphs
  std::memset(dst.data(), 0x5a, dst.size());  // the transport's late write
  CHECK(std::to_integer<int>(dst[dst.size() - 1]) == 0x5a);
}
