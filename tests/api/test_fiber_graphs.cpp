// Graphs that mix fiber and dataflow tasks, through the public API: a fixed graph whose fiber
// bodies acquire in other orders than declared, release early or never acquire a read, and
// random graphs of both kinds, each bit-identical to a sequential interpreter of program order
// on any number of workers (and run_until stopping after exactly the checked iteration). The
// mechanics of one fiber task: test_fiber_tasks.cpp.
#include <catch2/catch.hpp>

#include "test_support.hpp"
#include <cstdint>
#include <memory>
#include <ordo/ordo.hpp>
#include <span>
#include <string>
#include <vector>

// ---- mixed dataflow and fiber graphs: bit-identical to a sequential interpreter --------------

namespace {

using ordo::test::kTsan;

constexpr std::size_t kN = 48;

// The tasks' arithmetic, shared by the bodies and the interpreter so that both compute each
// element the same way; only the order of the steps differs. Doubles: any reordering of the
// steps would change low bits.
void k_seed(std::span<double> a, std::span<const double> ro, std::uint64_t k) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = a[i] * 0.5 + ro[i] + static_cast<double>(k);
}
void k_pairs(std::span<const double> a, std::vector<double>& tmp) {
  tmp.resize(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) tmp[i] = a[i] + a[(i + 1) % a.size()] * 0.3;
}
void k_smooth(std::span<double> b, const std::vector<double>& tmp) {
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = b[i] * 0.9 + tmp[i];
}
void k_feedback(std::span<double> a, std::span<const double> b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += 0.1 * b[i];
}
void k_mix(std::span<double> c, std::span<const double> b, std::span<const double> ro,
           std::span<const double> e) {
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = c[i] * 0.5 + b[i] * ro[i] - e[i] * 0.01;
}
void k_decay(std::span<double> d, std::span<const double> c) {
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = d[i] * 0.25 + c[i];
}
void k_sum(std::span<double> acc, std::span<double> e, std::span<const double> d) {
  for (double v : d) acc[0] += v;
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = acc[0] * 1e-3 + static_cast<double>(i);
}
void k_out(std::span<double> f, std::span<const double> a, std::span<const double> b,
           std::span<const double> e) {
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = f[i] * 0.5 + a[i] - b[i] + e[i];
}

struct Mixed {
  ordo::Location<double> a, b, c, d, e, f, acc, ro;
};

// Declaration (program) order, with the kind of each task:
//   seed     dataflow  write a, read ro
//   pairs    fiber     read a, write b      (copies from a, releases a, then writes b)
//   feedback dataflow  write a, read b
//   mix      fiber     write c, read b, read ro, read e  (acquires in another order than declared)
//   decay    fiber     read a, read c, write d            (never acquires a: released at the end)
//   sum      dataflow  read d, write acc, write e
//   out      fiber     read a, read b, read e, write f    (releases each input early)
// e's FIFO (mix r, sum w, out r) starts and ends with reads: its wrap-around read group merges.
Mixed build_mixed(ordo::Graph& g) {
  Mixed m;
  m.a = g.location<double>("a", kN);
  m.b = g.location<double>("b", kN);
  m.c = g.location<double>("c", kN);
  m.d = g.location<double>("d", kN);
  m.e = g.location<double>("e", kN);
  m.f = g.location<double>("f", kN);
  m.acc = g.location<double>("acc", 1);
  m.ro = g.location<double>("ro", kN);
  for (std::size_t i = 0; i < kN; ++i) g.data(m.ro)[i] = 1.0 / static_cast<double>(i + 3);
  const Mixed l = m;
  g.task("seed", {ordo::write(l.a), ordo::read(l.ro)},
         [=](ordo::Context& ctx) { k_seed(ctx.write(l.a), ctx.read(l.ro), ctx.iteration()); });
  g.fiber_task("pairs", {ordo::read(l.a), ordo::write(l.b)}, [=](ordo::FiberContext& ctx) {
    std::vector<double> tmp;
    k_pairs(ctx.acquire_read(l.a), tmp);
    ctx.release(l.a);
    k_smooth(ctx.acquire_write(l.b), tmp);
  });
  g.task("feedback", {ordo::write(l.a), ordo::read(l.b)},
         [=](ordo::Context& ctx) { k_feedback(ctx.write(l.a), ctx.read(l.b)); });
  g.fiber_task("mix", {ordo::write(l.c), ordo::read(l.b), ordo::read(l.ro), ordo::read(l.e)},
               [=](ordo::FiberContext& ctx) {
                 auto e = ctx.acquire_read(l.e);
                 auto ro = ctx.acquire_read(l.ro);
                 auto c = ctx.acquire_write(l.c);
                 auto b = ctx.acquire_read(l.b);
                 k_mix(c, b, ro, e);
                 ctx.release(l.b);
                 ctx.release(l.e);
               });
  g.fiber_task("decay", {ordo::read(l.a), ordo::read(l.c), ordo::write(l.d)},
               [=](ordo::FiberContext& ctx) {
                 auto d = ctx.acquire_write(l.d);
                 k_decay(d, ctx.acquire_read(l.c));
               });
  g.task("sum", {ordo::read(l.d), ordo::write(l.acc), ordo::write(l.e)}, [=](ordo::Context& ctx) {
    k_sum(ctx.write(l.acc), ctx.write(l.e), ctx.read(l.d));
  });
  g.fiber_task("out", {ordo::read(l.a), ordo::read(l.b), ordo::read(l.e), ordo::write(l.f)},
               [=](ordo::FiberContext& ctx) {
                 std::vector<double> a(kN), b(kN);
                 auto sa = ctx.acquire_read(l.a);
                 a.assign(sa.begin(), sa.end());
                 ctx.release(l.a);
                 auto sb = ctx.acquire_read(l.b);
                 b.assign(sb.begin(), sb.end());
                 ctx.release(l.b);
                 k_out(ctx.acquire_write(l.f), a, b, ctx.acquire_read(l.e));
               });
  return m;
}

// The program-order interpreter: every iteration runs every task in declaration order.
std::vector<std::vector<double>> interpret(std::uint64_t iterations) {
  std::vector<double> a(kN), b(kN), c(kN), d(kN), e(kN), f(kN), acc(1), ro(kN), tmp;
  for (std::size_t i = 0; i < kN; ++i) ro[i] = 1.0 / static_cast<double>(i + 3);
  for (std::uint64_t k = 0; k < iterations; ++k) {
    k_seed(a, ro, k);
    k_pairs(a, tmp);
    k_smooth(b, tmp);
    k_feedback(a, b);
    k_mix(c, b, ro, e);
    k_decay(d, c);
    k_sum(acc, e, d);
    k_out(f, a, b, e);
  }
  return {a, b, c, d, e, f, acc};
}

std::vector<std::vector<double>> contents(const ordo::Graph& g, const Mixed& m) {
  auto v = [&](ordo::Location<double> l) {
    auto s = g.data(l);
    return std::vector<double>(s.begin(), s.end());
  };
  return {v(m.a), v(m.b), v(m.c), v(m.d), v(m.e), v(m.f), v(m.acc)};
}

}  // namespace

TEST_CASE("mixed dataflow and fiber graphs equal program order on 1, 2 and 4 workers",
          "[fiber]") {
  const std::uint64_t iterations = kTsan ? 12 : 40;
  const auto expect = interpret(iterations);
  for (unsigned workers : {1u, 2u, 4u}) {
    INFO("workers " << workers);
    ordo::Graph g;
    Mixed m = build_mixed(g);
    ordo::Runtime rt({.workers = workers});
    // Two runs: the second continues the iteration count and the lock states of the first.
    rt.run(g, iterations / 2);
    rt.run(g, iterations - iterations / 2);
    const auto got = contents(g, m);
    REQUIRE(got.size() == expect.size());
    for (std::size_t l = 0; l < got.size(); ++l) {
      INFO("location #" << l);
      CHECK(got[l] == expect[l]);  // bit-identical
    }
  }
}

TEST_CASE("run_until stops a fiber graph after exactly the checked iteration", "[fiber]") {
  ordo::Graph g;
  Mixed m = build_mixed(g);
  ordo::Runtime rt({.workers = 2});
  ordo::Until until;
  until.check_every = 3;
  until.max_iterations = 100;
  until.done = [&](const ordo::Graph& gr) { return gr.iterations_done() >= 9; };
  auto stats = rt.run_until(g, until);
  CHECK(stats.iterations == 9);
  CHECK(contents(g, m) == interpret(9));
}

// ---- random mixed graphs -----------------------------------------------------------------------

namespace {

constexpr std::size_t kWords = 8;

struct RandomAccess {
  int location;
  bool write;
  bool used;           // a fiber body may leave a read unacquired (released at its end)
  bool release_early;  // a fiber body releases it as soon as it is done with it
};

struct RandomTask {
  bool fiber;
  std::vector<RandomAccess> accesses;
  std::vector<std::size_t> acquire_order;  // fiber bodies acquire in this order
};

std::uint64_t digest(std::uint64_t h, std::span<const std::uint64_t> words) {
  for (std::uint64_t w : words) h = (h ^ w) * 0x100000001b3ull;
  return h;
}

// The value a task writes: every used access's digest, combined in declaration order (so the
// order in which a fiber acquired them does not matter), and the task and the iteration.
std::uint64_t combine(const std::vector<std::uint64_t>& digests, std::size_t task,
                      std::uint64_t k) {
  std::uint64_t h = 0xcbf29ce484222325ull ^ (task * 1315423911ull) ^ (k << 20);
  for (std::uint64_t d : digests) h = (h ^ d) * 0x100000001b3ull;
  return h;
}

void write_words(std::span<std::uint64_t> w, std::uint64_t h) {
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = w[j] * 31 + h + j;
}

std::vector<RandomTask> random_tasks(std::uint32_t seed, int locations) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&](std::uint64_t n) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s % n;
  };
  const int ntasks = 4 + static_cast<int>(next(9));
  std::vector<RandomTask> tasks(static_cast<std::size_t>(ntasks));
  for (auto& t : tasks) {
    t.fiber = next(3) != 0;
    std::vector<int> locs(static_cast<std::size_t>(locations));
    for (int i = 0; i < locations; ++i) locs[static_cast<std::size_t>(i)] = i;
    const std::size_t count = next(4);  // 0..3 accesses (a task may have none)
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t pick = i + next(locs.size() - i);
      std::swap(locs[i], locs[pick]);
      RandomAccess a{locs[i], next(2) == 0, true, false};
      if (t.fiber) {
        a.used = a.write || next(5) != 0;
        a.release_early = next(2) == 0;
      }
      t.accesses.push_back(a);
    }
    for (std::size_t i = 0; i < t.accesses.size(); ++i) t.acquire_order.push_back(i);
    for (std::size_t i = t.acquire_order.size(); i > 1; --i)
      std::swap(t.acquire_order[i - 1], t.acquire_order[next(i)]);
  }
  return tasks;
}

std::vector<std::vector<std::uint64_t>> random_interpret(const std::vector<RandomTask>& tasks,
                                                         int locations, std::uint64_t iterations) {
  std::vector<std::vector<std::uint64_t>> mem(static_cast<std::size_t>(locations),
                                              std::vector<std::uint64_t>(kWords, 0));
  for (std::uint64_t k = 0; k < iterations; ++k)
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      std::vector<std::uint64_t> digests;
      for (const auto& a : tasks[t].accesses)
        if (a.used) digests.push_back(digest(0, mem[static_cast<std::size_t>(a.location)]));
      const std::uint64_t h = combine(digests, t, k);
      for (const auto& a : tasks[t].accesses)
        if (a.write) write_words(mem[static_cast<std::size_t>(a.location)], h);
    }
  return mem;
}

void random_build(ordo::Graph& g, const std::vector<RandomTask>& tasks, int locations,
                  std::vector<ordo::Location<std::uint64_t>>& locs) {
  for (int i = 0; i < locations; ++i)
    locs.push_back(g.location<std::uint64_t>("l" + std::to_string(i), kWords));
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const RandomTask task = tasks[t];
    std::vector<ordo::Access> acc;
    std::vector<ordo::Location<std::uint64_t>> mine;
    for (const auto& a : task.accesses) {
      auto l = locs[static_cast<std::size_t>(a.location)];
      mine.push_back(l);
      acc.push_back(a.write ? ordo::write(l) : ordo::read(l));
    }
    const std::string name = "t" + std::to_string(t);
    if (!task.fiber) {
      g.task(name, acc, [=](ordo::Context& ctx) {
        std::vector<std::uint64_t> digests;
        for (const auto& l : mine) digests.push_back(digest(0, ctx.read(l)));
        const std::uint64_t h = combine(digests, t, ctx.iteration());
        for (std::size_t i = 0; i < mine.size(); ++i)
          if (task.accesses[i].write) write_words(ctx.write(mine[i]), h);
      });
      continue;
    }
    g.fiber_task(name, acc, [=](ordo::FiberContext& ctx) {
      std::vector<std::uint64_t> by_access(mine.size(), 0);
      std::vector<std::span<std::uint64_t>> out(mine.size());
      for (std::size_t i : task.acquire_order) {
        const RandomAccess& a = task.accesses[i];
        if (!a.used) continue;
        if (a.write) {
          out[i] = ctx.acquire_write(mine[i]);
          by_access[i] = digest(0, out[i]);
        } else {
          by_access[i] = digest(0, ctx.acquire_read(mine[i]));
          if (a.release_early) ctx.release(mine[i]);
        }
      }
      std::vector<std::uint64_t> digests;
      for (std::size_t i = 0; i < mine.size(); ++i)
        if (task.accesses[i].used) digests.push_back(by_access[i]);
      const std::uint64_t h = combine(digests, t, ctx.iteration());
      for (std::size_t i = 0; i < mine.size(); ++i) {
        if (!task.accesses[i].write) continue;
        write_words(out[i], h);
        if (task.accesses[i].release_early) ctx.release(mine[i]);
      }
    });
  }
}

}  // namespace

TEST_CASE("random mixed graphs equal program order with 1 to 5 workers", "[fiber]") {
  const std::uint32_t graphs = kTsan ? 6 : 40;
  const std::uint64_t iterations = kTsan ? 8 : 25;
  std::vector<std::unique_ptr<ordo::Runtime>> runtimes;
  for (unsigned w = 1; w <= 5; ++w) runtimes.push_back(std::make_unique<ordo::Runtime>(ordo::RuntimeOptions{.workers = w}));
  for (std::uint32_t seed = 1; seed <= graphs; ++seed) {
    const int locations = 3 + static_cast<int>(seed % 5);
    const auto tasks = random_tasks(seed, locations);
    const auto expect = random_interpret(tasks, locations, iterations);
    for (unsigned w = 1; w <= 5; ++w) {
      INFO("seed " << seed << ", workers " << w);
      ordo::Graph g;
      std::vector<ordo::Location<std::uint64_t>> locs;
      random_build(g, tasks, locations, locs);
      runtimes[w - 1]->run(g, iterations);
      for (int l = 0; l < locations; ++l) {
        auto got = g.data(locs[static_cast<std::size_t>(l)]);
        REQUIRE(std::vector<std::uint64_t>(got.begin(), got.end()) ==
                expect[static_cast<std::size_t>(l)]);
      }
    }
  }
}
