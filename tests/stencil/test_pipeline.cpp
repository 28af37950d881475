// Pipelines of the stencil layer against a brute-force global-array implementation: random
// chains of stages (1 to 5 dimensions, several grids read and written per stage, pointwise,
// von Neumann, Moore and random neighbourhoods, feedback reads of a later stage's grid, fixed
// and periodic boundaries, random block grids, 1 and 2 workers) must give the same bits as
// plain loops over global arrays that look up every neighbour by its global coordinate. The
// brute force shares no code with the layer: it checks the halo widths and directions the
// layer derives, where the imports sit in the order, and the feedback across iterations and
// runs.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include <ordo/stencil.hpp>

#include "jacobi5_pipeline.hpp"
#include "stencil_check.hpp"

using ordo::test::same_bits;

namespace st = ordo::stencil;

namespace {

double fixed_at(const std::string& grid, st::Coord g) {
  double v = 0.5 + 0.125 * static_cast<double>(grid.size() % 5);
  for (std::size_t k = 0; k < g.size(); ++k) v += 0.01 * static_cast<double>(g[k] * (k + 2));
  return v;
}

// Weights of one stage: w[out][read][offset], the centre last.
using Weights = std::vector<std::vector<std::vector<double>>>;

struct Case {
  st::PipelineSpec spec;
  std::vector<Weights> weights;  // per stage
  std::vector<std::string> set;  // grids given initial values
};

// out_j(x) = sum_i sum_k w[j][i][k] * read_i(x + o_k) + w[j][i][centre] * read_i(x)
//            + 0.001 * iteration
st::StageKernel make_kernel(const st::Stage& stage, const Weights& w) {
  const std::vector<st::Offset> nb = stage.neighbourhood;
  const std::size_t nr = stage.reads.size(), nw = stage.writes.size();
  return [nb, nr, nw, w](const st::StageBlock& b) {
    std::vector<std::ptrdiff_t> delta(nb.size());
    for (std::size_t k = 0; k < nb.size(); ++k)
      for (std::size_t i = 0; i < b.dims; ++i) delta[k] += nb[k][i] * b.stride[i];
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      for (std::size_t q = 0; q < len; ++q) {
        const std::ptrdiff_t p = at + static_cast<std::ptrdiff_t>(q);
        for (std::size_t j = 0; j < nw; ++j) {
          double acc = 0.001 * static_cast<double>(b.iteration);
          for (std::size_t i = 0; i < nr; ++i) {
            for (std::size_t k = 0; k < nb.size(); ++k) acc += w[j][i][k] * b.in[i][p + delta[k]];
            acc += w[j][i][nb.size()] * b.in[i][p];
          }
          b.out[j][p] = acc;
        }
      }
    });
  };
}

using Grids = std::map<std::string, std::vector<double>>;

// Brute force: for each iteration, each stage in order over global arrays.
void brute_force(const Case& c, Grids& g, std::uint64_t first_iteration, std::uint64_t iters) {
  const auto& s = c.spec;
  const std::size_t d = s.size.size();
  std::size_t n = 1;
  for (std::size_t e : s.size) n *= e;
  auto value = [&](const std::string& name, const std::vector<std::int64_t>& x) {
    const auto gi = ordo::test::global_index(s.size, s.boundary == st::Boundary::periodic, x);
    return gi ? g[name][*gi] : fixed_at(name, st::Coord(x.data(), d));
  };
  for (std::uint64_t t = first_iteration; t < first_iteration + iters; ++t)
    for (std::size_t si = 0; si < s.stages.size(); ++si) {
      const st::Stage& stage = s.stages[si];
      const Weights& w = c.weights[si];
      std::vector<std::vector<double>> out(stage.writes.size(), std::vector<double>(n));
      std::vector<std::int64_t> x(d);
      for (std::size_t i = 0; i < n; ++i) {
        std::size_t r = i;
        for (std::size_t k = d; k-- > 0;) {
          x[k] = static_cast<std::int64_t>(r % s.size[k]);
          r /= s.size[k];
        }
        for (std::size_t j = 0; j < stage.writes.size(); ++j) {
          double acc = 0.001 * static_cast<double>(t);
          for (std::size_t ri = 0; ri < stage.reads.size(); ++ri) {
            const auto& nb = stage.neighbourhood;
            for (std::size_t k = 0; k < nb.size(); ++k) {
              std::vector<std::int64_t> y = x;
              for (std::size_t q = 0; q < d; ++q) y[q] += nb[k][q];
              acc += w[j][ri][k] * value(stage.reads[ri], y);
            }
            acc += w[j][ri][nb.size()] * value(stage.reads[ri], x);
          }
          out[j][i] = acc;
        }
      }
      for (std::size_t j = 0; j < stage.writes.size(); ++j) g[stage.writes[j]] = out[j];
    }
}

Case random_case(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  st::PipelineSpec& s = c.spec;
  const auto d = static_cast<std::size_t>(pick(0, 9) == 0 ? pick(4, 5) : pick(1, 3));
  s.boundary = pick(0, 1) ? st::Boundary::periodic : st::Boundary::fixed;
  s.fixed_value = fixed_at;
  const int ninputs = pick(1, 2);
  for (int i = 0; i < ninputs; ++i) s.inputs.push_back("in" + std::to_string(i));
  const int nstages = pick(1, 5);
  // Names first, so that a stage can read a later stage's grid (feedback).
  std::vector<std::vector<std::string>> writes(static_cast<std::size_t>(nstages));
  for (int si = 0; si < nstages; ++si)
    for (int j = 0, nw = pick(1, 2); j < nw; ++j)
      writes[static_cast<std::size_t>(si)].push_back("g" + std::to_string(si) + "_" +
                                                     std::to_string(j));
  int reach = 1;
  for (int si = 0; si < nstages; ++si) {
    st::Stage stage;
    stage.name = "s" + std::to_string(si);
    stage.writes = writes[static_cast<std::size_t>(si)];
    // Candidates: inputs and earlier grids, and now and then a later stage's (feedback).
    std::vector<std::string> earlier(s.inputs), later;
    for (int sj = 0; sj < nstages; ++sj)
      if (sj != si)
        for (const auto& w : writes[static_cast<std::size_t>(sj)])
          (sj < si ? earlier : later).push_back(w);
    std::shuffle(earlier.begin(), earlier.end(), rng);
    const int nr = std::min<int>(pick(1, 3), static_cast<int>(earlier.size()));
    stage.reads.assign(earlier.begin(), earlier.begin() + nr);
    // The newest grid most of the time: a chain, not a fan of inputs.
    if (si > 0 && pick(0, 2) > 0) {
      const std::string& prev = writes[static_cast<std::size_t>(si - 1)][0];
      if (std::find(stage.reads.begin(), stage.reads.end(), prev) == stage.reads.end())
        stage.reads[0] = prev;
    }
    if (!later.empty() && pick(0, 3) == 0)
      stage.reads.push_back(later[static_cast<std::size_t>(pick(0, int(later.size()) - 1))]);
    const int kind = pick(0, 4);
    const int radius = d >= 4 ? 1 : pick(1, 2);
    if (kind == 1) {
      stage.neighbourhood = st::von_neumann(d, radius);
    } else if (kind == 2) {
      stage.neighbourhood = st::moore(d, 1);
    } else if (kind >= 3) {
      for (int k = 0, nk = pick(1, 4); k < nk; ++k) {
        st::Offset o(d, 0);
        for (auto& v : o) v = pick(-radius, radius);
        stage.neighbourhood.push_back(o);
      }
    }  // kind 0: pointwise
    for (const auto& o : stage.neighbourhood)
      for (int v : o) reach = std::max(reach, std::abs(v));
    Weights w(stage.writes.size(),
              std::vector<std::vector<double>>(stage.reads.size()));
    const double terms =
        static_cast<double>(stage.reads.size() * (stage.neighbourhood.size() + 1));
    for (auto& per_out : w)
      for (auto& per_read : per_out)
        for (std::size_t k = 0; k <= stage.neighbourhood.size(); ++k)
          per_read.push_back(0.9 / terms * (0.5 + std::uniform_real_distribution<double>(0, 1)(rng)));
    c.weights.push_back(std::move(w));
    s.stages.push_back(std::move(stage));
  }
  // Uneven blocks: the smallest block (size / blocks, rounded down) holds the reach.
  for (std::size_t k = 0; k < d; ++k) {
    const auto b = static_cast<std::size_t>(pick(1, d >= 4 ? 2 : 3));
    s.blocks.push_back(b);
    s.size.push_back(b * static_cast<std::size_t>(reach) +
                     static_cast<std::size_t>(pick(0, d >= 4 ? 2 : 4 * static_cast<int>(b))));
  }
  c.set = s.inputs;
  for (const auto& ws : writes)
    for (const auto& w : ws)
      if (pick(0, 1)) c.set.push_back(w);
  for (std::size_t si = 0; si < s.stages.size(); ++si)
    s.stages[si].kernel = make_kernel(s.stages[si], c.weights[si]);
  return c;
}

std::string describe(const st::PipelineSpec& s) {
  std::string t = ordo::test::describe_grid(s);
  t += " periodic=" + std::to_string(s.boundary == st::Boundary::periodic) + " stages:";
  for (const auto& stage : s.stages) {
    t += " " + stage.name + "(";
    for (const auto& r : stage.reads) t += r + " ";
    t += "->";
    for (const auto& w : stage.writes) t += " " + w;
    t += ", " + std::to_string(stage.neighbourhood.size()) + " offsets)";
  }
  return t;
}

void check_case(const Case& c, std::mt19937& rng, ordo::Runtime& rt) {
  INFO(describe(c.spec));
  const std::size_t n = ordo::test::points(c.spec);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Grids want;
  for (const auto& in : c.spec.inputs) want[in] = std::vector<double>(n, 0.0);
  for (const auto& stage : c.spec.stages)
    for (const auto& w : stage.writes) want[w] = std::vector<double>(n, 0.0);
  for (const auto& name : c.set)
    for (auto& v : want[name]) v = u(rng);

  ordo::Graph g;
  st::Pipeline p(g, c.spec);
  for (const auto& name : c.set) p.set(name, want[name]);
  const std::uint64_t iters = std::uniform_int_distribution<std::uint64_t>(1, 4)(rng);
  // Two runs: grids (and the feedback through them) carry over from one run to the next.
  const std::uint64_t first = iters / 2;
  if (first) p.run(rt, first);
  p.run(rt, iters - first);
  brute_force(c, want, 0, iters);
  for (const auto& [name, grid] : want) {
    INFO("grid " << name);
    CHECK(same_bits(p.get(name), grid));
    CHECK(same_bits(p.gather(rt, name), grid));
  }
}

st::StageKernel copy_kernel() {
  return [](const st::StageBlock& b) {
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      for (std::size_t i = 0; i < len; ++i) b.out[0][at + std::ptrdiff_t(i)] = b.in[0][at + std::ptrdiff_t(i)];
    });
  };
}

}  // namespace

TEST_CASE("pipelines match a brute-force global array", "[stencil][pipeline][property]") {
  std::mt19937 rng(4242);
  ordo::Runtime one({.workers = 1});
  ordo::Runtime two({.workers = 2});
  for (int i = 0; i < 250; ++i) {
    Case c = random_case(rng);
    check_case(c, rng, i % 2 ? two : one);
  }
}

TEST_CASE("pipeline results do not depend on the block grid or the workers", "[pipeline]") {
  // A fixed three-stage chain over 24x18, block grids dividing it or not (down to 1-row
  // blocks where the halo of 2 is refused), 1 and 2 workers.
  std::mt19937 rng(5);
  Case base;
  base.spec.size = {24, 18};
  base.spec.fixed_value = fixed_at;
  base.spec.inputs = {"a"};
  base.spec.stages.push_back({"blur", {"a"}, {"b"}, st::moore(2, 1), {}});
  base.spec.stages.push_back({"square", {"b", "a"}, {"c", "e"}, {}, {}});
  base.spec.stages.push_back({"lap", {"c"}, {"f"}, st::von_neumann(2, 2), {}});
  for (const auto& stage : base.spec.stages) {
    Weights w(stage.writes.size(), std::vector<std::vector<double>>(
                                       stage.reads.size(),
                                       std::vector<double>(stage.neighbourhood.size() + 1, 0.1)));
    base.weights.push_back(w);
  }
  for (std::size_t si = 0; si < base.spec.stages.size(); ++si)
    base.spec.stages[si].kernel = make_kernel(base.spec.stages[si], base.weights[si]);
  std::vector<double> a(24 * 18);
  for (auto& v : a) v = std::uniform_real_distribution<double>(0, 1)(rng);
  Grids want{{"a", a}};
  for (const char* name : {"b", "c", "e", "f"}) want[name] = std::vector<double>(a.size());
  brute_force(base, want, 0, 2);
  for (unsigned workers : {1u, 2u}) {
    ordo::Runtime rt({.workers = workers});
    for (std::size_t bi : {1u, 2u, 3u, 4u, 5u, 7u, 12u})
      for (std::size_t bj : {1u, 2u, 3u, 4u, 7u, 9u}) {
        Case c = base;
        c.spec.blocks = {bi, bj};
        INFO("blocks " << bi << "x" << bj << " workers " << workers);
        ordo::Graph g;
        st::Pipeline p(g, c.spec);
        p.set("a", a);
        p.run(rt, 2);
        CHECK(same_bits(p.get("f"), want["f"]));
        CHECK(same_bits(p.get("e"), want["e"]));
      }
  }
}

TEST_CASE("a feedback pipeline is the single-stage Jacobi stencil", "[pipeline]") {
  // w = 5-point(u); u = w: the pipeline's feedback read of u (written by the later stage)
  // gives one Jacobi step per iteration, bit-identical to ordo::stencil::Stencil.
  const st::PipelineSpec p = ordo::test::jacobi5_pipeline({20, 15}, {4, 3});
  st::Spec s;
  s.size = p.size;
  s.blocks = {2, 5};
  s.neighbourhood = st::von_neumann(2, 1);
  std::mt19937 rng(3);
  std::vector<double> u0(20 * 15);
  for (auto& v : u0) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  ordo::Runtime rt({.workers = 2});
  ordo::Graph g1, g2;
  st::Pipeline pipe(g1, p);
  CHECK(pipe.halo("u") == 1);
  CHECK(pipe.halo("w") == 0);
  pipe.set("u", u0);
  st::Stencil sten(g2, s, ordo::test::jacobi5_kernel());
  sten.set(u0);
  pipe.run(rt, 4);
  pipe.run(rt, 5);
  sten.run(rt, 9);
  CHECK(same_bits(pipe.get("u"), sten.get()));
}

TEST_CASE("pipelines exchange halos only where a stage reads a neighbourhood", "[pipeline]") {
  st::PipelineSpec s;
  s.size = {8, 8};
  s.blocks = {2, 2};
  s.inputs = {"in"};
  // in -(Moore r1)-> a -(pointwise)-> b -(von Neumann r2)-> c
  s.stages.push_back({"s0", {"in"}, {"a"}, st::moore(2, 1), copy_kernel()});
  s.stages.push_back({"s1", {"a"}, {"b"}, {}, copy_kernel()});
  s.stages.push_back({"s2", {"b"}, {"c"}, st::von_neumann(2, 2), copy_kernel()});
  ordo::Graph g;
  st::Pipeline p(g, s);
  CHECK(p.halo("in") == 1);
  CHECK(p.halo("a") == 0);
  CHECK(p.halo("b") == 2);
  CHECK(p.halo("c") == 0);
  CHECK(p.grids() == std::vector<std::string>{"in", "a", "b", "c"});
  // 4 grids x 4 blocks; the input's halo is filled by set() (never exchanged); "b" is
  // exchanged over faces only (von Neumann): 2 neighbours per corner block.
  CHECK(g.locations() == 16 + 8);
  // 3 stages x 4 blocks, plus the import of "b" per block.
  CHECK(g.tasks() == 12 + 4);
  CHECK_THROWS_WITH(p.halo("zz"), Catch::Contains("no grid 'zz'"));
}

TEST_CASE("a pipeline block starts before other blocks of the previous stage end",
          "[pipeline]") {
  // Stage 0 on the last block waits until stage 1 has run on block 0 (pointwise, so it needs
  // only stage 0's block 0). A barrier between stages would make that wait time out.
  std::atomic<bool> later_ran{false};
  std::atomic<bool> timed_out{false};
  st::PipelineSpec s;
  s.size = {4, 16};
  s.blocks = {1, 4};
  s.inputs = {"in"};
  s.stages.push_back({"first", {"in"}, {"a"}, {}, [&](const st::StageBlock& b) {
                        if (b.origin[1] == 12) {
                          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                          // acquire: pairs with the release store in "second".
                          while (!later_ran.load(std::memory_order_acquire))
                            if (std::chrono::steady_clock::now() > end) {
                              timed_out = true;
                              break;
                            } else {
                              std::this_thread::yield();
                            }
                        }
                        copy_kernel()(b);
                      }});
  s.stages.push_back({"second", {"a"}, {"b"}, {}, [&](const st::StageBlock& b) {
                        copy_kernel()(b);
                        // release: pairs with the acquire load in "first".
                        if (b.origin[1] == 0) later_ran.store(true, std::memory_order_release);
                      }});
  ordo::Graph g;
  st::Pipeline p(g, s);
  ordo::Runtime rt({.workers = 2});
  p.run(rt, 1);
  CHECK(later_ran.load());
  CHECK_FALSE(timed_out.load());
}

TEST_CASE("pipeline spec errors say what is wrong", "[pipeline]") {
  auto k = copy_kernel();
  st::PipelineSpec s;
  s.size = {10, 10};
  s.blocks = {2, 2};
  s.inputs = {"in"};
  s.stages.push_back({"s0", {"in"}, {"a"}, st::moore(2, 1), k});
  {
    ordo::Graph g;
    st::Pipeline ok(g, s);
    std::vector<double> wrong(7);
    CHECK_THROWS_WITH(ok.set("in", wrong), Catch::Contains("7 values"));
    CHECK_THROWS_WITH(ok.get("nope"), Catch::Contains("no grid 'nope'"));
  }
  auto fails = [](st::PipelineSpec spec, const std::string& text) {
    ordo::Graph g;
    CHECK_THROWS_WITH(st::Pipeline(g, std::move(spec)), Catch::Contains(text));
  };
  {
    auto e = s;
    e.blocks = {11, 2};
    fails(e, "more blocks than points in dimension 0");
  }
  {
    auto e = s;
    e.blocks = {3, 2};  // 3, 3 and 4 rows: uneven blocks are fine
    ordo::Graph g;
    CHECK_NOTHROW(st::Pipeline(g, e));
    e.stages[0].neighbourhood = st::von_neumann(2, 4);
    fails(e, "larger than a block (3 points in dimension 0");
  }
  {
    auto e = s;
    e.stages.clear();
    fails(e, "at least one stage");
  }
  {
    auto e = s;
    e.stages[0].reads = {"typo"};
    fails(e, "neither an input nor written by a stage");
  }
  {
    auto e = s;
    e.stages[0].reads = {"in", "a"};
    fails(e, "which it writes");
  }
  {
    auto e = s;
    e.stages.push_back({"s1", {"in"}, {"a"}, {}, k});
    fails(e, "written by stage 's0' already");
  }
  {
    auto e = s;
    e.stages[0].writes = {"in"};
    fails(e, "an input already");
  }
  {
    auto e = s;
    e.stages[0].neighbourhood = st::von_neumann(2, 6);
    fails(e, "larger than a block");
  }
  {
    auto e = s;
    e.stages[0].kernel = nullptr;
    fails(e, "no kernel");
  }
  {
    auto e = s;
    e.stages.push_back({"s0", {"a"}, {"b"}, {}, k});
    fails(e, "name of its own");
  }
  {
    auto e = s;
    e.stages[0].neighbourhood = {{1}};
    fails(e, "components");
  }
  {
    auto e = s;
    e.stages[0].reads = {"in", "in"};
    fails(e, "twice");
  }
}
