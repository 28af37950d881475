// Sweep::by_rows of the in-place plan (docs/stencil-in-place.md, "Stars: a shift by rows
// too"): a star's one-step sweep moves the block by h planes and h rows (2-D: a piece of a
// row), one row per kernel call (a plane's rows of a slab where the kernel computes its rows
// in order), so that each write lands on the line the previous unit read a moment ago, still
// in L1. It unpacks the late faces as it goes and stages the exports
// across the last dimension for the export task.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "stencil/stencil_in_place.hpp"

namespace ordo::stencil {

using in_place::is_empty;
using in_place::Ix;
using in_place::Pad;

void Stencil::Impl::sweep_rows(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                               const Ix& lo, const Ix& hi, std::span<const LateFace> late,
                               bool down, ExportStage* stage) const {
  if (is_empty(dims, lo, hi)) return;
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  const auto width = static_cast<std::ptrdiff_t>(halo.width);
  // Unit (p, j) writes row j - h of plane p - h (down; up: + h, + h), which the units before
  // it were the last to read: row j - h of plane p (plane p - h + h), and rows j - h +- m of
  // plane p - h (m <= h, at most row j - 1: this slab's or an earlier one's, in an earlier
  // plane). No unit reads what it writes, and no later unit reads it either, whatever the
  // slabs: a slab never writes the rows the next one still reads (h rows from its edge, which
  // only the next slab's own units overwrite).
  const std::ptrdiff_t step = down ? 1 : -1;
  // Units along dimension 1: a row (3-D and up), or shift_rows points of the row (2-D: no
  // slabs; a unit's writes land shift_rows points behind it, so it reads none of them).
  const std::ptrdiff_t unit = dims >= 3 ? 1 : plan.shift_rows;
  const std::ptrdiff_t slab = dims >= 3 ? plan.slab_rows(pad, lo[1], hi[1]) : hi[1] - lo[1];
  const std::ptrdiff_t slabs = (hi[1] - lo[1] + slab - 1) / slab;
  // The staged exports (the plan's), filled by the last step, whose range is the block.
  ExportStage* const st = stage && !stage->parts.empty() ? stage : nullptr;
  if (st) st->values.resize(st->count);
  // The imports (all late: InPlacePlan::is_late_face). Those across dimension 0 per slab: the units
  // of a plane read no other plane's halo (a star), which is unpacked just before them, its lines
  // fetched ahead by the plane before. The others per plane, except those across the last
  // dimension in 3-D: a row's part of such a face is what only that row's unit reads, one
  // value per row on a line of its own, so it is unpacked just before the unit reads that line
  // (unpacked a plane ahead, the slab's lines would each be fetched twice).
  auto is_across = [](const LateFace& f) { return f.import->dir[0] != 0; };
  auto is_row_face = [&](const LateFace& f) {
    return dims == 3 && plan.is_across_last(f.import->dir);
  };
  // In the padded rows a row's part of such a face is copied into the halo just before its
  // kernel call; beside the rows the kernel reads it where the import holds it (Row::before
  // or after pointed at it for that row), as the hand-written graph passed its neighbours'
  // values: no copy, and the side array's lines are only read (the fixed values).
  struct RowFace {
    const double* src = nullptr;  // the face's values, plane by plane, row by row
    std::size_t count = 0;        // values per level
    std::ptrdiff_t col = 0;       // padded rows: the halo column its part of a row starts at
    bool east = false;            // the values right of the row
    bool halo_beside = false;     // its end's halo lies beside the rows
  };
  std::array<RowFace, 2> row_faces{};  // a star in 3-D has two faces across the last dimension
  std::size_t n_row_faces = 0;
  std::array<double*, kMaxLevels> level{};
  for (std::size_t l = 0; l < levels; ++l)
    level[l] = level_data(b, main, rot, -static_cast<std::ptrdiff_t>(l));
  for (const LateFace& f : late) {
    if (!is_row_face(f)) continue;
    Ix flo{}, fhi{};
    geometry::halo_box(pad, width, f.import->dir, flo, fhi);
    const bool east = f.import->dir[2] > 0;
    const bool beside = east ? pad.beside_high : pad.beside_low;
    if (beside && pad.side_step != width)
      throw Error("stencil '" + spec.name + "': internal: a face " + std::to_string(width) +
                  " wide beside rows of " + std::to_string(pad.side_step));
    row_faces.at(n_row_faces++) = {f.src, f.import->count, flo[2], east, beside};
  }
  // Beside the rows: the row number of row (p, j) (Row::row_of) is
  // p * rows_per_plane + j, and a face's values for it are pointed at as those of row 0
  // shifted by that many rows. safety: integer arithmetic, as Base; the kernel adds the row's
  // offset back (Row::before/after) and so reads inside the import.
  const std::ptrdiff_t rows_per_plane = dims >= 2 ? pad.stride[0] / pad.stride[1] : 0;
  auto as_row_0 = [&](const double* p, std::ptrdiff_t row) {
    return reinterpret_cast<const double*>(reinterpret_cast<std::uintptr_t>(p) -
                                           static_cast<std::uintptr_t>(row * width) *
                                               sizeof(double));
  };
  // A unit's range differs from [lo, hi) along dimensions 0 and 1 only.
  blk.lo = lo;
  blk.hi = hi;
  // A kernel that computes its rows in order takes a plane's rows of a slab in one call, in the
  // sweep's order (backwards up): row j's writes land on row j - h of plane p - h, which only
  // the rows before it were still to read, as in a call per row. A call per row cost more than
  // its row on short rows. The faces across the last dimension are then put in place for the
  // whole plane before the call (no unit writes a halo column: the block moves by whole rows
  // and planes) and the staged exports copied after it (no later row of the plane writes them).
  const bool whole = plan.whole_rows;
  blk.layout.backwards = whole && !down;
  for (std::ptrdiff_t n = 0; n < slabs; ++n) {
    const std::ptrdiff_t j0 = lo[1] + (down ? n : slabs - 1 - n) * slab;
    const std::ptrdiff_t j1 = std::min(j0 + slab, hi[1]);
    // The rows whose halo this slab's units read: its own and h on either side (the halo
    // rows beyond the range's ends, or other slabs' rows, whose cells at the old place no
    // unit has written yet: only the units of the slab that holds them will).
    const std::ptrdiff_t r0 = j0 - h, r1 = j1 + h;
    for (const LateFace& f : late) {
      if (!is_across(f)) continue;
      Ix flo{}, fhi{};
      geometry::halo_box(pad, width, f.import->dir, flo, fhi);
      for (std::ptrdiff_t p = flo[0]; p < fhi[0]; ++p) unpack_late(b, main, rot, f, p, r0, r1);
    }
    for (std::ptrdiff_t p = down ? lo[0] : hi[0] - 1; down ? p < hi[0] : p >= lo[0]; p += step) {
      for (const LateFace& f : late)
        if (!is_across(f) && !is_row_face(f)) unpack_late(b, main, rot, f, p, r0, r1);
      blk.lo[0] = p;
      blk.hi[0] = p + 1;
      // In 3-D: where row (p, j) starts (pad.index_of), and its part of a face or stage (packed
      // plane by plane, row by row, `width` values a row).
      const std::ptrdiff_t plane_at = pad.base + p * pad.stride[0];
      const std::ptrdiff_t plane_part = p * pad.ext[1];
      // The row whose staged parts are still to copy: the one before, whose values the
      // kernel's stores have left by now (read at once, they wait for those stores).
      std::ptrdiff_t staged_row = -1;
      auto copy_staged = [&](std::ptrdiff_t j) {
        const double* row = blk.out - pad.base + plane_at + j * pad.stride[1];
        for (const ExportStage::Part& part : st->parts)
          geometry::copy_row(st->values.data() + part.first + (plane_part + j) * width,
                             row + part.col, static_cast<std::size_t>(width));
      };
      // Row (p, j)'s part of each face across the last dimension, where the kernel reads it.
      auto put_row_faces = [&](std::ptrdiff_t j, bool ahead) {
        for (std::size_t i = 0; i < n_row_faces; ++i) {  // 3-D: the unit is row (p, j)
          const RowFace& f = row_faces[i];
          const double* from = f.src + (plane_part + j) * width;
          // A line of the face holds the parts of a few rows: the next one's, well ahead.
          if (ahead)
            __builtin_prefetch(reinterpret_cast<const void*>(
                reinterpret_cast<std::uintptr_t>(from) +
                static_cast<std::uintptr_t>(step * 8 * width) * sizeof(double)));
          if (f.halo_beside) {
            const std::ptrdiff_t row = p * rows_per_plane + j;
            for (std::size_t l = 0; l < levels; ++l) {
              const double* values = from + l * f.count;
              if (f.east)
                blk.layout.halo_after[l] = as_row_0(values, row);
              else
                blk.layout.halo_before[l] = as_row_0(values + width, row);
            }
            continue;
          }
          const std::ptrdiff_t at = plane_at + j * pad.stride[1] + f.col;
          for (std::size_t l = 0; l < levels; ++l)
            geometry::copy_row(level[l] + at, from + l * f.count, static_cast<std::size_t>(width));
        }
      };
      if (whole) {
        // Every row's part in the padded rows; beside the rows each row points the faces at
        // the same place (as_row_0 takes the row back out), so the last row's stand for all.
        for (std::ptrdiff_t j = j0; j < j1; ++j) put_row_faces(j, false);
        blk.lo[1] = j0;
        blk.hi[1] = j1;
        if (j0 < j1) kernel(blk);
        if (st)
          for (std::ptrdiff_t j = j0; j < j1; ++j) copy_staged(j);
        continue;
      }
      for (std::ptrdiff_t j = down ? j0 : j1 - 1; down ? j < j1 : j >= j0; j += step * unit) {
        blk.lo[1] = down ? j : std::max(j0, j - unit + 1);
        blk.hi[1] = down ? std::min(j + unit, j1) : j + 1;
        put_row_faces(j, true);
        kernel(blk);
        if (!st) continue;
        if (staged_row >= 0) copy_staged(staged_row);
        staged_row = j;
      }
      if (st && staged_row >= 0) copy_staged(staged_row);
    }
  }
  blk.layout.backwards = false;
}

}  // namespace ordo::stencil
