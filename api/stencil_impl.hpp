// The single-stage stencil's state, shared by the files that implement it: stencil.cpp (the
// spec, the locations and tasks, loading and reading grids, placement) and
// stencil_compute.cpp (what a compute task does: halo unpacking, time steps, cache tiles,
// streaming stores). Internal to api/; not installed.
//
// Locations per block b (all on b's rank):
//   main[b]    header (steps done, kHeader doubles) + NB padded buffers of the block's
//              prod(B + 2H) doubles: Jacobi NB = time_levels + 1 (rotating; the spare one
//              receives u^{t+1}), Gauss-Seidel NB = 1 (in place).
//   aux[b]     the coefficient grids, padded, written once by set_aux().
//   x[b,o]     for each direction o in {-1,0,1}^d \ 0 that a neighbour n = b+o reads: the
//              time_levels copies of b's edge region facing n, packed (core::Exchange).
// Tasks per block b:
//   compute[b] write main[b], read aux[b], read x[n,-o] for every neighbour n = b+o:
//              unpacks each x[n,-o] into the halo of main[b], then runs S kernel steps
//              (S = tb_depth, or fewer for the last group of a run).
//   export[b]  read main[b], write every x[b,o]: packs b's edge regions.
// Order (program order, so the FIFOs need no explicit positions):
//   Jacobi:       every compute, then every export. On x[b,o] the reader compute[b+o] comes
//                 before the writer export[b], so compute of step group k reads the edges of
//                 group k-1: exact Jacobi with no barrier and no global copy.
//   Gauss-Seidel: compute[b], export[b] for each b in lexicographic block order. A neighbour
//                 declared earlier (the low side, for axis-aligned offsets) has already
//                 exported this sweep's values; one declared later still holds the previous
//                 sweep's: exactly the global lexicographic in-place sweep.
// Temporal blocking (papers/004 §7.3): H = h*D. After the halo is filled, step s of the
// group computes the block extended by h*(S-1-s) on every side (clipped to the grid for
// fixed boundaries), so the last step computes exactly the block and every value it reads
// was computed from data of the same group: bit-identical to D = 1.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <ordo/stencil.hpp>

#include "api/blocked_grid.hpp"

namespace ordo::stencil {

namespace detail_stencil {
inline constexpr std::size_t kHeader = 8;  // doubles before the first buffer (64-byte aligned)

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
  std::size_t d = 0, nb = 0, levels = 0;
  bool streaming = false;  // Stores resolved at construction
  core::Exchange halo;     // the main grid's exports and imports (all time levels)
  struct Locations {
    Location<double> main, aux;
  };
  std::vector<Locations> locs;  // per block
  std::shared_ptr<detail_stencil::Shared> shared = std::make_shared<detail_stencil::Shared>();
  core::Placement placement;

  void declare(const std::set<core::Ix>& dirs);

  // Buffer index of time level `delta` relative to the newest (0), or the spare (+1), after
  // `rot` steps.
  std::size_t buffer(std::uint64_t rot, std::ptrdiff_t delta) const {
    const auto n = static_cast<std::int64_t>(nb);
    std::int64_t i = (static_cast<std::int64_t>(rot % nb) + delta) % n;
    return static_cast<std::size_t>(i < 0 ? i + n : i);
  }
  double* buf(std::size_t b, std::span<double> main, std::size_t index) const {
    return main.data() + detail_stencil::kHeader + index * grid.block(b).pad.count;
  }
  const double* buf(std::size_t b, std::span<const double> main, std::size_t index) const {
    return main.data() + detail_stencil::kHeader + index * grid.block(b).pad.count;
  }
  // Whether this rank holds block b (every block before placement).
  bool holds(std::size_t b) const { return placement.holds(b); }
  void place(unsigned rank, unsigned ranks);

  // The compute task of block b (stencil_compute.cpp).
  void compute(Context& ctx, std::size_t b) const;
  // Runs the kernel over blk's range (block b's layout); with `stream`, piece by piece
  // through the per-thread scratch.
  void run_range(std::size_t b, Block& blk, bool stream) const;
  // Packs block b's edges from `main` into its exports, through out(location).
  void pack_exports(std::size_t b, std::span<const double> main,
                    const std::function<std::span<double>(Location<double>)>& out) const;
};

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
