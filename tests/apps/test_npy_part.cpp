// The pieces the apps use across ranks, in one process: write_npy_part (several writers, each
// its own segments, over a stale file, in any order) gives the bytes of write_npy of the whole
// array; npy_fill reads any box of a file (one time level of it) and nothing outside it;
// Runtime::gather_values on one rank; the stencil layer's block_count and home_rank.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
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

// Calls f(at, len) for every row (run along the last dimension) of block b, row-major index
// over p.blocks: `len` points starting at global element `at` (C order).
template <class F>
void for_each_block_row(const AppParams& p, std::size_t b, F&& f) {
  const std::size_t d = p.size.size();
  std::vector<std::size_t> ext(d), origin(d), x(d, 0);
  for (std::size_t k = d; k-- > 0;) {
    const std::size_t i = b % p.blocks[k];
    origin[k] = ordo::stencil::block_low(i, p.size[k], p.blocks[k]);
    ext[k] = ordo::stencil::block_low(i + 1, p.size[k], p.blocks[k]) - origin[k];
    b /= p.blocks[k];
  }
  for (;;) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < d; ++k) at = at * p.size[k] + origin[k] + x[k];
    f(at, ext[d - 1]);
    std::size_t k = d - 1;  // odometer over the dimensions before the last
    for (;;) {
      if (k == 0) return;
      --k;
      if (++x[k] < ext[k]) break;
      x[k] = 0;
    }
  }
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

TEST_CASE("npy_fill: a box of a file's grid, any time level, read row by row into any strides") {
  std::mt19937_64 rng(11);
  AppParams p;
  p.size = {5, 7, 6};
  const std::size_t n = p.points(), levels = 2;
  std::vector<double> data(levels * n);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& x : data) x = u(rng);
  const std::string path = temp_path("fill.npy");
  write_npy(path, {levels, 5, 7, 6}, data);
  const NpyFile file(path);
  for (int trial = 0; trial < 50; ++trial) {
    ordo::stencil::Box box;
    box.dims = 3;
    std::array<std::size_t, 3> ext{};
    for (std::size_t k = 0; k < 3; ++k) {
      box.lo[k] = static_cast<std::int64_t>(rng() % p.size[k]);
      box.hi[k] = box.lo[k] + 1 + static_cast<std::int64_t>(rng() % (p.size[k] - box.lo[k]));
      ext[k] = static_cast<std::size_t>(box.hi[k] - box.lo[k]);
    }
    // A padded buffer (a block with a halo of 2, say), guarded by a sentinel everywhere else.
    const std::size_t pad = 2;
    box.stride = {static_cast<std::ptrdiff_t>((ext[1] + 2 * pad) * (ext[2] + 2 * pad)),
                  static_cast<std::ptrdiff_t>(ext[2] + 2 * pad), 1};
    std::vector<double> buf((ext[0] + 2 * pad) * static_cast<std::size_t>(box.stride[0]), -7.0);
    const std::size_t start = pad * static_cast<std::size_t>(box.stride[0] + box.stride[1] + 1);
    box.data = buf.data() + start;
    const std::size_t level = rng() % levels;
    npy_fill(p, file, level * n)(box);
    std::size_t written = 0;
    for (std::size_t x = 0; x < buf.size(); ++x) {
      const auto off = static_cast<std::ptrdiff_t>(x) - static_cast<std::ptrdiff_t>(start);
      const std::ptrdiff_t i = off >= 0 ? off / box.stride[0] : -1;
      const std::ptrdiff_t j = off >= 0 ? off % box.stride[0] / box.stride[1] : -1;
      const std::ptrdiff_t k = off >= 0 ? off % box.stride[1] : -1;
      const bool inside = off >= 0 && i < static_cast<std::ptrdiff_t>(ext[0]) &&
                          j < static_cast<std::ptrdiff_t>(ext[1]) &&
                          k < static_cast<std::ptrdiff_t>(ext[2]);
      if (!inside) {
        REQUIRE(buf[x] == -7.0);
        continue;
      }
      const std::size_t at = ((static_cast<std::size_t>(box.lo[0] + i) * 7) +
                              static_cast<std::size_t>(box.lo[1] + j)) * 6 +
                             static_cast<std::size_t>(box.lo[2] + k);
      REQUIRE(buf[x] == data[level * n + at]);
      ++written;
    }
    CHECK(written == ext[0] * ext[1] * ext[2]);
  }
  // The whole grid through the same fill (what --verify's reference starts from).
  CHECK(global_grid(p, npy_fill(p, file, n)) ==
        std::vector<double>(data.begin() + static_cast<std::ptrdiff_t>(n), data.end()));
  std::remove(path.c_str());
}
