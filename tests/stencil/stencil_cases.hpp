// The single-stage stencil layer's randomised cases and their oracle, shared by the
// in-process property test (test_stencil.cpp) and the one across ranks (dist_stencils.cpp):
// a random spec, a weighted-sum kernel, and a brute force over global arrays that resolves
// every neighbour by its global coordinate (wrap or fixed value) and shares no code with the
// layer.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ordo/stencil.hpp>

#include "stencil_check.hpp"

namespace ordo::test {

namespace st = ordo::stencil;

struct Case {
  st::Spec spec;
  st::KernelTraits traits{};    // what make_kernel's kernel declares
  std::vector<double> weights;  // one per offset, then the centre, then the older level
};

inline double fixed_at(st::Coord g) {
  double v = 1.0;
  for (std::size_t k = 0; k < g.size(); ++k) v += 0.01 * static_cast<double>(g[k] * (k + 1));
  return v;
}

// The kernel under test: a weighted sum over the neighbourhood in a fixed order. Declaring
// KernelTraits::halo_through_row it reads every value beyond the ends of a row (of the neighbour
// row an offset reaches) through Row::before/after, as the spec promises; else in the row. Kernel
// calls whose rows found their halo beside them at either end (before() or after() not in the row),
// so that a test can tell that the layer used that layout and not only the padded rows, which give
// the same bits.
inline std::atomic<std::size_t> calls_beside{0};
// Kernel calls given rows backwards (several rows of a plane at once, the last first, in an
// in-place sweep that runs up, KernelTraits::rows_in_order).
inline std::atomic<std::size_t> calls_backwards{0};

inline st::Kernel make_kernel(const Case& c) {
  return st::Kernel(
      [c](const st::Block& b) {
        const auto& nb = c.spec.neighbourhood;
        const std::size_t last = b.dims - 1;
        // Per offset: the element offset of its row (every component but the last) and its
        // component along the rows.
        std::vector<std::ptrdiff_t> row_delta(nb.size()), along(nb.size());
        for (std::size_t j = 0; j < nb.size(); ++j) {
          for (std::size_t k = 0; k < last; ++k) row_delta[j] += nb[j][k] * b.stride[k];
          along[j] = nb[j][last];
        }
        const std::size_t L = c.spec.time_levels;
        const bool has_aux = c.spec.aux_grids > 0;
        const bool beside = c.traits.halo_through_row;
        bool saw_beside = false, saw_backwards = false;
        std::ptrdiff_t last_at = PTRDIFF_MIN;
        st::for_each_row(b, [&](const st::Row& r) {
          const std::ptrdiff_t at = r.at;
          const std::size_t len = r.len;
          const auto n = static_cast<std::ptrdiff_t>(len);
          saw_beside = saw_beside || r.before() != b.in[0] + at || r.after() != b.in[0] + at + n;
          saw_backwards = saw_backwards || at < last_at;
          last_at = at;
          // Point i + a of the row at `row` (relative to `at`'s row) in level l.
          auto value = [&](std::size_t l, std::ptrdiff_t row, std::ptrdiff_t i) {
            if (beside && i < 0) return r.before(l, row)[i];
            if (beside && i >= n) return r.after(l, row)[i - n];
            return b.in[l][at + row + i];
          };
          for (std::ptrdiff_t i = 0; i < n; ++i) {
            const std::ptrdiff_t p = at + i;
            double acc = c.weights[nb.size()] * b.in[0][p];
            for (std::size_t j = 0; j < nb.size(); ++j)
              acc += c.weights[j] * value(0, row_delta[j], i + along[j]);
            if (L > 1) acc += c.weights[nb.size() + 1] * value(1, row_delta[0], i + along[0]);
            if (has_aux) acc += b.aux[0][p + row_delta[0] + along[0]];
            b.out[p] = acc;
          }
        });
        if (saw_beside) calls_beside.fetch_add(1, std::memory_order_relaxed);
        if (saw_backwards) calls_backwards.fetch_add(1, std::memory_order_relaxed);
      },
      c.traits);
}

// Brute force: global arrays, each neighbour looked up by its global coordinate.
inline std::vector<double> brute_force(const Case& c, std::vector<std::vector<double>> lv,
                                const std::vector<double>& aux, std::uint64_t steps) {
  const auto& s = c.spec;
  const std::size_t d = s.size.size();
  std::size_t n = 1;
  for (std::size_t e : s.size) n *= e;
  const bool gs = s.traversal == st::Traversal::gauss_seidel;
  // Value of grid g at coordinate x (any coordinate; outside: wrapped or fixed).
  auto value = [&](const std::vector<double>& g, const std::vector<std::int64_t>& x,
                   bool is_aux) {
    const auto gi = global_index(s.size, s.boundary == st::Boundary::periodic, x);
    if (gi) return g[*gi];
    return is_aux ? 0.0 : fixed_at(st::Coord(x.data(), d));
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

inline Case random_case(std::mt19937& rng, bool gauss_seidel) {
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
  // Jacobi double buffered or in place (one time level with temporal blocking).
  s.traversal = gauss_seidel ? st::Traversal::gauss_seidel
                : pick(0, 2) == 0 ? st::Traversal::jacobi_in_place
                                  : st::Traversal::jacobi;
  s.time_levels = gauss_seidel ? 1 : static_cast<std::size_t>(pick(1, 2));
  s.aux_grids = static_cast<std::size_t>(pick(0, 1));
  s.tb_depth = gauss_seidel || d > 3 ? 1 : static_cast<std::size_t>(pick(1, 3));
  s.fixed_value = fixed_at;
  // The kernel reads a row's halo through Block::before/after: the layer keeps it beside the
  // rows where that pays (3-D and up, a star, in place, no coefficient grid: at both ends at
  // depth 1, at the grid's fixed ends with temporal blocking) and in the rows elsewhere, where
  // the kernel must read the same values. Half of those cases in 3-D and up are made such
  // that it does, which the draws above would rarely give.
  c.traits.halo_through_row = pick(0, 1) == 1;
  if (c.traits.halo_through_row && !gauss_seidel && d >= 3 && pick(0, 1) == 1) {
    s.neighbourhood = st::von_neumann(d, radius);
    s.halo = static_cast<std::size_t>(radius + pick(0, 1));
    s.traversal = st::Traversal::jacobi_in_place;
    s.tb_depth = d > 3 ? 1 : static_cast<std::size_t>(pick(1, 3));
    s.aux_grids = 0;
  }
  const bool in_place = s.traversal == st::Traversal::jacobi_in_place;
  if (in_place && s.tb_depth > 1) s.time_levels = 1;
  // Cache tiles of temporal blocking (0: automatic, i.e. one tile here; 1: the smallest
  // skewed tiles) and streaming stores (Jacobi only).
  s.schedule.tile_bytes =
      std::array<std::size_t, 4>{0, 1, 1 << 9, 1 << 12}[static_cast<std::size_t>(pick(0, 3))];
  if (!gauss_seidel && !in_place)
    s.schedule.stores = pick(0, 1) ? st::Stores::streaming : st::Stores::cached;
  // Uneven block grids: any size whose smallest block (size / blocks, rounded down) still
  // holds the halo H, so blocks of H points (1-point blocks when H is 1) come up often.
  const std::size_t H = s.halo * s.tb_depth;
  const int max_blocks = d >= 4 ? 2 : 3;
  for (std::size_t k = 0; k < d; ++k) {
    const auto b = static_cast<std::size_t>(pick(1, max_blocks));
    const auto extra = static_cast<std::size_t>(pick(0, d >= 4 ? 2 : 4 * static_cast<int>(b)));
    s.blocks.push_back(b);
    s.size.push_back(b * H + extra);
  }
  const std::size_t nw = s.neighbourhood.size() + 2;
  for (std::size_t j = 0; j < nw; ++j)  // small weights: values stay bounded
    c.weights.push_back(0.9 / static_cast<double>(nw) * (1.0 + 0.1 * static_cast<double>(j)));
  return c;
}

// Random initial values of a case: its time levels, one coefficient grid, and a step count.
struct Values {
  std::vector<std::vector<double>> levels;
  std::vector<double> aux;
  std::uint64_t steps = 0;
};
inline Values random_values(const Case& c, std::mt19937& rng) {
  const std::size_t n = points(c.spec);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Values v;
  v.levels.assign(c.spec.time_levels, std::vector<double>(n));
  for (auto& l : v.levels)
    for (auto& x : l) x = u(rng);
  v.aux.resize(n);
  for (auto& x : v.aux) x = 0.01 * u(rng);
  v.steps = std::uniform_int_distribution<std::uint64_t>(1, 7)(rng);
  return v;
}

inline std::string describe(const st::Spec& s) {
  std::string t = "dims=" + std::to_string(s.size.size()) + " " + ordo::test::describe_grid(s);
  t += " halo=" + std::to_string(s.halo) + " offsets=" + std::to_string(s.neighbourhood.size()) +
       " periodic=" + std::to_string(s.boundary == st::Boundary::periodic) +
       " levels=" + std::to_string(s.time_levels) + " aux=" + std::to_string(s.aux_grids) +
       " tb=" + std::to_string(s.tb_depth) +
       " tile_bytes=" + std::to_string(s.schedule.tile_bytes) +
       " streaming=" + std::to_string(s.schedule.stores == st::Stores::streaming) +
       " gs=" + std::to_string(s.traversal == st::Traversal::gauss_seidel) +
       " in_place=" + std::to_string(s.traversal == st::Traversal::jacobi_in_place);
  return t;
}

inline std::string describe(const Case& c) {
  return describe(c.spec) + " halo_through_row=" + std::to_string(c.traits.halo_through_row) +
         " rows_in_order=" + std::to_string(c.traits.rows_in_order);
}

}  // namespace ordo::test
