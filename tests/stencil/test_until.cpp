// Stencil::run_until and Pipeline::run_until against brute-force global loops (the stop step,
// every point's bits and the reduced values' bits; until_cases.hpp), on random sizes, block
// grids, traversals, temporal-blocking depths and 1-3 workers; and the errors of a stop
// condition on a reduction no kernel contributes to and of a kernel that declares a
// contribution but does not make it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "until_cases.hpp"

namespace st = ordo::stencil;
using namespace ordo::test::until;

TEST_CASE("run_until stops where a brute-force loop does, bit for bit", "[stencil][until]") {
  std::mt19937 rng(7);
  for (unsigned workers = 1; workers <= 3; ++workers) {
    ordo::Runtime rt({.workers = workers});
    for (int i = 0; i < 40; ++i) {
      const Case c = random_case(rng, 1);
      INFO(c.describe() << " workers " << workers);
      CHECK(check(c, rt).empty());
    }
  }
}

TEST_CASE("temporal blocking tests every D steps and at the end of the run", "[stencil][until]") {
  ordo::Runtime rt({.workers = 2});
  for (std::size_t tb : {2, 3}) {
    Case c;
    c.rows = 16;
    c.cols = 12;
    c.brows = 2;
    c.bcols = 2;
    c.tb = tb;
    c.traversal = st::Traversal::jacobi;
    Case probe = c;
    probe.tb = 1;
    probe.tol = -1;
    probe.max_steps = 7;  // the condition first holds after step 7 tested every step
    c.tol = brute_force(probe).change;
    c.max_steps = 50;
    probe.tol = c.tol;
    probe.max_steps = 50;
    const std::uint64_t every_step = brute_force(probe).steps;  // tested after every step
    const Outcome want = brute_force(c);
    INFO("tb " << tb << " stops after " << want.steps << ", tested every step " << every_step);
    CHECK(want.steps % tb == 0);
    CHECK(want.steps >= every_step);
    CHECK(want.steps < every_step + tb);
    CHECK(check(c, rt).empty());
    c.max_steps = 8;  // for tb 3, 8 = 2*3 + 2: the last, shorter group contributes step 8
    c.tol = -1;
    CHECK(brute_force(c).steps == 8);
    CHECK(check(c, rt).empty());
  }
}

TEST_CASE("stop conditions and contributions that cannot hold are errors", "[stencil][until]") {
  ordo::Runtime rt({.workers = 2});
  Case c;
  c.rows = 10;
  c.cols = 10;
  c.brows = 2;
  c.bcols = 1;
  {  // a condition on a reduction no kernel contributes to
    ordo::Graph g;
    st::Stencil s(g, spec(c), kernel());
    CHECK_THROWS_WITH(s.run_until(
                          rt, [](const st::Values& v) { return v["residual"] < 1; }, 5),
                      Catch::Contains("no reduction 'residual', so no kernel contributes to it") &&
                          Catch::Contains("'change', 'squares'"));
  }
  {  // no reductions at all
    ordo::Graph g;
    st::Spec sp = spec(c);
    sp.reductions.clear();
    st::Stencil s(g, sp, kernel());
    CHECK_THROWS_WITH(s.run_until(
                          rt, [](const st::Values&) { return true; }, 5),
                      Catch::Contains("declares none"));
  }
  {  // a declared contribution the kernel does not make (in its third step)
    ordo::Graph g;
    st::Spec sp = spec(c);
    sp.reductions.push_back({"norm", st::Reduce::sum});
    st::Kernel k = kernel();
    st::Stencil s(g, sp, [k](const st::Block& b) {
      k(b);
      if (b.step != 2) b.contribute(2, 1.0);
    });
    CHECK_THROWS_WITH(s.run_until(
                          rt, [](const st::Values&) { return false; }, 5),
                      Catch::Contains("made no contribution to reduction 'norm' in step 2"));
  }
  {  // an index beyond the declared reductions
    ordo::Graph g;
    st::Stencil s(g, spec(c), [](const st::Block& b) { b.contribute(5, 1.0); });
    CHECK_THROWS_WITH(s.run(rt, 1), Catch::Contains("reduction 5 of 2"));
  }
  {  // names
    ordo::Graph g;
    st::Spec sp = spec(c);
    sp.reductions.push_back({"change", st::Reduce::min});
    CHECK_THROWS_WITH(st::Stencil(g, sp, kernel()), Catch::Contains("declared twice"));
  }
}

namespace {

// A pipeline of 32 populations: stage "mix" reads g0..g31 (written by "back", so the previous
// iteration's) with a von Neumann neighbourhood and writes h0..h31, contributing the largest
// |h - g|; stage "back" copies h to g. Against plain loops over global arrays.
constexpr std::size_t kGrids = 32;

double mix(std::size_t j, const double* nb) {
  // nb: g_j at the four neighbours (N, S, W, E), then g_{j+1} and g_{j+7} at the point.
  return 0.3 * nb[4] + 0.1 * ((nb[0] + nb[1]) + (nb[2] + nb[3])) - 0.1 * nb[5] +
         0.01 * static_cast<double>(j);
}

}  // namespace

TEST_CASE("a pipeline stage of 32 grids stops on its reduction like plain loops",
          "[stencil][pipeline][until]") {
  const std::size_t R = 14, C = 11;
  auto init = [](std::size_t j, std::int64_t r, std::int64_t c) {
    return static_cast<double>(
               (j * 5 + static_cast<std::size_t>(r) * 3 + static_cast<std::size_t>(c) * 7) % 13) /
           13.0;
  };
  auto outside = [](std::size_t j) { return 0.25 + 0.01 * static_cast<double>(j); };
  // Plain loops.
  std::vector<std::vector<double>> g(kGrids, std::vector<double>(R * C)), h = g;
  for (std::size_t j = 0; j < kGrids; ++j)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < C; ++c)
        g[j][r * C + c] = init(j, static_cast<std::int64_t>(r), static_cast<std::int64_t>(c));
  auto at = [&](const std::vector<double>& a, std::size_t j, std::ptrdiff_t r, std::ptrdiff_t c) {
    if (r < 0 || c < 0 || r >= static_cast<std::ptrdiff_t>(R) ||
        c >= static_cast<std::ptrdiff_t>(C))
      return outside(j);
    return a[static_cast<std::size_t>(r) * C + static_cast<std::size_t>(c)];
  };
  const std::size_t brows = 3, bcols = 2;
  const double tol = 0.02;
  std::uint64_t want_iters = 0;
  double want_change = 0;
  for (std::uint64_t it = 0; it < 200; ++it) {
    std::vector<double> part(brows * bcols, 0.0);
    for (std::size_t bi = 0; bi < brows; ++bi)
      for (std::size_t bj = 0; bj < bcols; ++bj) {
        double big = 0;
        for (std::size_t r = st::block_low(bi, R, brows); r < st::block_low(bi + 1, R, brows); ++r)
          for (std::size_t c = st::block_low(bj, C, bcols); c < st::block_low(bj + 1, C, bcols);
               ++c)
            for (std::size_t j = 0; j < kGrids; ++j) {
              const auto ri = static_cast<std::ptrdiff_t>(r), ci = static_cast<std::ptrdiff_t>(c);
              const double nb[6] = {at(g[j], j, ri - 1, ci),        at(g[j], j, ri + 1, ci),
                                    at(g[j], j, ri, ci - 1),        at(g[j], j, ri, ci + 1),
                                    g[(j + 1) % kGrids][r * C + c], g[(j + 7) % kGrids][r * C + c]};
              const double v = mix(j, nb);
              h[j][r * C + c] = v;
              const double ch = std::fabs(v - g[j][r * C + c]);
              big = big < ch ? ch : big;
            }
        part[bi * bcols + bj] = big;
      }
    g = h;
    want_iters = it + 1;
    want_change = ordo::combine_in_order<double>(part, ordo::Max{});
    if (want_change <= tol) break;
  }
  REQUIRE(want_iters > 3);
  REQUIRE(want_iters < 200);

  st::PipelineSpec p;
  p.size = {R, C};
  p.blocks = {brows, bcols};
  p.fixed_value = [&](const std::string& grid, st::Coord) {
    return outside(static_cast<std::size_t>(std::stoi(grid.substr(1))));
  };
  p.reductions = {{"change", st::Reduce::max}};
  std::vector<std::string> gs, hs;
  for (std::size_t j = 0; j < kGrids; ++j) {
    gs.push_back("g" + std::to_string(j));
    hs.push_back("h" + std::to_string(j));
  }
  st::Stage mix_stage{"mix", gs, hs, st::von_neumann(2, 1), [](const st::StageBlock& b) {
                        const std::ptrdiff_t n = b.stride[0];
                        double big = 0;
                        st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
                          for (std::size_t q = 0; q < len; ++q) {
                            const std::ptrdiff_t x = at + static_cast<std::ptrdiff_t>(q);
                            for (std::size_t j = 0; j < kGrids; ++j) {
                              const double* u = b.in[j];
                              const double nb[6] = {u[x - n],
                                                    u[x + n],
                                                    u[x - 1],
                                                    u[x + 1],
                                                    b.in[(j + 1) % kGrids][x],
                                                    b.in[(j + 7) % kGrids][x]};
                              const double v = mix(j, nb);
                              b.out[j][x] = v;
                              const double ch = std::fabs(v - u[x]);
                              big = big < ch ? ch : big;
                            }
                          }
                        });
                        b.contribute(0, big);
                      }};
  mix_stage.contributes = {"change"};
  p.stages.push_back(mix_stage);
  p.stages.push_back({"back", hs, gs, {}, [](const st::StageBlock& b) {
                        st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
                          for (std::size_t j = 0; j < kGrids; ++j)
                            std::memcpy(b.out[j] + at, b.in[j] + at, len * sizeof(double));
                        });
                      }});
  for (unsigned workers : {1u, 3u}) {
    ordo::Graph graph;
    st::Pipeline pipe(graph, p);
    for (std::size_t j = 0; j < kGrids; ++j)
      pipe.set(gs[j], [&, j](st::Coord x) { return init(j, x[0], x[1]); });
    ordo::Runtime rt({.workers = workers});
    const auto r = pipe.run_until(
        rt, [tol](const st::Values& v) { return v["change"] <= tol; }, 200);
    INFO("workers " << workers);
    CHECK(r.iterations == want_iters);
    const double change = pipe.values()["change"];
    CHECK(std::memcmp(&change, &want_change, sizeof change) == 0);
    for (std::size_t j = 0; j < kGrids; ++j) CHECK(pipe.get(gs[j]) == g[j]);
  }

  // 33 grids are refused; a reduction without a contributing stage, and a stage whose kernel
  // does not contribute, are errors.
  {
    auto e = p;
    e.stages[0].reads.push_back("h0");
    ordo::Graph graph;
    CHECK_THROWS_WITH(st::Pipeline(graph, e), Catch::Contains("more than 32 grids"));
  }
  {
    auto e = p;
    e.stages[0].contributes.clear();
    ordo::Graph graph;
    CHECK_THROWS_WITH(st::Pipeline(graph, e),
                      Catch::Contains("no stage contributes to reduction 'change'"));
  }
  {
    auto e = p;
    e.stages[0].kernel = [](const st::StageBlock&) {};
    ordo::Graph graph;
    st::Pipeline pipe(graph, e);
    ordo::Runtime rt({.workers = 2});
    CHECK_THROWS_WITH(pipe.run_until(
                          rt, [](const st::Values& v) { return v["change"] < 0; }, 3),
                      Catch::Contains("made no contribution to reduction 'change' in iteration 0"));
  }
}
