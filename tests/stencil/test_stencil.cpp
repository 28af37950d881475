// The stencil layer against a brute-force global array: for random dimensions, sizes, block
// grids, halos, neighbourhoods, boundaries, time levels and temporal-blocking depths, the
// block-decomposed run must give the same bits as a plain loop over one global array that
// resolves every neighbour by its global coordinate (wrap or fixed value). The brute force
// shares no code with the layer: it checks the layer's halo bookkeeping (which regions are
// exported, where they land, when) and its reference().
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <random>

#include <ordo/stencil.hpp>

#include "stencil_check.hpp"

using ordo::test::same_bits;

namespace st = ordo::stencil;

namespace {

struct Case {
  st::Spec spec;
  std::vector<double> weights;  // one per offset, then the centre, then the older level
};

double fixed_at(st::Coord g) {
  double v = 1.0;
  for (std::size_t k = 0; k < g.size(); ++k) v += 0.01 * static_cast<double>(g[k] * (k + 1));
  return v;
}

// The kernel under test: a weighted sum over the neighbourhood in a fixed order.
st::Kernel make_kernel(const Case& c) {
  return [c](const st::Block& b) {
    const auto& nb = c.spec.neighbourhood;
    std::vector<std::ptrdiff_t> delta(nb.size());
    for (std::size_t j = 0; j < nb.size(); ++j)
      for (std::size_t k = 0; k < b.dims; ++k) delta[j] += nb[j][k] * b.stride[k];
    const std::size_t L = c.spec.time_levels;
    const bool has_aux = c.spec.aux_grids > 0;
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      for (std::size_t i = 0; i < len; ++i) {
        const std::ptrdiff_t p = at + static_cast<std::ptrdiff_t>(i);
        double acc = c.weights[nb.size()] * b.in[0][p];
        for (std::size_t j = 0; j < nb.size(); ++j) acc += c.weights[j] * b.in[0][p + delta[j]];
        if (L > 1) acc += c.weights[nb.size() + 1] * b.in[1][p + delta[0]];
        if (has_aux) acc += b.aux[0][p + delta[0]];
        b.out[p] = acc;
      }
    });
  };
}

// Brute force: global arrays, each neighbour looked up by its global coordinate.
std::vector<double> brute_force(const Case& c, std::vector<std::vector<double>> lv,
                                const std::vector<double>& aux, std::uint64_t steps) {
  const auto& s = c.spec;
  const std::size_t d = s.size.size();
  std::size_t n = 1;
  for (std::size_t e : s.size) n *= e;
  const bool gs = s.traversal == st::Traversal::gauss_seidel;
  // Value of grid g at coordinate x (any coordinate; outside: wrapped or fixed).
  auto value = [&](const std::vector<double>& g, std::vector<std::int64_t> x, bool is_aux) {
    std::size_t gi = 0;
    for (std::size_t k = 0; k < d; ++k) {
      const auto e = static_cast<std::int64_t>(s.size[k]);
      if (x[k] < 0 || x[k] >= e) {
        if (s.boundary == st::Boundary::periodic)
          x[k] = ((x[k] % e) + e) % e;
        else
          return is_aux ? 0.0 : fixed_at(st::Coord(x.data(), d));
      }
      gi = gi * s.size[k] + static_cast<std::size_t>(x[k]);
    }
    return g[gi];
  };
  for (std::uint64_t t = 0; t < steps; ++t) {
    std::vector<double> next(n);
    std::vector<double>& out = gs ? lv[0] : next;
    std::vector<std::int64_t> x(d, 0);
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t r = i;
      for (std::size_t k = d; k-- > 0;) {
        x[k] = static_cast<std::int64_t>(r % s.size[k]);
        r /= s.size[k];
      }
      auto at = [&](const st::Offset& o) {
        std::vector<std::int64_t> y = x;
        for (std::size_t k = 0; k < d; ++k) y[k] += o[k];
        return y;
      };
      const auto& nb = s.neighbourhood;
      double acc = c.weights[nb.size()] * lv[0][i];
      for (std::size_t j = 0; j < nb.size(); ++j)
        acc += c.weights[j] * value(lv[0], at(nb[j]), false);
      if (s.time_levels > 1) acc += c.weights[nb.size() + 1] * value(lv[1], at(nb[0]), false);
      if (s.aux_grids > 0) acc += value(aux, at(nb[0]), true);
      out[i] = acc;
    }
    if (!gs) {
      for (std::size_t l = lv.size() - 1; l > 0; --l) lv[l] = lv[l - 1];
      lv[0] = std::move(next);
    }
  }
  return lv[0];
}

Case random_case(std::mt19937& rng, bool gauss_seidel) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  st::Spec& s = c.spec;
  const auto d = static_cast<std::size_t>(pick(1, 5));
  const int kind = gauss_seidel ? pick(0, 1) * 2 : pick(0, 2);  // GS: von Neumann or axis offsets
  const int radius = d >= 4 ? 1 : pick(1, 2);
  if (kind == 0) {
    s.neighbourhood = st::von_neumann(d, radius);
  } else if (kind == 1) {
    s.neighbourhood = st::moore(d, 1);
  } else {  // random explicit offsets
    const int count = pick(1, 6);
    for (int j = 0; j < count; ++j) {
      st::Offset o(d, 0);
      if (gauss_seidel) {
        o[static_cast<std::size_t>(pick(0, int(d) - 1))] = pick(0, 1) ? radius : -radius;
      } else {
        for (auto& v : o) v = pick(-radius, radius);
      }
      s.neighbourhood.push_back(o);
    }
  }
  int reach = 0;
  for (const auto& o : s.neighbourhood)
    for (int v : o) reach = std::max(reach, std::abs(v));
  s.halo = static_cast<std::size_t>(std::max(1, reach) + pick(0, 1));
  s.boundary = !gauss_seidel && pick(0, 1) ? st::Boundary::periodic : st::Boundary::fixed;
  s.traversal = gauss_seidel ? st::Traversal::gauss_seidel : st::Traversal::jacobi;
  s.time_levels = gauss_seidel ? 1 : static_cast<std::size_t>(pick(1, 2));
  s.aux_grids = static_cast<std::size_t>(pick(0, 1));
  s.tb_depth = gauss_seidel || d > 3 ? 1 : static_cast<std::size_t>(pick(1, 3));
  s.fixed_value = fixed_at;
  // Cache tiles of temporal blocking (0: automatic, i.e. one tile here; 1: the smallest
  // skewed tiles) and streaming stores (Jacobi only).
  s.tile_bytes = std::array<std::size_t, 4>{0, 1, 1 << 9, 1 << 12}[static_cast<std::size_t>(pick(0, 3))];
  if (!gauss_seidel)
    s.stores = pick(0, 1) ? st::Stores::streaming : st::Stores::cached;
  const std::size_t H = s.halo * s.tb_depth;
  const int max_blocks = d >= 4 ? 2 : 3;
  for (std::size_t k = 0; k < d; ++k) {
    const auto b = static_cast<std::size_t>(pick(1, max_blocks));
    const std::size_t ext = H + static_cast<std::size_t>(pick(0, d >= 4 ? 1 : 3));
    s.blocks.push_back(b);
    s.size.push_back(b * ext);
  }
  const std::size_t nw = s.neighbourhood.size() + 2;
  for (std::size_t j = 0; j < nw; ++j)  // small weights: values stay bounded
    c.weights.push_back(0.9 / static_cast<double>(nw) * (1.0 + 0.1 * static_cast<double>(j)));
  return c;
}

std::string describe(const st::Spec& s) {
  std::string t = "dims=" + std::to_string(s.size.size()) + " " + ordo::test::describe_grid(s);
  t += " halo=" + std::to_string(s.halo) + " offsets=" + std::to_string(s.neighbourhood.size()) +
       " periodic=" + std::to_string(s.boundary == st::Boundary::periodic) +
       " levels=" + std::to_string(s.time_levels) + " aux=" + std::to_string(s.aux_grids) +
       " tb=" + std::to_string(s.tb_depth) + " tile_bytes=" + std::to_string(s.tile_bytes) +
       " streaming=" + std::to_string(s.stores == st::Stores::streaming) +
       " gs=" + std::to_string(s.traversal == st::Traversal::gauss_seidel);
  return t;
}

void check_case(const Case& c, std::mt19937& rng, ordo::Runtime& rt) {
  INFO(describe(c.spec));
  const std::size_t n = ordo::test::points(c.spec);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::vector<double>> lv(c.spec.time_levels, std::vector<double>(n));
  for (auto& l : lv)
    for (auto& v : l) v = u(rng);
  std::vector<double> aux(n);
  for (auto& v : aux) v = 0.01 * u(rng);
  const std::uint64_t steps = std::uniform_int_distribution<std::uint64_t>(1, 7)(rng);

  auto want = brute_force(c, lv, aux, steps);

  ordo::Graph g;
  st::Stencil s(g, c.spec, make_kernel(c));
  for (std::size_t l = 0; l < lv.size(); ++l) s.set(lv[l], l);
  if (c.spec.aux_grids) s.set_aux(0, aux);
  // Two runs: the split must not matter (the second may end with a partial tb group).
  const std::uint64_t first = steps / 2;
  if (first) s.run(rt, first);
  s.run(rt, steps - first);
  CHECK(s.steps_done() == steps);
  CHECK(same_bits(s.get(), want));

  std::vector<std::vector<double>> aux_list;
  if (c.spec.aux_grids) aux_list.push_back(aux);
  auto ref = st::reference(c.spec, make_kernel(c), lv, aux_list, steps);
  CHECK(same_bits(ref[0], want));
}

}  // namespace

TEST_CASE("stencil layer matches a brute-force global array (Jacobi)", "[stencil][property]") {
  std::mt19937 rng(12345);
  ordo::Runtime one({.workers = 1});
  ordo::Runtime two({.workers = 2});
  for (int i = 0; i < 300; ++i) {
    Case c = random_case(rng, false);
    check_case(c, rng, i % 2 ? two : one);
  }
}

TEST_CASE("stencil layer matches a brute-force global array (Gauss-Seidel)",
          "[stencil][property]") {
  std::mt19937 rng(777);
  ordo::Runtime two({.workers = 2});
  for (int i = 0; i < 100; ++i) {
    Case c = random_case(rng, true);
    check_case(c, rng, two);
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
    c.spec.stores = st::Stores::cached;
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
          cd.spec.tile_bytes = tile;
          cd.spec.stores = stores;
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
  ordo::Graph g;
  st::Stencil st1(g, s, [](const st::Block&) {});
  // 4 main locations + 2 face exports per block (corner block, von Neumann: 2 neighbours).
  CHECK(g.locations() == 4 + 8);
  CHECK(g.tasks() == 8);
  ordo::Graph gm;
  s.neighbourhood = st::moore(2, 1);
  st::Stencil st2(gm, s, [](const st::Block&) {});
  CHECK(gm.locations() == 4 + 12);  // faces and the diagonal
}

TEST_CASE("stencil spec errors say what is wrong", "[stencil]") {
  ordo::Graph g;
  auto k = [](const st::Block&) {};
  st::Spec s;
  s.size = {10, 10};
  s.blocks = {3, 2};
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("not divisible"));
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
  s.traversal = st::Traversal::jacobi;
  s.neighbourhood = st::von_neumann(2, 2);
  s.halo = 1;
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("smaller than the neighbourhood"));
  s.size = {2, 2, 2, 2, 2, 2};
  s.blocks = {1, 1, 1, 1, 1, 1};
  s.neighbourhood.clear();
  CHECK_THROWS_WITH(st::Stencil(g, s, k), Catch::Contains("1 to 5"));
}
