// Group::wavefront of the in-place plan (docs/stencil-in-place.md, "Temporal blocking by a
// star: wavefronts of moves"): k steps of a star's group as one wavefront along dimension 0,
// each step the one-step sweep by rows running h planes behind the step before and moving the
// block by one more unit, into room the buffer keeps for them (InPlacePlan::spare_units).
// Nothing is copied and nothing deferred; the fixed values beyond fixed ends of the grid are
// put back plane by plane as each step passes.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

#include "stencil/stencil_in_place.hpp"

namespace ordo::stencil {

using in_place::is_empty;
using in_place::Ix;
using in_place::Pad;
using in_place::point_at_side;

void Stencil::Impl::sweep_wavefront(std::size_t b, std::span<double> main, Block& blk,
                                    std::uint64_t rot, std::size_t s0, std::size_t k,
                                    const std::vector<Ix>& slo, const std::vector<Ix>& shi,
                                    bool down) const {
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  const std::size_t target = buffer_index(rot, 1);  // with one level, the only buffer
  const std::size_t n = moved_units(main, target);
  double* const start = main.data() + detail_stencil::kHeader + target * buffer_size(b);
  const std::ptrdiff_t unit = shift_at(pad);
  // Level i of the wavefront (0: its input; i: after its i-th step) lies moved by n +- i units.
  auto level = [&](std::size_t i) {
    return start + static_cast<std::ptrdiff_t>(plan.spare_units - (down ? n + i : n - i)) * unit;
  };
  // Every step is sweep_rows' one-step sweep (unit (p, j) writes row j - h of plane p - h, down),
  // and step i+1 runs h planes behind step i, so when it reaches plane p, step i has computed
  // p + h, the last plane step i+1 reads there. Step i+1's writes land on level i+1's cells
  // that step i+1 itself has read for the last time (the one-step argument); level i+1's
  // cells hold level i's before, which step i read for the last time before it wrote them.
  // Step i computes plane tau - dir*i*h at time tau, tau running in the sweep's direction.
  const std::ptrdiff_t dir = down ? 1 : -1;
  const auto lag = [&](std::size_t i) { return static_cast<std::ptrdiff_t>(i) * h; };
  std::ptrdiff_t first = 0, last = 0;  // tau's range, in sweep order
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t s = s0 + i;
    const std::ptrdiff_t a = down ? slo[s][0] + lag(i) : shi[s][0] - 1 - lag(i);
    const std::ptrdiff_t z = down ? shi[s][0] - 1 + lag(i) : slo[s][0] - lag(i);
    first = i == 0 ? a : down ? std::min(first, a) : std::max(first, a);
    last = i == 0 ? z : down ? std::max(last, z) : std::min(last, z);
  }
  // The values beyond fixed ends of the grid that step i+1 reads in level i+1, put back by
  // step i plane by plane as soon as it has read for the last time what they overwrite (level
  // i's cells a unit away, in the plane it has just computed or below it), those of the planes
  // beyond its range at its first and last plane; in strips, each strip those of its rows.
  const FixedHalo& fixed = *fixed_halo[b];
  const FixedHalo::Runs& runs = down ? fixed.down : fixed.up;
  auto put_back = [&](const FixedHalo::Runs& runs, double* out, std::ptrdiff_t p0,
                      std::ptrdiff_t p1, std::ptrdiff_t r0, std::ptrdiff_t r1) {
    std::size_t r = 0, e = runs.plane.size();
    while (r < e) {  // the first run at or after (p0, r0)
      const std::size_t m = r + (e - r) / 2;
      if (std::pair(runs.plane[m], runs.row[m]) < std::pair(p0, r0))
        r = m + 1;
      else
        e = m;
    }
    for (; r < runs.plane.size() && std::pair(runs.plane[r], runs.row[r]) < std::pair(p1, r1); ++r)
      if (runs.row[r] >= r0 && runs.row[r] < r1)
        geometry::copy_row(out + runs.where[r].first, runs.values.data() + runs.first[r],
                           runs.where[r].second);
  };
  // Units along dimension 1: a row (3-D and up), or shift_rows points of the row (2-D; a
  // unit's writes land shift_rows points behind it), in the sweep's direction.
  const std::ptrdiff_t unit_rows = dims >= 3 ? 1 : plan.shift_rows;
  // The columns beside the rows (at fixed ends only: temporal blocking) hold fixed values,
  // which every step reads where set() put them.
  if (pad.halo_beside) point_at_side(blk, 0, pad, side_data(b, main, target));
  // A kernel that takes rows in order computes a plane's rows of a strip in one call, in the
  // sweep's order (detail::RowLayout::backwards up): row j's writes land on row j - h of the plane
  // h behind (down), which the rows before it in the call were the last to read.
  const bool whole_rows = plan.whole_rows;
  blk.layout.backwards = whole_rows && !down;
  // Strips of rows (3-D and up), so that the planes in flight stay in the L2: strip t holds
  // the last step's rows [tJ, (t+1)J) from where its range starts (down; up, from where it
  // ends), and at step i those rows moved by (k-1-i)h towards the sweep's end, skewed like the
  // windows' strips: step i+1 reads h rows beyond its own, which step i has computed in the
  // same strip or an earlier one. The one-step argument holds strip by strip: unit (p, j)
  // overwrites row j - h of plane p - h, whose readers are rows up to j, in this strip or an
  // earlier one, except at a fixed end (below).
  const auto* const sl = dims >= 3 ? &slo[s0 + k - 1] : nullptr;
  const auto* const sh = dims >= 3 ? &shi[s0 + k - 1] : nullptr;
  const std::ptrdiff_t strip = plan.wavefront_strip_rows(pad, k);
  std::ptrdiff_t strips = strip > 0 ? ((*sh)[1] - (*sl)[1] + strip - 1) / strip : 1;
  if (strips < 2) strips = 1;
  // Strip t's edge for step i, t counted in the sweep's direction (0: the range's near end).
  auto edge = [&](std::ptrdiff_t t, std::size_t i) -> std::ptrdiff_t {
    const std::size_t s = s0 + i;
    if (t <= 0) return down ? slo[s][1] : shi[s][1];
    if (t >= strips) return down ? shi[s][1] : slo[s][1];
    const std::ptrdiff_t skew = static_cast<std::ptrdiff_t>(k - 1 - i) * h;
    return std::clamp(down ? (*sl)[1] + t * strip + skew : (*sh)[1] - t * strip - skew, slo[s][1],
                      shi[s][1]);
  };
  // In strips, the fixed values that no step reads are left alone (the fixed planes and
  // columns beyond other dimensions' fixed ends reach into the whole deep halo): those of an
  // intermediate level beyond the rows its step reads, which a unit carries onto rows of the
  // next plane that the first strip has written, and the last level's farthest h rows at a
  // near end with a neighbour, which a unit carries past the padding onto the far end of the
  // plane before. (near_fixed below.)
  bool near_fixed = false;
  // The rows step i computes in strip t, [lo, hi); and those whose fixed values it puts back:
  // besides, the first strip those beyond the range's near end, and the strip that reaches
  // its far end (where the skew meets a fixed end, not always the last) those beyond that.
  auto rows_of = [&](std::ptrdiff_t t, std::size_t i, bool owned) {
    const std::ptrdiff_t near = edge(t, i), far = edge(t + 1, i), end = edge(strips, i);
    const bool past_near = owned && t == 0, past_far = owned && far == end && near != end;
    std::ptrdiff_t lo = down ? near : far, hi = down ? far : near;
    if (down ? past_near : past_far) lo = PTRDIFF_MIN;
    if (down ? past_far : past_near) hi = PTRDIFF_MAX;
    if (owned && strips > 1) {
      if (i + 1 < k) {  // rows of level i+1 that step i+1 reads
        lo = std::max(lo, slo[s0 + i + 1][1] - h);
        hi = std::min(hi, shi[s0 + i + 1][1] + h);
      } else {  // the last level's: after the last strip
        hi = lo;
      }
    }
    return std::pair(lo, hi);
  };
  // Where the near end (down: below row 0) is a fixed end of the grid, its padding is h rows
  // and the moves carry later levels' rows past it: level k's fixed row and first (k-1)h rows
  // lie on the last k*h rows of the plane before as step s0 found them ([c0, c1), where it
  // reads them). Swept whole, every step has read those cells for the last time before they
  // are overwritten; in strips, a later strip would read them after the first one overwrote
  // them. So strips only where step s0, which reads the most rows, reads none of those: where
  // the near end has a neighbour (its deep halo takes the moves), or from a group's (k+1)-th
  // step on (its reach has shrunk by as many rows as the block moves); not with a fixed far end.
  const core::BlockGeom& geo = grid.block(b);
  near_fixed = spec.boundary == Boundary::fixed &&
               (down ? geo.origin[1] == 0
                     : geo.origin[1] + pad.ext[1] == static_cast<std::int64_t>(spec.size[1]));
  const auto kh = static_cast<std::ptrdiff_t>(k) * h;
  const std::ptrdiff_t c0 =
      std::max(down ? pad.ext[1] + pad.high[1] - kh : -pad.low[1], slo[s0][1] - h);
  const std::ptrdiff_t c1 =
      std::min(down ? pad.ext[1] + pad.high[1] : -pad.low[1] + kh, shi[s0][1] + h);
  if (near_fixed && c0 < c1) strips = 1;
  for (std::ptrdiff_t t = 0; t < strips; ++t) {
    for (std::ptrdiff_t tau = first; down ? tau <= last : tau >= last; tau += dir) {
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t s = s0 + i;
        const std::ptrdiff_t p = tau - dir * lag(i);
        if (p < slo[s][0] || p >= shi[s][0] || is_empty(dims, slo[s], shi[s])) continue;
        const auto [j0, j1] = rows_of(t, i, false);
        blk.in[0] = level(i) + pad.base;
        blk.out = level(i + 1) + pad.base;
        blk.step = rot + s;
        // Only the first step reads what the cache may not hold yet (Row::prefetch).
        blk.layout.next_plane = i == 0 ? dir * pad.stride[0] : 0;
        blk.lo = slo[s];
        blk.hi = shi[s];
        blk.lo[0] = p;
        blk.hi[0] = p + 1;
        if (whole_rows) {
          blk.lo[1] = j0;
          blk.hi[1] = j1;
          if (j0 < j1) kernel(blk);
        } else {
          for (std::ptrdiff_t j = down ? j0 : j1 - 1; down ? j < j1 : j >= j0;
               j += dir * unit_rows) {
            blk.lo[1] = down ? j : std::max(j0, j - unit_rows + 1);
            blk.hi[1] = down ? std::min(j + unit_rows, j1) : j + 1;
            kernel(blk);
          }
        }
        const auto [o0, o1] = rows_of(t, i, true);
        put_back(runs, level(i + 1), p == slo[s][0] ? PTRDIFF_MIN : p,
                 p == shi[s][0] - 1 ? PTRDIFF_MAX : p, o0, o1);
      }
    }
  }
  if (strips > 1 && !is_empty(dims, slo[s0 + k - 1], shi[s0 + k - 1])) {
    // The last level's fixed values, which no step of the wavefront reads, put back after
    // the last strip: in a strip, the first rows the moves carry past the near end's padding
    // would land on cells later strips still use. All of them in a neighbour's deep halo,
    // where a value left out as already in place could rest on one left out before it.
    const bool far_fixed =
        spec.boundary == Boundary::fixed &&
        (down ? geo.origin[1] + pad.ext[1] == static_cast<std::int64_t>(spec.size[1])
              : geo.origin[1] == 0);
    const bool low_fixed = down ? near_fixed : far_fixed;
    const bool high_fixed = down ? far_fixed : near_fixed;
    put_back(runs, level(k), PTRDIFF_MIN, PTRDIFF_MAX, low_fixed ? PTRDIFF_MIN : 0,
             high_fixed ? PTRDIFF_MAX : pad.ext[1]);
    put_back(fixed.deep, level(k), PTRDIFF_MIN, PTRDIFF_MAX, PTRDIFF_MIN, PTRDIFF_MAX);
  }
  blk.layout.backwards = false;
  set_moved_units(main, target, down ? n + k : n - k);
}

}  // namespace ordo::stencil
