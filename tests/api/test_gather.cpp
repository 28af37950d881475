// The public gather in one process, and the refusals that send a program to it: a gather
// gives exactly what Graph::data reads on the home (a location, a stencil's level, a
// pipeline's grid); a gather to a rank the job does not have, one from a task body, and
// Graph::data from a task body are Errors that say what to do. Across ranks: dist_graphs and
// dist_stencils (multiprocess suite).
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>
#include <ordo/stencil.hpp>

using Catch::Contains;
namespace st = ordo::stencil;

namespace {

template <class T>
bool same_bits(const std::vector<T>& a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("a gathered location is the location, before and after runs") {
  ordo::Runtime rt({.workers = 2});
  ordo::Graph g;
  auto a = g.location<double>("a", 1000);
  auto b = g.location<std::uint32_t>("b", 3);
  g.task("grow", {ordo::write(a), ordo::read(b)}, [=](ordo::Context& ctx) {
    auto x = ctx.write(a);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] * 1.5 + 0.1 * double(i) - ctx.read(b)[1];
  });
  auto init = g.data(b);
  init[1] = 7;
  CHECK(same_bits(rt.gather(g, b), std::span<const std::uint32_t>(g.data(b))));
  rt.run(g, 3);
  CHECK(same_bits(rt.gather(g, a), std::as_const(g).data(a)));
  CHECK(same_bits(rt.gather(g, a, 0), std::as_const(g).data(a)));
  CHECK(rt.gather_values(42) == std::vector<int>{42});
  CHECK(rt.gather_values(2.5, 0) == std::vector<double>{2.5});
}

TEST_CASE("a gather to a rank the job does not have is refused, naming the ranks") {
  ordo::Runtime rt({.workers = 1});
  ordo::Graph g;
  auto a = g.location<double>("a", 4);
  g.task("t", {ordo::write(a)}, [](ordo::Context&) {});
  rt.run(g, 1);
  CHECK_THROWS_WITH(rt.gather(g, a, 1),
                    Contains("Runtime::gather of location 'a' onto rank 1: the job has 1 "
                             "rank(s), 0 to 0") &&
                        Contains("ordo::kAllRanks"));
  CHECK_THROWS_WITH(rt.gather_values(1, 5), Contains("onto rank 5: the job has 1 rank(s)"));
  ordo::Graph other;
  auto foreign = other.location<double>("a", 4);
  CHECK_THROWS_AS(rt.gather(g, foreign), ordo::Error);
}

// Location<T> is typed, so only a handle whose bytes were copied into another T's reaches a
// location with the wrong type; the gather and Graph::data refuse it rather than reinterpret.
TEST_CASE("a location gathered or read as another type is refused") {
  ordo::Runtime rt({.workers = 1});
  ordo::Graph g;
  auto a = g.location<double>("a", 4);
  g.task("t", {ordo::write(a)}, [](ordo::Context&) {});
  rt.run(g, 1);
  const auto as_long = std::bit_cast<ordo::Location<std::int64_t>>(a);
  CHECK_THROWS_WITH(rt.gather(g, as_long), Contains("Runtime::gather: location 'a' holds another "
                                                    "element type") &&
                                               Contains("the Location<T> that Graph::location "
                                                        "returned (the same T)"));
  CHECK_THROWS_WITH(g.data(as_long), Contains("Graph::data: location 'a' holds another element "
                                              "type") &&
                                         Contains("the Location<T> that Graph::location returned "
                                                  "(the same T)"));
  CHECK(rt.gather(g, a).size() == 4);
}

TEST_CASE("Graph::data and the gather refuse a task body; it uses its Context") {
  ordo::Runtime rt({.workers = 2});
  {
    ordo::Graph g;
    auto a = g.location<double>("a", 4);
    auto b = g.location<double>("b", 4);
    g.task("peek", {ordo::write(a)}, [&](ordo::Context&) { (void)g.data(b); });
    CHECK_THROWS_WITH(rt.run(g, 1), Contains("Graph::data of location 'b' called from a task "
                                             "body") &&
                                        Contains("through its Context"));
  }
  {
    ordo::Graph g;
    auto a = g.location<double>("a", 4);
    g.task("collect", {ordo::write(a)}, [&](ordo::Context&) { (void)rt.gather_values(1); });
    CHECK_THROWS_WITH(rt.run(g, 1), Contains("Runtime::gather_values called from a task body"));
  }
}

TEST_CASE("a stencil's and a pipeline's gather on one rank are their get()") {
  ordo::Runtime rt({.workers = 2});
  st::Spec s;
  s.size = {13, 10};
  s.blocks = {3, 2};
  s.neighbourhood = st::von_neumann(2, 1);
  s.time_levels = 2;
  const auto point = [](const double* u, std::ptrdiff_t at, std::ptrdiff_t n) {
    return 0.25 * (((u[at - n] + u[at + n]) + u[at - 1]) + u[at + 1]);
  };
  ordo::Graph g;
  st::Stencil sten(g, s, [&](const st::Block& b) {
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      for (std::size_t i = 0; i < len; ++i)
        b.out[at + std::ptrdiff_t(i)] =
            point(b.in[0], at + std::ptrdiff_t(i), b.stride[0]) - 0.5 * b.in[1][at + std::ptrdiff_t(i)];
    });
  });
  sten.set(st::PointValue([](st::Coord x) { return double(x[0] * 31 + x[1]) / 7.0; }));
  sten.set(st::PointValue([](st::Coord x) { return double(x[0] - x[1]); }), 1);
  sten.run(rt, 5);
  for (std::size_t level : {0, 1}) {
    const std::vector<double> got = sten.gather(rt, ordo::kAllRanks, level);
    CHECK(same_bits(got, std::span<const double>(sten.get(level))));
  }
  CHECK_THROWS_WITH(sten.gather(rt, 0, 2), Contains("level 2 out of range"));
  CHECK_THROWS_WITH(sten.gather(rt, 3), Contains("onto rank 3: the job has 1 rank(s)"));

  st::PipelineSpec p;
  p.size = {9, 11};
  p.blocks = {2, 3};
  p.inputs = {"u"};
  p.stages.push_back({"blur", {"u"}, {"w"}, st::von_neumann(2, 1),
                      [&](const st::StageBlock& b) {
                        st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
                          for (std::size_t i = 0; i < len; ++i)
                            b.out[0][at + std::ptrdiff_t(i)] =
                                point(b.in[0], at + std::ptrdiff_t(i), b.stride[0]);
                        });
                      }});
  ordo::Graph pg;
  st::Pipeline pipe(pg, p);
  pipe.set("u", st::PointValue([](st::Coord x) { return double(x[0] * x[1]) + 0.5; }));
  pipe.run(rt, 2);
  for (const char* grid : {"u", "w"})
    CHECK(same_bits(pipe.gather(rt, grid), std::span<const double>(pipe.get(grid))));
}
