// The in-place plan: how Traversal::jacobi_in_place runs a stencil, decided once per stencil
// from its spec, its block grid and the tile budget (docs/stencil-in-place.md). Every part of
// the in-place sweeps reads its strategy and numbers here instead of testing the spec again.
// Internal to the stencil layer; not installed.
#pragma once

#include <cstddef>

#include <ordo/stencil.hpp>

#include "stencil/blocked_grid.hpp"

namespace ordo::stencil {

struct InPlacePlan {
  // How a one-step sweep moves a block inside its buffer (stencil_sweep_planes.cpp,
  // stencil_sweep_rows.cpp): by h + unit_planes planes, or, for a star (every offset along
  // one dimension), by h planes and shift_rows along dimension 1. none: not in place.
  enum class Sweep { none, by_planes, by_rows };
  // How a temporal-blocking group of several steps runs: wavefronts that move the block a unit
  // per step (stencil_wavefront.cpp), wavefronts through windows in strips
  // (stencil_windows.cpp, which run as one sweep per step where their strips do not pay or
  // their rings cannot be mapped), or one shifted sweep per step.
  enum class Group { per_step, wavefront, windows };
  // Which halo faces a one-step sweep unpacks itself, plane by plane, instead of before it.
  enum class LateFaces { none, across_last, every };

  Sweep sweep = Sweep::none;
  Group group = Group::per_step;
  LateFaces late_faces = LateFaces::none;
  std::size_t dims = 0;
  std::size_t halo = 0;
  // Planes (dimension 0) a one-step sweep moves the block by, and points along dimension 1:
  // h rows in 3-D and up, a piece of a row in 2-D (by_rows only; 0 otherwise).
  std::ptrdiff_t shift_planes = 0;
  std::ptrdiff_t shift_rows = 0;
  // Planes per kernel call of a sweep by planes (1 in 3-D and up).
  std::ptrdiff_t unit_planes = 1;
  // Units of shift_at() each buffer keeps spare for the block's moves: 1 for one-step sweeps,
  // for the star's wavefronts the most steps one may run. From the spec and the blocks only,
  // since it sizes the locations (every rank and every restart must agree).
  std::size_t spare_units = 1;
  // Steps one wavefront of moves runs on this machine (Group::wavefront), at most spare_units.
  std::size_t wavefront_steps = 1;
  // Where the blocks keep the last dimension's halo.
  geometry::RowHalo row_halo = geometry::RowHalo::in_rows;
  // The sweep copies the exports across the last dimension into a per-block stage as it goes
  // (3-D, one time level, by rows).
  bool staged_exports = false;
  // A wavefront passes a plane's rows of a strip in one kernel call (the kernel computes its
  // rows in order; 3-D and up).
  bool whole_rows = false;
  // Bytes a slab or strip of a sweep's rows may fill, and the windows' working set.
  std::size_t slab_budget = 0;
  std::size_t tile_budget = 0;
  bool tile_bytes_given = false;  // Schedule::tile_bytes given: strips followed down to one row
  std::size_t time_levels = 1;
  std::size_t aux_grids = 0;

  // The doubles by which a one-step sweep moves a block of layout `pad`.
  std::ptrdiff_t shift_at(const geometry::Pad& pad) const {
    return shift_planes * pad.stride[0] + (shift_rows != 0 ? shift_rows * pad.stride[1] : 0);
  }
  // Whether a group of `steps` steps unpacks the face from direction `dir` inside its sweep.
  bool is_late_face(const core::Ix& dir, std::size_t steps) const {
    if (steps != 1) return false;
    return late_faces == LateFaces::every ||
           (late_faces == LateFaces::across_last && is_across_last(dir));
  }
  // Whether the export towards `dir` is staged by the sweep (staged_exports).
  bool is_staged_export(const core::Ix& dir) const { return staged_exports && is_across_last(dir); }
  // Whether `dir` points across the last dimension alone: its face is h values per row.
  bool is_across_last(const core::Ix& dir) const {
    for (std::size_t k = 0; k + 1 < dims; ++k)
      if (dir[k] != 0) return false;
    return dims > 0 && dir[dims - 1] != 0;
  }
  // Rows per slab of a 3-D+ one-step sweep over rows [lo, hi) of a block of layout `pad`: the
  // planes a unit reaches stay in slab_budget.
  std::ptrdiff_t slab_rows(const geometry::Pad& pad, std::ptrdiff_t lo, std::ptrdiff_t hi) const;
  // Rows of a strip of a wavefront of k steps (3-D and up; 0 in 2-D: whole cross-sections),
  // whose planes in flight fit the slab budget.
  std::ptrdiff_t wavefront_strip_rows(const geometry::Pad& pad, std::size_t k) const;
  // The windows of a group of `steps` steps over a block of layout `pad` (Group::windows):
  // rings of ring_planes planes (window_bytes each), unit_planes per kernel call, strips of
  // strip_rows rows along dimension 1 (the whole block when it fits the tile budget), or one
  // shifted sweep per step where strip_rows is 0.
  struct Windows {
    std::ptrdiff_t strip_rows = 0, ring_planes = 0, unit_planes = 1;
    std::size_t window_bytes = 0;
  };
  Windows windows(const geometry::Pad& pad, std::size_t steps) const;
};

// The plan of a stencil whose spec has its defaults and is valid, for a kernel that declares
// `traits`, on the block grid `grid`, which it pads (the padding depends on where the plan
// keeps the rows' halo). `tile_budget`: Schedule::tile_bytes or the machine's default; `l2`:
// this machine's L2 in bytes.
InPlacePlan plan_in_place(const Spec& s, const KernelTraits& traits, core::BlockedGrid& grid,
                          std::size_t tile_budget, std::size_t l2);

}  // namespace ordo::stencil
