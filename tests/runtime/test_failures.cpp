// The failure path across ranks (Engine::fail, runtime/failure_relay.hpp) on simulated ranks:
// a body exception, a dead rank, a graph mismatch or an ABORT no failure caused ends the run on
// every rank, each with the error that names the rank at fault.
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
#include "simulated_ranks.hpp"

using namespace ordo;
using namespace ordo::test;

TEST_CASE("ranks that built different graphs stop with the first difference named",
          "[distributed]") {
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  auto f = run_failing(hub, rs, 1, 3, [](rt::Graph& g, unsigned r) {
    auto x = g.add_location("x", 8, 4, typeid(long));
    g.add_task({"a", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
    g.add_task({r == 0 ? "b" : "c", {{x, rt::Mode::read}}, [](const rt::Instance&) {}});
  });
  for (auto& x : f) {
    std::string msg = x.get();
    CHECK_THAT(msg, Catch::StartsWith("RunError(mismatch") &&
                        Catch::Contains("ranks 0 and 1 built different graphs") &&
                        Catch::Contains("task #1") && Catch::Contains("'b'") &&
                        Catch::Contains("'c'") && Catch::Contains("SPMD"));
  }
}

TEST_CASE("a body exception on one rank stops every rank", "[distributed]") {
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  auto f = run_failing(hub, rs, 2, 50, [](rt::Graph& g, unsigned) {
    auto x = g.add_location("x", 8, 4, typeid(long));
    auto y = g.add_location("y", 8, 4, typeid(long));
    g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
    g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [](const rt::Instance& in) {
                  if (in.iteration == 4) throw std::runtime_error("wy broke at 4");
                }});
  });
  // y (and wy) live on rank 1 by default placement: there the body's own exception comes back
  // as it was, on rank 0 rank 1's failure.
  CHECK(f[0].get() == "RunError(peer_body, rank 1): rank 1 failed: wy broke at 4");
  CHECK(f[1].get() == "exception: wy broke at 4");
}

// A program that goes on after a failed run (it caught the error) and runs another graph: the
// job has failed, so that graph's first run fails at once on every rank, and on the rank whose
// body threw it names that rank's own failure. Before, that rank reported it as a lost peer
// naming itself ("RunError(peer_lost, rank 1)", a PeerFailure of rank 1 on rank 1).
TEST_CASE("a graph run after this rank's own failure reports that failure as its own",
          "[distributed]") {
  LoopbackHub hub(2);
  auto declare = [](bool throws) {
    return [throws](rt::Graph& g, unsigned) {
      auto x = g.add_location("x", 8, 4, typeid(long));
      auto y = g.add_location("y", 8, 4, typeid(long));
      g.set_home(x, 0);
      g.set_home(y, 1);
      g.add_task({"wx", {{x, rt::Mode::write}}, [](const rt::Instance&) {}});
      g.add_task(
          {"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, [throws](const rt::Instance& in) {
             if (throws && in.iteration == 4) throw std::runtime_error("wy broke at 4");
           }});
    };
  };
  std::vector<Rank> first(2), second(2);
  auto f = run_failing(hub, first, 1, 50, declare(true));
  CHECK(f[0].get() == "RunError(peer_body, rank 1): rank 1 failed: wy broke at 4");
  CHECK(f[1].get() == "exception: wy broke at 4");
  auto g = run_failing(hub, second, 1, 50, declare(false), 0, 2);
  for (auto& x : g)
    if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      FAIL_CHECK("the second graph's run did not return within 30 s");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  CHECK(g[0].get() == "RunError(peer_lost, rank 1): rank 1 failed: wy broke at 4");
  CHECK(g[1].get() == "RunError(own, rank 1): rank 1 (this rank) failed: wy broke at 4");
}

namespace {

// What each rank's run threw once rank `dead` died. The dead rank's own engine hears of it from
// its own net (a transport failing on that rank): its own failure, not the loss of a peer that
// is itself; the others lost that peer.
void check_dead_rank(std::vector<std::future<std::string>>& f, unsigned dead) {
  const std::string d = "rank " + std::to_string(dead);
  for (unsigned r = 0; r < f.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(f[r].wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const std::string got = f[r].get();
    if (r == dead)
      CHECK_THAT(got, Catch::StartsWith("RunError(own, " + d + "): " + d +
                                        " (this rank) failed: " + d + " died"));
    else
      CHECK_THAT(
          got, Catch::StartsWith("RunError(peer_lost, " + d + ")") && Catch::Contains(d + " died"));
  }
}

}  // namespace

TEST_CASE("a rank that dies ends the run on every rank, naming it", "[distributed]") {
  LoopbackHub hub(3);
  std::vector<Rank> rs(3);
  auto f = run_failing(hub, rs, 1, 1000000, [&hub](rt::Graph& g, unsigned) {
    std::vector<std::uint32_t> locs;
    for (int i = 0; i < 3; ++i)
      locs.push_back(g.add_location("x" + std::to_string(i), 8, 4, typeid(long)));
    for (std::uint32_t i = 0; i < 3; ++i)
      g.add_task({"t" + std::to_string(i),
                  {{locs[i], rt::Mode::write}, {locs[(i + 1) % 3], rt::Mode::read}},
                  [&hub, i](const rt::Instance& in) {
                    if (i == 2 && in.iteration == 20) hub.kill(2);
                  }});
  });
  check_dead_rank(f, 2);
}

// A transport sees a peer die only where it holds an endpoint to it (created on first use),
// so the ranks that see it tell the others: here only the dead rank's tree parent does, and
// every rank still ends, naming the dead rank (without the relay the others wait in the
// control plane's next round for ever).
TEST_CASE("a rank that dies ends the run on every rank when only one rank sees it",
          "[distributed]") {
  const unsigned ranks = 16, dead = 9;  // rank 9's only tree neighbour is its parent, 8
  LoopbackHub hub(ranks);
  std::vector<Rank> rs(ranks);
  auto f = run_failing(hub, rs, 1, 1000000, [&hub](rt::Graph& g, unsigned) {
    std::vector<std::uint32_t> locs;
    for (unsigned i = 0; i < ranks; ++i)
      locs.push_back(g.add_location("x" + std::to_string(i), 8, 4, typeid(long)));
    for (std::uint32_t i = 0; i < ranks; ++i)
      g.add_task({"t" + std::to_string(i),
                  {{locs[i], rt::Mode::write}, {locs[(i + 1) % ranks], rt::Mode::read}},
                  [&hub, i](const rt::Instance& in) {
                    if (i == dead && in.iteration == 20) hub.kill(dead, {8});
                  }});
  });
  check_dead_rank(f, dead);
}

// A fiber task parked on a grant that a dead rank would have sent is woken: its acquire
// throws, unwinding the body, and the run ends with the peer's failure instead of waiting for
// the fiber forever (before the one failure path, Engine::run never returned here).
TEST_CASE("a fiber task waiting on a rank that dies returns with that rank's failure",
          "[distributed]") {
  for (bool parked_first : {true, false}) {
    LoopbackHub hub(2);
    std::vector<Rank> rs(2);
    std::atomic<bool> waiting{false};
    auto f =
        run_failing(hub, rs, 1, 1000000, [&hub, &waiting, parked_first](rt::Graph& g, unsigned) {
          auto a = g.add_location("a", 8, 4, typeid(long));
          auto b = g.add_location("b", 8, 4, typeid(long));
          g.set_home(a, 0);
          g.set_home(b, 1);
          g.add_task({"wa",
                      {{a, rt::Mode::write}},
                      [&hub, &waiting, parked_first](const rt::Instance& in) {
                        if (in.iteration != 20) return;
                        // The fiber of iteration 20 waits for this instance's release, which never
                        // comes: either it parked already (give it time) or the death comes first.
                        if (parked_first)
                          for (int i = 0; i < 200 && !waiting; ++i)
                            std::this_thread::sleep_for(std::chrono::milliseconds(1));
                        hub.kill(0);
                      }});
          rt::TaskDesc fiber{"wb",
                             {{b, rt::Mode::write}, {a, rt::Mode::read}},
                             [&waiting](const rt::Instance& in) {
                               if (in.iteration == 20) waiting = true;
                               in.engine->fiber_acquire(in, 1);  // a: from rank 0
                               in.engine->fiber_acquire(in, 0);
                             },
                             true};
          g.add_task(std::move(fiber));
        });
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        // A run that never returns cannot be joined: end the test program here.
        FAIL_CHECK("a rank's run did not return within 30 s of rank 0's death");
        std::fflush(nullptr);
        std::_Exit(1);
      }
    INFO("parked first: " << parked_first);
    CHECK_THAT(f[1].get(),
               Catch::StartsWith("RunError(peer_lost, rank 0)") && Catch::Contains("rank 0 died"));
    CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(own, rank 0): rank 0 (this rank) failed"));
  }
}

// A fatal ABORT says its sender has stopped. The receiver takes the sender for lost and stops,
// and tells it so: were the ABORT forged (or the sender's own transport blind to the failure),
// the sender would otherwise wait for a rank that no longer answers, for ever.
TEST_CASE("a rank that takes a peer for lost tells that peer it stops", "[distributed]") {
  std::vector<std::byte> abort(12);
  abort[0] = std::byte{4};  // ABORT
  const std::uint16_t fatal = 2;
  std::memcpy(abort.data() + 2, &fatal, 2);
  const std::string text = "forged: rank 1 is not stopped";
  for (char ch : text) abort.push_back(std::byte(ch));
  LoopbackHub hub(2);
  std::vector<Rank> rs(2);
  auto f = run_failing(hub, rs, 1, 1000000, [&hub, &abort](rt::Graph& g, unsigned) {
    declare_protocol_graph(g, {.wx_body = [&hub, &abort](const rt::Instance& in) {
                             if (in.iteration == 5) hub.inject(1, 0, 1, abort, {});
                           }});
  });
  for (auto& x : f)
    if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      FAIL_CHECK("a rank's run did not return within 30 s of the forged ABORT");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  CHECK_THAT(f[0].get(), Catch::StartsWith("RunError(peer_lost, rank 1)") && Catch::Contains(text));
  CHECK_THAT(f[1].get(), Catch::StartsWith("RunError(peer_lost, rank 0)") &&
                             Catch::Contains("rank 0 stopped: " + text));
}

// An ABORT that no failure caused (a forged or corrupt message, a peer of another version) must
// still end the run on every rank, each with a typed error: the receiver alone stopping, or
// draining one step, left the others waiting for it in the next step or vote, for ever. Three
// ranks, in steps of 3 iterations with a vote between them; rank 1 "sends" rank 0 the ABORT.
TEST_CASE("an ABORT no failure caused ends the run on every rank", "[distributed]") {
  auto abort = [](std::uint16_t flags, std::uint32_t named, const std::string& text) {
    std::vector<std::byte> m(12);
    m[0] = std::byte{4};  // ABORT
    std::memcpy(m.data() + 2, &flags, 2);
    std::memcpy(m.data() + 4, &named, 4);
    for (char ch : text) m.push_back(std::byte(ch));
    return m;
  };
  struct Case {
    std::string name;
    std::vector<std::byte> message;
    // What each rank's error must start with (kind and rank), and contain.
    std::vector<std::string> starts;
    std::vector<std::string> contains;
  };
  const std::string text = "forged";
  const std::vector<Case> cases = {
      // Not fatal: "a body threw on rank 1", which it did not. Rank 0 stops; rank 1 learns that
      // it was named, refuses that as a protocol error, and tells everyone.
      {"non-fatal ABORT",
       abort(0, 0, text),
       {"RunError(peer_body, rank 1)", "RunError(protocol, rank 0)", "RunError(peer_"},
       {text, "rank 1 stopped: rank 0 relayed a body failure of this rank", ", rank 1)"}},
      // Fatal: "rank 1 stopped", which it did not. Rank 0 takes it for lost and tells it and
      // rank 2; rank 2 stops and tells rank 1 too, so rank 1 hears it from rank 0 or from
      // rank 2, whichever comes first.
      {"fatal ABORT",
       abort(2, 0, text),
       {"RunError(peer_lost, rank 1)", "RunError(peer_lost, rank ", "RunError(peer_lost, rank 1)"},
       {text, " stopped: " + text, text}},
      // Relayed: "rank 1 lost rank 2", which is alive. Rank 0 takes rank 2 for lost and tells
      // rank 2 and rank 1; rank 2 hears it from rank 0 or from rank 1, whichever comes first.
      {"relayed fatal ABORT naming a third rank",
       abort(2 | 8, 2, text),
       {"RunError(peer_lost, rank 2)", "RunError(peer_lost, rank 2)", "RunError(peer_lost, rank "},
       {text, text, " stopped: " + text}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    LoopbackHub hub(3);
    std::vector<Rank> rs(3);
    auto f = run_failing(
        hub, rs, 1, 1000000,
        [&hub, &c](rt::Graph& g, unsigned) {
          std::vector<std::uint32_t> locs;
          for (unsigned i = 0; i < 3; ++i) {
            locs.push_back(g.add_location("x" + std::to_string(i), 8, 4, typeid(long)));
            g.set_home(locs[i], i);
          }
          for (std::uint32_t i = 0; i < 3; ++i)
            g.add_task({"t" + std::to_string(i),
                        {{locs[i], rt::Mode::write}, {locs[(i + 1) % 3], rt::Mode::read}},
                        [&hub, &c, i](const rt::Instance& in) {
                          if (i == 0 && in.iteration == 5) hub.inject(1, 0, 1, c.message, {});
                        }});
        },
        3);
    for (auto& x : f)
      if (x.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        FAIL_CHECK("a rank's run did not return within 30 s of the " << c.name);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    for (unsigned r = 0; r < 3; ++r) {
      INFO("rank " << r);
      CHECK_THAT(f[r].get(), Catch::StartsWith(c.starts[r]) && Catch::Contains(c.contains[r]));
    }
  }
}
