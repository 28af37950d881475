// The single-stage stencil's state, shared by the files that implement it: stencil.cpp (the
// spec, the locations and tasks, loading and reading grids, placement),
// stencil_compute.cpp (what a compute task does: halo unpacking, time steps, cache tiles,
// streaming stores) and stencil_in_place.cpp (Traversal::jacobi_in_place). Internal to the
// layer; not installed.
//
// Locations per block b (all on b's rank):
//   main[b]    header (steps done, then where each buffer's block lies; kHeader doubles) + NB
//              padded buffers of the block (geometry::Pad; in place, + plan.spare_units *
//              shift_at() each): Jacobi NB = time_levels + 1 (rotating; the spare one receives
//              u^{t+1}), in-place Jacobi NB = time_levels (u^{t+1} overwrites the oldest),
//              Gauss-Seidel NB = 1 (in place).
//              Then, where the last dimension's halo lies beside the rows (pad.halo_beside), NB
//              side arrays (Pad::side_count each), buffer i's at kHeader + NB * buffer size +
//              i * side_count. They do not move with the block: row x's values are at its
//              place in the side array whatever the buffer's shift.
//   aux[b]     the coefficient grids, padded, written once by set_aux().
//   x[b,o]     for each direction o in {-1,0,1}^d \ 0 that a neighbour n = b+o on another
//              rank reads: the time_levels copies of b's edge region facing n, packed
//              (core::Exchange). A neighbour on b's own rank gets no export location: its halo
//              is written straight from b's buffer (halo[b>n] below), so a rank holds no copy
//              of an edge that does not leave it.
// The exchange (x, export, halo) depends on which rank holds which block, so it is declared
// when the blocks are placed (Impl::place: Stencil::place, or the graph's first run), and
// marked derived (Graph::set_derived): a checkpoint holds the blocks only, whatever the rank
// count, and a restart rebuilds the exchange from them (stencil_restore.cpp).
// Tasks per block b:
//   compute[b]   write main[b], read aux[b], read x[n,-o] for every neighbour n = b+o on
//                another rank: unpacks each x[n,-o] into the halo of main[b], then runs S
//                kernel steps (S = tb_depth, or fewer for the last group of a run).
//   export[b]    read main[b], write every x[b,o]: packs b's edges that go to other ranks.
//   halo[b>n]    for every neighbour n of b on b's rank (n may be b itself across a periodic
//                end): read main[b], write main[n]: copies b's edge regions facing n into
//                n's halo, every direction o with b+o = n at once.
// Order (program order, so the FIFOs need no explicit positions):
//   Jacobi:       every compute, then every export and halo task. On x[b,o] the reader
//                 compute[b+o] comes before the writer export[b], and on main[n] compute[n]
//                 comes before halo[b>n], so compute of step group k reads the edges of group
//                 k-1: exact Jacobi with no barrier and no global copy.
//   Gauss-Seidel: compute[b], export[b], halo[b>*] for each b in lexicographic block order. A
//                 neighbour declared earlier (the low side, for axis-aligned offsets) has
//                 already sent this sweep's values; one declared later still holds the
//                 previous sweep's: exactly the global lexicographic in-place sweep.
// Temporal blocking (Saied 2018 §7.3): H = h*D. After the halo is filled, step s of the
// group computes the block extended by h*(S-1-s) on every side (clipped to the grid for
// fixed boundaries), so the last step computes exactly the block and every value it reads
// was computed from data of the same group: bit-identical to D = 1.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include <ordo/stencil.hpp>

#include "stencil/blocked_grid.hpp"
#include "stencil/stencil_plan.hpp"
#include "stencil/stencil_reductions.hpp"

namespace ordo::stencil {

namespace detail_stencil {
// The block header, kHeader doubles at the start of main[b] (64-byte aligned): [0] the steps
// done, then for each buffer i, [1 + i] where the block lies in it: the units (shift_at()
// doubles each) by which in-place sweeps have moved it from where set() puts it (kAtRest, 0)
// towards the buffer's start, at most InPlacePlan::spare_units (that many: at the buffer's start; a
// one-step sweep moves it by one, a wavefront of temporal blocking by a star by one per step). Only
// in-place Jacobi moves blocks. A checkpoint holds the headers as they are.
inline constexpr std::size_t kHeader = 8;
static_assert(kHeader >= 1 + (kMaxLevels + 1),
              "the header holds the steps done and where each buffer's block lies");
inline constexpr double kAtRest = 0;

// At least n doubles of this thread's memory for `slot`, reused from task to task and
// allocated without being written, so that only what a task touches takes pages; a call for
// more than a slot holds replaces its contents. Slot 0: the streaming pieces (run_range);
// 1 and up: the in-place sweeps (stencil_in_place.cpp).
double* thread_scratch(std::size_t slot, std::size_t n);

// Copies n doubles with non-temporal stores (no read of dst's lines before they are written:
// for what the cache would lose before anyone reads it). The caller issues stream_fence()
// before the data may be read by another thread (stencil_compute.cpp).
void stream_copy(double* dst, const double* src, std::size_t n);
void stream_fence();

// Between runs only: how many kernel steps the next graph iteration runs.
struct Shared {
  std::size_t steps_per_iteration = 1;
};
}  // namespace detail_stencil

struct Stencil::Impl {
  Graph* graph = nullptr;
  Spec spec;
  Kernel kernel;
  core::BlockedGrid grid;
  std::size_t dims = 0;  // the grid's dimensions
  std::size_t buffer_count =
      0;  // buffers a block rotates through (its time levels, + 1 double-buffered)
  std::size_t levels = 0;
  bool streaming = false;  // Stores resolved at construction
  // Traversal::jacobi_in_place's strategy and numbers (stencil_plan.hpp), decided once at
  // construction; a plan with Sweep::none (no shift, one unit) for the other traversals.
  InPlacePlan plan;
  std::ptrdiff_t shift_at(const geometry::Pad& pad) const { return plan.shift_at(pad); }
  // Per block, the fixed values of its halo beyond fixed ends of the grid that a shifted
  // sweep must put back at the block's new place, one list per direction. Built between runs
  // (set(), or placement for a block set by a restart) and only read by the sweeps. A run
  // whose cells already hold their values after the shift (the cells it lands on held the
  // same fixed values) is left out.
  struct FixedHalo {
    struct Runs {
      std::vector<std::pair<std::ptrdiff_t, std::size_t>> where;  // (pad.index_of, length)
      std::vector<double> values;  // each distinct sequence of the runs' values, once
      std::vector<std::ptrdiff_t> plane;  // each run's plane (dimension 0), ascending
      std::vector<std::ptrdiff_t> row;    // its row (dimension 1), ascending within a plane
      std::vector<std::size_t> first;     // where each run's values start in `values`
    };
    Runs down, up;  // after a sweep down the planes, after one up
    // Every fixed cell in the rows of a neighbour's deep halo along dimension 1, whatever it
    // held before (for a wavefront in strips, which leaves some of them out on the way).
    Runs deep;
  };
  std::vector<std::unique_ptr<FixedHalo>> fixed_halo;
  // Builds block b's fixed_halo where it has none (between runs).
  void build_fixed_halo(std::size_t b) {
    if (plan.sweep != InPlacePlan::Sweep::none && !fixed_halo[b]) fixed_halo[b] = fixed_runs(b);
  }
  // Per block, the new values of its exports across the last dimension (3-D, one time level,
  // a row-shifted sweep: InPlacePlan::is_staged_export), copied by the group's last sweep from
  // each row it has just written, still in L1, for the export task that follows: gathered
  // from the buffer there, each value of such a face costs a line read from memory. `steps`:
  // main[0] after that group; the export task uses the stage only while it matches, then
  // clears it. Owned by the block's compute and export tasks, which alone hold it (their
  // closures share it); they never run at once, since one writes the block's main location
  // and the other reads it.
  struct ExportStage {
    // Each staged export's part of a row: the column it starts at, and where row (p, j)'s part
    // goes in `values`: first + (p * rows + j) * halo width. Set when the exchange is declared.
    struct Part {
      std::ptrdiff_t col = 0;
      std::size_t first = 0;
    };
    std::vector<Part> parts;
    std::size_t count = 0;       // values of every part
    std::vector<double> values;  // the staged exports' packed values, one after the other
    double steps = -1;
  };
  std::unique_ptr<FixedHalo> fixed_runs(std::size_t b) const;
  core::Exchange halo;     // the exports and imports across ranks (all time levels)
  // A block's edges that go straight into the halo of a neighbour on its rank: every
  // direction o with from + o = to.
  struct Push {
    std::size_t from = 0, to = 0;
    std::vector<core::Ix> dirs;
  };
  std::vector<Push> pushes;
  std::set<core::Ix> read_dirs;  // the directions the kernel reads (read_directions)
  bool filled = false;           // set() ran: the exports to pack once placed
  struct Locations {
    Location<double> main, aux;
  };
  std::vector<Locations> locs;  // per block
  // Spec::reductions: block b's compute task contributes its kernel's partial of the group's
  // last step as contribution b.
  detail::ReductionSet reds;
  std::shared_ptr<detail_stencil::Shared> shared = std::make_shared<detail_stencil::Shared>();
  core::Placement placement;

  // The blocks' locations and the graph's hook that places them at its first run
  // (construction), then the halo exchange, its locations and every task (placement).
  void declare_blocks();
  void declare_exchange();

  // Buffer index of time level `delta` relative to the newest (0), or the spare (+1), after
  // `rot` steps.
  std::size_t buffer_index(std::uint64_t rot, std::ptrdiff_t delta) const {
    const auto n = static_cast<std::int64_t>(buffer_count);
    std::int64_t i = (static_cast<std::int64_t>(rot % buffer_count) + delta) % n;
    return static_cast<std::size_t>(i < 0 ? i + n : i);
  }
  // By how many units of shift_at() buffer `index`'s block lies moved from rest towards the
  // buffer's start, in the header of main[b] (detail_stencil::kHeader): 0 (kAtRest) to
  // plan.spare_units.
  template <class T>
  static std::size_t moved_units(std::span<T> main, std::size_t index) {
    return static_cast<std::size_t>(main[1 + index]);
  }
  static void set_moved_units(std::span<double> main, std::size_t index, std::size_t units) {
    main[1 + index] = static_cast<double>(units);
  }
  // Buffer `index` of block b in its main location `main`, as the pointer to which
  // pad.index_of(x) adds point x's offset: where the block lies in the buffer (moved_units).
  template <class T>
  T* buffer_data(std::size_t b, std::span<T> main, std::size_t index) const {
    const geometry::Pad& pad = grid.block(b).pad;
    return main.data() + detail_stencil::kHeader + index * buffer_size(b) +
           static_cast<std::ptrdiff_t>(plan.spare_units - moved_units(main, index)) * shift_at(pad);
  }
  // Time level `delta` of block b after `rot` steps (buffer_index), as buffer_data gives it.
  template <class T>
  T* level_data(std::size_t b, std::span<T> main, std::uint64_t rot, std::ptrdiff_t delta) const {
    return buffer_data(b, main, buffer_index(rot, delta));
  }
  // The side array of buffer `index` of block b (pad.halo_beside; else nullptr): point x beside
  // the rows lies at pad.side_layout(right).index_of(x) in it.
  template <class T>
  T* side_data(std::size_t b, std::span<T> main, std::size_t index) const {
    const geometry::Pad& pad = grid.block(b).pad;
    if (!pad.halo_beside) return nullptr;
    return main.data() + detail_stencil::kHeader + buffer_count * buffer_size(b) +
           index * pad.side_count;
  }
  template <class T>
  T* level_side(std::size_t b, std::span<T> main, std::uint64_t rot, std::ptrdiff_t delta) const {
    return side_data(b, main, buffer_index(rot, delta));
  }
  // Doubles per buffer of block b: the padded block and the room the shifted sweeps need.
  std::size_t buffer_size(std::size_t b) const {
    const geometry::Pad& pad = grid.block(b).pad;
    return pad.count + plan.spare_units * static_cast<std::size_t>(shift_at(pad));
  }
  // Working set of one cache tile or in-place window set: Schedule::tile_bytes, or the default.
  std::size_t tile_budget() const;
  // Whether this rank holds block b (every block before placement).
  bool holds(std::size_t b) const { return placement.holds(b); }
  // Throws Error unless `level` is one of the stencil's time levels (0: the newest).
  void check_level(std::size_t level) const;
  // Time level `level` of block b, which this rank holds, between runs (Graph::data), as
  // level_data gives it.
  const double* held_level(std::size_t b, std::size_t level) const;
  void place(unsigned rank, unsigned ranks);

  // An import whose unpacking the in-place sweep does itself, and the data it reads.
  struct LateFace {
    const core::Import* import = nullptr;
    const double* src = nullptr;
  };
  // The compute task of block b (stencil_compute.cpp); `stage`: the block's export stage,
  // which it shares with the block's export task.
  void compute(Context& ctx, std::size_t b, ExportStage& stage) const;
  // Runs the kernel over blk's range (block b's layout); with `stream`, piece by piece
  // through the per-thread scratch.
  void run_range(std::size_t b, Block& blk, bool stream) const;
  // Traversal::jacobi_in_place (stencil_in_place.cpp): the group's `steps` steps over block b,
  // whose main location is `main`, step s over [slo[s], shi[s]), the result overwriting the
  // oldest level, as the plan says. `late`: the faces that compute left for the sweep to
  // unpack (InPlacePlan::is_late_face).
  void run_in_place(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                    std::size_t steps, const std::vector<core::Ix>& slo,
                    const std::vector<core::Ix>& shi, std::span<const LateFace> late,
                    ExportStage& stage) const;
  // Group::wavefront (stencil_wavefront.cpp): steps s0 .. s0+k-1 of a group of a star's
  // steps, each moving the block by a unit (down: towards the buffer's start) and all k in one
  // wavefront along dimension 0: none copies, since each overwrites only what its own and the
  // steps before have read for the last time.
  void sweep_wavefront(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                       std::size_t s0, std::size_t k, const std::vector<core::Ix>& slo,
                       const std::vector<core::Ix>& shi, bool down) const;
  // Group::windows (stencil_windows.cpp): the group's steps as a wavefront through windows,
  // strip by strip; false where it has no windows (the plan's strips do not pay, or a ring
  // cannot be mapped), which leaves the group to the caller, untouched.
  class WindowedStrips;
  bool sweep_windows(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                     std::size_t steps, const std::vector<core::Ix>& slo,
                     const std::vector<core::Ix>& shi) const;
  // A one-step sweep, moving the block by shift_at() (stencil_in_place.cpp). `stage`: where
  // the group's last step (its range is the block) stages the exports; null for the others.
  void sweep_shifted(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                     const core::Ix& lo, const core::Ix& hi, ExportStage* stage,
                     std::span<const LateFace> late = {}) const;
  // Sweep::by_rows (stencil_sweep_rows.cpp): its units one row each (2-D: a piece of a row),
  // slab by slab, plane by plane, writing through blk.out; down (ascending) or up
  // (descending); with `stage`, copying each row's part of the staged exports into it.
  void sweep_rows(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                  const core::Ix& lo, const core::Ix& hi, std::span<const LateFace> late, bool down,
                  ExportStage* stage) const;
  // Sweep::by_planes (stencil_sweep_planes.cpp): its units plan.unit_planes planes (and a
  // slab's rows in 3-D and up) each, writing to `out`.
  void sweep_planes(std::size_t b, std::span<double> main, Block& blk, std::uint64_t rot,
                    const core::Ix& lo, const core::Ix& hi, std::span<const LateFace> late,
                    bool down, double* out) const;
  // Unpacks the rows [r0, r1) (dimension 1) of plane p of a late face into every level.
  void unpack_late(std::size_t b, std::span<double> main, std::uint64_t rot, const LateFace& f,
                   std::ptrdiff_t p, std::ptrdiff_t r0, std::ptrdiff_t r1) const;
  // Copies the edges of push p from `from` (main[p.from]) into the halo of `to` (main[p.to];
  // the same span when p.from == p.to), every time level.
  void push_halo(const Push& p, std::span<const double> from, std::span<double> to) const;
  // Packs block b's edges from `main` into its exports, through out(location); the staged
  // exports from `staged` where given (the export task's stage, still matching main).
  void pack_exports(std::size_t b, std::span<const double> main,
                    const std::function<std::span<double>(Location<double>)>& out,
                    const ExportStage* staged = nullptr) const;
  // After Runtime::restart loaded this rank's blocks (stencil_restore.cpp): "" or why their
  // headers are none a run writes; then the exports and same-rank halos rebuilt from them.
  std::string restore(Restored& restored) const;
  std::string check_restored(const Restored& restored) const;
  void rebuild_exchange(Restored& restored) const;
  // The export task of block b: packs its exports, taking the staged ones from `stage` while
  // it matches main, and spends the stage (every later pack reads the buffer).
  void export_block(std::size_t b, std::span<const double> main,
                    const std::function<std::span<double>(Location<double>)>& out,
                    ExportStage& stage) const;
};

// Default working-set budget of a cache tile: half of a core's share of the last-level cache,
// at least the L2 (docs/benchmarks.md has the measurements behind it).
std::size_t default_tile_bytes();
inline std::size_t Stencil::Impl::tile_budget() const {
  return spec.schedule.tile_bytes ? spec.schedule.tile_bytes : default_tile_bytes();
}

// The spec with its defaults: the neighbourhood (von Neumann of the halo's radius, at least
// 1) and the halo (the neighbourhood's reach, at least 1).
Spec with_defaults(Spec s);
// Throws Error saying what is wrong with a spec whose defaults are filled in, `grid` being
// its block decomposition (which checked the shape).
void validate(const Spec& s, const core::BlockedGrid& grid);
// The directions whose neighbour regions the kernel reads (every one with temporal blocking:
// the extended range reaches the corners).
std::set<core::Ix> read_directions(const Spec& s);

}  // namespace ordo::stencil
