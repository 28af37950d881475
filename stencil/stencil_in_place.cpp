// In-place Jacobi (Traversal::jacobi_in_place; docs/stencil-in-place.md): the results of the
// double-buffered Jacobi, bit for bit, with one buffer per time level instead of one more, the
// new level overwriting the oldest. A step reads the buffer it overwrites, so the layer keeps
// every new value out of it until no later read needs the old one. How, the in-place plan
// decides once per stencil (stencil_plan.hpp); each strategy has a file of its own:
//
// * One step: a shifted sweep (sweep_shifted, below). The block moves inside its buffer, which
//   has room to spare, so that each unit writes only what no unit still to come reads: by
//   h + P planes (stencil_sweep_planes.cpp), or for a star by h planes and h rows, one row per
//   kernel call (stencil_sweep_rows.cpp). What moves with the block is its halo: a neighbour's
//   halo is unpacked at the new place by the next step anyway, and the values beyond a fixed
//   end of the grid are put back from a store of them the block keeps (fixed_runs, O(surface)).
//   The shift of each buffer is in the main location's header, so everything that reads a
//   buffer finds the block where it is.
// * Temporal blocking by a star: wavefronts of k steps, each moving the block by one more unit
//   (stencil_wavefront.cpp).
// * Temporal blocking otherwise: a wavefront through windows, strip by strip
//   (stencil_windows.cpp), or one shifted sweep per step where the windows do not pay.
// Exactness: every value is computed by the same kernel from the same old values as in the
// double-buffered form (the delays above guarantee that each read sees the old value), so the
// bits are the same; the property tests compare both with a brute force.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stencil/stencil_in_place.hpp"

namespace ordo::stencil {

using geometry::for_each_point;
using in_place::Ix;
using in_place::Pad;
using in_place::point_at_side;

std::unique_ptr<Stencil::Impl::FixedHalo> Stencil::Impl::fixed_runs(std::size_t b) const {
  auto f = std::make_unique<FixedHalo>();
  const core::BlockGeom& geo = grid.block(b);
  const Pad& pad = geo.pad;
  // Whether a cell (local coordinate) lies beyond a fixed end of the grid, and its value.
  Ix low{}, high{};  // 1 where that end of the block is a fixed end of the grid
  for (std::size_t k = 0; k < dims; ++k) {
    low[k] = spec.boundary == Boundary::fixed && geo.origin[k] == 0;
    high[k] = spec.boundary == Boundary::fixed &&
              geo.origin[k] + pad.ext[k] == static_cast<std::int64_t>(spec.size[k]);
  }
  auto is_fixed = [&](const Ix& l) {
    for (std::size_t k = 0; k < dims; ++k)
      if ((l[k] < 0 && low[k]) || (l[k] >= pad.ext[k] && high[k])) return true;
    return false;
  };
  auto value = [&](const Ix& l) {
    core::Origin x{};
    for (std::size_t k = 0; k < dims; ++k) x[k] = geo.origin[k] + l[k];
    return spec.fixed_value ? spec.fixed_value(Coord(x.data(), dims)) : 0.0;
  };
  const std::vector<std::pair<Ix, Ix>> regions = grid.fixed_regions(b);
  std::vector<double> want;
  // Where each distinct sequence of values already stored starts, by a hash of its bytes: a
  // block's fixed runs mostly repeat a few sequences (a constant boundary, a row of them),
  // which are kept once instead of once per run; where the values vary with the coordinate
  // nearly every run differs, and a scan of all earlier ones would be quadratic in the runs.
  std::unordered_multimap<std::size_t, std::pair<std::size_t, std::size_t>>
      stored;  // (start, length)
  // Rows of a neighbour's deep halo along dimension 1 (temporal blocking's ranges shrink
  // there): FixedHalo::deep holds all the fixed cells in them.
  auto is_deep_row = [&](std::ptrdiff_t r) {
    return dims >= 2 && ((r < 0 && !low[1]) || (r >= pad.ext[1] && !high[1]));
  };
  // After a sweep down, the cells of plane p (row j) lie where plane p - shift_planes (row
  // j - shift_rows) was; up, p + shift_planes (j + shift_rows).
  for (const std::ptrdiff_t sign : {-1, 1, 0}) {
    FixedHalo::Runs& runs = sign < 0 ? f->down : sign > 0 ? f->up : f->deep;
    auto from = [&](Ix c) {
      c[0] += sign * plan.shift_planes;
      if (dims >= 2) c[1] += sign * plan.shift_rows;
      return c;
    };
    for (auto [rlo, rhi] : regions) {
      // Beside the rows, the fixed values stay where set() put them: the side array does not
      // move with the block. Only the cells in the rows move.
      pad.clip_to_rows(rlo[dims - 1], rhi[dims - 1]);
      if (rhi[dims - 1] <= rlo[dims - 1]) continue;
      Ix row_hi = rhi;
      row_hi[dims - 1] = rlo[dims - 1] + 1;
      const auto len = static_cast<std::size_t>(rhi[dims - 1] - rlo[dims - 1]);
      for_each_point(dims, rlo, row_hi, [&](const Ix& l) {  // l: the first cell of a run
        if (sign == 0 && !is_deep_row(l[1])) return;
        want.resize(len);
        const Ix src = from(l);
        bool same = sign != 0 && is_fixed(src);
        for (std::size_t k = 0; k < 2 && k < dims; ++k)
          same = same && src[k] >= -pad.low[k] && src[k] < pad.ext[k] + pad.high[k];
        for (std::size_t j = 0; j < len; ++j) {
          Ix c = l;
          c[dims - 1] += static_cast<std::ptrdiff_t>(j);
          want[j] = value(c);
          if (!same) continue;
          const double had = value(from(c));
          same = std::memcmp(&had, &want[j], sizeof had) == 0;
        }
        if (same) return;
        runs.where.emplace_back(pad.index_of(l), len);
        runs.plane.push_back(l[0]);
        runs.row.push_back(dims >= 2 ? l[1] : 0);
        const std::size_t key = std::hash<std::string_view>{}(
            std::string_view(reinterpret_cast<const char*>(want.data()), len * sizeof(double)));
        for (auto [it, end] = stored.equal_range(key); it != end; ++it) {
          const auto [at, n] = it->second;
          if (n == len &&
              std::memcmp(runs.values.data() + at, want.data(), len * sizeof(double)) == 0) {
            runs.first.push_back(at);
            return;
          }
        }
        stored.emplace(key, std::pair(runs.values.size(), len));
        runs.first.push_back(runs.values.size());
        runs.values.insert(runs.values.end(), want.begin(), want.end());
      });
    }
    stored.clear();
    runs.values.shrink_to_fit();
    // By plane and row, for a wavefront that puts them back plane by plane, strip by strip
    // (sweep_wavefront).
    std::vector<std::size_t> order(runs.where.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return std::pair(runs.plane[x], runs.row[x]) < std::pair(runs.plane[y], runs.row[y]);
    });
    FixedHalo::Runs sorted;
    sorted.where.reserve(order.size());
    sorted.plane.reserve(order.size());
    sorted.row.reserve(order.size());
    sorted.first.reserve(order.size());
    for (const std::size_t i : order) {
      sorted.where.push_back(runs.where[i]);
      sorted.plane.push_back(runs.plane[i]);
      sorted.row.push_back(runs.row[i]);
      sorted.first.push_back(runs.first[i]);
    }
    sorted.values = std::move(runs.values);
    runs = std::move(sorted);
  }
  return f;
}

void Stencil::Impl::unpack_late(std::size_t b, std::span<double> main, std::uint64_t rot,
                                const LateFace& f, std::ptrdiff_t p, std::ptrdiff_t r0,
                                std::ptrdiff_t r1) const {
  const Pad& pad = grid.block(b).pad;
  Ix lo{}, hi{};
  geometry::halo_box(pad, static_cast<std::ptrdiff_t>(halo.width), f.import->dir, lo, hi);
  r0 = std::max(r0, lo[1]);
  r1 = std::min(r1, hi[1]);
  if (p < lo[0] || p >= hi[0] || r0 >= r1) return;
  // The face is packed row-major over [lo, hi): plane p's rows [r0, r1) are one run of it.
  std::size_t inner = 1;  // values per (plane, row): dimensions 2 .. d-1 of the box
  for (std::size_t k = 2; k < dims; ++k) inner *= static_cast<std::size_t>(hi[k] - lo[k]);
  const std::size_t first =
      (static_cast<std::size_t>(p - lo[0]) * static_cast<std::size_t>(hi[1] - lo[1]) +
       static_cast<std::size_t>(r0 - lo[1])) *
      inner;
  lo[0] = p;
  hi[0] = p + 1;
  lo[1] = r0;
  hi[1] = r1;
  for (std::size_t l = 0; l < levels; ++l) {
    const auto delta = -static_cast<std::ptrdiff_t>(l);
    const geometry::Cells c = geometry::cells_of(pad, level_data(b, main, rot, delta),
                                                 level_side(b, main, rot, delta), lo, hi);
    geometry::unpack_box(c.pad, c.data, lo, hi, f.src + l * f.import->count + first);
  }
}

void Stencil::Impl::sweep_shifted(std::size_t b, std::span<double> main, Block& blk,
                                  std::uint64_t rot, const Ix& lo, const Ix& hi, ExportStage* stage,
                                  std::span<const LateFace> late) const {
  const Pad& pad = grid.block(b).pad;
  const std::size_t target = buffer_index(rot, 1);  // the oldest level: it gets the new one
  // Where the block is decides the direction: towards the buffer's start while it has room.
  const std::size_t moved = moved_units(main, target);
  const bool down = moved < plan.spare_units;
  const std::size_t moved_after = down ? moved + 1 : moved - 1;
  blk.layout.next_plane = down ? pad.stride[0] : -pad.stride[0];
  for (std::size_t l = 0; l < levels; ++l) {
    blk.in[l] = level_data(b, main, rot, -static_cast<std::ptrdiff_t>(l)) + pad.base;
    if (pad.halo_beside)
      point_at_side(blk, l, pad, level_side(b, main, rot, -static_cast<std::ptrdiff_t>(l)));
  }
  // Where point x of the new level goes: out + pad.index_of(x).
  double* const out = main.data() + detail_stencil::kHeader + target * buffer_size(b) +
                      static_cast<std::ptrdiff_t>(plan.spare_units - moved_after) * shift_at(pad);
  blk.step = rot;
  if (plan.sweep == InPlacePlan::Sweep::by_rows) {
    blk.out = out + pad.base;
    // The stage holds the block's rows: only a range that is the block fills it.
    for (std::size_t k = 0; k < dims; ++k)
      if (lo[k] != 0 || hi[k] != pad.ext[k]) stage = nullptr;
    sweep_rows(b, main, blk, rot, lo, hi, late, down, stage);
    if (stage) stage->steps = static_cast<double>(rot + 1);
  } else {
    sweep_planes(b, main, blk, rot, lo, hi, late, down, out);
  }
  set_moved_units(main, target, moved_after);
  // The values beyond fixed ends of the grid, at the block's new place.
  const FixedHalo::Runs& runs = down ? fixed_halo[b]->down : fixed_halo[b]->up;
  // Streaming stores where the block is larger than a slab: a sweep of the block reads these
  // cells only when it reaches their planes, a whole block later, so the cache would keep
  // nothing of the lines it would read before writing them. A block within a slab is read
  // again from the cache; a non-temporal store would evict the line it reads next step, at a
  // miss to memory per row end.
  const bool stream = buffer_size(b) * sizeof(double) > plan.slab_budget;
  for (std::size_t r = 0; r < runs.where.size(); ++r) {
    double* const to = out + runs.where[r].first;
    const double* const from = runs.values.data() + runs.first[r];
    if (stream)
      detail_stencil::stream_copy(to, from, runs.where[r].second);
    else
      std::copy_n(from, runs.where[r].second, to);
  }
  if (stream) detail_stencil::stream_fence();
}

void Stencil::Impl::run_in_place(std::size_t b, std::span<double> main, Block& blk,
                                 std::uint64_t rot, std::size_t steps, const std::vector<Ix>& slo,
                                 const std::vector<Ix>& shi, std::span<const LateFace> late,
                                 ExportStage& stage) const {
  ExportStage* const last_stage = &stage;  // the group's last step stages the exports
  if (steps == 1) {
    sweep_shifted(b, main, blk, rot, slo[0], shi[0], last_stage, late);
    return;
  }
  switch (plan.group) {
    case InPlacePlan::Group::wavefront: {
      // Wavefronts that move the block a unit per step, towards the buffer's start while it
      // has room for the steps left, else back; where neither end has room for them all, to
      // the start first. A wavefront of one step is a shifted sweep.
      const std::size_t target = buffer_index(rot, 1);
      const std::size_t room = plan.spare_units;
      for (std::size_t done = 0; done < steps;) {
        const std::size_t n = moved_units(main, target), left = steps - done;
        const bool down = n + left <= room || (n < left && n < room);
        const std::size_t k = std::min({left, down ? room - n : n, plan.wavefront_steps});
        if (k == 1)
          sweep_shifted(b, main, blk, rot + done, slo[done], shi[done],
                        done + 1 == steps ? last_stage : nullptr);
        else
          sweep_wavefront(b, main, blk, rot, done, k, slo, shi, down);
        done += k;
      }
      return;
    }
    case InPlacePlan::Group::windows:
      if (sweep_windows(b, main, blk, rot, steps, slo, shi)) return;
      break;  // no windows to be had: one sweep per step
    case InPlacePlan::Group::per_step: break;
  }
  for (std::size_t s = 0; s < steps; ++s)
    sweep_shifted(b, main, blk, rot + s, slo[s], shi[s], s + 1 == steps ? last_stage : nullptr);
}

}  // namespace ordo::stencil
