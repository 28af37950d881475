// The in-place plan (stencil_plan.hpp): the strategy of Traversal::jacobi_in_place and its
// numbers, decided once per stencil. The figures behind the constants are in
// docs/benchmarks.md, "Figures behind defaults in the code".
#include "stencil/stencil_plan.hpp"

#include <algorithm>
#include <cstdint>

#include <unistd.h>

namespace ordo::stencil {

namespace {

using geometry::Pad;

// Points of the planes the kernel is called on at least once: one call per unit costs about
// as much as a few dozen points, so units of fewer points are merged along dimension 0.
constexpr std::size_t kUnitPoints = 512;
// A 2-D sweep by rows whose rows are in the cache (temporal blocking) calls the kernel on
// shorter pieces of a row, which ran faster there.
constexpr std::size_t kUnitPointsInCache = 384;
// The most steps one wavefront of moves runs, and so the units of room a buffer keeps: each
// unit is about a plane of memory per block, and more bought no speed.
constexpr std::size_t kMostWavefrontSteps = 4;

std::size_t page_bytes() {
  static const auto v = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return v;
}

// A star: every offset along one dimension.
bool is_star(const Spec& s) {
  return std::all_of(s.neighbourhood.begin(), s.neighbourhood.end(), [](const Offset& o) {
    return std::count_if(o.begin(), o.end(), [](int c) { return c != 0; }) <= 1;
  });
}

// How many steps one wavefront of moves runs: the most whose (2k + 1)h + 1 planes in flight
// fit `budget`, at most `room`. A plane is the largest block's, or in 3-D and up (which runs
// in strips of rows) a strip of the fewest rows worth one: the skew and the h rows either side.
std::size_t wavefront_steps(const Spec& s, const core::BlockedGrid& grid, std::size_t room,
                            std::size_t budget) {
  if (room <= 1) return 1;
  const auto h = static_cast<std::ptrdiff_t>(s.halo);
  auto plane = [&](std::size_t k) {
    std::ptrdiff_t most = 0;
    for (std::size_t b = 0; b < grid.count(); ++b) {
      const Pad& pad = grid.block(b).pad;
      const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(k + 2) * h;
      most = std::max(
          most, grid.dims() >= 3 && rows < pad.padded(1) ? rows * pad.stride[1] : pad.stride[0]);
    }
    return 8.0 * static_cast<double>(most) * static_cast<double>(1 + s.aux_grids);
  };
  std::size_t k = room;
  while (k > 1 &&
         static_cast<double>((2 * k + 1) * s.halo + 1) * plane(k) > static_cast<double>(budget))
    --k;
  return k;
}

}  // namespace

InPlacePlan plan_in_place(const Spec& s, const KernelTraits& traits, core::BlockedGrid& grid,
                          std::size_t tile_budget, std::size_t l2) {
  InPlacePlan p;
  const std::size_t d = grid.dims();
  p.dims = d;
  p.halo = s.halo;
  p.time_levels = s.time_levels;
  p.aux_grids = s.aux_grids;
  p.tile_budget = tile_budget;
  p.tile_bytes_given = s.schedule.tile_bytes != 0;
  const bool in_place = s.traversal == Traversal::jacobi_in_place;
  const auto h = static_cast<std::ptrdiff_t>(s.halo);
  // The smallest block's planes along dimension 0 and points per plane (2-D: per row).
  std::ptrdiff_t plane_points = 1, planes = 0;
  for (std::size_t k = 0; k < d; ++k) {
    const auto smallest = static_cast<std::ptrdiff_t>(s.size[k] / s.blocks[k]);
    if (k == 0)
      planes = smallest;
    else
      plane_points *= smallest;
  }
  // A star in 2-D and up moves the block by rows too: each row (3-D) or piece of a row (2-D)
  // is written onto the line the previous unit read a moment ago (in L1), where the shift by
  // planes writes onto one read a plane earlier (in L2). Not a 2-D one-step sweep over rows
  // shorter than a unit: it would call the kernel once per row, where the shift by planes
  // merges rows into units of kUnitPoints (fewer calls measured faster there).
  const bool short_rows =
      d == 2 && s.tb_depth == 1 && plane_points < static_cast<std::ptrdiff_t>(kUnitPoints);
  if (in_place)
    p.sweep = d >= 2 && is_star(s) && !short_rows ? InPlacePlan::Sweep::by_rows
                                                  : InPlacePlan::Sweep::by_planes;
  const bool by_rows = p.sweep == InPlacePlan::Sweep::by_rows;
  if (by_rows) {
    const std::size_t piece = s.tb_depth > 1 ? kUnitPointsInCache : kUnitPoints;
    p.shift_rows =
        d >= 3 ? h : (std::max<std::ptrdiff_t>(h, static_cast<std::ptrdiff_t>(piece)) + 7) / 8 * 8;
  }
  // The halo beside the rows pays where a sweep by rows reads each row once from memory with
  // its halo values (3-D and up); temporal blocking computes into a neighbour's halo, so it
  // keeps that halo in the rows and only the columns beyond a fixed end beside them.
  // Coefficient grids share the buffer's layout, so they keep the padded rows.
  if (traits.halo_through_row && by_rows && d >= 3 && s.aux_grids == 0)
    p.row_halo =
        s.tb_depth == 1 ? geometry::RowHalo::beside : geometry::RowHalo::beside_at_fixed_ends;
  grid.set_padding(s.halo * s.tb_depth, s.halo, p.row_halo);
  if (!in_place) return p;

  // Planes per kernel call of a sweep by planes: one in 3-D and up (a plane is many rows, and
  // a slab's deferred rows are kept per plane), else enough for kUnitPoints points.
  p.unit_planes = d >= 3 ? 1
                         : std::clamp<std::ptrdiff_t>(
                               static_cast<std::ptrdiff_t>(kUnitPoints) / plane_points, 1, planes);
  p.shift_planes = h + (by_rows ? 0 : p.unit_planes);
  if (by_rows) p.unit_planes = 1;
  // A plane shift writes one more row per unit, onto lines it does not read; a row shift
  // writes onto lines of the 2h + 1 planes it reads, and its slabs may fill more of the L2: a
  // slab re-reads the rows on either side of it, so larger slabs cost less while they fit.
  p.slab_budget = s.schedule.tile_bytes ? s.schedule.tile_bytes : by_rows ? 3 * l2 / 4 : l2 / 2;
  if (d >= 3)
    p.late_faces = by_rows ? InPlacePlan::LateFaces::every : InPlacePlan::LateFaces::across_last;
  p.staged_exports = by_rows && d == 3 && s.time_levels == 1;
  p.whole_rows = d >= 3 && traits.rows_in_order;
  if (s.tb_depth > 1) {
    // The room depends on the spec and the blocks alone, never on the tile budget: it sizes
    // the locations. How many steps one wavefront runs is this machine's choice.
    if (s.time_levels == 1 && by_rows) p.spare_units = std::min(s.tb_depth, kMostWavefrontSteps);
    p.wavefront_steps = wavefront_steps(s, grid, p.spare_units, tile_budget);
    p.group = p.wavefront_steps > 1 ? InPlacePlan::Group::wavefront : InPlacePlan::Group::windows;
  }
  return p;
}

std::ptrdiff_t InPlacePlan::slab_rows(const Pad& pad, std::ptrdiff_t lo, std::ptrdiff_t hi) const {
  const auto h = static_cast<std::ptrdiff_t>(halo);
  const double budget = static_cast<double>(slab_budget);
  const double rows =
      static_cast<double>((time_levels + aux_grids) * static_cast<std::size_t>(2 * h + 1) +
                          (sweep == Sweep::by_rows ? 0 : 1));
  return std::clamp<std::ptrdiff_t>(
      static_cast<std::ptrdiff_t>(budget / (8.0 * static_cast<double>(pad.stride[1]) * rows)), h,
      std::max<std::ptrdiff_t>(hi - lo, h));
}

std::ptrdiff_t InPlacePlan::wavefront_strip_rows(const Pad& pad, std::size_t k) const {
  if (dims < 3) return 0;
  const double budget = static_cast<double>(slab_budget);
  const double planes = static_cast<double>(((2 * k + 1) * halo + 1) * (1 + aux_grids));
  return std::max<std::ptrdiff_t>(
      1, static_cast<std::ptrdiff_t>(budget / (8.0 * static_cast<double>(pad.stride[1]) * planes)));
}

InPlacePlan::Windows InPlacePlan::windows(const Pad& pad, std::size_t steps) const {
  const std::size_t d = dims;
  const auto h = static_cast<std::ptrdiff_t>(halo);
  Windows w;
  std::ptrdiff_t plane_points = 1;
  for (std::size_t k = 1; k < d; ++k) plane_points *= pad.padded(k);
  w.unit_planes = std::max<std::ptrdiff_t>(
      1, static_cast<std::ptrdiff_t>(kUnitPoints) / std::max<std::ptrdiff_t>(plane_points, 1));
  // A window is a ring of at least 2h + unit_planes planes: step s writes planes [a, a + P)
  // while step s+1, h planes behind, still reads [a - 2h, a + P) of it.
  const std::ptrdiff_t least = 2 * h + w.unit_planes;
  // The working set, in rows (dimension 1; in 1-D the cross-section is one point): per row of
  // a strip, the steps-1 windows' planes and the planes of the buffer (and of each coefficient
  // grid) between the wavefront's first and last step; besides, the rows each window holds
  // beyond its strip (at most 3h: carried and fixed) and the buffer's skew ((steps+1)h rows).
  // It fits half the tile budget: the rings and the carried rows stay resident per worker.
  const auto n = static_cast<std::ptrdiff_t>(steps);
  const std::ptrdiff_t row = d >= 2 ? pad.stride[1] : 1;
  const auto grids = static_cast<double>(1 + aux_grids);
  const double buffer_planes = static_cast<double>((n + 1) * h + w.unit_planes);
  const std::ptrdiff_t all = d >= 2 ? pad.ext[1] : 1;
  auto strip_rows = [&](std::ptrdiff_t ring_planes) -> std::ptrdiff_t {
    const double per_row = static_cast<double>((n - 1) * ring_planes) + grids * buffer_planes;
    const double beyond = static_cast<double>((n - 1) * ring_planes * 3 * h) +
                          grids * buffer_planes * static_cast<double>((n + 1) * h);
    const double rows =
        (static_cast<double>(tile_budget) / 2 / (8.0 * static_cast<double>(row)) - beyond) /
        per_row;
    return rows < 1 ? 0 : std::min(all, static_cast<std::ptrdiff_t>(rows));
  };
  // The ring is whole pages (MirroredRing), so its length exceeds the planes by `drift`
  // doubles unless they are whole pages: from one round of the ring to the next a strip's
  // rows move by the drift, touching that many more of the ring's pages. With strips narrower
  // than the block, the ring has the fewest planes from `least` on whose drift over the block
  // stays within two rows a plane (else the one of least drift among 64).
  const auto page = static_cast<std::ptrdiff_t>(page_bytes() / sizeof(double));
  auto drift = [&](std::ptrdiff_t ring_planes) {
    return (page - ring_planes * pad.stride[0] % page) % page *
           ((pad.padded(0) + ring_planes - 1) / ring_planes);
  };
  w.ring_planes = least;
  w.strip_rows = strip_rows(least);
  if (w.strip_rows > 0 && w.strip_rows < all) {
    for (std::ptrdiff_t planes = least; planes < least + 64; ++planes) {
      if (drift(planes) < drift(w.ring_planes)) w.ring_planes = planes;
      if (drift(planes) <= 2 * row * planes) {
        w.ring_planes = planes;
        break;
      }
    }
    w.strip_rows = strip_rows(w.ring_planes);
    // Each strip carries 2h rows of every intermediate step to the next, written and read
    // back through memory: with the automatic budget, strips whose carried rows would exceed
    // half their own run as shifted sweeps instead. An explicit tile_bytes is followed down
    // to one-row strips.
    if (!tile_bytes_given && w.strip_rows < 4 * (n - 1) * h) w.strip_rows = 0;
  }
  w.window_bytes =
      static_cast<std::size_t>((w.ring_planes * pad.stride[0] + page - 1) / page * page) *
      sizeof(double);
  return w;
}

}  // namespace ordo::stencil
