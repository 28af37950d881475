// The README example and the basic contract of the API.
#include <catch2/catch.hpp>

#include <ordo/ordo.hpp>

using namespace ordo;

TEST_CASE("the README example computes what a sequential loop computes", "[api]") {
  Graph g;
  auto a = g.location<double>("a", 1024);
  auto b = g.location<double>("b", 1024);
  auto init = g.data(a);
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<double>(i);
  g.task("scale", {read(a), write(b)}, [=](Context& ctx) {
    auto in = ctx.read(a);
    auto out = ctx.write(b);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = 2 * in[i];
  });
  g.task("shift", {read(b), write(a)}, [=](Context& ctx) {
    auto in = ctx.read(b);
    auto out = ctx.write(a);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] - 1;
  });
  Runtime rt({.workers = 2});
  CHECK(rt.run(g, 10).iterations == 10);
  std::vector<double> want(1024);
  for (std::size_t i = 0; i < want.size(); ++i) {
    double v = static_cast<double>(i);
    for (int k = 0; k < 10; ++k) v = 2 * v - 1;
    want[i] = v;
  }
  auto got = g.data(a);
  CHECK(std::vector<double>(got.begin(), got.end()) == want);
  CHECK(g.iterations_done() == 10);
  CHECK(g.locations() == 2);
  CHECK(g.tasks() == 2);
}

TEST_CASE("iteration() counts across runs and worker() is in range", "[api]") {
  Graph g;
  auto x = g.location<std::uint64_t>("x", 64);
  Runtime rt({.workers = 3});
  CHECK(rt.workers() == 3);
  g.task("log", {write(x)}, [=, &rt](Context& ctx) {
    auto out = ctx.write(x);
    out[ctx.iteration()] = ctx.iteration() + 1;
    if (ctx.worker() >= rt.workers()) out[63] = 999;
  });
  rt.run(g, 4);
  rt.run(g, 3);
  auto d = g.data(x);
  for (std::uint64_t k = 0; k < 7; ++k) CHECK(d[k] == k + 1);
  CHECK(d[63] == 0);
}

TEST_CASE("an empty graph runs", "[api]") {
  Graph g;
  Runtime rt({.workers = 2});
  CHECK(rt.run(g, 5).iterations == 5);
}
