// In-place Jacobi (Traversal::jacobi_in_place; docs/stencil.md, "In-place Jacobi"): the
// results of the double-buffered Jacobi, bit for bit, with one buffer per time level instead
// of one more, the new level overwriting the oldest. A step reads the buffer it overwrites, so
// the layer keeps every new value out of it until no later read needs the old one:
//
// * One step (S = 1): a shifted sweep. The block moves by s = h + P planes along dimension 0
//   inside its buffer, which has s planes to spare: the sweep runs down the planes, P at a time
//   (one kernel call), reading the block where it is and writing each plane s planes higher;
//   the next step runs up the planes and moves it back. A unit [a, a+P) writes planes
//   [a-s, a+P-s), all below a-h: no unit still to come reads them (each reads its own planes
//   and h on either side), and the unit itself reads none of them. Upwards likewise. Nothing
//   is copied: each point is read from memory and written once, the write landing on a line
//   read h + P planes before (16 bytes per point for heat, against 24 double-buffered).
//   With a star neighbourhood in 3-D and up the block moves by h planes and h rows instead,
//   one row per kernel call (sweep_rows), so that each write lands on a line still in L1.
//   What moves with the block is its halo: a neighbour's halo is unpacked at the new place
//   by the next step anyway, and the values beyond a fixed end of the grid are put back from
//   a store of them the block keeps (O(surface)). The shift of each buffer is in the main
//   location's header, so everything that reads a buffer finds the block where it is.
// * Temporal blocking by a star (S > 1, one time level, the row shift): wavefronts of k <= 4
//   steps along dimension 0 (sweep_wavefront), each step the one-step sweep by rows running
//   h planes behind the step before and moving the block by one more unit (h planes and h
//   rows), into room the buffer keeps for k units (spare_units). Each step overwrites only
//   cells that it and the steps before have read for the last time, so nothing is copied or
//   deferred; the fixed values beyond fixed ends of the grid are put back plane by plane as
//   each step passes. A group of S > k steps runs as several wavefronts, towards the
//   buffer's start while there is room and back. The whole cross-section of the (2k + 1)h + 1
//   planes in flight fits the tile budget; where it does not fit for k = 2, the windows below.
// * Temporal blocking otherwise (S > 1, one time level): a wavefront along dimension 0, step s
//   lagging s*h planes behind step 0, strip by strip along dimension 1 (run_in_place). Step s < S-1
//   writes into a window of its own, a ring of 2h + P planes or a few more (step s+1 reads
//   the 2h + P behind its front) mapped twice back to back, so that the planes a kernel call
//   reads are contiguous wherever the ring wraps (api/mirrored_ring.hpp: no plane is copied,
//   and a worker keeps its rings from task to task, one per size); step 0
//   reads the buffer, step s > 0 the window of step s-1, and the last step writes into the
//   buffer directly: step 0 has passed those planes by (S-1)*h >= h, so nobody reads their old
//   values again. Beyond a fixed boundary a window holds what the buffer holds there (the
//   fixed values), copied. Strips keep the windows in the cache: strip t covers the last
//   step's rows [tJ, (t+1)J) and, at step s, those rows moved up by (S-1-s)h (skewed like the
//   cache tiles), so step s of strip t+1 reads 2h rows of step s-1 that strip t computed: they
//   are carried in a per-step store (2h rows of every plane). The last step of strip t writes
//   the buffer below row (t+1)J, which step 0 of strip t+1 reads from (t+1)J + (S-2)h on:
//   nothing is deferred. Memory per worker: S-1 rings of a strip's rows and the carried rows,
//   against a second whole buffer per block for the double-buffered form.
// Exactness: every value is computed by the same kernel from the same old values as in the
// double-buffered form (the delays above guarantee that each read sees the old value), so the
// bits are the same; the property tests compare both with a brute force.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <climits>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <ordo/bench.hpp>

#include "stencil/mirrored_ring.hpp"
#include "stencil/stencil_impl.hpp"

namespace ordo::stencil {

namespace {

using core::Ix;
using geometry::for_each_point;
using geometry::Pad;

// An address `base` such that base + pad.at(x) * 8 is point x, held as an integer: the window
// it describes covers only some planes, so base itself may lie outside any object. safety: it
// becomes a pointer only with an offset that lands inside the window (addr), or as a kernel's
// in/out pointer, to which the kernel adds such offsets.
using Base = std::uintptr_t;
Base base_of(const double* p, std::ptrdiff_t shift) {
  return reinterpret_cast<std::uintptr_t>(p) - static_cast<std::uintptr_t>(shift) * sizeof(double);
}
double* addr(Base base, std::ptrdiff_t at) {
  return reinterpret_cast<double*>(base + static_cast<std::uintptr_t>(at) * sizeof(double));
}

// Copies box [lo, hi) between two buffers of the layout `pad`.
void copy_box(const Pad& pad, Base dst, Base src, const Ix& lo, const Ix& hi) {
  geometry::for_each_box_row(pad, lo, hi, [&](std::ptrdiff_t at, std::size_t, std::size_t len) {
    geometry::copy_row(addr(dst, at), addr(src, at), len);
  });
}

bool is_empty(std::size_t d, const Ix& lo, const Ix& hi) {
  for (std::size_t k = 0; k < d; ++k)
    if (hi[k] <= lo[k]) return true;
  return false;
}

// Points of the planes the kernel is called on at least once: one call per unit costs about
// as much as a few dozen points, so units of fewer points are merged along dimension 0.
constexpr std::size_t kUnitPoints = 512;
// A 2-D unit where the sweep's rows are in the cache (temporal blocking): in_place_shift_rows.
constexpr std::size_t kUnitPointsInCache = 384;

std::size_t page_bytes() {
  static const auto v = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return v;
}

std::atomic<std::size_t> wavefronts_in_strips_{0};

// Points level l of the kernel's block at the halo beside the rows of layout `pad` (its side
// array `side`), read through Block::before/after.
void point_at_side(Block& blk, std::size_t l, const Pad& pad, const double* side) {
  blk.west[l] = pad.west_of(side);
  blk.east[l] = pad.east_of(side);
  blk.beside_step = pad.side_step;
}

}  // namespace

namespace detail_stencil {
std::size_t wavefronts_in_strips() { return wavefronts_in_strips_.load(std::memory_order_relaxed); }
}  // namespace detail_stencil

std::ptrdiff_t in_place_shift(const Spec& s, const core::BlockedGrid& grid) {
  const std::size_t d = grid.dims();
  std::ptrdiff_t plane_points = 1, planes = 0;
  for (std::size_t k = 0; k < d; ++k) {
    const auto smallest = static_cast<std::ptrdiff_t>(s.size[k] / s.blocks[k]);
    if (k == 0)
      planes = smallest;
    else
      plane_points *= smallest;
  }
  // Planes per kernel call: one in 3-D and up (a plane is many rows, and a slab's deferred
  // rows are kept per plane), enough for kUnitPoints points below.
  const std::ptrdiff_t P =
      d >= 3 ? 1
             : std::clamp<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(kUnitPoints) / plane_points,
                                          1, planes);
  return static_cast<std::ptrdiff_t>(s.halo) + (in_place_shift_rows(s, grid) != 0 ? 0 : P);
}

// A star (every offset along one dimension) in 3-D and up: the sweep then moves the block by
// h rows as well as h planes, and writes each row onto a line of the plane h behind that the
// previous row read (in L1), where a plane shift writes onto one read a plane earlier (in L2).
// In 2-D the units are pieces of a row, kUnitPoints long (rounded to whole lines), and the
// block moves by h rows and one piece: each piece is written onto the line the previous piece
// read a row behind (in L1), where a shift by rows alone writes onto a line read two rows
// earlier (in L2 for long rows).
std::ptrdiff_t in_place_shift_rows(const Spec& s, const core::BlockedGrid& grid) {
  if (grid.dims() < 2) return 0;
  for (const Offset& o : s.neighbourhood)
    if (std::count_if(o.begin(), o.end(), [](int c) { return c != 0; }) > 1) return 0;
  const auto h = static_cast<std::ptrdiff_t>(s.halo);
  if (grid.dims() >= 3) return h;
  // Temporal blocking's wavefronts run in the cache, where shorter pieces paid (heat2d 8192²
  // at --tb 8: 384 points ran 6-9% faster than 512, and 256 or whole rows slower; depth 1
  // streams from memory and keeps 512; docs/benchmarks.md).
  const std::size_t piece = s.tb_depth > 1 ? kUnitPointsInCache : kUnitPoints;
  return (std::max<std::ptrdiff_t>(h, static_cast<std::ptrdiff_t>(piece)) + 7) / 8 * 8;
}

// The halo beside the rows pays where a sweep reads each row once from memory with its two
// halo values: a sweep by rows (3-D and up, a star), where each padded row spans a line more
// than its points. Temporal blocking computes into a neighbour's halo (its ranges extend
// beyond the rows there), so it keeps that halo in the rows and only the h columns beyond a
// fixed end of the grid beside them, where nothing computes: a row of 8 + 256 points is 33
// lines, against 34 with the fixed column in it (the memory bound: depth 8 within 1.1x depth 1).
// Coefficient grids share the buffer's layout, so they keep the padded rows.
geometry::RowHalo row_halo_of(const Spec& s, const core::BlockedGrid& grid) {
  if (!s.row_halo_beside || s.traversal != Traversal::jacobi_in_place || grid.dims() < 3 ||
      s.aux_grids != 0 || in_place_shift_rows(s, grid) == 0)
    return geometry::RowHalo::in_rows;
  return s.tb_depth == 1 ? geometry::RowHalo::beside : geometry::RowHalo::beside_at_fixed_ends;
}

// A star's group of S steps runs as wavefronts of whole cross-sections (sweep_wavefront), each
// step moving the block by a unit, so k steps at once need k units of room in the buffer and
// (2k + 1)h + 1 planes of every grid in the cache (each step h planes behind the one before,
// the h planes either side of what it computes and the plane it writes). The room is at most
// kMostWavefrontSteps units: each unit is a plane of memory per block (the memory bound holds
// depth 8 within 1.1x depth 1) and more room bought no speed (docs/benchmarks.md); a group
// of 8 then runs as two wavefronts, one towards the buffer's start and one back. The room
// depends on the spec and the blocks alone, not on the tile budget: it sizes the locations,
// which every rank of a job (and a restart on another machine) must agree on. How many steps
// one wavefront runs is this machine's choice: the most whose planes fit the tile budget, at
// most the room; where fewer than 2 fit, the group runs through windows in strips instead
// (run_in_place).
constexpr std::size_t kMostWavefrontSteps = 4;

std::size_t in_place_spare_units(const Spec& s, const core::BlockedGrid& grid) {
  if (s.tb_depth <= 1 || s.time_levels != 1 || in_place_shift_rows(s, grid) == 0) return 1;
  return std::min(s.tb_depth, kMostWavefrontSteps);
}

std::size_t in_place_wavefront_steps(const Spec& s, const core::BlockedGrid& grid,
                                     std::size_t room, std::size_t budget) {
  if (room <= 1) return 1;
  const auto h = static_cast<std::ptrdiff_t>(s.halo);
  // Doubles per plane of the largest block, or in 3-D and up (which runs in strips of rows)
  // per strip of the fewest rows worth one: the wavefront's skew and the h rows either side.
  auto plane = [&](std::size_t k) {
    std::ptrdiff_t most = 0;
    for (std::size_t b = 0; b < grid.count(); ++b) {
      const Pad& pad = grid.block(b).pad;
      const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(k + 2) * h;
      most = std::max(most, grid.dims() >= 3 && rows < pad.padded(1) ? rows * pad.stride[1]
                                                                      : pad.stride[0]);
    }
    return 8.0 * static_cast<double>(most) * static_cast<double>(1 + s.aux_grids);
  };
  std::size_t k = room;
  while (k > 1 && static_cast<double>((2 * k + 1) * s.halo + 1) * plane(k) >
                      static_cast<double>(budget))
    --k;
  return k;
}

std::unique_ptr<Stencil::Impl::FixedHalo> Stencil::Impl::fixed_runs(std::size_t b) const {
  auto f = std::make_unique<FixedHalo>();
  const core::BlockGeom& geo = grid.block(b);
  const Pad& pad = geo.pad;
  // Whether a cell (local coordinate) lies beyond a fixed end of the grid, and its value.
  Ix low{}, high{};  // 1 where that end of the block is a fixed end of the grid
  for (std::size_t k = 0; k < d; ++k) {
    low[k] = spec.boundary == Boundary::fixed && geo.origin[k] == 0;
    high[k] = spec.boundary == Boundary::fixed &&
              geo.origin[k] + pad.ext[k] == static_cast<std::int64_t>(spec.size[k]);
  }
  auto is_fixed = [&](const Ix& l) {
    for (std::size_t k = 0; k < d; ++k)
      if ((l[k] < 0 && low[k]) || (l[k] >= pad.ext[k] && high[k])) return true;
    return false;
  };
  auto value = [&](const Ix& l) {
    core::Origin x{};
    for (std::size_t k = 0; k < d; ++k) x[k] = geo.origin[k] + l[k];
    return spec.fixed_value ? spec.fixed_value(Coord(x.data(), d)) : 0.0;
  };
  const std::vector<std::pair<Ix, Ix>> regions = grid.fixed_regions(b);
  std::vector<double> want;
  // Where each distinct sequence of values already stored starts, by a hash of its bytes: a
  // block's fixed runs mostly repeat a few sequences (a constant boundary, a row of them),
  // which are kept once instead of once per run; where the values vary with the coordinate
  // nearly every run differs, and a scan of all earlier ones would be quadratic in the runs.
  std::unordered_multimap<std::size_t, std::pair<std::size_t, std::size_t>> stored;  // (start, length)
  // Rows of a neighbour's deep halo along dimension 1 (temporal blocking's ranges shrink
  // there): FixedHalo::deep holds all the fixed cells in them.
  auto is_deep_row = [&](std::ptrdiff_t r) {
    return d >= 2 && ((r < 0 && !low[1]) || (r >= pad.ext[1] && !high[1]));
  };
  // After a sweep down, the cells of plane p (row j) lie where plane p - shift (row
  // j - shift_rows) was; up, p + shift (j + shift_rows).
  for (const std::ptrdiff_t sign : {-1, 1, 0}) {
    FixedHalo::Runs& runs = sign < 0 ? f->down : sign > 0 ? f->up : f->deep;
    auto from = [&](Ix c) {
      c[0] += sign * shift;
      if (d >= 2) c[1] += sign * shift_rows;
      return c;
    };
    for (auto [rlo, rhi] : regions) {
      // Beside the rows, the fixed values stay where set() put them: the side array does not
      // move with the block. Only the cells in the rows move.
      pad.clip_to_rows(rlo[d - 1], rhi[d - 1]);
      if (rhi[d - 1] <= rlo[d - 1]) continue;
      Ix row_hi = rhi;
      row_hi[d - 1] = rlo[d - 1] + 1;
      const auto len = static_cast<std::size_t>(rhi[d - 1] - rlo[d - 1]);
      for_each_point(d, rlo, row_hi, [&](const Ix& l) {  // l: the first cell of a run
        if (sign == 0 && !is_deep_row(l[1])) return;
        want.resize(len);
        const Ix src = from(l);
        bool same = sign != 0 && is_fixed(src);
        for (std::size_t k = 0; k < 2 && k < d; ++k)
          same = same && src[k] >= -pad.low[k] && src[k] < pad.ext[k] + pad.high[k];
        for (std::size_t j = 0; j < len; ++j) {
          Ix c = l;
          c[d - 1] += static_cast<std::ptrdiff_t>(j);
          want[j] = value(c);
          if (!same) continue;
          const double had = value(from(c));
          same = std::memcmp(&had, &want[j], sizeof had) == 0;
        }
        if (same) return;
        runs.at.emplace_back(pad.at(l), len);
        runs.plane.push_back(l[0]);
        runs.row.push_back(d >= 2 ? l[1] : 0);
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
    std::vector<std::size_t> order(runs.at.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return std::pair(runs.plane[x], runs.row[x]) < std::pair(runs.plane[y], runs.row[y]);
    });
    FixedHalo::Runs sorted;
    sorted.at.reserve(order.size());
    sorted.plane.reserve(order.size());
    sorted.row.reserve(order.size());
    sorted.first.reserve(order.size());
    for (const std::size_t i : order) {
      sorted.at.push_back(runs.at[i]);
      sorted.plane.push_back(runs.plane[i]);
      sorted.row.push_back(runs.row[i]);
      sorted.first.push_back(runs.first[i]);
    }
    sorted.values = std::move(runs.values);
    runs = std::move(sorted);
  }
  return f;
}

bool Stencil::Impl::is_late_face(const core::Ix& dir, std::size_t steps) const {
  if (spec.traversal != Traversal::jacobi_in_place || steps != 1 || d < 3) return false;
  if (shift_rows != 0) return true;  // sweep_rows unpacks every import as it goes
  return is_across_last(dir);
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
  for (std::size_t k = 2; k < d; ++k) inner *= static_cast<std::size_t>(hi[k] - lo[k]);
  const std::size_t first =
      (static_cast<std::size_t>(p - lo[0]) * static_cast<std::size_t>(hi[1] - lo[1]) +
       static_cast<std::size_t>(r0 - lo[1])) * inner;
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
                                  std::uint64_t rot, const Ix& lo, const Ix& hi, bool last,
                                  std::span<const LateFace> late) const {
  const Pad& pad = grid.block(b).pad;
  const std::size_t target = buffer_index(rot, 1);  // the oldest level: it gets the new one
  // Where the block is decides the direction: towards the buffer's start while it has room.
  const std::size_t moved = moved_units(main, target);
  const bool down = moved < spare_units;
  const std::size_t moved_after = down ? moved + 1 : moved - 1;
  blk.ahead = down ? pad.stride[0] : -pad.stride[0];
  for (std::size_t l = 0; l < levels; ++l) {
    blk.in[l] = level_data(b, main, rot, -static_cast<std::ptrdiff_t>(l)) + pad.base;
    if (pad.beside)
      point_at_side(blk, l, pad, level_side(b, main, rot, -static_cast<std::ptrdiff_t>(l)));
  }
  // Where point x of the new level goes: out + pad.at(x).
  double* const out = main.data() + detail_stencil::kHeader + target * buffer_size(b) +
                      static_cast<std::ptrdiff_t>(spare_units - moved_after) * shift_at(pad);
  blk.step = rot;
  if (shift_rows != 0) {
    blk.out = out + pad.base;
    // The stage holds the block's rows: only a range that is the block fills it.
    bool stage = last;
    for (std::size_t k = 0; k < d; ++k) stage = stage && lo[k] == 0 && hi[k] == pad.ext[k];
    sweep_rows(b, main, blk, rot, lo, hi, late, down, stage);
    if (stage) stages[b].steps = static_cast<double>(rot + 1);
  } else {
    sweep_planes(b, main, blk, rot, lo, hi, late, down, out);
  }
  set_moved_units(main, target, moved_after);
  // The values beyond fixed ends of the grid, at the block's new place.
  if (!fixed_halo[b]) fixed_halo[b] = fixed_runs(b);
  const FixedHalo::Runs& runs = down ? fixed_halo[b]->down : fixed_halo[b]->up;
  // Streaming stores where the block is larger than a slab: a sweep of the block reads these
  // cells only when it reaches their planes, a whole block later, so the cache would keep
  // nothing of the lines it would read before writing them. A block within a slab is read
  // again from the cache; a non-temporal store would evict the line it reads next step, at a
  // miss to memory per row end (heat2d 96x64: half its kernel's time).
  const bool stream = buffer_size(b) * sizeof(double) > slab_budget();
  for (std::size_t r = 0; r < runs.at.size(); ++r) {
    double* const to = out + runs.at[r].first;
    const double* const from = runs.values.data() + runs.first[r];
    if (stream)
      detail_stencil::stream_copy(to, from, runs.at[r].second);
    else
      std::copy_n(from, runs.at[r].second, to);
  }
  if (stream) detail_stencil::stream_fence();
}

std::size_t Stencil::Impl::slab_budget() const {
  if (spec.tile_bytes) return spec.tile_bytes;
  const std::size_t l2 = bench::cache_sizes().l2 ? bench::cache_sizes().l2 : std::size_t{1} << 20;
  // A plane shift writes one more row per unit, onto lines it does not read; a row shift
  // writes onto lines of the 2h + 1 planes it reads, and its slabs may fill 3/4 of the L2: a
  // slab re-reads the rows on either side of it, two per plane (heat3d 512³: 1/2 of the L2
  // ran 4% slower, the whole L2 6%; docs/benchmarks.md).
  return shift_rows != 0 ? 3 * l2 / 4 : l2 / 2;
}

std::ptrdiff_t Stencil::Impl::slab_rows(std::size_t b, std::ptrdiff_t lo,
                                        std::ptrdiff_t hi) const {
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  const double budget = static_cast<double>(slab_budget());
  const double rows = static_cast<double>(
      (levels + spec.aux_grids) * static_cast<std::size_t>(2 * h + 1) + (shift_rows != 0 ? 0 : 1));
  return std::clamp<std::ptrdiff_t>(
      static_cast<std::ptrdiff_t>(budget / (8.0 * static_cast<double>(pad.stride[1]) * rows)), h,
      std::max<std::ptrdiff_t>(hi - lo, h));
}

std::ptrdiff_t Stencil::Impl::wavefront_strip_rows(std::size_t b, std::size_t k) const {
  if (d < 3) return 0;
  const Pad& pad = grid.block(b).pad;
  // Wavefronts run only where the block moves by rows (in_place_spare_units): 3/4 of the L2.
  const double budget = static_cast<double>(slab_budget());
  const double planes = static_cast<double>(((2 * k + 1) * spec.halo + 1) * (1 + spec.aux_grids));
  return std::max<std::ptrdiff_t>(
      1, static_cast<std::ptrdiff_t>(budget / (8.0 * static_cast<double>(pad.stride[1]) * planes)));
}

void Stencil::Impl::sweep_rows(std::size_t b, std::span<double> main, Block& blk,
                               std::uint64_t rot, const Ix& lo, const Ix& hi,
                               std::span<const LateFace> late, bool down, bool stage) const {
  if (is_empty(d, lo, hi)) return;
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
  const std::ptrdiff_t U = d >= 3 ? 1 : shift_rows;
  const std::ptrdiff_t J = d >= 3 ? slab_rows(b, lo[1], hi[1]) : hi[1] - lo[1];
  const std::ptrdiff_t slabs = (hi[1] - lo[1] + J - 1) / J;
  // The staged exports (is_staged_export), filled by the last step, whose range is the block.
  ExportStage* const st = stage && !stages[b].parts.empty() ? &stages[b] : nullptr;
  if (st) st->values.resize(st->count);
  // The imports (all late, is_late_face). Those across dimension 0 per slab: the units of a
  // plane read no other plane's halo (a star), which is unpacked just before them, its lines
  // fetched ahead by the plane before. The others per plane, except those across the last
  // dimension in 3-D: a row's part of such a face is what only that row's unit reads, one
  // value per row on a line of its own, so it is unpacked just before the unit reads that line
  // (unpacked a plane ahead, the slab's lines would each be fetched twice).
  auto is_across = [](const LateFace& f) { return f.import->dir[0] != 0; };
  auto is_row_face = [&](const LateFace& f) { return d == 3 && is_across_last(f.import->dir); };
  // In the padded rows a row's part of such a face is copied into the halo just before its
  // kernel call; beside the rows the kernel reads it where the import holds it (Block::west
  // or east pointed at it for that row), as the hand-written graph passed its neighbours'
  // values: no copy, and the side array's lines are only read (the fixed values).
  struct RowFace {
    const double* src = nullptr;  // the face's values, plane by plane, row by row
    std::size_t count = 0;        // values per level
    std::ptrdiff_t col = 0;       // padded rows: the halo column its part of a row starts at
    bool east = false;            // the values right of the row
    bool beside = false;          // its end's halo lies beside the rows
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
  // Beside the rows: the row number of row (p, j) (Block::row_of) is
  // p * rows_per_plane + j, and a face's values for it are pointed at as those of row 0
  // shifted by that many rows. safety: integer arithmetic, as Base; the kernel adds the row's
  // offset back (Block::before/after) and so reads inside the import.
  const std::ptrdiff_t rows_per_plane = d >= 2 ? pad.stride[0] / pad.stride[1] : 0;
  auto as_row_0 = [&](const double* p, std::ptrdiff_t row) {
    return reinterpret_cast<const double*>(reinterpret_cast<std::uintptr_t>(p) -
                                           static_cast<std::uintptr_t>(row * width) * sizeof(double));
  };
  // A unit's range differs from [lo, hi) along dimensions 0 and 1 only.
  blk.lo = lo;
  blk.hi = hi;
  for (std::ptrdiff_t n = 0; n < slabs; ++n) {
    const std::ptrdiff_t j0 = lo[1] + (down ? n : slabs - 1 - n) * J;
    const std::ptrdiff_t j1 = std::min(j0 + J, hi[1]);
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
      // In 3-D: where row (p, j) starts (pad.at), and its part of a face or stage (packed
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
      for (std::ptrdiff_t j = down ? j0 : j1 - 1; down ? j < j1 : j >= j0; j += step * U) {
        blk.lo[1] = down ? j : std::max(j0, j - U + 1);
        blk.hi[1] = down ? std::min(j + U, j1) : j + 1;
        for (std::size_t i = 0; i < n_row_faces; ++i) {  // 3-D: the unit is row (p, j)
          const RowFace& f = row_faces[i];
          const double* from = f.src + (plane_part + j) * width;
          // A line of the face holds the parts of a few rows: the next one's, well ahead.
          __builtin_prefetch(reinterpret_cast<const void*>(
              reinterpret_cast<std::uintptr_t>(from) +
              static_cast<std::uintptr_t>(step * 8 * width) * sizeof(double)));
          if (f.beside) {
            const std::ptrdiff_t row = p * rows_per_plane + j;
            for (std::size_t l = 0; l < levels; ++l) {
              const double* values = from + l * f.count;
              if (f.east)
                blk.east[l] = as_row_0(values, row);
              else
                blk.west[l] = as_row_0(values + width, row);
            }
            continue;
          }
          const std::ptrdiff_t at = plane_at + j * pad.stride[1] + f.col;
          for (std::size_t l = 0; l < levels; ++l)
            geometry::copy_row(level[l] + at, from + l * f.count, static_cast<std::size_t>(width));
        }
        kernel(blk);
        if (!st) continue;
        if (staged_row >= 0) copy_staged(staged_row);
        staged_row = j;
      }
      if (st && staged_row >= 0) copy_staged(staged_row);
    }
  }
}

void Stencil::Impl::sweep_planes(std::size_t b, std::span<double> main, Block& blk,
                                 std::uint64_t rot, const Ix& lo, const Ix& hi,
                                 std::span<const LateFace> late, bool down, double* out) const {
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  const std::ptrdiff_t P = shift - h;
  const Base out_base = base_of(out, 0);
  // Slabs of J rows along dimension 1 (d >= 3) keep the planes a unit reaches in half the L2
  // (or tile_bytes). A slab's last h rows are read, old, by the next slab, so their new values
  // wait in a store (h rows per plane) until that slab has passed the plane they go to.
  const std::ptrdiff_t J = d >= 3 ? slab_rows(b, lo[1], hi[1]) : 0;
  const std::ptrdiff_t planes = hi[0] - lo[0];
  const std::ptrdiff_t units = (planes + P - 1) / P;
  const std::ptrdiff_t slot = d >= 3 ? h * pad.stride[1] : 0;  // one plane's deferred rows
  double* const deferred =
      d >= 3 && J < hi[1] - lo[1] ? detail_stencil::thread_scratch(1, static_cast<std::size_t>(planes * slot)) : nullptr;
  auto run = [&](const Ix& ulo, const Ix& uhi, double* o) {
    if (is_empty(d, ulo, uhi)) return;
    blk.lo = ulo;
    blk.hi = uhi;
    blk.out = o + pad.base;
    kernel(blk);
  };
  // Whether the previous slab deferred its last rows, [held - h, held) (negative rows too: a
  // temporal-blocking step's range reaches into the halo).
  bool holding = false;
  std::ptrdiff_t held = 0;
  const std::ptrdiff_t j_end = d >= 3 ? hi[1] : lo[1] + 1;
  for (std::ptrdiff_t j0 = lo[1]; j0 < j_end; j0 += d >= 3 ? J : 1) {
    const std::ptrdiff_t j1 = d >= 3 ? std::min(j0 + J, hi[1]) : hi[1];
    const bool defer = deferred != nullptr && j1 < hi[1];
    // The previous slab's deferred rows of plane q, to their place (q - shift or q + shift):
    // the planes this slab still reads there are the ones within h of it.
    std::ptrdiff_t next = down ? lo[0] : hi[0] - 1;  // the next plane to commit, sweep order
    auto commit_to = [&](std::ptrdiff_t limit) {
      for (; holding && (down ? next <= limit : next >= limit); next += down ? 1 : -1) {
        Ix clo = lo, chi = hi;
        clo[0] = next;
        chi[0] = next + 1;
        clo[1] = held - h;
        chi[1] = held;
        copy_box(pad, out_base,
                 base_of(deferred + (next - lo[0]) * slot, pad.at(clo)), clo, chi);
      }
    };
    // The late faces' planes unpacked so far for this slab's rows (and the h rows on either
    // side, which its kernel calls read too), in sweep order.
    std::ptrdiff_t unpacked = down ? lo[0] - h : hi[0] - 1 + h;
    const std::ptrdiff_t r0 = d >= 3 ? j0 - h : 0, r1 = d >= 3 ? j1 + h : 0;
    for (std::ptrdiff_t i = 0; i < units; ++i) {
      const std::ptrdiff_t a = lo[0] + (down ? i : units - 1 - i) * P;
      const std::ptrdiff_t z = std::min(a + P, hi[0]);
      // This unit reads planes [a - h, z + h): unpack those not yet, before the kernel does.
      if (!late.empty()) {
        for (; down ? unpacked < z + h : unpacked >= a - h; unpacked += down ? 1 : -1)
          for (const LateFace& f : late) unpack_late(b, main, rot, f, unpacked, r0, r1);
      }
      // Planes computed so far end at a - 1 (down) or begin at z (up): a deferred row of
      // plane q goes s = h + P planes away, where this slab has read its last old value.
      commit_to(down ? std::min(a - 1 + P, hi[0] - 1) : std::max(z - P, lo[0]));
      Ix ulo = lo, uhi = hi;
      ulo[0] = a;
      uhi[0] = z;
      if (d >= 3) {
        ulo[1] = j0;
        uhi[1] = defer ? j1 - h : j1;
      }
      run(ulo, uhi, out);
      if (defer) {  // P is 1 here
        ulo[1] = j1 - h;
        uhi[1] = j1;
        run(ulo, uhi, reinterpret_cast<double*>(base_of(deferred + (a - lo[0]) * slot, pad.at(ulo))));
      }
    }
    commit_to(down ? hi[0] - 1 : lo[0]);
    holding = defer;
    held = j1;
  }
}

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
    return start + static_cast<std::ptrdiff_t>(spare_units - (down ? n + i : n - i)) * unit;
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
  if (!fixed_halo[b]) fixed_halo[b] = fixed_runs(b);
  const FixedHalo::Runs& runs = down ? fixed_halo[b]->down : fixed_halo[b]->up;
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
    for (; r < runs.plane.size() && std::pair(runs.plane[r], runs.row[r]) < std::pair(p1, r1);
         ++r)
      if (runs.row[r] >= r0 && runs.row[r] < r1)
        geometry::copy_row(out + runs.at[r].first, runs.values.data() + runs.first[r],
                           runs.at[r].second);
  };
  // Units along dimension 1: a row (3-D and up), or shift_rows points of the row (2-D; a
  // unit's writes land shift_rows points behind it), in the sweep's direction.
  const std::ptrdiff_t U = d >= 3 ? 1 : shift_rows;
  // The columns beside the rows (at fixed ends only: temporal blocking) hold fixed values,
  // which every step reads where set() put them.
  if (pad.beside) point_at_side(blk, 0, pad, side_data(b, main, target));
  // A kernel that takes rows in order computes a plane's rows of a strip in one call, in the
  // sweep's order (Block::backwards up): row j's writes land on row j - h of the plane h
  // behind (down), which the rows before it in the call were the last to read.
  const bool whole_rows = d >= 3 && spec.rows_in_order;
  blk.backwards = whole_rows && !down;
  // Strips of rows (3-D and up), so that the planes in flight stay in the L2: strip t holds
  // the last step's rows [tJ, (t+1)J) from where its range starts (down; up, from where it
  // ends), and at step i those rows moved by (k-1-i)h towards the sweep's end, skewed like the
  // windows' strips: step i+1 reads h rows beyond its own, which step i has computed in the
  // same strip or an earlier one. The one-step argument holds strip by strip: unit (p, j)
  // overwrites row j - h of plane p - h, whose readers are rows up to j, in this strip or an
  // earlier one, except at a fixed end (below).
  const auto* const sl = d >= 3 ? &slo[s0 + k - 1] : nullptr;
  const auto* const sh = d >= 3 ? &shi[s0 + k - 1] : nullptr;
  const std::ptrdiff_t J = d >= 3 ? wavefront_strip_rows(b, k) : 0;
  std::ptrdiff_t strips = J > 0 ? ((*sh)[1] - (*sl)[1] + J - 1) / J : 1;
  if (strips < 2) strips = 1;
  // Strip t's edge for step i, t counted in the sweep's direction (0: the range's near end).
  auto edge = [&](std::ptrdiff_t t, std::size_t i) -> std::ptrdiff_t {
    const std::size_t s = s0 + i;
    if (t <= 0) return down ? slo[s][1] : shi[s][1];
    if (t >= strips) return down ? shi[s][1] : slo[s][1];
    const std::ptrdiff_t skew = static_cast<std::ptrdiff_t>(k - 1 - i) * h;
    return std::clamp(down ? (*sl)[1] + t * J + skew : (*sh)[1] - t * J - skew, slo[s][1],
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
  near_fixed =
      spec.boundary == Boundary::fixed &&
      (down ? geo.origin[1] == 0
            : geo.origin[1] + pad.ext[1] == static_cast<std::int64_t>(spec.size[1]));
  const auto kh = static_cast<std::ptrdiff_t>(k) * h;
  const std::ptrdiff_t c0 =
      std::max(down ? pad.ext[1] + pad.high[1] - kh : -pad.low[1], slo[s0][1] - h);
  const std::ptrdiff_t c1 =
      std::min(down ? pad.ext[1] + pad.high[1] : -pad.low[1] + kh, shi[s0][1] + h);
  if (near_fixed && c0 < c1) strips = 1;
  if (strips > 1) wavefronts_in_strips_.fetch_add(1, std::memory_order_relaxed);
  for (std::ptrdiff_t t = 0; t < strips; ++t) {
    for (std::ptrdiff_t tau = first; down ? tau <= last : tau >= last; tau += dir) {
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t s = s0 + i;
        const std::ptrdiff_t p = tau - dir * lag(i);
        if (p < slo[s][0] || p >= shi[s][0] || is_empty(d, slo[s], shi[s])) continue;
        const auto [j0, j1] = rows_of(t, i, false);
        blk.in[0] = level(i) + pad.base;
        blk.out = level(i + 1) + pad.base;
        blk.step = rot + s;
        // Only the first step reads what the cache may not hold yet (Block::ahead).
        blk.ahead = i == 0 ? dir * pad.stride[0] : 0;
        blk.lo = slo[s];
        blk.hi = shi[s];
        blk.lo[0] = p;
        blk.hi[0] = p + 1;
        if (whole_rows) {
          blk.lo[1] = j0;
          blk.hi[1] = j1;
          if (j0 < j1) kernel(blk);
        } else {
          for (std::ptrdiff_t j = down ? j0 : j1 - 1; down ? j < j1 : j >= j0; j += dir * U) {
            blk.lo[1] = down ? j : std::max(j0, j - U + 1);
            blk.hi[1] = down ? std::min(j + U, j1) : j + 1;
            kernel(blk);
          }
        }
        const auto [o0, o1] = rows_of(t, i, true);
        put_back(runs, level(i + 1), p == slo[s][0] ? PTRDIFF_MIN : p,
                 p == shi[s][0] - 1 ? PTRDIFF_MAX : p, o0, o1);
      }
    }
  }
  if (strips > 1 && !is_empty(d, slo[s0 + k - 1], shi[s0 + k - 1])) {
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
    put_back(fixed_halo[b]->deep, level(k), PTRDIFF_MIN, PTRDIFF_MAX, PTRDIFF_MIN, PTRDIFF_MAX);
  }
  blk.backwards = false;
  set_moved_units(main, target, down ? n + k : n - k);
}

Stencil::Impl::Wavefront Stencil::Impl::wavefront(std::size_t b, std::size_t S) const {
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  Wavefront w;
  std::ptrdiff_t plane_points = 1;
  for (std::size_t k = 1; k < d; ++k) plane_points *= pad.padded(k);
  w.unit_planes = std::max<std::ptrdiff_t>(
      1, static_cast<std::ptrdiff_t>(kUnitPoints) / std::max<std::ptrdiff_t>(plane_points, 1));
  // A window is a ring of K >= 2h + P planes: step s writes planes [a, a + P) while step s+1,
  // h planes behind, still reads [a - 2h, a + P) of it.
  const std::ptrdiff_t least = 2 * h + w.unit_planes;
  // The working set, in rows (dimension 1; in 1-D the cross-section is one point): per row of
  // a strip, the S-1 windows' K planes and the planes of the buffer (and of each coefficient
  // grid) between the wavefront's first and last step; besides, the rows each window holds
  // beyond its strip (at most 3h: carried and fixed) and the buffer's skew ((S+1)h rows). It
  // fits half the tile budget: the rings and the carried rows stay resident per worker.
  const auto steps = static_cast<std::ptrdiff_t>(S);
  const std::ptrdiff_t row = d >= 2 ? pad.stride[1] : 1;
  const auto grids = static_cast<double>(1 + spec.aux_grids);
  const double buffer_planes = static_cast<double>((steps + 1) * h + w.unit_planes);
  const std::ptrdiff_t all = d >= 2 ? pad.ext[1] : 1;
  auto strip_rows = [&](std::ptrdiff_t K) -> std::ptrdiff_t {
    const double per_row = static_cast<double>((steps - 1) * K) + grids * buffer_planes;
    const double beyond = static_cast<double>((steps - 1) * K * 3 * h) +
                          grids * buffer_planes * static_cast<double>((steps + 1) * h);
    const double rows =
        (static_cast<double>(tile_budget()) / 2 / (8.0 * static_cast<double>(row)) - beyond) /
        per_row;
    return rows < 1 ? 0 : std::min(all, static_cast<std::ptrdiff_t>(rows));
  };
  // The ring is whole pages (MirroredRing), so its length exceeds K planes by `drift` doubles
  // unless K planes are whole pages: plane p lies p planes from the start modulo the length,
  // and from one round of the ring to the next a strip's rows move by the drift, over the
  // block's planes touching that many more of the ring's pages. With strips narrower than the
  // block, K is the smallest count from 2h + P whose drift over the block stays within two
  // rows a plane (else the one of least drift among 64).
  const auto page = static_cast<std::ptrdiff_t>(page_bytes() / sizeof(double));
  auto drift = [&](std::ptrdiff_t K) {
    return (page - K * pad.stride[0] % page) % page * ((pad.padded(0) + K - 1) / K);
  };
  w.planes = least;
  w.strip_rows = strip_rows(least);
  if (w.strip_rows > 0 && w.strip_rows < all) {
    for (std::ptrdiff_t K = least; K < least + 64; ++K) {
      if (drift(K) < drift(w.planes)) w.planes = K;
      if (drift(K) <= 2 * row * K) {
        w.planes = K;
        break;
      }
    }
    w.strip_rows = strip_rows(w.planes);
    // Each strip carries 2h rows of every intermediate step to the next, written and read
    // back through memory: with the automatic budget, strips whose carried rows would exceed
    // half their own (the buffer's rows, read and written once) run as shifted sweeps instead
    // (docs/benchmarks.md: 19-row strips ran slower than the sweeps, 38-row ones faster). An
    // explicit tile_bytes is followed down to one-row strips.
    if (spec.tile_bytes == 0 && w.strip_rows < 4 * (steps - 1) * h) w.strip_rows = 0;
  }
  w.window_bytes =
      static_cast<std::size_t>((w.planes * pad.stride[0] + page - 1) / page * page) *
      sizeof(double);
  return w;
}

Stencil::Impl::InPlaceGroup& Stencil::Impl::in_place_group(std::size_t b, std::size_t S,
                                                           const std::vector<Ix>& slo,
                                                           const std::vector<Ix>& shi) const {
  InPlaceGroup& g = in_place_groups[b];
  if (g.steps == S) return g;
  g.steps = S;
  g.w = wavefront(b, S);
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  // What step s+1 reads beyond step s's range: the fixed values beyond a fixed end of the grid,
  // where the ranges stop shrinking (elsewhere step s's range is step s+1's plus h).
  g.rim_lo.assign(S, Ix{});
  g.rim_hi.assign(S, Ix{});
  for (std::size_t s = 0; s + 1 < S; ++s)
    for (std::size_t k = 0; k < d; ++k) {
      g.rim_lo[s][k] = slo[s][k] - (slo[s + 1][k] - h);
      g.rim_hi[s][k] = shi[s + 1][k] + h - shi[s][k];
    }
  // The planes each step covers: its range, and for a window the fixed planes beyond it.
  g.from.resize(S);
  g.to.resize(S);
  for (std::size_t s = 0; s < S; ++s) {
    g.from[s] = slo[s][0] - g.rim_lo[s][0];
    g.to[s] = shi[s][0] + g.rim_hi[s][0];
    const auto lag = static_cast<std::ptrdiff_t>(s) * h;
    g.q0 = s == 0 ? g.from[s] + lag : std::min(g.q0, g.from[s] + lag);
    g.q1 = s == 0 ? g.to[s] + lag : std::max(g.q1, g.to[s] + lag);
  }
  g.window.assign(S - 1, nullptr);
  g.carry.assign(S - 1, nullptr);
  g.held.assign(S - 1, 0);
  g.rims.resize(S - 1);
  return g;
}

void Stencil::Impl::run_in_place(std::size_t b, std::span<double> main, Block& blk,
                                 std::uint64_t rot, std::size_t S, const std::vector<Ix>& slo,
                                 const std::vector<Ix>& shi,
                                 std::span<const LateFace> late) const {
  if (S == 1) {
    sweep_shifted(b, main, blk, rot, slo[0], shi[0], true, late);
    return;
  }
  if (wavefront_steps > 1) {
    // A star: wavefronts that move the block a unit per step, towards the buffer's start
    // while it has room for the steps left, else back; where neither end has room for them
    // all, to the start first. A wavefront of one step is a shifted sweep.
    const std::size_t target = buffer_index(rot, 1);
    for (std::size_t done = 0; done < S;) {
      const std::size_t n = moved_units(main, target), left = S - done;
      const bool down = n + left <= spare_units || (n < left && n < spare_units);
      const std::size_t k = std::min({left, down ? spare_units - n : n, wavefront_steps});
      if (k == 1)
        sweep_shifted(b, main, blk, rot + done, slo[done], shi[done], done + 1 == S);
      else
        sweep_wavefront(b, main, blk, rot, done, k, slo, shi, down);
      done += k;
    }
    return;
  }
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  // Temporal blocking: the wavefront of windows described at the top, strip by strip.
  InPlaceGroup& g = in_place_group(b, S, slo, shi);
  const Wavefront& w = g.w;
  std::vector<double*>& window = g.window;
  bool has_windows = w.strip_rows > 0;
  for (std::size_t s = 0; has_windows && s + 1 < S; ++s) {
    window[s] = detail_stencil::thread_ring(s, w.window_bytes);
    has_windows = window[s] != nullptr;
  }
  // Windows beyond the budget even for the narrowest strips, or not to be had (thread_ring
  // said why): one shifted sweep per step.
  if (!has_windows) {
    for (std::size_t s = 0; s < S; ++s)
      sweep_shifted(b, main, blk, rot + s, slo[s], shi[s], s + 1 == S);
    return;
  }
  // The buffer the group overwrites (with one level, the only one).
  double* const target = level_data(b, main, rot, 1);
  const Base u_base = base_of(target, 0);
  const std::ptrdiff_t H = pad.low[0];  // planes below the block in its buffer
  const std::ptrdiff_t P = w.unit_planes;
  const std::ptrdiff_t row = d >= 2 ? pad.stride[1] : 0;  // doubles per row (dimension 1)
  const std::vector<Ix>& rim_lo = g.rim_lo;
  const std::vector<Ix>& rim_hi = g.rim_hi;
  const std::vector<std::ptrdiff_t>& from = g.from;
  const std::vector<std::ptrdiff_t>& to = g.to;
  // Strip t covers rows [edge(t, s), edge(t + 1, s)) at step s: the last step's rows
  // [t*J, (t+1)*J) of the block, skewed by h per step before it (clipped to the step's range).
  const std::ptrdiff_t J = w.strip_rows;
  const std::ptrdiff_t strips = d >= 2 ? (pad.ext[1] + J - 1) / J : 1;
  auto edge = [&](std::ptrdiff_t t, std::size_t s) -> std::ptrdiff_t {
    if (d < 2) return 0;
    if (t <= 0) return slo[s][1];
    if (t >= strips) return shi[s][1];
    return std::clamp(t * J + static_cast<std::ptrdiff_t>(S - 1 - s) * h, slo[s][1], shi[s][1]);
  };
  // Window s of strip t holds rows [held_lo(t, s), held_hi(t, s)): what step s+1 of the strip
  // reads, and above it the rows step s computes. Below the computed rows they were computed
  // by earlier strips: carried (at most 2h rows), or fixed (a rim, copied from the buffer).
  auto held_lo = [&](std::ptrdiff_t t, std::size_t s) { return edge(t, s + 1) - h; };
  auto held_hi = [&](std::ptrdiff_t t, std::size_t s) {
    return std::max(edge(t + 1, s), edge(t + 1, s + 1) + h);
  };
  // A box of planes [p0, p1), rows [r0, r1) and step s's window section beyond dimension 1
  // (its range and the fixed rims).
  // The columns beside the rows (at fixed ends: fixed values) are read where set() put them,
  // by every step, and copied to no window: a box stops at the rows' ends there.
  auto box = [&](std::size_t s, std::ptrdiff_t p0, std::ptrdiff_t p1, std::ptrdiff_t r0,
                 std::ptrdiff_t r1, Ix& lo, Ix& hi) {
    lo[0] = p0;
    hi[0] = p1;
    if (d >= 2) {
      lo[1] = r0;
      hi[1] = r1;
    }
    for (std::size_t k = 2; k < d; ++k) {
      lo[k] = slo[s][k] - rim_lo[s][k];
      hi[k] = shi[s][k] + rim_hi[s][k];
    }
    if (d >= 3) pad.clip_to_rows(lo[d - 1], hi[d - 1]);
  };
  if (pad.beside) point_at_side(blk, 0, pad, side_data(b, main, buffer_index(rot, 1)));
  std::vector<double*>& carry = g.carry;
  std::vector<std::ptrdiff_t>& held = g.held;  // the row at the start of each window's planes
  // Slot 1 is sweep_planes' deferred rows.
  if (strips > 1)
    for (std::size_t s = 0; s + 1 < S; ++s)
      carry[s] = detail_stencil::thread_scratch(
          2 + s, static_cast<std::size_t>((shi[s][0] - slo[s][0]) * 2 * h * row));
  // Window s as a base in which plane p lies in its slot of the ring and the K - 1 planes
  // after it follow in the mirror.
  const auto ring = static_cast<std::ptrdiff_t>(w.window_bytes / sizeof(double));
  auto window_base = [&](std::size_t s, std::ptrdiff_t p) {
    const std::ptrdiff_t at = ((p - from[s]) * pad.stride[0] % ring + ring) % ring;
    return base_of(window[s] + at, (p + H) * pad.stride[0] + (held[s] + pad.low[1]) * row);
  };
  // Plane p's slot of step s's carry, as a base for the rows from `ref` on (2h of them).
  auto carry_base = [&](std::size_t s, std::ptrdiff_t p, std::ptrdiff_t ref) {
    Ix lo{}, hi{};
    box(s, p, p + 1, ref, ref + 2 * h, lo, hi);
    return base_of(carry[s] + (p - slo[s][0]) * 2 * h * row, pad.at(lo));
  };
  // The fixed values step s+1 reads in window s of strip t, beyond fixed ends of the grid
  // around the rows [g0, g1) the window holds, [r0, r1) of them computed: 3^(d-1) - 1 regions
  // of a plane at most (along dimension 1 the held rows beyond the range), the same for every
  // plane the step computes; the planes beyond the grid are copied whole.
  std::vector<std::vector<std::pair<Ix, Ix>>>& rims = g.rims;
  auto find_rims = [&](std::ptrdiff_t t, std::size_t s) {
    rims[s].clear();
    Ix lo{}, hi{}, tlo{}, thi{};
    box(s, 0, 1, held_lo(t, s), held_hi(t, s), lo, hi);
    for (std::size_t k = 1; k < d; ++k) {
      tlo[k] = -1;
      thi[k] = 2;
    }
    thi[0] = 1;
    for_each_point(d, tlo, thi, [&](const Ix& c) {
      Ix rlo = lo, rhi = hi;
      bool any = false;
      for (std::size_t k = 1; k < d; ++k) {
        if (c[k] < 0) rhi[k] = std::min(hi[k], slo[s][k]);
        if (c[k] > 0) rlo[k] = std::max(lo[k], shi[s][k]);
        if (c[k] == 0) {
          rlo[k] = k == 1 ? edge(t, s) : slo[s][k];
          rhi[k] = k == 1 ? edge(t + 1, s) : shi[s][k];
        }
        any = any || c[k] != 0;
      }
      if (any && !is_empty(d, rlo, rhi)) rims[s].emplace_back(rlo, rhi);
    });
  };
  auto copy_rims = [&](std::ptrdiff_t t, std::size_t s, std::ptrdiff_t a, std::ptrdiff_t z) {
    for (std::ptrdiff_t p = a; p < z; ++p) {
      const Base win = window_base(s, p);
      if (p < slo[s][0] || p >= shi[s][0]) {
        Ix lo{}, hi{};
        box(s, p, p + 1, held_lo(t, s), held_hi(t, s), lo, hi);
        copy_box(pad, win, u_base, lo, hi);
        continue;
      }
      for (auto [lo, hi] : rims[s]) {
        lo[0] = p;
        hi[0] = p + 1;
        copy_box(pad, win, u_base, lo, hi);
      }
    }
  };
  for (std::ptrdiff_t t = 0; t < strips; ++t) {
    for (std::size_t s = 0; s + 1 < S; ++s) {
      held[s] = held_lo(t, s);
      find_rims(t, s);
    }
    for (std::ptrdiff_t q = g.q0; q < g.q1; q += P) {
      for (std::size_t s = 0; s < S; ++s) {
        const auto lag = static_cast<std::ptrdiff_t>(s) * h;
        const std::ptrdiff_t a = std::max(from[s], q - lag), z = std::min(to[s], q + P - lag);
        if (a >= z) continue;
        const bool last = s + 1 == S;
        const std::ptrdiff_t r0 = edge(t, s), r1 = edge(t + 1, s);  // the rows computed
        Ix lo{}, hi{};
        // The rows below the strip's that the next step reads, from the strip before.
        const std::ptrdiff_t ca = std::max(a, slo[s][0]), cz = std::min(z, shi[s][0]);
        if (!last && t > 0 && d >= 2)
          for (std::ptrdiff_t p = ca; p < cz; ++p) {
            box(s, p, p + 1, std::max(held[s], slo[s][1]), r0, lo, hi);
            copy_box(pad, window_base(s, p), carry_base(s, p, r0 - 2 * h), lo, hi);
          }
        blk.in[0] = s == 0 ? target + pad.base : addr(window_base(s - 1, ca - h), pad.base);
        blk.out = last ? target + pad.base : addr(window_base(s, ca), pad.base);
        blk.step = rot + s;
        blk.lo = slo[s];
        blk.hi = shi[s];
        blk.lo[0] = ca;
        blk.hi[0] = cz;
        if (d >= 2) {
          blk.lo[1] = r0;
          blk.hi[1] = r1;
        }
        if (!is_empty(d, blk.lo, blk.hi)) kernel(blk);
        if (last) continue;
        copy_rims(t, s, a, z);
        // The rows the next strip's steps read from this one: the top 2h (or fewer) below
        // where the next strip starts, computed here or carried through a narrow strip.
        if (t + 1 < strips && d >= 2)
          for (std::ptrdiff_t p = ca; p < cz; ++p) {
            const std::ptrdiff_t top = edge(t + 1, s);
            box(s, p, p + 1, std::max(held_lo(t + 1, s), slo[s][1]), top, lo, hi);
            copy_box(pad, carry_base(s, p, top - 2 * h), window_base(s, p), lo, hi);
          }
      }
    }
  }
}

}  // namespace ordo::stencil
