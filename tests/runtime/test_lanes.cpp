// Lanes (runtime/lanes.hpp): the lock protocol without shared counters must give exactly the
// phase machine's order. Random graphs against the sequential interpreter under 1-4 workers,
// protocol changes between runs, parking, the FIFO of read groups that wrap, and the rule that
// keeps the phase machine where lanes do not apply.
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "graph_spec.hpp"
#include "runtime/engine.hpp"
#include "runtime/graph.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"
#include "scheduler/topology.hpp"
#include "skip.hpp"

using namespace ordo::rt;
using ordo::test::GraphSpec;

namespace {

using Choice = Engine::LaneChoice;

std::unique_ptr<Engine> make_engine(Graph& graph) {
  CompileResult c = compile(graph);
  REQUIRE(c.error.empty());
  return std::make_unique<Engine>(graph, std::move(c.plan));
}

// The spec as an rt graph, one task per spec task; `sleepy` task sleeps in every instance (so
// that the lanes waiting for it park).
std::vector<std::uint32_t> build(Graph& g, const GraphSpec& spec, int sleepy = -1) {
  std::vector<std::uint32_t> locs;
  for (std::size_t l = 0; l < spec.sizes.size(); ++l)
    locs.push_back(g.add_location("L" + std::to_string(l), 8, spec.sizes[l], typeid(std::uint64_t)));
  for (std::uint32_t t = 0; t < spec.tasks.size(); ++t) {
    std::vector<AccessDesc> acc;
    for (const auto& a : spec.tasks[t].accesses)
      acc.push_back({locs[a.location], a.write ? Mode::write : Mode::read, a.position.has_value(),
                     a.position.value_or(0)});
    g.add_task({"T" + std::to_string(t), std::move(acc), [&spec, locs, t, sleepy](const Instance& in) {
                  if (static_cast<int>(t) == sleepy)
                    std::this_thread::sleep_for(std::chrono::microseconds(300));
                  ordo::test::run_body(spec, t, in.iteration, [&](std::uint32_t l) {
                    auto* p = reinterpret_cast<std::uint64_t*>(in.graph->data(locs[l]));
                    return std::span<std::uint64_t>(p, spec.sizes[l]);
                  });
                }});
  }
  return locs;
}

std::vector<std::vector<std::uint64_t>> contents(const Graph& g, const GraphSpec& spec) {
  std::vector<std::vector<std::uint64_t>> out;
  for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
    const auto* p = reinterpret_cast<const std::uint64_t*>(g.data(l));
    out.emplace_back(p, p + spec.sizes[l]);
  }
  return out;
}

// Runs `spec` for the iterations in `runs`, one run each, with the protocol of `choices[i]`
// for run i; returns the contents and whether each run took lanes (and, into `parks`, how
// often a lane parked).
std::vector<std::vector<std::uint64_t>> run_spec(const GraphSpec& spec, unsigned workers,
                                                 const std::vector<std::uint64_t>& runs,
                                                 const std::vector<Choice>& choices,
                                                 std::vector<bool>& took, int sleepy = -1,
                                                 std::uint64_t* parks = nullptr) {
  Graph g;
  build(g, spec, sleepy);
  auto engine = make_engine(g);
  ordo::sched::Pool pool({workers});
  for (std::size_t i = 0; i < runs.size(); ++i) {
    engine->set_lanes(choices[i]);
    REQUIRE(engine->run(pool, runs[i], {}, 0) == runs[i]);
    took.push_back(engine->ran_lanes());
  }
  if (parks) *parks = engine->lane_parks();
  return contents(g, spec);
}

// x: w, which sleeps 1 ms in each instance and adds the iteration to x, then r, which reads
// it; returns x.
std::uint32_t slow_writer(Graph& g) {
  const std::uint32_t x = g.add_location("x", 8, 1, typeid(std::uint64_t));
  g.add_task({"w", {{x, Mode::write}}, [x](const Instance& in) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                *reinterpret_cast<std::uint64_t*>(in.graph->data(x)) += in.iteration;
              }});
  g.add_task({"r", {{x, Mode::read}}, [](const Instance&) {}});
  return x;
}

std::vector<std::uint32_t> program_order(const GraphSpec& spec) {
  std::vector<std::uint32_t> order(spec.tasks.size());
  std::iota(order.begin(), order.end(), 0u);
  return order;
}

}  // namespace

TEST_CASE("lanes give random graphs the sequential interpreter's contents", "[lanes]") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    const GraphSpec spec = ordo::test::random_spec(seed * 7 + 3, 6, 12);
    const std::uint64_t first = 1 + seed % 5, second = 1 + seed % 3;
    const auto want = ordo::test::interpret(spec, program_order(spec), first + second);
    for (unsigned workers : {1u, 2u, 3u, 4u}) {
      INFO("seed " << seed << " workers " << workers);
      std::vector<bool> took;
      CHECK(run_spec(spec, workers, {first, second}, {Choice::always, Choice::always}, took) == want);
      CHECK(took == std::vector<bool>{true, true});
    }
  }
}

TEST_CASE("lanes are rebuilt when the pool's size changes between runs", "[lanes]") {
  // Runs of one graph on pools of N, then M, then N workers: each run's lanes must be split
  // for its own pool (lanes built for 3 workers would pin lane 2 to a worker that a pool of 2
  // lacks), and the state must carry over from one split to the next.
  const std::vector<std::pair<unsigned, unsigned>> sizes{{2, 3}, {3, 2}, {4, 2}, {2, 4}};
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    const GraphSpec spec = ordo::test::random_spec(seed * 11 + 5, 6, 12);
    const std::vector<std::uint64_t> runs{3, 4, 2};
    const auto want = ordo::test::interpret(spec, program_order(spec), 3 + 4 + 2);
    for (const auto& [n, m] : sizes) {
      INFO("seed " << seed << " workers " << n << ", then " << m << ", then " << n);
      Graph g;
      build(g, spec);
      auto engine = make_engine(g);
      engine->set_lanes(Choice::always);
      const unsigned workers[] = {n, m, n};
      for (std::size_t i = 0; i < runs.size(); ++i) {
        ordo::sched::Pool pool({workers[i]});
        REQUIRE(engine->run(pool, runs[i], {}, 0) == runs[i]);
        CHECK(engine->ran_lanes());
      }
      CHECK(contents(g, spec) == want);
    }
  }
}

TEST_CASE("a lane spins as long as the pool's idle workers, not at all where cores are shared",
          "[lanes]") {
  // x: W0 then R1 per iteration, a lane each on 2 workers; W0 sleeps 1 ms in each instance, so
  // lane 1 waits about 1 ms for each of its instances. With the pool's idle spin at 10 s it
  // never parks; with a fixed 20 us spin of its own it parked at nearly every wait. On an
  // oversubscribed pool (idle spin 0 whatever was configured) it parks instead of spinning.
  auto lane_parks = [](const ordo::sched::PoolConfig& cfg, bool& oversubscribed) {
    Graph g;
    const std::uint32_t x = slow_writer(g);
    auto engine = make_engine(g);
    engine->set_lanes(Choice::always);
    ordo::sched::Pool pool(cfg);
    oversubscribed = pool.is_oversubscribed();
    REQUIRE(engine->run(pool, 20, {}, 0) == 20);
    REQUIRE(engine->ran_lanes());
    CHECK(*reinterpret_cast<const std::uint64_t*>(g.data(x)) == 19 * 20 / 2);
    return engine->lane_parks();
  };
  bool oversubscribed = false;
  const auto long_spin = lane_parks({.workers = 2, .idle_spin = std::chrono::seconds(10)},
                                    oversubscribed);
  if (oversubscribed)
    WARN("2 workers share cores here: the long spin is not tried");
  else
    CHECK(long_spin == 0);
  // Two workers on a one-core machine (hwloc's synthetic description: nothing is bound).
  if (!ordo::sched::Topology::hwloc_available())
    ORDO_SKIP("built without hwloc: no synthetic one-core machine for the shared case");
  const auto shared = lane_parks({.workers = 2,
                                  .topology = "synthetic:pack:1 core:1 pu:1",
                                  .idle_spin = std::chrono::seconds(10)},
                                 oversubscribed);
  REQUIRE(oversubscribed);
  CHECK(shared >= 10);  // lane 1 waits at each of its 20 instances but the first
}

TEST_CASE("lane_parks counts every run's parks, also across a new split of the lanes",
          "[lanes]") {
  // x: w (1 ms per instance) then r, a lane each. Runs on 2, 3, then 2 workers of a one-core
  // machine (hwloc's synthetic description: oversubscribed, so a waiting lane parks at once):
  // r's lane waits for w in every instance but the first. The count must only grow, also
  // when a pool of another size splits the lanes anew.
  if (!ordo::sched::Topology::hwloc_available())
    ORDO_SKIP("built without hwloc: no synthetic one-core machine to oversubscribe");
  Graph g;
  const std::uint32_t x = slow_writer(g);
  auto engine = make_engine(g);
  engine->set_lanes(Choice::always);
  std::vector<std::uint64_t> parks;
  for (unsigned workers : {2u, 3u, 2u}) {
    ordo::sched::Pool pool({.workers = workers, .topology = "synthetic:pack:1 core:1 pu:1"});
    REQUIRE(pool.is_oversubscribed());
    REQUIRE(engine->run(pool, 10, {}, 0) == 10);
    REQUIRE(engine->ran_lanes());
    parks.push_back(engine->lane_parks());
  }
  CHECK(*reinterpret_cast<const std::uint64_t*>(g.data(x)) == 29 * 30 / 2);
  INFO("lane_parks after each run: " << parks[0] << ", " << parks[1] << ", " << parks[2]);
  CHECK(parks[0] >= 5);
  CHECK(parks[1] >= parks[0] + 5);
  CHECK(parks[2] >= parks[1] + 5);
}

TEST_CASE("lanes follow explicit positions", "[lanes]") {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    GraphSpec spec = ordo::test::random_spec(seed ^ 0x5eed, 5, 10);
    ordo::test::SplitMix rng{seed};
    std::vector<std::uint32_t> order = program_order(spec);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<std::int64_t> rank(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) rank[order[i]] = static_cast<std::int64_t>(i);
    for (std::uint32_t t = 0; t < spec.tasks.size(); ++t)
      for (auto& a : spec.tasks[t].accesses) a.position = rank[t];
    const auto want = ordo::test::interpret(spec, order, 6);
    for (unsigned workers : {2u, 4u}) {
      INFO("seed " << seed << " workers " << workers);
      std::vector<bool> took;
      CHECK(run_spec(spec, workers, {6}, {Choice::always}, took) == want);
    }
  }
}

TEST_CASE("runs change between lanes and the phase machine without losing the order", "[lanes]") {
  const std::vector<Choice> choices{Choice::always, Choice::never, Choice::never, Choice::always,
                                    Choice::always, Choice::never};
  const std::vector<std::uint64_t> runs{3, 2, 1, 4, 1, 3};
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const GraphSpec spec = ordo::test::random_spec(seed * 13 + 1, 6, 12);
    const auto want = ordo::test::interpret(spec, program_order(spec), 14);
    INFO("seed " << seed);
    std::vector<bool> took;
    CHECK(run_spec(spec, 2, runs, choices, took) == want);
    CHECK(took == std::vector<bool>{true, false, false, true, true, false});
  }
}

TEST_CASE("a lane that waits for a slow producer parks and is woken", "[lanes]") {
  // Every lane waits for task 0 at some point of each iteration, longer than a lane spins.
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    GraphSpec spec = ordo::test::random_spec(seed + 100, 4, 8);
    spec.tasks[0].accesses = {};
    for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) spec.tasks[0].accesses.push_back({l, true, {}});
    const auto want = ordo::test::interpret(spec, program_order(spec), 12);
    for (unsigned workers : {2u, 3u}) {
      INFO("seed " << seed << " workers " << workers);
      std::vector<bool> took;
      std::uint64_t parks = 0;
      CHECK(run_spec(spec, workers, {5, 7}, {Choice::always, Choice::always}, took, 0, &parks) ==
            want);
      CHECK(took == std::vector<bool>{true, true});
      CHECK(parks > 0);
    }
  }
}

TEST_CASE("every location's FIFO holds on lanes, read groups that wrap around included",
          "[lanes]") {
  // One location, each task a family of one (lanes take them in turn: task t on lane t mod
  // workers), accesses in the order of the pattern in every iteration. The oracle is the FIFO
  // itself, with no phase in it: of two accesses of which one writes, the earlier in the
  // pattern ends before the later one starts, and the later ends before the earlier's next
  // instance starts; reads are not ordered among themselves. Where the pattern starts and
  // ends with reads, those of one iteration's end and the next one's start are one read group:
  // the write after it must wait for both runs, so the first read at the end is slow (on a
  // lane of its own, nothing else orders it before that write).
  const std::vector<std::string> patterns{"RRWRR", "RWRWR", "RWRRWWR", "RRWRWRR", "WRRWR",
                                          "RWWR", "WRWRRR"};
  const std::uint64_t iters = 30;
  for (const std::string& pattern : patterns) {
    const auto n = static_cast<std::uint32_t>(pattern.size());
    std::uint32_t slow = n;  // the first read of the trailing read run
    while (slow > 0 && pattern[slow - 1] == 'R') --slow;
    for (unsigned workers : {2u, 3u, 4u}) {
      Graph g;
      const std::uint32_t x = g.add_location("x", 8, 1, typeid(std::uint64_t));
      // Each instance's start and end on one clock of events: (t, k) took [at, at + 1].
      std::atomic<std::uint64_t> clock{0};
      std::vector<std::uint64_t> start(n * iters), end(n * iters);
      for (std::uint32_t t = 0; t < n; ++t)
        g.add_task({"t" + std::to_string(t), {{x, pattern[t] == 'W' ? Mode::write : Mode::read}},
                    [&, t](const Instance& in) {
                      start[t * iters + in.iteration] = clock.fetch_add(1);
                      std::this_thread::sleep_for(std::chrono::microseconds(t == slow ? 300 : 10));
                      end[t * iters + in.iteration] = clock.fetch_add(1);
                    }});
      auto engine = make_engine(g);
      engine->set_lanes(Choice::always);
      ordo::sched::Pool pool({workers});
      REQUIRE(engine->run(pool, iters, {}, 0) == iters);
      REQUIRE(engine->ran_lanes());
      INFO("pattern " << pattern << ", workers " << workers);
      std::uint64_t disorders = 0;
      for (std::uint32_t a = 0; a < n; ++a)
        for (std::uint32_t b = a + 1; b < n; ++b) {
          if (pattern[a] == 'R' && pattern[b] == 'R') continue;
          for (std::uint64_t k = 0; k < iters; ++k) {
            disorders += end[a * iters + k] > start[b * iters + k];
            if (k + 1 < iters) disorders += end[b * iters + k] > start[a * iters + k + 1];
          }
        }
      CHECK(disorders == 0);
    }
  }
}

TEST_CASE("the automatic rule takes lanes only where they apply", "[lanes]") {
  // A width-2 stencil of two families (one task per worker and step): lanes on 2 workers.
  // `summed`: the first family also contributes its values to a reduction that the second
  // reads in the same iteration (a combining task between them).
  auto stencil = [](Graph& g, std::uint32_t width, bool extra, bool summed = false) {
    std::vector<std::uint32_t> a, b;
    for (std::uint32_t i = 0; i < width; ++i) {
      a.push_back(g.add_location("a" + std::to_string(i), 8, 1, typeid(std::uint64_t)));
      b.push_back(g.add_location("b" + std::to_string(i), 8, 1, typeid(std::uint64_t)));
    }
    auto word = [](const Graph& graph, std::uint32_t l) -> std::uint64_t& {
      return *reinterpret_cast<std::uint64_t*>(graph.data(l));
    };
    std::uint32_t r = 0;
    if (summed)
      r = g.add_reduction("s", width, 8, typeid(std::uint64_t),
                          [](const std::byte* x, const std::byte* y, std::byte* out) {
                            std::uint64_t u, v;
                            std::memcpy(&u, x, 8);
                            std::memcpy(&v, y, 8);
                            u = u * 3 + v;  // not commutative: the fold's order shows
                            std::memcpy(out, &u, 8);
                          });
    const std::uint32_t part = summed ? g.reductions()[r].first_partial : 0;
    const std::uint32_t total = summed ? g.reductions()[r].result : 0;
    for (int step = 0; step < 2; ++step) {
      const auto& from = step == 0 ? a : b;
      const auto& to = step == 0 ? b : a;
      g.begin_family(step == 0 ? "ab" : "ba", [=](const Instance& in) {
        std::uint64_t sum = in.iteration;
        for (std::uint32_t j = in.index == 0 ? 0 : in.index - 1; j <= std::min(in.index + 1, width - 1); ++j)
          sum = sum * 31 + word(*in.graph, from[j]);
        if (summed && step == 1) sum = sum * 31 + word(*in.graph, total);
        word(*in.graph, to[in.index]) = sum;
        if (summed && step == 0) word(*in.graph, part + in.index) = sum;
      });
      for (std::uint32_t i = 0; i < width; ++i) {
        for (std::uint32_t j = i == 0 ? 0 : i - 1; j <= std::min(i + 1, width - 1); ++j)
          g.add_access({from[j], Mode::read});
        g.add_access({to[i], Mode::write});
        if (summed && step == 0) g.add_access({part + i, Mode::write});
        if (summed && step == 1) g.add_access({total, Mode::read});
        g.end_member();
        if (summed && step == 0) g.set_contributor(r, i, g.task_count() - 1, to[i]);
      }
      g.end_family();
      if (summed && step == 0) g.add_combine(r);
    }
    if (extra) {
      const std::uint32_t z = g.add_location("z", 8, 1, typeid(std::uint64_t));
      g.add_task({"extra", {{z, Mode::write}}, [](const Instance&) {}});
    }
    return a;
  };
  auto result = [&](std::uint32_t width, unsigned workers, Choice choice, bool& took,
                    bool extra = false, bool summed = false) {
    Graph g;
    auto a = stencil(g, width, extra, summed);
    auto engine = make_engine(g);
    engine->set_lanes(choice);
    ordo::sched::Pool pool({.workers = workers, .bind = false});
    engine->run(pool, 50, {}, 0);
    took = engine->ran_lanes();
    std::vector<std::uint64_t> out;
    for (std::uint32_t l : a) out.push_back(*reinterpret_cast<const std::uint64_t*>(g.data(l)));
    return out;
  };
  bool took = false;
  const auto want = result(2, 2, Choice::never, took);
  CHECK_FALSE(took);
  CHECK(result(2, 2, Choice::automatic, took) == want);
  CHECK(took);
  // Wider than kTasksPerLane per worker: the work stealing stays.
  const auto wide = result(2 * Lanes::kTasksPerLane + 2, 2, Choice::never, took);
  CHECK(result(2 * Lanes::kTasksPerLane + 2, 2, Choice::automatic, took) == wide);
  CHECK_FALSE(took);
  // Tasks that do not divide among the workers (5 on 2).
  const auto odd = result(2, 2, Choice::never, took, true);
  CHECK(result(2, 2, Choice::automatic, took, true) == odd);
  CHECK_FALSE(took);
  // A reduction's combining task is not counted: 4 tasks and the fold of their sum, lanes.
  const auto summed = result(2, 2, Choice::never, took, false, true);
  CHECK_FALSE(took);
  CHECK(result(2, 2, Choice::automatic, took, false, true) == summed);
  CHECK(took);
  CHECK(summed != want);
  // One worker: nothing to hand off.
  const auto one = result(2, 1, Choice::never, took);
  CHECK(result(2, 1, Choice::automatic, took) == one);
  CHECK_FALSE(took);
  {
    // A task without locks beside them: lanes never look at the deques its range items go
    // to, so it would wait for the lanes to park or finish.
    Graph g;
    auto a = stencil(g, 2, false);
    std::atomic<int> ran{0};
    g.add_task({"free", {}, [&ran](const Instance&) { ran.fetch_add(1); }});
    auto engine = make_engine(g);
    engine->set_lanes(Choice::automatic);
    ordo::sched::Pool pool({.workers = 2, .bind = false});
    engine->run(pool, 50, {}, 0);
    CHECK_FALSE(engine->ran_lanes());
    CHECK(ran == 50);
    std::vector<std::uint64_t> out;
    for (std::uint32_t l : a) out.push_back(*reinterpret_cast<const std::uint64_t*>(g.data(l)));
    CHECK(out == want);
  }

  // A fiber task: never lanes, even when asked.
  Graph g;
  const std::uint32_t x = g.add_location("x", 8, 1, typeid(std::uint64_t));
  g.add_task({"w", {{x, Mode::write}}, [](const Instance&) {}});
  g.add_task({"f", {{x, Mode::read}}, [](const Instance& in) {
                in.engine->fiber_acquire(in, 0);
                in.engine->fiber_release(in, 0);
              }, true});
  auto engine = make_engine(g);
  engine->set_lanes(Choice::always);
  ordo::sched::Pool pool({2});
  CHECK(engine->run(pool, 5, {}, 0) == 5);
  CHECK_FALSE(engine->ran_lanes());
}

TEST_CASE("a body exception on a lane stops the run and nothing after it runs", "[lanes]") {
  // x: W0 R1 W2 per iteration, a lane each on 3 workers; W0 throws at iteration 4, so neither
  // R1 nor W2 may run an instance of iteration 4 or later (they come after it on x).
  Graph g;
  const std::uint32_t x = g.add_location("x", 8, 1, typeid(std::uint64_t));
  std::atomic<int> late{0};
  const Mode modes[] = {Mode::write, Mode::read, Mode::write};
  for (std::uint32_t t = 0; t < 3; ++t)
    g.add_task({"t" + std::to_string(t), {{x, modes[t]}}, [t, &late](const Instance& in) {
                  if (t == 0 && in.iteration == 4) throw std::runtime_error("W0 failed at 4");
                  if (t != 0 && in.iteration >= 4) late.fetch_add(1);
                }});
  auto engine = make_engine(g);
  engine->set_lanes(Choice::always);
  ordo::sched::Pool pool({3});
  CHECK_THROWS_WITH(engine->run(pool, 50, {}, 0), "W0 failed at 4");
  CHECK(engine->ran_lanes());
  CHECK(late.load() == 0);
  CHECK(engine->broken());
}

TEST_CASE("a lane whose worker still holds a pinned item fails the run, not the process",
          "[lanes]") {
  // A broken lanes protocol, set up by hand: when w completes, r's lane (lane 1) is parked and
  // worker 1's pinned slot is full, so Pool::push_to refuses the engine's pin of lane 1's item
  // (std::logic_error). Thrown out of worker 0 it ended the process. The run must drain (the
  // item in the slot runs lane 1) and throw a RunError that says why. How: f, a task without
  // locks (a range item), holds worker 1 after lane 1 parked there; w's body then pins lane
  // 1's item itself; f lets worker 1 go once worker 0 has finished its lane (it parks after).
  // Which worker takes f first is the pool's choice, so runs of one iteration are tried until
  // f lands on worker 1 after its lane parked.
  class Parks final : public ordo::sched::Observer {
   public:
    void on_park(unsigned w) override {
      if (w == 0) worker0.fetch_add(1);
    }
    void on_unpark(unsigned) override {}
    void on_steal(unsigned, unsigned) override {}
    std::atomic<std::uint64_t> worker0{0};
  } parks;
  // No idle spin: a lane whose input is missing parks at once.
  ordo::sched::Pool pool({.workers = 2, .bind = false, .idle_spin = std::chrono::nanoseconds{0}});
  pool.set_observer(&parks);
  enum Stage : int { waiting, f_on_1, f_elsewhere, pinned, gave_up };
  std::atomic<int> stage{waiting};
  std::atomic<std::uint64_t> parks_before{0}, worker0_parks_at_pin{0};
  std::unique_ptr<Engine> engine;
  const auto until = [](std::chrono::steady_clock::time_point deadline) {
    return std::chrono::steady_clock::now() < deadline;
  };
  Graph g;
  const std::uint32_t x = g.add_location("x", 8, 1, typeid(std::uint64_t));
  g.add_task({"w", {{x, Mode::write}}, [&](const Instance&) {
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                while (stage.load() == waiting && until(deadline)) std::this_thread::yield();
                if (stage.load() != f_on_1) return;  // f ran on worker 0: an ordinary run
                if (engine->lane_parks() == parks_before.load()) {  // f came before lane 1
                  stage.store(gave_up);
                  return;
                }
                worker0_parks_at_pin.store(parks.worker0.load());
                pool.push_to(1, Engine::kLane | 1);
                stage.store(pinned);
              }});
  g.add_task({"r", {{x, Mode::read}}, [](const Instance&) {}});
  g.add_task({"f", {}, [&](const Instance& in) {
                int expected = waiting;
                if (!stage.compare_exchange_strong(expected, in.worker == 1 ? f_on_1 : f_elsewhere) ||
                    in.worker != 1)
                  return;
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                while (stage.load() == f_on_1 && until(deadline)) std::this_thread::yield();
                if (stage.load() != pinned) return;
                while (parks.worker0.load() == worker0_parks_at_pin.load() && until(deadline))
                  std::this_thread::yield();
              }});
  engine = make_engine(g);
  engine->set_lanes(Choice::always);
  std::optional<RunError> error;
  int runs = 0;
  while (!error && runs < 200) {
    ++runs;
    stage.store(waiting);
    parks_before.store(engine->lane_parks());
    try {
      const std::uint64_t ran = engine->run(pool, 1, {}, 0);
      REQUIRE(ran == 1);
      REQUIRE(engine->ran_lanes());
    } catch (const RunError& e) {
      error = e;
    }
  }
  INFO(runs << " run(s)");
  REQUIRE(error);
  CHECK(stage.load() == pinned);
  CHECK(error->kind() == Failure::Kind::own);
  CHECK_THAT(error->what(), Catch::Contains("a lane could not be woken") &&
                                Catch::Contains("worker 1 has not taken its pinned item"));
  CHECK(engine->broken());
}
