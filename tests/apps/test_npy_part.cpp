// The pieces the apps use across ranks, in one process: write_npy_part (several writers, each
// its own segments, over a stale file, in any order) gives the bytes of write_npy of the whole
// array; for_each_block_row covers every element exactly once; Runtime::gather_values on one rank; the
// stencil layer's block_count and home_rank.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "npy.hpp"
#include "stencil_app.hpp"

using namespace ordo::app;

namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/ordo_test_npy_part_" + std::to_string(::getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("write_npy_part: writers of block rows, in any order, over a stale file, give write_npy's bytes") {
  std::mt19937_64 rng(7);
  const std::vector<std::vector<std::size_t>> shapes{{12}, {6, 10}, {4, 6, 6}, {2, 3, 4, 4}};
  const std::vector<std::vector<std::size_t>> blocks{{4}, {3, 5}, {2, 3, 2}, {1, 3, 2, 2}};
  for (std::size_t c = 0; c < shapes.size(); ++c) {
    AppParams p;
    p.size = shapes[c];
    p.blocks = blocks[c];
    std::vector<double> data(p.points());
    std::uniform_real_distribution<double> u(-1, 1);
    for (double& x : data) x = u(rng);
    const std::string want = temp_path("want.npy"), got = temp_path("got.npy");
    write_npy(want, p.size, data);

    std::size_t nb = 1;
    for (auto b : p.blocks) nb *= b;
    // Every element is in exactly one block row.
    std::vector<int> seen(p.points(), 0);
    for (std::size_t b = 0; b < nb; ++b)
      for_each_block_row(p, b, [&](std::size_t at, std::size_t len) {
        for (std::size_t i = at; i < at + len; ++i) ++seen[i];
      });
    for (int s : seen) REQUIRE(s == 1);

    for (unsigned writers : {1u, 2u, 3u}) {
      {  // stale: longer than the result and full of junk
        std::ofstream f(got, std::ios::binary);
        f << std::string(slurp(want).size() + 999, '\xa5');
      }
      // Writer w takes blocks [w*nb/W, (w+1)*nb/W); writers run last to first.
      for (unsigned w = writers; w-- > 0;) {
        std::vector<NpySegment> seg;
        for (std::size_t b = w * nb / writers; b < (w + 1) * nb / writers; ++b)
          for_each_block_row(p, b, [&](std::size_t at, std::size_t len) {
            seg.push_back({at, std::span<const double>(&data[at], len)});
          });
        std::shuffle(seg.begin(), seg.end(), rng);
        write_npy_part(got, p.size, w == 0, seg);
      }
      INFO("shape " << join_shape(p.size) << ", " << writers << " writer(s)");
      CHECK(slurp(got) == slurp(want));
    }
    std::remove(want.c_str());
    std::remove(got.c_str());
  }
}

TEST_CASE("write_npy_part: a missing directory or a segment out of range is an Error") {
  std::vector<double> v(4, 1.0);
  CHECK_THROWS_WITH(write_npy_part("/nonexistent-dir/x.npy", {4}, true, {{0, v}}),
                    Catch::Contains("cannot write '/nonexistent-dir/x.npy'"));
  const std::string path = temp_path("range.npy");
  CHECK_THROWS_WITH(write_npy_part(path, {4}, true, {{2, v}}),
                    Catch::Contains("beyond the array"));
  std::remove(path.c_str());
}

TEST_CASE("gather_values on one rank and the layer's block placement") {
  ordo::Runtime rt({.workers = 1});
  CHECK(rt.gather_values(42) == std::vector<int>{42});

  ordo::stencil::Spec s;
  s.size = {8, 6};
  s.blocks = {4, 3};
  s.neighbourhood = ordo::stencil::von_neumann(2, 1);
  ordo::Graph g;
  ordo::stencil::Stencil st(g, s, [](const ordo::stencil::Block&) {});
  CHECK(st.block_count() == 12);
  CHECK_THROWS_WITH(st.home_rank(0), Catch::Contains("first run"));
  st.run(rt, 1);
  for (std::size_t b = 0; b < st.block_count(); ++b) CHECK(st.home_rank(b) == 0);
  CHECK_THROWS_WITH(st.home_rank(12), Catch::Contains("out of range"));
}
