// Reductions in one process: the value is combine_in_order of the contributions, bit for bit,
// for any number of contributions and workers; tasks after the combine read this iteration's
// value, tasks before it the previous one; run_until stops on a reduced value where a
// sequential loop does; and every misuse is an Error that names the reduction.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

using Catch::Contains;

namespace {

// Contribution b of iteration k: values over many magnitudes, so that the sum depends on the
// order in which they are added.
double contribution(std::uint32_t b, std::uint64_t k) {
  return std::ldexp(1.0 + 0.1 * static_cast<double>((b * 7 + k * 3) % 11), static_cast<int>((b * 13 + k) % 40) - 20) *
         (((b + k) % 3 == 0) ? -1.0 : 1.0);
}

struct Values {
  std::vector<double> sum, min, max;
  std::vector<std::uint64_t> bits;  // the user operator's (a non-commutative mix)
  bool operator==(const Values&) const = default;
};

// A non-commutative, non-associative operator: only one order gives its result.
struct Mix {
  std::uint64_t operator()(std::uint64_t a, std::uint64_t b) const {
    return a * 0x9E3779B97F4A7C15ull + (b ^ (a >> 7));
  }
};

// Each iteration every block contributes; a task after the combines records the values.
Values run_graph(std::uint32_t blocks, std::uint64_t iterations, unsigned workers) {
  ordo::Graph g;
  auto sum = g.reduction<double>("sum", blocks);
  auto min = g.reduction<double, ordo::Min>("min", blocks);
  auto max = g.reduction<double>("max", blocks, ordo::Max{});
  auto mix = g.reduction<std::uint64_t>("mix", blocks, Mix{});
  auto data = g.location_family<double>("data", blocks, 4);
  g.task_family("block", blocks, [&](std::uint32_t b, ordo::AccessList& acc) {
    acc.add(ordo::write(data[b]));
    acc.add(ordo::contribute(sum, b));
    acc.add(ordo::contribute(min, b));
    acc.add(ordo::contribute(max, b));
    acc.add(ordo::contribute(mix, b));
  }, [=](ordo::Context& ctx, std::uint32_t b) {
    const double v = contribution(b, ctx.iteration());
    ctx.write(data[b])[0] = v;
    ctx.contribute(sum, b, v);
    ctx.contribute(min, b, v);
    ctx.contribute(max, b, v);
    ctx.contribute(mix, b, b * 1000003ull + ctx.iteration());
  });
  g.combine(sum);
  g.combine(min);
  g.combine(max);
  g.combine(mix);
  Values out;
  g.task("record", {ordo::read(sum), ordo::read(min), ordo::read(max), ordo::read(mix)},
         [&out, sum, min, max, mix](ordo::Context& ctx) {
           out.sum.push_back(ctx.value(sum));
           out.min.push_back(ctx.value(min));
           out.max.push_back(ctx.value(max));
           out.bits.push_back(ctx.value(mix));
         });
  ordo::Runtime rt({.workers = workers});
  rt.run(g, iterations);
  CHECK(g.value(sum) == out.sum.back());
  CHECK(g.value(mix) == out.bits.back());
  return out;
}

Values sequential(std::uint32_t blocks, std::uint64_t iterations) {
  Values out;
  for (std::uint64_t k = 0; k < iterations; ++k) {
    std::vector<double> v(blocks);
    std::vector<std::uint64_t> m(blocks);
    for (std::uint32_t b = 0; b < blocks; ++b) {
      v[b] = contribution(b, k);
      m[b] = b * 1000003ull + k;
    }
    out.sum.push_back(ordo::combine_in_order<double>(v));
    out.min.push_back(ordo::combine_in_order<double>(v, ordo::Min{}));
    out.max.push_back(ordo::combine_in_order<double>(v, ordo::Max{}));
    out.bits.push_back(ordo::combine_in_order<std::uint64_t>(m, Mix{}));
  }
  return out;
}

}  // namespace

TEST_CASE("a reduction gives combine_in_order's bits for any contributions and workers") {
  for (std::uint32_t blocks : {1u, 2u, 7u, 8u, 9u, 64u, 65u, 100u, 513u}) {
    const Values want = sequential(blocks, 5);
    for (unsigned workers : {1u, 2u, 4u}) {
      INFO("blocks " << blocks << " workers " << workers);
      CHECK(run_graph(blocks, 5, workers) == want);
    }
  }
}

TEST_CASE("combine_in_order is the documented tree, not a left fold") {
  // 17 contributions: groups 0-7, 8-15 and 16 folded, then those three; with Mix that differs
  // from one fold over all.
  std::vector<std::uint64_t> v(17);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i + 1;
  auto fold = [](std::size_t begin, std::size_t end, const std::vector<std::uint64_t>& in) {
    std::uint64_t acc = in[begin];
    for (std::size_t i = begin + 1; i < end; ++i) acc = Mix{}(acc, in[i]);
    return acc;
  };
  const std::vector<std::uint64_t> level1{fold(0, 8, v), fold(8, 16, v), v[16]};
  CHECK(ordo::combine_in_order<std::uint64_t>(v, Mix{}) == fold(0, 3, level1));
  CHECK(ordo::combine_in_order<std::uint64_t>(v, Mix{}) != fold(0, 17, v));
  CHECK_THROWS_WITH(ordo::combine_in_order<double>(std::vector<double>{}),
                    Contains("no contributions"));
}

TEST_CASE("readers after the combine see this iteration's value, readers before it the last") {
  ordo::Graph g;
  auto r = g.reduction<std::int64_t>("r", 3);
  std::vector<std::int64_t> before, after;
  g.task("before", {ordo::read(r)}, [&, r](ordo::Context& ctx) { before.push_back(ctx.value(r)); });
  for (std::uint32_t i = 0; i < 3; ++i)
    g.task("c" + std::to_string(i), {ordo::contribute(r, i)}, [r, i](ordo::Context& ctx) {
      ctx.contribute(r, i, static_cast<std::int64_t>((ctx.iteration() + 1) * (i + 1)));
    });
  g.combine(r);
  g.task("after", {ordo::read(r)}, [&, r](ordo::Context& ctx) { after.push_back(ctx.value(r)); });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 4);
  // Iteration k: contributions (k + 1) * 1, 2, 3, whose sum is 6 (k + 1).
  CHECK(after == std::vector<std::int64_t>{6, 12, 18, 24});
  CHECK(before == std::vector<std::int64_t>{0, 6, 12, 18});
  CHECK(g.value(r) == 24);
}

TEST_CASE("run_until on a reduced value stops where the sequential loop stops") {
  // x_b halves every iteration; stop once the sum of squares is below a threshold.
  constexpr std::uint32_t kBlocks = 12;
  for (unsigned workers : {1u, 2u, 4u})
    for (std::uint64_t check_every : {1u, 3u})
      for (bool dataflow : {false, true}) {
        INFO("workers " << workers << " check_every " << check_every << " dataflow " << dataflow);
        ordo::Graph g;
        auto x = g.location_family<double>("x", kBlocks, 1);
        auto norm = g.reduction<double>("norm", kBlocks);
        g.task_family(
            "step", kBlocks,
            [&](std::uint32_t b, ordo::AccessList& acc) {
              acc.add(ordo::write(x[b]));
              acc.add(ordo::contribute(norm, b));
            },
            [=](ordo::Context& ctx, std::uint32_t b) {
              auto v = ctx.write(x[b]);
              if (ctx.iteration() == 0) v[0] = 1.0 + b;
              v[0] *= 0.5;
              ctx.contribute(norm, b, v[0] * v[0]);
            });
        g.combine(norm);
        std::vector<double> seen;
        ordo::Until until;
        until.done = [&](const ordo::Graph& graph) {
          seen.push_back(graph.value(norm));
          return seen.back() < 1e-6;
        };
        until.check_every = check_every;
        until.max_iterations = 1000;
        if (dataflow) until.reads = {ordo::read(norm)};
        ordo::Runtime rt({.workers = workers});
        const auto stats = rt.run_until(g, until);
        // The same computation, sequentially.
        std::vector<double> xs(kBlocks);
        for (std::uint32_t b = 0; b < kBlocks; ++b) xs[b] = 1.0 + b;
        std::vector<double> want;
        std::uint64_t k = 0;
        while (true) {
          std::vector<double> parts(kBlocks);
          for (std::uint32_t b = 0; b < kBlocks; ++b) {
            xs[b] *= 0.5;
            parts[b] = xs[b] * xs[b];
          }
          ++k;
          const double n = ordo::combine_in_order<double>(parts);
          if (k % check_every != 0) continue;
          want.push_back(n);
          if (n < 1e-6) break;
        }
        CHECK(stats.iterations == k);
        CHECK(seen == want);
      }
}

TEST_CASE("a fiber task contributes and reads a reduction") {
  ordo::Graph g;
  auto r = g.reduction<int>("r", 2);
  std::vector<int> got;
  g.fiber_task("f0", {ordo::contribute(r, 0)}, [r](ordo::FiberContext& ctx) {
    ctx.contribute(r, 0, static_cast<int>(ctx.iteration()));
  });
  g.task("t1", {ordo::contribute(r, 1)}, [r](ordo::Context& ctx) { ctx.contribute(r, 1, 100); });
  g.combine(r);
  g.fiber_task("reader", {ordo::read(r)}, [&, r](ordo::FiberContext& ctx) { got.push_back(ctx.value(r)); });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 3);
  CHECK(got == std::vector<int>{100, 101, 102});
}

TEST_CASE("an operator that throws stops the run with an Error naming the reduction") {
  ordo::Graph g;
  auto r = g.reduction<int>("fragile", 3, [](const int& a, const int& b) -> int {
    if (b == 7) throw std::runtime_error("seven is not allowed");
    return a + b;
  });
  for (std::uint32_t i = 0; i < 3; ++i)
    g.task("c" + std::to_string(i), {ordo::contribute(r, i)}, [r, i](ordo::Context& ctx) {
      ctx.contribute(r, i, ctx.iteration() == 2 && i == 1 ? 7 : 1);
    });
  g.combine(r);
  ordo::Runtime rt({.workers = 2});
  CHECK_THROWS_WITH(rt.run(g, 5), Contains("the operator of reduction 'fragile' threw: seven is not allowed"));
  CHECK_THROWS_WITH(rt.run(g, 1), Contains("previous run failed"));

  ordo::Graph f;
  auto t = f.reduction<int>("t", 2, [](const int&, const int&) -> int { throw 42; });
  f.task("c", {ordo::contribute(t, 0), ordo::contribute(t, 1)}, [t](ordo::Context& ctx) {
    ctx.contribute(t, 0, 1);
    ctx.contribute(t, 1, 2);
  });
  f.combine(t);
  try {
    rt.run(f, 1);
    FAIL("the run should have thrown");
  } catch (const ordo::Error& e) {
    CHECK_THAT(e.what(), Contains("reduction 't' threw something that is not a std::exception"));
  }
}

namespace {

// Reduction<T> is typed, so only a handle whose bytes were copied into another T's reaches a
// reduction with the wrong type. `wrong` picks the access that uses such a handle.
enum class Wrong { none, contribute, value, fiber_value };
struct TypedGraph {
  ordo::Graph g;
  ordo::Reduction<double> dot;
  explicit TypedGraph(Wrong wrong) {
    dot = g.reduction<double>("dot", 2);
    const auto d = dot;
    const auto as_float = std::bit_cast<ordo::Reduction<float>>(d);
    const auto as_long = std::bit_cast<ordo::Reduction<std::int64_t>>(d);
    g.task("c0", {ordo::contribute(d, 0)}, [=](ordo::Context& ctx) {
      if (wrong == Wrong::contribute) ctx.contribute(as_float, 0, 1.0f);
      ctx.contribute(d, 0, 1.0);
    });
    g.task("c1", {ordo::contribute(d, 1)}, [=](ordo::Context& ctx) { ctx.contribute(d, 1, 2.0); });
    g.combine(d);
    g.task("reader", {ordo::read(d)}, [=](ordo::Context& ctx) {
      if (wrong == Wrong::value) (void)ctx.value(as_long);
      (void)ctx.value(d);
    });
    g.fiber_task("fiber", {ordo::read(d)}, [=](ordo::FiberContext& ctx) {
      if (wrong == Wrong::fiber_value) (void)ctx.value(as_float);
      (void)ctx.value(d);
    });
  }
};

}  // namespace

TEST_CASE("a reduced value read as another type is refused with an Error naming the reduction") {
  ordo::Runtime rt({.workers = 2});
  TypedGraph t(Wrong::none);
  const auto as_float = std::bit_cast<ordo::Reduction<float>>(t.dot);
  const auto as_long = std::bit_cast<ordo::Reduction<std::int64_t>>(t.dot);
  CHECK_THROWS_WITH(t.g.value(as_float), Contains("reduction 'dot' holds 8-byte values of another type"));
  rt.run(t.g, 2);
  CHECK(t.g.value(t.dot) == 3.0);
  CHECK_THROWS_WITH(t.g.value(as_float),
                    Contains("Graph::value: reduction 'dot' holds 8-byte values of another type") &&
                        Contains("use the Reduction<T> that Graph::reduction returned"));
  CHECK_THROWS_WITH(t.g.value(as_long), Contains("reduction 'dot' holds 8-byte values"));

  TypedGraph contribute(Wrong::contribute);
  CHECK_THROWS_WITH(rt.run(contribute.g, 1),
                    Contains("task 'c0' accesses reduction 'dot' as another type than the 8-byte "
                             "values it was declared with; use the Reduction<T>"));
  TypedGraph value(Wrong::value);
  CHECK_THROWS_WITH(rt.run(value.g, 1), Contains("task 'reader' accesses reduction 'dot' as another type"));
  TypedGraph fiber(Wrong::fiber_value);
  CHECK_THROWS_WITH(rt.run(fiber.g, 1), Contains("task 'fiber' acquires reduction 'dot' as another type"));
}

TEST_CASE("misused reductions are refused with an Error saying what to do") {
  ordo::Graph g;
  auto x = g.location<int>("x", 1);
  auto r = g.reduction<int>("r", 2);
  CHECK_THROWS_WITH(g.reduction<int>("r", 2), Contains("'r' already exists"));
  CHECK_THROWS_WITH(g.location<int>("r.part[1]", 1), Contains("already exists"));
  CHECK_THROWS_WITH(g.reduction<int>("none", 0), Contains("0 contributions"));
  CHECK_THROWS_WITH(ordo::contribute(r, 2), Contains("contribution 2 of a reduction of 2"));
  CHECK_THROWS_WITH(g.value(r), Contains("no value before the graph's first run"));
  // Accesses that only the reduction may make.
  CHECK_THROWS_WITH(g.task("w", {ordo::Access{r.result(), ordo::Mode::write, false, 0, r.graph_serial()}},
                           [](ordo::Context&) {}),
                    Contains("writes reduction 'r', which only its combining step writes"));
  CHECK_THROWS_WITH(g.task("p", {ordo::Access{r.partial(0), ordo::Mode::read, false, 0, r.graph_serial()}},
                           [](ordo::Context&) {}),
                    Contains("reads contribution 0 of reduction 'r'"));
  CHECK_THROWS_WITH(g.task("pos", {ordo::contribute(r, 0).at(3)}, [](ordo::Context&) {}),
                    Contains("a reduction's accesses take none"));
  CHECK_THROWS_WITH(g.combine(r), Contains("contribution 0 of reduction 'r' has no task"));
  g.task("c0", {ordo::contribute(r, 0), ordo::write(x)}, [r](ordo::Context& ctx) { ctx.contribute(r, 0, 1); });
  CHECK_THROWS_WITH(g.task("again", {ordo::contribute(r, 0)}, [](ordo::Context&) {}),
                    Contains("contributes contribution 0 of reduction 'r', which task 'c0' contributes already"));
  // A refused family undoes its contributions: member 1 fails after member 0 contributed 1.
  CHECK_THROWS_WITH(g.task_family("fam", 2, [&](std::uint32_t i, ordo::AccessList& acc) {
    acc.add(ordo::contribute(r, 1));
    if (i == 1) acc.add(ordo::read(x).at(1));
  }, [](ordo::Context&, std::uint32_t) {}), Contains("contributes contribution 1 of reduction 'r', which task 'fam[0]'"));
  CHECK_THROWS_WITH(g.combine(r), Contains("contribution 1 of reduction 'r' has no task"));
  // A task reading the value but not declaring it; contributing without declaring.
  g.task("c1", {ordo::contribute(r, 1)}, [r](ordo::Context& ctx) {
    ctx.contribute(r, 1, 2);
    if (ctx.iteration() == 1) (void)ctx.value(r);
  });
  g.combine(r);
  CHECK_THROWS_WITH(g.combine(r), Contains("combined already"));
  CHECK_THROWS_WITH(g.task("late", {ordo::contribute(r, 0)}, [](ordo::Context&) {}),
                    Contains("after Graph::combine"));
  ordo::Runtime rt({.workers = 2});
  CHECK_THROWS_WITH(rt.run(g, 3), Contains("task 'c1' accesses location 'r', which it did not declare"));

  // Never combined: the graph does not run.
  ordo::Graph h;
  auto q = h.reduction<double>("q", 1);
  h.task("c", {ordo::contribute(q, 0)}, [q](ordo::Context& ctx) { ctx.contribute(q, 0, 1.0); });
  CHECK_THROWS_WITH(rt.run(h, 1), Contains("reduction 'q' is never combined"));
  CHECK_THROWS_WITH(h.validate(), Contains("reduction 'q' is never combined"));
  h.combine(q);
  rt.run(h, 1);
  CHECK_THROWS_WITH(h.combine(q), Contains("after the graph's first run"));
  CHECK_THROWS_WITH(h.reduction<int>("late", 1), Contains("after the graph's first run"));

  // Handles of another graph, or of none.
  ordo::Graph other;
  auto foreign = other.reduction<double>("q", 1);
  CHECK_THROWS_WITH(h.value(foreign), Contains("belongs to another Graph"));
  CHECK_THROWS_WITH(h.value(ordo::Reduction<double>{}), Contains("default-constructed"));
  CHECK_THROWS_WITH(other.combine(ordo::Reduction<double>{}), Contains("default-constructed"));

  // Graph::value from a task body.
  ordo::Graph b;
  auto v = b.reduction<int>("v", 1);
  b.task("c", {ordo::contribute(v, 0)}, [v](ordo::Context& ctx) { ctx.contribute(v, 0, 1); });
  b.combine(v);
  rt.run(b, 1);
  ordo::Graph body;
  auto y = body.location<int>("y", 1);
  body.task("peek", {ordo::write(y)}, [&b, v](ordo::Context&) { (void)b.value(v); });
  CHECK_THROWS_WITH(rt.run(body, 1), Contains("called from a task body"));

  // Inside a family's access pattern.
  ordo::Graph inside;
  auto z = inside.reduction<int>("z", 1);
  CHECK_THROWS_WITH(inside.task_family("fam", 1, [&](std::uint32_t, ordo::AccessList& acc) {
    acc.add(ordo::contribute(z, 0));
    inside.combine(z);
  }, [](ordo::Context&, std::uint32_t) {}), Contains("inside the access pattern of task family 'fam'"));
}

namespace {

// x[b] halves every iteration from 1 + b; `norm` sums their squares. Built for the run_until
// cases below.
struct Halving {
  static constexpr std::uint32_t kBlocks = 6;
  ordo::Graph g;
  std::vector<ordo::Location<double>> x;
  ordo::Reduction<double> norm, other;
  Halving() {
    x = g.location_family<double>("x", kBlocks, 1);
    norm = g.reduction<double>("norm", kBlocks);
    other = g.reduction<double>("other", 1);
    g.task_family(
        "step", kBlocks,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(x[b]));
          acc.add(ordo::contribute(norm, b));
          if (b == 0) acc.add(ordo::contribute(other, 0));
        },
        [x = x, norm = norm, other = other](ordo::Context& ctx, std::uint32_t b) {
          auto v = ctx.write(x[b]);
          if (ctx.iteration() == 0) v[0] = 1.0 + b;
          v[0] *= 0.5;
          ctx.contribute(norm, b, v[0] * v[0]);
          if (b == 0) ctx.contribute(other, 0, v[0]);
        });
    g.combine(norm);
    g.combine(other);
  }
};

}  // namespace

TEST_CASE(
    "run_until in the dataflow stops where between iterations does, on runs split by "
    "max_iterations") {
  // The same graph run to the tolerance in pieces (max_iterations 1..5, checks every 2): each
  // piece's checks count from its start, as between iterations.
  for (unsigned workers : {1u, 2u, 3u}) {
    std::vector<std::uint64_t> ran[2];
    std::vector<std::uint64_t> bits[2];
    for (int dataflow = 0; dataflow < 2; ++dataflow) {
      Halving h;
      ordo::Runtime rt({.workers = workers});
      for (std::uint64_t piece = 1; piece <= 5; ++piece) {
        ordo::Until u{.done = [&](const ordo::Graph& g) { return g.value(h.norm) < 1e-3; },
                      .check_every = 2,
                      .max_iterations = piece};
        if (dataflow) u.reads = {ordo::read(h.norm)};
        ran[dataflow].push_back(rt.run_until(h.g, u).iterations);
        bits[dataflow].push_back(std::bit_cast<std::uint64_t>(h.g.value(h.norm)));
      }
    }
    INFO("workers " << workers);
    CHECK(ran[0] == ran[1]);
    CHECK(bits[0] == bits[1]);
    // 91 / 4^k < 1e-3 first at k = 9; checks at totals 1, 3, 5-6, 8-10 (holds at 10), 12.
    CHECK(ran[0] == std::vector<std::uint64_t>{1, 2, 3, 4, 2});
  }
}

TEST_CASE("a condition in the dataflow reads only the reductions it lists") {
  ordo::Runtime rt({.workers = 2});
  {
    Halving h;
    ordo::Until u{.done = [&](const ordo::Graph& g) { return g.data(h.x[0])[0] < 0.1; },
                  .reads = {ordo::read(h.norm)}};
    CHECK_THROWS_WITH(rt.run_until(h.g, u),
                      Contains("run_until's stop condition reads location 'x[0]' with Graph::data, "
                               "but it lists its reads in Until::reads") &&
                          Contains("leave Until::reads empty"));
  }
  {
    Halving h;
    ordo::Until u{.done = [&](const ordo::Graph& g) { return g.value(h.other) < 0.1; },
                  .reads = {ordo::read(h.norm)}};
    CHECK_THROWS_WITH(rt.run_until(h.g, u),
                      Contains("reads reduction 'other', which Until::reads does not list"));
  }
  {
    // Both listed: stops at the first check where both hold, as the sequential loop.
    Halving h;
    ordo::Until u{
        .done =
            [&](const ordo::Graph& g) { return g.value(h.other) < 0.01 && g.value(h.norm) < 1e-3; },
        .reads = {ordo::read(h.norm), ordo::read(h.other)}};
    double x0 = 1.0, n = 0;
    std::uint64_t k = 0;
    do {
      x0 *= 0.5;
      std::vector<double> parts;
      for (std::uint32_t b = 0; b < Halving::kBlocks; ++b)
        parts.push_back(std::ldexp(1.0 + b, -static_cast<int>(k + 1)) *
                        std::ldexp(1.0 + b, -static_cast<int>(k + 1)));
      n = ordo::combine_in_order<double>(parts);
      ++k;
    } while (!(x0 < 0.01 && n < 1e-3));
    CHECK(rt.run_until(h.g, u).iterations == k);
  }
}

TEST_CASE("Until::reads naming no reduction of the graph is refused, saying what to list") {
  ordo::Runtime rt({.workers = 2});
  Halving h, elsewhere;
  auto never = [](const ordo::Graph&) { return false; };
  CHECK_THROWS_WITH(rt.run_until(h.g, ordo::Until{.done = never, .reads = {ordo::read(h.x[1])}}),
                    Contains("Until::reads lists location 'x[1]', which is no reduction's value") &&
                        Contains("list ordo::read(r) of each reduction it reads"));
  CHECK_THROWS_WITH(
      rt.run_until(h.g,
                   ordo::Until{.done = never, .reads = {ordo::read(ordo::Reduction<double>{})}}),
      Contains("Until::reads lists the access of a default-constructed handle"));
  CHECK_THROWS_WITH(
      rt.run_until(h.g, ordo::Until{.done = never, .reads = {ordo::read(elsewhere.norm)}}),
      Contains("Until::reads lists a handle of another graph"));
  // The graph is still good: nothing ran.
  CHECK(rt.run_until(h.g,
                     ordo::Until{.done = never, .max_iterations = 3, .reads = {ordo::read(h.norm)}})
            .iterations == 3);
}

TEST_CASE("a contribution declared but not made in an iteration stops the run with an Error") {
  for (int form = 0; form < 3; ++form) {
    INFO("form " << form);
    ordo::Graph g;
    auto r = g.reduction<double>("res", 2);
    auto x = g.location<double>("x", 1);
    // Contribution 1 is left out in iteration 3.
    auto skips = [](std::uint64_t k) { return k == 3; };
    g.task("c0", {ordo::contribute(r, 0), ordo::write(x)},
           [=](ordo::Context& ctx) { ctx.contribute(r, 0, 1.0); });
    if (form == 0)
      g.task("c1", {ordo::contribute(r, 1)}, [=](ordo::Context& ctx) {
        if (!skips(ctx.iteration())) ctx.contribute(r, 1, 2.0);
      });
    else if (form == 1)
      g.task_family(
          "fam", 1, [&](std::uint32_t, ordo::AccessList& acc) { acc.add(ordo::contribute(r, 1)); },
          [=](ordo::Context& ctx, std::uint32_t) {
            if (!skips(ctx.iteration())) ctx.contribute(r, 1, 2.0);
          });
    else
      g.fiber_task("fib", {ordo::contribute(r, 1)}, [=](ordo::FiberContext& ctx) {
        if (!skips(ctx.iteration())) ctx.contribute(r, 1, 2.0);
      });
    g.combine(r);
    ordo::Runtime rt({.workers = 2});
    CHECK(rt.run(g, 3).iterations == 3);
    const char* task = form == 0 ? "task 'c1'" : form == 1 ? "task 'fam'" : "task 'fib'";
    CHECK_THROWS_WITH(
        rt.run(g, 2),
        Contains(std::string(task) + " declared ordo::contribute(res, 1) "
                                     "but made no contribution 1 to reduction 'res' in "
                                     "iteration 3") &&
            Contains("call ctx.contribute(r, 1, value) in every iteration"));
  }
}

TEST_CASE("a stop condition that throws ends the run with its exception, in the dataflow or not") {
  for (bool dataflow : {false, true})
    for (unsigned workers : {1u, 2u}) {
      INFO("dataflow " << dataflow << " workers " << workers);
      Halving h;
      ordo::Runtime rt({.workers = workers});
      int calls = 0;
      ordo::Until u{.done = [&](const ordo::Graph& g) -> bool {
        if (++calls == 3) throw std::runtime_error("the residual is not a number");
        return g.value(h.norm) < 0;
      }};
      if (dataflow) u.reads = {ordo::read(h.norm)};
      CHECK_THROWS_WITH(rt.run_until(h.g, u), Contains("the residual is not a number"));
      CHECK(calls == 3);
      CHECK_THROWS_WITH(rt.run(h.g, 1), Contains("previous run failed"));
    }
}
