// Placement through the public API: Graph::set_home_node is accepted before the first run and
// refused after it, never changes results (bit-identical for 1..5 workers, placed or not), and the
// runtime reports the NUMA nodes its workers span.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace {

constexpr std::size_t kBlocks = 6, kCells = 2048;

// A ring of blocks, each task smoothing its block from both neighbours. Returns the contents.
std::vector<double> run_ring(unsigned workers, bool placed) {
  ordo::Graph g;
  std::vector<ordo::Location<double>> b;
  for (std::size_t i = 0; i < kBlocks; ++i) b.push_back(g.location<double>("b" + std::to_string(i), kCells));
  for (std::size_t i = 0; i < kBlocks; ++i) {
    auto me = b[i], l = b[(i + kBlocks - 1) % kBlocks], r = b[(i + 1) % kBlocks];
    g.task("t" + std::to_string(i), {ordo::write(me), ordo::read(l), ordo::read(r)},
           [=](ordo::Context& ctx) {
             auto out = ctx.write(me);
             auto a = ctx.read(l), c = ctx.read(r);
             for (std::size_t k = 0; k < kCells; ++k)
               out[k] = 0.5 * out[k] + 0.25 * (a[(k + 1) % kCells] + c[k]) + 1e-3 * static_cast<double>(k);
           });
  }
  if (placed)
    for (std::size_t i = 0; i < kBlocks; ++i)
      g.set_home_node(b[i], static_cast<unsigned>(kBlocks - i));
  ordo::Runtime rt({.workers = workers});
  CHECK(rt.numa_nodes() >= 1);
  CHECK(rt.numa_nodes() <= rt.workers());
  rt.run(g, 30);
  CHECK_THROWS_WITH(g.set_home_node(b[0], 0), Catch::Contains("before running"));
  std::vector<double> out;
  for (auto loc : b) {
    auto d = g.data(loc);
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

}  // namespace

TEST_CASE("placement never changes results, for any worker count", "[placement]") {
  const std::vector<double> ref = run_ring(1, false);
  for (unsigned w = 1; w <= 5; ++w)
    for (bool placed : {false, true}) {
      INFO("workers " << w << (placed ? ", placed" : ""));
      auto got = run_ring(w, placed);
      REQUIRE(got.size() == ref.size());
      CHECK(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(double)) == 0);
    }
}
