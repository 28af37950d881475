// Which in-place plan (stencil/stencil_plan.hpp) each spec gets: the strategy and its numbers,
// worked out by hand from the rules in docs/stencil-in-place.md, for the shapes the apps and
// the property tests run. The property tests check that every plan gives the brute force's
// bits; this table checks that each spec runs the plan meant for it.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <ordo/stencil.hpp>

#include "plan_of.hpp"

namespace st = ordo::stencil;
using Plan = st::InPlacePlan;
using plan_test::plan_of;

namespace {

constexpr std::size_t kL2 = std::size_t{1} << 20;

// A spec and what its kernel declares.
struct Declared {
  st::Spec spec;
  st::KernelTraits traits{};
  Declared(st::Spec s, st::KernelTraits t = {}) : spec(std::move(s)), traits(t) {}
};

struct Row {
  std::string what;
  Declared spec;
  Plan::Sweep sweep;
  Plan::Group group;
  std::ptrdiff_t shift_planes, shift_rows, unit_planes;
  std::size_t spare_units, wavefront_steps;
  st::geometry::RowHalo row_halo;
  Plan::LateFaces late_faces;
  bool staged_exports, whole_rows;
  std::size_t slab_budget;
};

st::Spec spec(std::vector<std::size_t> size, std::vector<std::size_t> blocks,
              std::vector<st::Offset> nb, std::size_t tb = 1, std::size_t tile = 0) {
  st::Spec s;
  s.size = std::move(size);
  s.blocks = std::move(blocks);
  s.neighbourhood = std::move(nb);
  s.traversal = st::Traversal::jacobi_in_place;
  s.tb_depth = tb;
  s.schedule.tile_bytes = tile;
  return s;
}

Declared with(st::Spec s, bool beside, bool in_order, std::size_t levels = 1, std::size_t aux = 0) {
  s.time_levels = levels;
  s.aux_grids = aux;
  return {std::move(s), {.halo_through_row = beside, .rows_in_order = in_order}};
}

}  // namespace

TEST_CASE("each spec gets its in-place plan", "[stencil]") {
  using G = Plan::Group;
  using S = Plan::Sweep;
  using L = Plan::LateFaces;
  using R = st::geometry::RowHalo;
  const auto star2 = st::von_neumann(2, 1), star3 = st::von_neumann(3, 1);
  const std::size_t rows_slab = 3 * kL2 / 4, planes_slab = kL2 / 2;
  Declared double_buffer = with(spec({64, 64, 64}, {2, 2, 2}, star3), true, true);
  double_buffer.spec.traversal = st::Traversal::jacobi;
  const std::vector<Row> table{
      // heat2d: rows and pieces of 512 points (a multiple of 8), one unit of room.
      {"heat2d", spec({2048, 2048}, {4, 4}, star2), S::by_rows, G::per_step, 1, 512, 1, 1, 1,
       R::in_rows, L::none, false, false, rows_slab},
      // heat2d on rows shorter than 512 points: by planes, 512 / 256 = 2 rows per call, the
      // block moved by h + 2 planes.
      {"heat2d, short rows", spec({1024, 1024}, {4, 4}, star2), S::by_planes, G::per_step, 3, 0, 2,
       1, 1, R::in_rows, L::none, false, false, planes_slab},
      // 96x64 in 2 blocks: rows of 64 points, 8 per call.
      {"heat2d 96x64", spec({96, 64}, {2, 1}, star2), S::by_planes, G::per_step, 9, 0, 8, 1, 1,
       R::in_rows, L::none, false, false, planes_slab},
      // heat2d --tb 8: pieces of 384 points; 4 units of room; a wavefront of k steps holds
      // (2k + 1)h + 1 planes of 272 doubles (8 + 256 + 8), 21760 bytes for k = 4.
      {"heat2d tb 8", spec({1024, 1024}, {4, 4}, star2, 8, kL2), S::by_rows, G::wavefront, 1, 384,
       1, 4, 4, R::in_rows, L::none, false, false, kL2},
      // 20000 bytes: 8 planes of 2176 bytes fit (k = 3), 10 do not.
      {"heat2d tb 8, small budget", spec({1024, 1024}, {4, 4}, star2, 8, 20000), S::by_rows,
       G::wavefront, 1, 384, 1, 4, 3, R::in_rows, L::none, false, false, 20000},
      // heat3d: a row per call, h planes and h rows; every face late, the row faces' exports
      // staged; the halo beside the rows at both ends; a plane's rows in one call.
      {"heat3d", with(spec({512, 512, 512}, {2, 2, 2}, star3), true, true), S::by_rows, G::per_step,
       1, 1, 1, 1, 1, R::beside, L::every, true, true, rows_slab},
      // heat3d --tb 8: beside the rows at the fixed ends only; strips of (k + 2)h = 6 rows of
      // 264 doubles per plane, 10 planes (k = 4): 126720 bytes.
      {"heat3d tb 8", with(spec({512, 512, 512}, {2, 2, 2}, star3, 8, kL2), true, true), S::by_rows,
       G::wavefront, 1, 1, 1, 4, 4, R::beside_at_fixed_ends, L::every, true, true, kL2},
      // 100000 bytes: 8 planes of 5 rows (84480 bytes) fit, k = 3.
      {"heat3d tb 8, small budget",
       with(spec({512, 512, 512}, {2, 2, 2}, star3, 8, 100000), true, true), S::by_rows,
       G::wavefront, 1, 1, 1, 4, 3, R::beside_at_fixed_ends, L::every, true, true, 100000},
      // Not a star: shift by h + 1 planes, windows for temporal blocking; only the faces
      // across the last dimension late.
      {"moore 3-D tb 3", spec({40, 36, 32}, {2, 2, 1}, st::moore(3, 1), 3), S::by_planes,
       G::windows, 2, 0, 1, 1, 1, R::in_rows, L::across_last, false, false, planes_slab},
      // 2-D planes of 12 points: 512 / 12 = 42 planes per call.
      {"moore 2-D", spec({300, 12}, {2, 1}, st::moore(2, 1)), S::by_planes, G::per_step, 43, 0, 42,
       1, 1, R::in_rows, L::none, false, false, planes_slab},
      // 1-D: points are planes, 512 per call; halo 2.
      {"1-D", spec({20000}, {3}, st::von_neumann(1, 2)), S::by_planes, G::per_step, 514, 0, 512, 1,
       1, R::in_rows, L::none, false, false, planes_slab},
      // A coefficient grid shares the buffer's layout: padded rows; two time levels: no stage.
      {"heat3d, a coefficient grid, two levels",
       with(spec({64, 64, 64}, {2, 2, 2}, star3), true, false, 2, 1), S::by_rows, G::per_step, 1, 1,
       1, 1, 1, R::in_rows, L::every, false, false, rows_slab},
      // The double buffer has no in-place plan and keeps the padded rows.
      {"double buffer", double_buffer, S::none, G::per_step, 0, 0, 1, 1, 1, R::in_rows, L::none,
       false, false, 0},
  };
  for (const Row& r : table) {
    INFO(r.what);
    const Plan p = plan_of(r.spec.spec, r.spec.traits, kL2).plan;
    CHECK(p.sweep == r.sweep);
    CHECK(p.group == r.group);
    CHECK(p.shift_planes == r.shift_planes);
    CHECK(p.shift_rows == r.shift_rows);
    CHECK(p.unit_planes == r.unit_planes);
    CHECK(p.spare_units == r.spare_units);
    CHECK(p.wavefront_steps == r.wavefront_steps);
    CHECK(p.row_halo == r.row_halo);
    CHECK(p.late_faces == r.late_faces);
    CHECK(p.staged_exports == r.staged_exports);
    CHECK(p.whole_rows == r.whole_rows);
    CHECK(p.slab_budget == r.slab_budget);
  }
}

TEST_CASE("the plan lays heat3d's --tb 8 rows out in 33 lines", "[stencil]") {
  // Rows of 256 points: beside the fixed end, a row holds the 8-deep halo on its neighbour's
  // side and its points, 264 = 33 lines, and the one column beyond the grid's end lies in a
  // side array; in the rows it was 265 points, padded to 272: 34 lines.
  const auto star3 = st::von_neumann(3, 1);
  const Declared declared = with(spec({512, 512, 512}, {2, 2, 2}, star3, 8, kL2), true, true);
  const auto beside = plan_of(declared.spec, declared.traits, kL2);
  const auto padded = plan_of(spec({512, 512, 512}, {2, 2, 2}, star3, 8, kL2), {}, kL2);
  for (std::size_t b = 0; b < 8; ++b) {
    INFO("block " << b);
    const auto& pad = beside.grid.block(b).pad;
    CHECK(pad.stride[1] == 264);
    CHECK(pad.halo_beside);
    CHECK(pad.beside_low == (b % 2 == 0));  // the fixed end is below block 0's rows
    CHECK(padded.grid.block(b).pad.stride[1] == 272);
    CHECK(!padded.grid.block(b).pad.halo_beside);
    // Strips of a wavefront of 4 steps: 1 MiB over 10 planes of 264 doubles a row: 49 rows.
    CHECK(beside.plan.wavefront_strip_rows(pad, 4) == 49);
  }
}
