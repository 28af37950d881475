// run_until against a sequential loop that tests after every iteration, on random graphs: the
// property test of convergence checks (docs/convergence.md). Run alone (one process) or under
// ordorun (every rank builds the same graphs). For each seed it builds a random graph
// (tests/common/graph_spec.hpp) with one to three reductions (sums and a maximum) whose
// contributions read the graph's locations and shrink with the iteration, a task after the
// graph's own and before the combines that reads the previous iteration's first value, and one
// after the combines that mixes this iteration's values into a location; it stops on a random
// condition over the values with a random tolerance, check_every and max_iterations. It runs
// the graph with the condition in the dataflow (Until::reads) and, on a fresh graph, between
// iterations (no reads); with
// --checkpoint DIR also in two parts, the second restarted from the first's newest checkpoint.
// Every rank checks the stop iteration, the values the condition saw at every check, the
// values after the run and every location whose home it is against the sequential loop, bit
// for bit, and prints one line with a digest of them, which the driver compares across
// worker and rank counts.
// Exit status: 0 all match, 1 a mismatch, 2 an error.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "random_graph.hpp"

using namespace ordo;
using namespace ordo::test;

namespace {

std::uint64_t bits(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// A contribution: a fraction from the location's contents, shrinking with the iteration.
double contribution(std::span<const std::uint64_t> loc, std::uint64_t k, std::uint32_t j,
                    std::uint32_t i) {
  std::uint64_t h = mix(k * 3 + j, i);
  for (std::uint64_t x : loc) h = mix(h, x);
  return static_cast<double>(h % 4096) / 4096.0 * std::pow(0.75, static_cast<double>(k));
}

struct Case {
  GraphSpec spec;
  std::vector<std::uint32_t> parts;  // per reduction: its contributions
  std::vector<bool> is_max;          // per reduction: Max, else Sum
  std::vector<double> tol;           // per reduction
  bool any = false;                  // stop when any value is below its tolerance (else all)
  std::uint64_t every = 1, max = 1;

  std::uint32_t read_of(std::uint32_t j, std::uint32_t i) const {
    return static_cast<std::uint32_t>((i * 7 + j * 3) % spec.sizes.size());
  }
  bool holds(const std::vector<double>& v) const {
    bool all = true, one = false;
    for (std::size_t j = 0; j < v.size(); ++j) {
      all = all && v[j] < tol[j];
      one = one || v[j] < tol[j];
    }
    return any ? one : all;
  }
};

Case make_case(std::uint64_t seed) {
  Case c;
  c.spec = random_spec(seed, 5, 8);
  SplitMix rng{seed * 977 + 13};
  const std::uint32_t reductions = 1 + static_cast<std::uint32_t>(rng.below(3));
  for (std::uint32_t j = 0; j < reductions; ++j) {
    c.parts.push_back(1 + static_cast<std::uint32_t>(rng.below(12)));
    c.is_max.push_back(j == 1);
    c.tol.push_back(std::ldexp(1.0, -static_cast<int>(rng.below(12))) *
                    (j == 1 ? 0.5 : c.parts[j]));
  }
  c.any = rng.below(2) == 1;
  c.every = 1 + rng.below(3);
  c.max = 4 + rng.below(30);
  return c;
}

struct Result {
  std::uint64_t iterations = 0;
  std::vector<std::vector<double>> seen;  // the values at every check
  std::vector<double> values;             // after the run
  std::vector<std::vector<std::uint64_t>> data;
};

void pre_body(std::span<std::uint64_t> last, double previous) {
  for (auto& x : last) x = mix(x, bits(previous));
}
void post_body(std::span<std::uint64_t> first, const std::vector<double>& values) {
  for (double v : values) first[0] = mix(first[0], bits(v));
}

// The sequential loop: each iteration runs the tasks in program order, then tests.
Result sequential(const Case& c) {
  Result r;
  const GraphSpec& spec = c.spec;
  std::vector<std::vector<std::uint64_t>> data;
  for (std::size_t s : spec.sizes) data.emplace_back(s, 0);
  const std::size_t n = data.size();
  std::vector<double> values(c.parts.size(), 0.0);
  for (std::uint64_t k = 0; k < c.max; ++k) {
    for (std::uint32_t t = 0; t < spec.tasks.size(); ++t)
      run_body(spec, t, k, [&](std::uint32_t l) { return std::span<std::uint64_t>(data[l]); });
    pre_body(data[n - 1], values[0]);
    for (std::uint32_t j = 0; j < c.parts.size(); ++j) {
      std::vector<double> parts;
      for (std::uint32_t i = 0; i < c.parts[j]; ++i)
        parts.push_back(contribution(data[c.read_of(j, i)], k, j, i));
      values[j] =
          c.is_max[j] ? combine_in_order<double>(parts, Max{}) : combine_in_order<double>(parts);
    }
    post_body(data[0], values);
    r.iterations = k + 1;
    if (r.iterations % c.every == 0 || r.iterations == c.max) {
      r.seen.push_back(values);
      if (c.holds(values)) break;
    }
  }
  r.values = values;
  r.data = data;
  return r;
}

struct Built {
  std::vector<Location<std::uint64_t>> locs;
  std::vector<Reduction<double>> red;
};

Built build_case(Graph& g, const Case& c) {
  Built b;
  b.locs = build(g, c.spec);  // the spec's locations and tasks (random_graph.hpp)
  for (std::uint32_t j = 0; j < c.parts.size(); ++j)
    b.red.push_back(c.is_max[j] ? g.reduction<double>("r" + std::to_string(j), c.parts[j], Max{})
                                : g.reduction<double>("r" + std::to_string(j), c.parts[j]));
  const auto locs = b.locs;
  const auto red = b.red;
  const auto last = locs.back();
  // Before the combines: the previous iteration's value.
  g.task("pre", {write(last), read(red[0])},
         [=](Context& ctx) { pre_body(ctx.write(last), ctx.value(red[0])); });
  for (std::uint32_t j = 0; j < c.parts.size(); ++j) {
    g.task_family(
        "c" + std::to_string(j), c.parts[j],
        [&](std::uint32_t i, AccessList& acc) {
          acc.add(read(locs[c.read_of(j, i)]));
          acc.add(contribute(red[j], i));
        },
        [=, &c](Context& ctx, std::uint32_t i) {
          ctx.contribute(red[j], i,
                         contribution(ctx.read(locs[c.read_of(j, i)]), ctx.iteration(), j, i));
        });
    g.combine(red[j]);
  }
  std::vector<Access> post{write(locs[0])};
  for (auto r : red) post.push_back(read(r));
  g.task("post", post, [=](Context& ctx) {
    std::vector<double> v;
    for (auto r : red) v.push_back(ctx.value(r));
    post_body(ctx.write(locs[0]), v);
  });
  return b;
}

Until until_of(const Case& c, const Built& b, Result& got, bool dataflow, std::uint64_t max) {
  Until u;
  u.check_every = c.every;
  u.max_iterations = max;
  u.done = [&c, &b, &got](const Graph& g) {
    std::vector<double> v;
    for (auto r : b.red) v.push_back(g.value(r));
    got.seen.push_back(v);
    return c.holds(v);
  };
  if (dataflow)
    for (auto r : b.red) u.reads.push_back(read(r));
  return u;
}

void finish(Runtime& rt, Graph& g, const Built& b, Result& got) {
  for (auto r : b.red) got.values.push_back(g.value(r));
  for (auto l : b.locs) {
    if (g.home_rank(l) == rt.rank()) {
      auto d = g.data(l);
      got.data.emplace_back(d.begin(), d.end());
    } else {
      got.data.emplace_back();
    }
  }
}

// What differs from the sequential loop's, or empty.
std::string compare(Runtime& rt, Graph& g, const Built& b, const Result& got, const Result& want) {
  std::string wrong;
  if (got.iterations != want.iterations)
    wrong += " iterations " + std::to_string(got.iterations) + " (want " +
             std::to_string(want.iterations) + ")";
  if (got.values != want.values) wrong += " values";
  for (std::size_t l = 0; l < b.locs.size(); ++l)
    if (g.home_rank(b.locs[l]) == rt.rank() && got.data[l] != want.data[l])
      wrong += " L" + std::to_string(l);
  return wrong;
}

void clear_dir(Runtime& rt, const std::string& dir) {
  rt.gather_values(0);  // every rank is past its last checkpoint
  if (rt.rank() == 0)
    for (const auto& e : std::filesystem::directory_iterator(dir)) std::filesystem::remove_all(e);
  rt.gather_values(0);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seeds = 20, first = 0;
  unsigned workers = 2;
  std::string checkpoint;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seeds"))
      seeds = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--first"))
      first = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--workers"))
      workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--checkpoint"))
      checkpoint = argv[i + 1];
    else {
      std::fprintf(stderr, "until_graphs: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  try {
    RuntimeOptions options{.workers = workers};
    const std::uint64_t pause_every = 6;  // a multiple of every check_every (1, 2, 3)
    if (!checkpoint.empty()) {
      options.checkpoint_dir = checkpoint;
      options.checkpoint_every = pause_every;
    }
    Runtime rt(options);
    std::uint64_t digest = 0, stops = 0;
    int failures = 0;
    for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
      const Case c = make_case(seed);
      const Result want = sequential(c);
      for (const bool dataflow : {true, false}) {
        Result got;
        Graph g;
        const Built b = build_case(g, c);
        std::string wrong;
        if (checkpoint.empty() || want.iterations <= pause_every) {
          got.iterations = rt.run_until(g, until_of(c, b, got, dataflow, c.max)).iterations;
          if (got.seen != want.seen) wrong += " checks";
          finish(rt, g, b, got);
          wrong += compare(rt, g, b, got, want);
        } else {
          // Cut after a checkpoint and before the stop, then restart from the newest
          // checkpoint on a fresh graph and run to the end.
          const std::uint64_t cut = pause_every + (seed % (want.iterations - pause_every));
          clear_dir(rt, checkpoint);
          const std::uint64_t ran = rt.run_until(g, until_of(c, b, got, dataflow, cut)).iterations;
          if (ran != cut) wrong += " cut run " + std::to_string(ran);
          Graph h;
          const Built hb = build_case(h, c);
          const std::uint64_t from = rt.restart(h, checkpoint);
          if (from != cut / pause_every * pause_every)
            wrong += " restarted at " + std::to_string(from);
          Result rest;
          rest.iterations =
              from + rt.run_until(h, until_of(c, hb, rest, dataflow, c.max - from)).iterations;
          // The checks of the restarted run are those of the sequential loop after `from`.
          std::vector<std::vector<double>> later(
              want.seen.begin() + static_cast<long>(from / c.every), want.seen.end());
          if (rest.seen != later) wrong += " checks after the restart";
          finish(rt, h, hb, rest);
          wrong += compare(rt, h, hb, rest, want);
        }
        if (!wrong.empty()) {
          ++failures;
          std::printf("seed %llu (%s): differs from the sequential loop:%s\n",
                      static_cast<unsigned long long>(seed), dataflow ? "dataflow" : "between",
                      wrong.c_str());
        }
      }
      stops += want.iterations;
      digest = mix(digest, want.iterations);
      for (double v : want.values) digest = mix(digest, bits(v));
    }
    std::printf("seeds=%llu stops=%llu digest=%016llx %s\n", static_cast<unsigned long long>(seeds),
                static_cast<unsigned long long>(stops), static_cast<unsigned long long>(digest),
                failures == 0 ? "sequential=same" : "sequential=differs");
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "until_graphs: %s\n", e.what());
    return 2;
  }
}
