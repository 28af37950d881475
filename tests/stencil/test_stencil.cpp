// The stencil layer against a brute-force global array: for random dimensions, sizes, block
// grids, halos, neighbourhoods, boundaries, time levels and temporal-blocking depths, the
// block-decomposed run must give the same bits as a plain loop over one global array that
// resolves every neighbour by its global coordinate (wrap or fixed value). The brute force
// shares no code with the layer: it checks the layer's halo bookkeeping (which regions are
// exported, where they land, when) and its reference().
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include <unistd.h>

#include <ordo/stencil.hpp>

#include "plan_of.hpp"
#include "stencil/mirrored_ring.hpp"
#include "stencil/stencil_impl.hpp"
#include "stencil_cases.hpp"

using ordo::test::same_bits;

namespace st = ordo::stencil;

namespace {

using namespace ordo::test;

// How a case loads its initial values: the three forms of Stencil::set.
enum class Load { global, points, boxes };

// A box fill that copies from a global grid, written here (not the layer's).
st::BoxFill boxes_of(const std::vector<double>& g, const std::vector<std::size_t>& size) {
  return [&g, size](const st::Box& b) {
    st::for_each_box_row(b, [&](double* row, st::Coord first, std::size_t len) {
      std::size_t gi = 0;
      for (std::size_t k = 0; k < size.size(); ++k)
        gi = gi * size[k] + static_cast<std::size_t>(first[k]);
      std::memcpy(row, &g[gi], len * sizeof(double));
    });
  };
}

st::PointValue points_of(const std::vector<double>& g, const std::vector<std::size_t>& size) {
  return [&g, size](st::Coord x) {
    std::size_t gi = 0;
    for (std::size_t k = 0; k < size.size(); ++k) gi = gi * size[k] + static_cast<std::size_t>(x[k]);
    return g[gi];
  };
}

void check_case(const Case& c, std::mt19937& rng, ordo::Runtime& rt) {
  INFO(describe(c));
  const std::size_t n = ordo::test::points(c.spec);
  const Values values = random_values(c, rng);
  const auto& lv = values.levels;
  const auto& aux = values.aux;
  const std::uint64_t steps = values.steps;
  const auto load = static_cast<Load>(std::uniform_int_distribution<int>(0, 2)(rng));
  INFO("load=" << static_cast<int>(load) << " workers=" << rt.workers() << " steps=" << steps);

  auto want = brute_force(c, lv, aux, steps);

  ordo::Graph g;
  st::Stencil s(g, c.spec, make_kernel(c));
  for (std::size_t l = 0; l < lv.size(); ++l) {
    if (load == Load::global) s.set(lv[l], l);
    if (load == Load::points) s.set(points_of(lv[l], c.spec.size), l);
    if (load == Load::boxes) s.set(boxes_of(lv[l], c.spec.size), l);
  }
  if (c.spec.aux_grids) {
    if (load == Load::boxes)
      s.set_aux(0, boxes_of(aux, c.spec.size));
    else
      s.set_aux(0, points_of(aux, c.spec.size));
  }
  // Two runs: the split must not matter (the second may end with a partial tb group).
  const std::uint64_t first = steps / 2;
  if (first) s.run(rt, first);
  s.run(rt, steps - first);
  CHECK(s.steps_done() == steps);
  CHECK(same_bits(s.get(), want));
  // get_blocks visits every point exactly once, with the same values.
  std::vector<double> seen(n, 0.0);
  std::vector<int> visits(n, 0);
  s.get_blocks([&](const st::ConstBox& b) {
    st::for_each_box_row(b, [&](const double* row, st::Coord first_point, std::size_t len) {
      std::size_t gi = 0;
      for (std::size_t k = 0; k < c.spec.size.size(); ++k)
        gi = gi * c.spec.size[k] + static_cast<std::size_t>(first_point[k]);
      for (std::size_t j = 0; j < len; ++j) {
        seen[gi + j] = row[j];
        ++visits[gi + j];
      }
    });
  });
  CHECK(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }));
  CHECK(same_bits(seen, want));

  std::vector<std::vector<double>> aux_list;
  if (c.spec.aux_grids) aux_list.push_back(aux);
  auto ref = st::reference(c.spec, make_kernel(c), lv, aux_list, steps);
  CHECK(same_bits(ref[0], want));
}

// An in-place Jacobi case: one coefficient grid, the fixed values of fixed_at, equal weights.
Case in_place_case(std::vector<std::size_t> size, std::vector<std::size_t> blocks,
                   std::vector<st::Offset> nb, st::Boundary boundary, std::size_t levels,
                   std::size_t tb, std::size_t tile) {
  Case c;
  c.spec.size = std::move(size);
  c.spec.blocks = std::move(blocks);
  c.spec.neighbourhood = std::move(nb);
  c.spec.boundary = boundary;
  c.spec.time_levels = levels;
  c.spec.tb_depth = tb;
  c.spec.schedule.tile_bytes = tile;
  c.spec.aux_grids = 1;
  c.spec.fixed_value = fixed_at;
  c.spec.traversal = st::Traversal::jacobi_in_place;
  const std::size_t nw = c.spec.neighbourhood.size() + 2;
  for (std::size_t j = 0; j < nw; ++j) c.weights.push_back(0.9 / static_cast<double>(nw));
  return c;
}

// The newest level after v.steps steps of case c from the values v, run on rt (with
// `kernel` in place of the case's own, where given).
std::vector<double> run_case(const Case& c, const Values& v, ordo::Runtime& rt,
                             st::Kernel kernel = {}) {
  ordo::Graph g;
  st::Stencil s(g, c.spec, kernel ? std::move(kernel) : make_kernel(c));
  for (std::size_t l = 0; l < v.levels.size(); ++l) s.set(v.levels[l], l);
  if (c.spec.aux_grids > 0) s.set_aux(0, v.aux);
  s.run(rt, v.steps);
  return s.get();
}

// Which way a block's steps ran, seen from its kernel calls: the most steps in flight at once,
// that is how far a call's step lies behind the latest step the block has already been called
// for, plus one. One step at a time (shifted sweeps) gives 1, a wavefront of k steps k, the
// windows a whole group's steps.
class StepsInFlight {
 public:
  void saw(const st::Block& b) {
    std::lock_guard lock(mu_);
    auto [it, is_new] = blocks_.try_emplace(b.origin, Seen{b.step, 1});
    Seen& seen = it->second;
    if (is_new) return;
    if (b.step > seen.latest) seen.latest = b.step;
    seen.most = std::max(seen.most, seen.latest - b.step + 1);
  }
  std::uint64_t most() const {
    std::lock_guard lock(mu_);
    std::uint64_t m = 0;
    for (const auto& [origin, seen] : blocks_) m = std::max(m, seen.most);
    return m;
  }
  std::size_t blocks() const {
    std::lock_guard lock(mu_);
    return blocks_.size();
  }

 private:
  struct Seen {
    std::uint64_t latest, most;
  };
  mutable std::mutex mu_;
  std::map<std::array<std::int64_t, st::kMaxDims>, Seen> blocks_;
};

// A heat-like star on 3-D blocks in place at depth 8, 16 steps from a fixed pattern on 2
// workers: what its locations hold, the result and the most steps a block had in flight (a
// wavefront of k steps: k; windows: the group's 8). The kernel reads the values beyond a
// row's ends through Block::before/after, so with `beside` the layer may keep them beside the
// rows.
struct StarRun {
  ordo::StorageStats held;
  std::vector<double> values;
  std::uint64_t steps_in_flight = 0;
};
StarRun run_star_tb8(std::vector<std::size_t> size, std::vector<std::size_t> blocks,
                     std::size_t tile_bytes, bool beside) {
  st::Spec s;
  s.size = std::move(size);
  s.blocks = std::move(blocks);
  s.neighbourhood = st::von_neumann(3, 1);
  s.traversal = st::Traversal::jacobi_in_place;
  s.tb_depth = 8;
  s.schedule.tile_bytes = tile_bytes;
  ordo::Runtime rt({.workers = 2});
  ordo::Graph g;
  StepsInFlight in_flight;
  st::Stencil st1(g, s,
                  st::Kernel(
                      [&in_flight](const st::Block& b) {
                        in_flight.saw(b);
                        st::for_each_row(b, [&](const st::Row& r) {
                          const std::ptrdiff_t at = r.at;
                          const std::size_t len = r.len;
                          const double* u = b.in[0] + at;
                          const double west = r.before()[-1], east = r.after()[0];
                          const auto m = static_cast<std::ptrdiff_t>(len);
                          for (std::ptrdiff_t j = 0; j < m; ++j)
                            b.out[at + j] = 0.25 * u[j] +
                                            0.125 * ((j == 0 ? west : u[j - 1]) +
                                                     (j + 1 == m ? east : u[j + 1])) +
                                            0.0625 * (u[j - b.stride[0]] + u[j + b.stride[0]] +
                                                      u[j - b.stride[1]] + u[j + b.stride[1]]);
                        });
                      },
                      {.halo_through_row = beside}));
  st1.set([](st::Coord c) { return static_cast<double>((c[0] * 7 + c[1] * 3 + c[2]) % 11); });
  st1.run(rt, 16);
  return {g.storage_held(), st1.get(), in_flight.most()};
}

}  // namespace

TEST_CASE("stencil layer matches a brute-force global array (Jacobi)", "[stencil][property]") {
  std::mt19937 rng(12345);
  std::vector<std::unique_ptr<ordo::Runtime>> runtimes;  // 1 to 4 workers
  for (unsigned w = 1; w <= 4; ++w) runtimes.push_back(std::make_unique<ordo::Runtime>(ordo::RuntimeOptions{.workers = w}));
  for (int i = 0; i < 300; ++i) {
    Case c = random_case(rng, false);
    check_case(c, rng, *runtimes[static_cast<std::size_t>(i) % runtimes.size()]);
  }
}

TEST_CASE("stencil layer matches a brute-force global array (Gauss-Seidel)",
          "[stencil][property]") {
  std::mt19937 rng(777);
  ordo::Runtime one({.workers = 1});
  ordo::Runtime three({.workers = 3});
  for (int i = 0; i < 100; ++i) {
    Case c = random_case(rng, true);
    check_case(c, rng, i % 2 ? three : one);
  }
}

TEST_CASE("temporal blocking is bit-identical to depth 1", "[stencil]") {
  std::mt19937 rng(99);
  ordo::Runtime rt({.workers = 2});
  for (std::size_t depth : {2u, 3u, 4u}) {
    Case c;
    c.spec.size = {24, 24};
    c.spec.blocks = {3, 2};
    c.spec.neighbourhood = st::moore(2, 1);
    c.spec.fixed_value = fixed_at;
    c.weights.assign(c.spec.neighbourhood.size() + 2, 0.1);
    std::vector<double> init(24 * 24);
    for (auto& v : init) v = std::uniform_real_distribution<double>(0, 1)(rng);
    ordo::Graph g1, g2;
    st::Stencil a(g1, c.spec, make_kernel(c));
    Case cd = c;
    cd.spec.tb_depth = depth;
    st::Stencil b(g2, cd.spec, make_kernel(cd));
    a.set(init);
    b.set(init);
    a.run(rt, 11);
    b.run(rt, 11);
    CHECK(same_bits(a.get(), b.get()));
  }
}

TEST_CASE("cache tiles and streaming stores keep temporal blocking bit-identical",
          "[stencil]") {
  // Blocks far larger than the tiles, so that every step of a group is cut into many skewed
  // tiles (and, streaming, into pieces), against the untiled depth-1 run with cached stores.
  std::mt19937 rng(4242);
  ordo::Runtime rt({.workers = 2});
  struct Shape {
    std::vector<std::size_t> size, blocks;
    std::vector<st::Offset> nb;
    st::Boundary boundary;
    std::size_t levels;
  };
  const std::vector<Shape> shapes{
      {{64, 50}, {2, 2}, st::von_neumann(2, 1), st::Boundary::fixed, 1},
      {{40, 36}, {2, 1}, st::moore(2, 1), st::Boundary::periodic, 2},
      {{20, 18, 16}, {2, 1, 2}, st::von_neumann(3, 1), st::Boundary::fixed, 1},
      {{18, 16, 22}, {1, 2, 1}, st::moore(3, 1), st::Boundary::periodic, 1},
      {{48, 40}, {2, 2}, st::von_neumann(2, 2), st::Boundary::fixed, 1},
  };
  for (const Shape& sh : shapes) {
    Case c;
    c.spec.size = sh.size;
    c.spec.blocks = sh.blocks;
    c.spec.neighbourhood = sh.nb;
    c.spec.boundary = sh.boundary;
    c.spec.time_levels = sh.levels;
    c.spec.fixed_value = fixed_at;
    c.spec.schedule.stores = st::Stores::cached;
    c.weights.assign(c.spec.neighbourhood.size() + 2, 0.9 / double(sh.nb.size() + 2));
    std::size_t n = 1;
    for (auto e : sh.size) n *= e;
    std::vector<std::vector<double>> init(sh.levels, std::vector<double>(n));
    for (auto& l : init)
      for (auto& v : l) v = std::uniform_real_distribution<double>(0, 1)(rng);
    ordo::Graph g1;
    st::Stencil a(g1, c.spec, make_kernel(c));
    for (std::size_t l = 0; l < sh.levels; ++l) a.set(init[l], l);
    a.run(rt, 17);
    const std::vector<double> want = a.get();
    std::size_t min_ext = 1000;
    for (std::size_t k = 0; k < sh.size.size(); ++k)
      min_ext = std::min(min_ext, sh.size[k] / sh.blocks[k]);
    for (std::size_t depth : {1u, 2u, 4u, 8u}) {
      for (std::size_t tile : {std::size_t{1}, std::size_t{3000}, std::size_t{40000}}) {
        for (st::Stores stores : {st::Stores::cached, st::Stores::streaming}) {
          Case cd = c;
          cd.spec.tb_depth = depth;
          cd.spec.schedule.tile_bytes = tile;
          cd.spec.schedule.stores = stores;
          const std::size_t reach = sh.nb == st::von_neumann(2, 2) ? 2 : 1;
          if (reach * depth > min_ext) continue;  // the halo D*h must fit in a block
          INFO("shape " << sh.size.size() << "-d depth " << depth << " tile_bytes " << tile
                        << " streaming " << (stores == st::Stores::streaming));
          ordo::Graph g2;
          st::Stencil b(g2, cd.spec, make_kernel(cd));
          for (std::size_t l = 0; l < sh.levels; ++l) b.set(init[l], l);
          b.run(rt, 5);  // a partial group, then the rest
          b.run(rt, 12);
          CHECK(same_bits(b.get(), want));
          if (sh.levels > 1) CHECK(same_bits(b.get(1), a.get(1)));
        }
      }
    }
  }
}

TEST_CASE("stencil layer exchanges only with the neighbours the offsets reach", "[stencil]") {
  st::Spec s;
  s.size = {8, 8};
  s.blocks = {2, 2};
  s.neighbourhood = st::von_neumann(2, 1);
  ordo::Runtime rt({.workers = 1});
  ordo::Graph g;
  st::Stencil st1(g, s, [](const st::Block&) {});
  // The exchange is declared once the blocks are placed: before, the 4 main locations only.
  CHECK(g.locations() == 4);
  CHECK(g.tasks() == 0);
  st1.place(rt);
  // One rank: no export location; a compute per block and a halo task per neighbour (corner
  // block, von Neumann: 2 neighbours).
  CHECK(g.locations() == 4);
  CHECK(g.tasks() == 4 + 8);
  ordo::Graph gm;
  s.neighbourhood = st::moore(2, 1);
  st::Stencil st2(gm, s, [](const st::Block&) {});
  st2.run(rt, 1);  // places it
  CHECK(gm.locations() == 4);
  CHECK(gm.tasks() == 4 + 12);  // faces and the diagonal
}

TEST_CASE("a rank keeps no copy of the edges that stay on it", "[stencil]") {
  // Temporal blocking reads every direction 3 deep; on one rank each neighbour's halo is
  // written straight from the block, so the rank holds the blocks' main locations only
  // (counted by the runtime: Graph::storage_held).
  st::Spec s;
  s.size = {24, 20, 18};
  s.blocks = {2, 2, 2};
  s.neighbourhood = st::von_neumann(3, 1);
  s.traversal = st::Traversal::jacobi_in_place;
  s.tb_depth = 3;
  const auto kernel = [](const st::Block& b) {
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      for (std::ptrdiff_t j = 0; j < static_cast<std::ptrdiff_t>(len); ++j)
        b.out[at + j] = 0.5 * b.in[0][at + j] + 1.0;
    });
  };
  ordo::Runtime rt({.workers = 2});
  ordo::Graph g;
  st::Stencil st1(g, s, kernel);
  st1.set([](st::Coord) { return 1.0; });
  st1.run(rt, 6);
  const ordo::StorageStats held = g.storage_held();
  // With an export per direction it held 8 + 8 * 7 locations.
  CHECK(held.locations == 8);
  CHECK(st1.steps_done() == 6);
}

TEST_CASE("in-place temporal blocking sizes its blocks alike whatever the tile budget",
          "[stencil]") {
  // The tile budget is the machine's (its caches and cores) unless the spec gives one; the
  // locations' sizes are part of the graph every rank and every restart must agree on, so
  // they must not follow it. Each budget also runs the steps its own way, checked from the
  // kernel's calls: wavefronts of 4, 3 or 2 steps, or one shifted sweep per step (no windows
  // either): the same bits. A wavefront of k steps needs (2k + 1)h + 1 strips of (k + 2)h rows
  // of 40 doubles here: 7.5, 12.5 and 18.75 KiB for k = 2, 3, 4.
  const StarRun four = run_star_tb8({40, 36, 32}, {2, 2, 1}, 64u << 20, false);
  CHECK(four.steps_in_flight == 4);
  for (const auto& [tile_bytes, steps] : {std::pair<std::size_t, std::uint64_t>{16u << 10, 3},
                                          {10u << 10, 2},
                                          {1u << 10, 1}}) {
    INFO("tile_bytes " << tile_bytes);
    const StarRun r = run_star_tb8({40, 36, 32}, {2, 2, 1}, tile_bytes, false);
    CHECK(r.steps_in_flight == steps);
    CHECK(r.held.bytes == four.held.bytes);
    CHECK(same_bits(r.values, four.values));
  }
}

TEST_CASE("temporal blocking deepens a block's halo only where a neighbour lies", "[stencil]") {
  // Depth 3 of a halo-1 stencil against depth 1 of a halo-3 one: the same halo where blocks
  // meet, but beyond a fixed end of the grid no step computes, so the kernel reads 1 point
  // there, not 3. Periodic grids have a neighbour on every side: the same memory.
  auto held = [](st::Boundary boundary, std::size_t halo, std::size_t depth) {
    st::Spec s;
    s.size = {24, 20, 18};
    s.blocks = {2, 2, 2};
    s.neighbourhood = st::von_neumann(3, 1);
    s.boundary = boundary;
    s.halo = halo;
    s.tb_depth = depth;
    ordo::Runtime rt({.workers = 1});
    ordo::Graph g;
    st::Stencil st1(g, s, [](const st::Block&) {});
    st1.set([](st::Coord) { return 1.0; });
    st1.run(rt, depth);
    return g.storage_held().bytes;
  };
  CHECK(held(st::Boundary::fixed, 1, 3) < held(st::Boundary::fixed, 3, 1));
  CHECK(held(st::Boundary::periodic, 1, 3) == held(st::Boundary::periodic, 3, 1));
}

TEST_CASE("stencil spec errors say what is wrong", "[stencil]") {
  ordo::Graph g;
  auto k = [](const st::Block&) {};
  st::Spec s;
  s.size = {10, 3};
  s.blocks = {3, 4};
  CHECK_THROWS_WITH(st::Stencil(g, s, k),
                    Catch::Contains("more blocks than points in dimension 1") &&
                        Catch::Contains("give at most 3 blocks"));
  s.size = {10, 10};
  s.blocks = {0, 2};
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("must be positive"));
  s.blocks = {2};
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("give one per dimension"));
  // Uneven blocks: 10 in 3 blocks is 3, 3, 4 points; the halo must fit the smallest.
  s.blocks = {3, 2};
  s.halo = 4;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("larger than a block (3 points"));
  s.halo = 3;
  CHECK_NOTHROW(st::Stencil(g, s, k));
  s.blocks = {5, 5};
  s.halo = 3;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("larger than a block"));
  s.halo = 1;
  s.tb_depth = 3;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("larger than a block"));
  s.tb_depth = 2;
  s.traversal = st::Traversal::gauss_seidel;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("Jacobi"));
  s.tb_depth = 1;
  s.neighbourhood = st::moore(2, 1);
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("axis-aligned"));
  // In place: no streaming stores (a step writes back lines it has just read), and temporal
  // blocking only for a kernel of one time level.
  s.neighbourhood = st::von_neumann(2, 1);
  s.traversal = st::Traversal::jacobi_in_place;
  s.schedule.stores = st::Stores::streaming;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("streaming stores go with the "
                                                          "double-buffered Jacobi"));
  s.schedule.stores = st::Stores::cached;
  s.tb_depth = 2;
  s.time_levels = 2;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("temporal blocking in place reads one "
                                                          "time level (this kernel reads 2)"));
  s.time_levels = 1;
  ordo::Graph blocked, levels;  // each accepted stencil declares its locations in its own graph
  CHECK_NOTHROW(st::Stencil(blocked, s, k));
  s.tb_depth = 1;
  s.time_levels = 2;
  CHECK_NOTHROW(st::Stencil(levels, s, k));
  s.time_levels = 1;
  s.traversal = st::Traversal::jacobi;
  s.neighbourhood = st::von_neumann(2, 2);
  s.halo = 1;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("smaller than the neighbourhood"));
  s.size = {2, 2, 2, 2, 2, 2};
  s.blocks = {1, 1, 1, 1, 1, 1};
  s.neighbourhood.clear();
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("1 to 5"));
}

TEST_CASE("stencil set/get errors say what is wrong", "[stencil]") {
  ordo::Graph g;
  st::Spec s;
  s.size = {6, 5};
  s.blocks = {2, 2};
  st::Stencil sten(g, s, [](const st::Block&) {});
  CHECK_THROWS_WITH(sten.set(std::vector<double>(7)), Catch::Contains("7 values"));
  CHECK_THROWS_WITH(sten.set(std::vector<double>(30), 1), Catch::Contains("level 1 out of range"));
  CHECK_THROWS_WITH(sten.set(st::PointValue()), Catch::Contains("empty function"));
  CHECK_THROWS_WITH(sten.set_aux(0, std::vector<double>(30)), Catch::Contains("coefficient grid 0"));
  CHECK_THROWS_WITH(sten.get(1), Catch::Contains("level 1 out of range"));
  CHECK_THROWS_WITH(sten.home_rank(4), Catch::Contains("block 4 out of range"));
}

TEST_CASE("blocks are balanced: extents differ by at most one point", "[stencil]") {
  // 1000 x 7 on 3 x 7 blocks: 333, 333, 334 rows and 1-point columns; every block's box
  // starts at block_low and the boxes tile the grid.
  st::Spec s;
  s.size = {1000, 7};
  s.blocks = {3, 7};
  ordo::Graph g;
  st::Stencil sten(g, s, [](const st::Block&) {});
  std::vector<std::array<std::int64_t, 4>> boxes;  // lo0, hi0, lo1, hi1
  sten.get_blocks([&](const st::ConstBox& b) { boxes.push_back({b.lo[0], b.hi[0], b.lo[1], b.hi[1]}); });
  REQUIRE(boxes.size() == 21);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 7; ++j) {
      const auto& b = boxes[i * 7 + j];
      CHECK(b[0] == static_cast<std::int64_t>(st::block_low(i, 1000, 3)));
      CHECK(b[1] - b[0] == (i == 2 ? 334 : 333));
      CHECK(b[2] == static_cast<std::int64_t>(j));
      CHECK(b[3] - b[2] == 1);
    }
}

TEST_CASE("in-place Jacobi equals the double buffer on long blocks", "[stencil]") {
  // Blocks long along dimension 0, so that the in-place sweep's window of old planes slides
  // many times, and 3-D blocks cut into slabs of one row (tile_bytes 1) or several, whose
  // edges travel between slabs; one and two time levels, fixed and periodic boundaries.
  struct Shape {
    std::vector<std::size_t> size, blocks;
    std::vector<st::Offset> nb;
    std::size_t levels, tb, tile;
    st::Boundary boundary;
  };
  const std::vector<Shape> shapes{
      {{20000}, {3}, st::von_neumann(1, 2), 1, 1, 0, st::Boundary::fixed},
      {{3000}, {2}, st::von_neumann(1, 1), 2, 1, 0, st::Boundary::periodic},
      {{300, 12}, {2, 1}, st::moore(2, 1), 1, 1, 0, st::Boundary::fixed},
      {{301, 7}, {1, 2}, st::von_neumann(2, 2), 2, 1, 0, st::Boundary::periodic},
      {{40, 9, 7}, {1, 2, 1}, st::moore(3, 1), 1, 1, 1, st::Boundary::fixed},
      {{33, 17, 6}, {2, 1, 1}, st::von_neumann(3, 1), 2, 1, 4000, st::Boundary::periodic},
      {{64, 5}, {1, 1}, st::von_neumann(2, 1), 1, 4, 0, st::Boundary::fixed},
      {{50, 11, 6}, {1, 1, 2}, st::moore(3, 1), 1, 3, 0, st::Boundary::periodic},
      // Windows beyond the budget (tile_bytes 1): temporal blocking as one shifted sweep per
      // step over the shrinking ranges, which reach into the halo along the slabs' dimension
      // (dimension 1) when it has several blocks or is periodic: slabs of negative rows.
      {{60, 9, 7}, {2, 1, 2}, st::moore(3, 1), 1, 3, 1, st::Boundary::fixed},
      {{45, 10}, {2, 2}, st::von_neumann(2, 2), 1, 2, 1, st::Boundary::periodic},
      {{4, 21, 12}, {1, 3, 3}, st::von_neumann(3, 1), 1, 3, 1, st::Boundary::fixed},
      {{7, 15, 13}, {1, 2, 2}, st::moore(3, 1), 1, 3, 1, st::Boundary::periodic},
      {{14, 15, 13}, {2, 2, 2}, st::moore(3, 1), 1, 3, 1, st::Boundary::fixed},
      // Stars in 3-D and up move the block by rows too (one row per kernel call, the exports
      // across the last dimension staged by the sweep): slabs of one row and several, halos
      // of 2 (staged faces 2 wide), temporal blocking as shifted sweeps whose last one stages,
      // 4-D rows of a plane each, fixed ends on every side (the halo rows put back).
      {{40, 9, 7}, {1, 2, 1}, st::von_neumann(3, 1), 1, 1, 1, st::Boundary::fixed},
      {{23, 17, 11}, {2, 2, 2}, st::von_neumann(3, 2), 1, 1, 0, st::Boundary::fixed},
      {{21, 19, 10}, {2, 3, 2}, st::von_neumann(3, 2), 1, 1, 6000, st::Boundary::periodic},
      {{9, 20, 13}, {1, 2, 2}, st::von_neumann(3, 1), 1, 3, 1, st::Boundary::fixed},
      {{12, 14, 9}, {2, 2, 1}, st::von_neumann(3, 2), 1, 2, 1, st::Boundary::periodic},
      {{12, 14, 9}, {2, 2, 1}, st::von_neumann(3, 2), 1, 2, 1, st::Boundary::fixed},
      {{12, 7, 5, 4}, {2, 1, 1, 2}, st::von_neumann(4, 1), 1, 1, 0, st::Boundary::fixed},
      // 2-D stars move by rows and a piece of a row (512 points) where a block's rows hold a
      // piece: rows of several pieces and a short last one, halos of 2 with two time levels,
      // temporal blocking as sweeps. On shorter rows they move by planes, several rows a
      // call (the last unit shorter), with one time level and two.
      {{9, 1500}, {2, 2}, st::von_neumann(2, 1), 1, 1, 0, st::Boundary::fixed},
      {{7, 1600}, {1, 3}, st::von_neumann(2, 2), 2, 1, 0, st::Boundary::periodic},
      {{61, 100}, {2, 3}, st::von_neumann(2, 1), 1, 1, 0, st::Boundary::fixed},
      {{45, 70}, {3, 1}, st::von_neumann(2, 2), 2, 1, 0, st::Boundary::periodic},
      {{20, 1200}, {2, 2}, st::von_neumann(2, 1), 1, 3, 1, st::Boundary::fixed},
      {{16, 2100}, {2, 1}, st::von_neumann(2, 2), 1, 2, 1, st::Boundary::periodic},
      {{10, 9, 4, 5}, {1, 2, 2, 1}, st::von_neumann(4, 1), 2, 1, 1, st::Boundary::periodic},
  };
  std::mt19937 rng(31337);
  ordo::Runtime rt({.workers = 2});
  for (const Shape& sh : shapes) {
    Case c = in_place_case(sh.size, sh.blocks, sh.nb, sh.boundary, sh.levels, sh.tb, sh.tile);
    Values v = random_values(c, rng);
    v.steps = 9;
    const auto want = brute_force(c, v.levels, v.aux, v.steps);
    // Also with a kernel that computes its rows in order (a plane's rows of a slab per call
    // where the sweep moves a star's block by rows, the staged exports copied after it).
    for (const bool in_order : {false, true}) {
      c.traits.rows_in_order = in_order;
      INFO(describe(c));
      CHECK(same_bits(run_case(c, v, rt), want));
    }
  }
}

TEST_CASE("in-place temporal blocking in strips equals the brute force", "[stencil][property]") {
  // The wavefront's windows cut into strips along dimension 1, each strip's rows skewed by h
  // per step and the rows the next strip reads carried to it: budgets (tile_bytes) from
  // "nothing fits" (one shifted sweep per step) through one-row strips (narrower than 2h when
  // h is 2), uneven last strips and several strip counts to the whole cross-section; depths 2
  // to 8 with a shorter last group, fixed and periodic ends, halos of 2, 2-D to 4-D. Stars in
  // 3-D and up run as wavefronts that move the block, in strips of rows too (`strips`: the
  // plan gives them at some budget): with a fixed end at either end of dimension 1 or
  // both (blocks along it that have one, one that has two, an interior one), each shape also
  // with a kernel that takes a plane's rows of a strip in one call (KernelTraits::rows_in_order).
  struct Shape {
    std::vector<std::size_t> size, blocks;
    std::vector<st::Offset> nb;
    std::size_t tb;
    st::Boundary boundary;
    bool strips = false;
  };
  const std::vector<Shape> shapes{
      {{14, 23, 10}, {2, 1, 1}, st::von_neumann(3, 1), 4, st::Boundary::fixed},
      {{12, 19, 9}, {1, 2, 2}, st::von_neumann(3, 2), 2, st::Boundary::periodic, true},
      {{18, 17, 8}, {2, 1, 1}, st::moore(3, 1), 8, st::Boundary::fixed},
      {{11, 21, 7}, {1, 3, 1}, st::moore(3, 1), 3, st::Boundary::periodic},
      {{16, 13, 11}, {1, 1, 1}, st::von_neumann(3, 2), 5, st::Boundary::fixed},
      {{20, 37}, {2, 1}, st::von_neumann(2, 2), 5, st::Boundary::fixed},
      {{15, 29}, {1, 2}, st::moore(2, 1), 6, st::Boundary::periodic},
      {{8, 11, 5, 4}, {2, 1, 1, 1}, st::von_neumann(4, 1), 2, st::Boundary::fixed},
      {{18, 34, 9}, {2, 2, 1}, st::von_neumann(3, 1), 8, st::Boundary::fixed, true},
      {{11, 40, 12}, {1, 3, 2}, st::von_neumann(3, 1), 5, st::Boundary::fixed, true},
      {{14, 29, 7}, {2, 2, 1}, st::von_neumann(3, 2), 3, st::Boundary::fixed, true},
      {{7, 24, 4, 5}, {1, 2, 1, 1}, st::von_neumann(4, 1), 4, st::Boundary::fixed, true},
  };
  // 1 KiB: no strip fits (shifted sweeps). Then budgets 10% apart from 16 to 320 KiB: with
  // these shapes one row of a strip costs 2-18 KiB of budget, one-row strips start between 16
  // and 170 KiB, and the whole cross-section fits below 290 KiB, so the steps give every shape
  // one-row strips, most strip widths up to a dozen rows (uneven last strips) and whole ones.
  std::vector<std::size_t> tiles{1024};
  for (std::size_t tile = 16 * 1024; tile <= 320 * 1024; tile = tile * 11 / 10) tiles.push_back(tile);
  std::mt19937 rng(4242);
  ordo::Runtime rt({.workers = 2});
  for (const Shape& sh : shapes) {
    Case c = in_place_case(sh.size, sh.blocks, sh.nb, sh.boundary, 1, sh.tb, 0);
    Values v = random_values(c, rng);
    v.steps = 2 * sh.tb + 1;  // two whole groups and a one-step group
    const auto want = brute_force(c, v.levels, v.aux, v.steps);
    for (const bool in_order : {false, true}) {
      c.traits.rows_in_order = in_order;
      calls_backwards = 0;
      bool strips = false;  // some budget's plan runs wavefronts of moves in strips of rows
      for (const std::size_t tile : tiles) {
        c.spec.schedule.tile_bytes = tile;
        INFO(describe(c));
        CHECK(same_bits(run_case(c, v, rt), want));
        strips = strips || plan_test::planned_strips(c.spec, c.traits);
      }
      INFO(describe(c));
      if (sh.strips) CHECK(strips);
      // Up the planes, a plane's rows go to the kernel in one call, last to first.
      const bool is_star = std::all_of(sh.nb.begin(), sh.nb.end(), [](const st::Offset& o) {
        return std::count_if(o.begin(), o.end(), [](int x) { return x != 0; }) == 1;
      });
      CHECK((calls_backwards > 0) == (in_order && is_star && sh.size.size() >= 3));
    }
  }
}

TEST_CASE("a worker keeps one ring per window size", "[stencil]") {
  // Blocks differ in padding and by a point in extent, so a worker running them in turn asks
  // for a few window sizes, group after group: each size's ring is mapped once and lent again,
  // not mapped afresh each time the size changes.
  namespace ds = st::detail_stencil;
  const std::size_t slot = 6, page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // Each ring gets a mark: a ring mapped afresh holds zeros, even at the same address.
  std::vector<double*> first;
  for (std::size_t i = 1; i <= 3; ++i) {
    first.push_back(ds::thread_ring(slot, i * page));
    REQUIRE(first.back() != nullptr);
    first.back()[0] = static_cast<double>(i);
  }
  for (int round = 0; round < 4; ++round)
    for (std::size_t i = 1; i <= 3; ++i) {
      INFO("round " << round << ", ring of " << i << " pages");
      double* const ring = ds::thread_ring(slot, i * page);
      CHECK(ring == first[i - 1]);
      REQUIRE(ring != nullptr);
      CHECK(ring[0] == static_cast<double>(i));
    }
}

TEST_CASE("in-place temporal blocking without its windows runs one sweep per step",
          "[stencil]") {
  // A ring that cannot be mapped (here: injected; for real, out of file descriptors, mappings
  // or memory) leaves the group to shifted sweeps, with the same bits. The same run without
  // the injection shows that this group takes windows (its 4 steps in flight at once).
  Case c = in_place_case({14, 23, 10}, {2, 1, 1}, st::moore(3, 1), st::Boundary::fixed, 1, 4,
                         160 * 1024);
  std::mt19937 rng(78);
  Values v = random_values(c, rng);
  v.steps = 9;
  const auto want = brute_force(c, v.levels, v.aux, v.steps);
  struct Ran {
    std::vector<double> values;
    std::uint64_t steps_in_flight;
    std::size_t refused;
  };
  auto run = [&](std::size_t failures) {
    const std::size_t refused = st::detail_stencil::ring_mappings_refused();
    st::detail_stencil::fail_ring_mappings(failures, ENOMEM);
    StepsInFlight in_flight;
    Ran r;
    {
      ordo::Runtime rt({.workers = 2});
      r.values = run_case(c, v, rt,
                          st::Kernel(
                              [&in_flight, k = make_kernel(c)](const st::Block& b) {
                                in_flight.saw(b);
                                k(b);
                              },
                              c.traits));
    }
    st::detail_stencil::fail_ring_mappings(0, 0);
    r.steps_in_flight = in_flight.most();
    r.refused = st::detail_stencil::ring_mappings_refused() - refused;
    return r;
  };
  const Ran windows = run(0);
  CHECK(windows.steps_in_flight == 4);  // the group's 4 steps at once: windows
  CHECK(windows.refused == 0);
  CHECK(same_bits(windows.values, want));
  const Ran failed = run(1000);
  CHECK(failed.refused > 0);           // the injected failure was reached
  CHECK(failed.steps_in_flight == 1);  // one step at a time: shifted sweeps
  CHECK(same_bits(failed.values, want));
}

TEST_CASE("a thread keeps its rings when a new one cannot be mapped", "[stencil]") {
  // A thread's slot full of rings (kRingsPerSlot sizes), then a size whose mapping fails: the
  // rings held stay, so the sizes they serve keep their windows even while every new mapping
  // fails. Dropping the least recently used one first lost its window for nothing.
  namespace ds = st::detail_stencil;
  const std::size_t slot = 7, page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<double*> held;
  for (std::size_t i = 1; i <= ds::kRingsPerSlot; ++i)
    held.push_back(ds::thread_ring(slot, i * page));
  const std::size_t refused = ds::ring_mappings_refused();
  ds::fail_ring_mappings(1000, ENOMEM);
  CHECK(ds::thread_ring(slot, (ds::kRingsPerSlot + 1) * page) == nullptr);
  CHECK(ds::ring_mappings_refused() == refused + 1);
  for (std::size_t i = 1; i <= ds::kRingsPerSlot; ++i) {
    INFO("ring of " << i << " pages");
    CHECK(held[i - 1] != nullptr);
    CHECK(ds::thread_ring(slot, i * page) == held[i - 1]);
  }
  ds::fail_ring_mappings(0, 0);
}

TEST_CASE("a kernel reading a row's halo beside the rows equals the brute force",
          "[stencil][property]") {
  // KernelTraits::halo_through_row: in place, 3-D and up, a star, depth 1 and no coefficient grid
  // keep the last dimension's halo in side arrays (rows of whole lines); everywhere else the same
  // kernel reads it in the padded rows. Uneven blocks down to 1 point, halos of 1 and 2, fixed
  // and periodic ends (a block its own neighbour across them), one and two time levels, slabs
  // of one row (tile_bytes 1) or the whole block, 1 to 4 workers. Temporal blocking keeps the
  // columns beyond the grid's fixed ends beside the rows and a neighbour's halo in them:
  // depths 2 to 8, wavefronts (the machine's budget), shifted sweeps (tile_bytes 1), a last
  // dimension of one block (both ends beside), of three (a middle block with none), 4-D. Then
  // the opting-in kernel where the rows stay padded: temporal blocking across periodic ends
  // only, a Moore neighbourhood, a coefficient grid, the double buffer, 2-D.
  struct Shape {
    std::vector<std::size_t> size, blocks;
    std::vector<st::Offset> nb;
    std::size_t levels, tb, tile, aux;
    st::Boundary boundary;
    st::Traversal traversal = st::Traversal::jacobi_in_place;
  };
  const auto fixed = st::Boundary::fixed, periodic = st::Boundary::periodic;
  const std::vector<Shape> shapes{
      {{9, 10, 11}, {2, 2, 2}, st::von_neumann(3, 1), 1, 1, 0, 0, fixed},
      {{9, 10, 11}, {2, 2, 2}, st::von_neumann(3, 1), 1, 1, 0, 0, periodic},
      {{3, 5, 3}, {2, 3, 2}, st::von_neumann(3, 1), 1, 1, 1, 0, fixed},      // 1-point blocks
      {{3, 4, 3}, {2, 2, 3}, st::von_neumann(3, 1), 1, 1, 0, 0, periodic},   // 1-point blocks
      {{7, 9, 19}, {1, 2, 1}, st::von_neumann(3, 1), 1, 1, 1, 0, periodic},  // its own neighbour
      {{11, 13, 21}, {2, 3, 3}, st::von_neumann(3, 2), 1, 1, 0, 0, fixed},
      {{10, 9, 17}, {2, 2, 2}, st::von_neumann(3, 2), 2, 1, 1, 0, periodic},
      {{8, 7, 5}, {3, 1, 2}, st::von_neumann(3, 1), 2, 1, 0, 0, fixed},
      {{7, 6, 5, 9}, {2, 2, 1, 2}, st::von_neumann(4, 1), 1, 1, 0, 0, fixed},
      {{6, 5, 4, 7}, {2, 1, 2, 3}, st::von_neumann(4, 1), 1, 1, 1, 0, periodic},
      {{5, 6, 5, 8}, {1, 2, 2, 2}, st::von_neumann(4, 1), 2, 1, 0, 0, periodic},
      // Temporal blocking: beside the rows at fixed ends only.
      {{9, 10, 11}, {2, 2, 2}, st::von_neumann(3, 1), 1, 3, 0, 0, fixed},
      {{10, 12, 21}, {1, 2, 3}, st::von_neumann(3, 2), 1, 2, 0, 0, fixed},
      {{17, 9, 20}, {2, 1, 1}, st::von_neumann(3, 1), 1, 8, 1, 0, fixed},
      {{16, 18, 19}, {2, 2, 2}, st::von_neumann(3, 1), 1, 8, 0, 0, fixed},
      {{9, 6, 5, 10}, {2, 1, 1, 2}, st::von_neumann(4, 1), 1, 2, 0, 0, fixed},
      // The rows stay padded: the same kernel reads its halo there.
      {{9, 10, 11}, {2, 1, 2}, st::von_neumann(3, 2), 1, 2, 1, 0, periodic},
      {{9, 10, 11}, {2, 2, 2}, st::moore(3, 1), 1, 1, 0, 0, periodic},
      {{9, 10, 11}, {2, 2, 2}, st::von_neumann(3, 1), 1, 1, 0, 1, fixed},
      {{9, 10, 11}, {2, 2, 2}, st::von_neumann(3, 1), 2, 1, 0, 0, fixed, st::Traversal::jacobi},
      {{13, 14}, {2, 3}, st::von_neumann(2, 2), 1, 1, 0, 0, periodic},
  };
  std::vector<std::unique_ptr<ordo::Runtime>> runtimes;
  for (unsigned w = 1; w <= 4; ++w)
    runtimes.push_back(std::make_unique<ordo::Runtime>(ordo::RuntimeOptions{.workers = w}));
  std::mt19937 rng(2611);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& sh = shapes[i];
    Case c = in_place_case(sh.size, sh.blocks, sh.nb, sh.boundary, sh.levels, sh.tb, sh.tile);
    c.spec.aux_grids = sh.aux;
    c.spec.traversal = sh.traversal;
    c.traits.halo_through_row = true;
    Values v = random_values(c, rng);
    v.steps = 7;
    const auto want = brute_force(c, v.levels, v.aux, v.steps);
    ordo::Runtime& rt = *runtimes[i % runtimes.size()];
    // Also with a kernel that computes its rows in order: every in-place sweep of a star in
    // 3-D and up, one step or a wavefront, then passes a plane's rows in one call, backwards
    // up the planes.
    for (const bool in_order : {false, true}) {
      c.traits.rows_in_order = in_order;
      INFO(describe(c) << " workers=" << rt.workers());
      calls_beside = 0;
      calls_backwards = 0;
      CHECK(same_bits(run_case(c, v, rt), want));
      // The first 16 shapes take the layout beside the rows, the others keep padded rows.
      CHECK((calls_beside > 0) == (i < 16));
      // (Slabs of one row, tile_bytes 1, give the kernel one row per call.)
      if (i < 16 && sh.tile == 0) CHECK((calls_backwards > 0) == in_order);
    }
  }
  // Temporal blocking beside the fixed ends through the wavefront's windows, strip by strip:
  // budgets from none (shifted sweeps) through one-row strips to the whole cross-section.
  Case c = in_place_case({14, 23, 10}, {2, 1, 1}, st::von_neumann(3, 1), fixed, 1, 4, 0);
  c.spec.aux_grids = 0;
  c.traits.halo_through_row = true;
  Values v = random_values(c, rng);
  v.steps = 9;
  const auto want = brute_force(c, v.levels, v.aux, v.steps);
  for (std::size_t tile = 1024; tile <= 320 * 1024; tile = tile < 8192 ? 8192 : tile * 3 / 2) {
    c.spec.schedule.tile_bytes = tile;
    INFO(describe(c));
    calls_beside = 0;
    CHECK(same_bits(run_case(c, v, *runtimes[1]), want));
    CHECK(calls_beside > 0);
  }
}
