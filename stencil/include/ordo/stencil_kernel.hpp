// ordo::stencil's kernel contract: what a kernel sees of one step of one block (Block), how it
// walks its rows (for_each_row, Row) and what it may declare it does (KernelTraits). Included
// by <ordo/stencil.hpp>; the contract is written down in docs/stencil.md, "The kernel
// contract". A kernel reads and writes through these alone: where the layer keeps the halo and
// in which order its sweeps run are the layer's (detail::RowLayout), so a new sweep or layout
// changes neither this header nor a kernel.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>

namespace ordo::stencil {

inline constexpr std::size_t kMaxDims = 5;
inline constexpr std::size_t kMaxLevels = 4;  // time levels the kernel may read
inline constexpr std::size_t kMaxAux = 8;     // coefficient grids

// Reductions a kernel contributes to (Spec::reductions, PipelineSpec::reductions): a residual,
// a norm, the largest change of a step. Each block's kernel folds its contributions of a step
// into one partial (Block::contribute), and the layer combines the blocks' partials in
// ordo::combine_in_order's order over the blocks, so a value has the same bits on any worker
// and rank count (docs/stencil.md, "Reductions and stopping on convergence").
inline constexpr std::size_t kMaxReductions = 8;
enum class Reduce {
  sum,  // a + b, folded in the order of the kernel's calls (see Block::contribute)
  max,  // the larger; of equal values the first, as ordo::Max
  min,  // the smaller; of equal values the first, as ordo::Min
};

namespace detail {
// Moves x to the next row of [lo, hi) in lexicographic order (an odometer over the d-1
// dimensions before the last); false after the last row.
template <class T>
bool next_row(std::array<T, kMaxDims>& x, const std::array<T, kMaxDims>& lo,
              const std::array<T, kMaxDims>& hi, std::size_t d) {
  for (std::size_t i = d - 1; i-- > 0;) {
    if (++x[i] < hi[i]) return true;
    x[i] = lo[i];
  }
  return false;
}
// The row before x in that order; false before the first row.
template <class T>
bool previous_row(std::array<T, kMaxDims>& x, const std::array<T, kMaxDims>& lo,
                  const std::array<T, kMaxDims>& hi, std::size_t d) {
  for (std::size_t i = d - 1; i-- > 0;) {
    if (--x[i] >= lo[i]) return true;
    x[i] = hi[i] - 1;
  }
  return false;
}
// One block's contributions of one step, as the kernel makes them (Block::contribute): the
// layer hands the kernel one, reads it after the step and contributes its values to the graph's
// reductions. Not for programs.
struct Partials {
  std::size_t count = 0;  // the reductions declared
  std::array<Reduce, kMaxReductions> op{};
  std::array<double, kMaxReductions> value{};
  std::uint32_t made = 0;  // bit r: reduction r has a contribution in this step
  std::uint64_t step = 0;  // Block::step whose contributions count
  [[noreturn]] void refuse(std::size_t r) const;
  void add(std::size_t r, double v) {
    if (r >= count) refuse(r);
    const std::uint32_t bit = std::uint32_t{1} << r;
    if ((made & bit) == 0) {
      value[r] = v;
      made |= bit;
      return;
    }
    double& a = value[r];
    switch (op[r]) {
      case Reduce::sum: a = a + v; break;
      case Reduce::max: a = a < v ? v : a; break;
      case Reduce::min: a = v < a ? v : a; break;
    }
  }
};
// Where the layer keeps, for one kernel call, what a Row gives: filled by the layer's sweeps,
// read by Row and for_each_row. Not for kernels: its fields change with the sweeps.
struct RowLayout {
  // Elements from a point to the same point of the plane (along dimension 0) the sweep
  // computes after this one: stride[0], or -stride[0] when an in-place sweep runs up the
  // planes (it then runs backwards along dimension 1 too). 0 where the input is in the cache
  // already (a temporal-blocking wavefront's steps after its first): nothing to prefetch.
  std::ptrdiff_t next_plane = 0;
  // for_each_row visits the range's rows from the last to the first: an in-place sweep that
  // runs up passes many rows at once this way, only to a kernel that computes them in order.
  bool backwards = false;
  // Where the last dimension's halo lies when the layer keeps it beside the rows, per level:
  // the values left of local row 0 end at halo_before[l], those right of it start at
  // halo_after[l], and those of row r (r = (at - lo[dims - 1]) / stride[dims - 2]) lie
  // r * halo_row_step further on. Null where that end's halo lies in the rows.
  std::array<const double*, kMaxLevels> halo_before{}, halo_after{};
  std::ptrdiff_t halo_row_step = 0;
};
}  // namespace detail

// What the kernel sees for one step of one block. Coordinates are block-local: 0 is the
// block's first owned point in each dimension; the pointers point at that point, so an offset
// o reads at `at + sum(o[d] * stride[d])`, negative or beyond the block included (the halo).
struct Block {
  std::size_t dims = 0;
  std::array<std::ptrdiff_t, kMaxDims> stride{};  // elements between neighbours in dimension d
  // The points to compute: lo[d] <= x[d] < hi[d]. With temporal blocking this range extends
  // into the halo (the recomputed overlap); it never leaves the grid for fixed boundaries.
  // One step of a block may come as several calls over parts of its range (cache tiles,
  // streaming pieces): a kernel computes each point of its range from `in` and writes it to
  // `out`, whatever the range.
  std::array<std::ptrdiff_t, kMaxDims> lo{}, hi{};
  std::array<std::int64_t, kMaxDims> origin{};  // global coordinate of local point 0
  // in[0] = u^t (newest), in[1] = u^{t-1}, ... For Gauss-Seidel in[0] == out.
  std::array<const double*, kMaxLevels> in{};
  double* out = nullptr;  // u^{t+1}
  std::array<const double*, kMaxAux> aux{};
  std::uint64_t step = 0;  // global time step being computed (0 for the first)
  // Where the sweep under way keeps what a Row reads (the layer's: read it through Row).
  detail::RowLayout layout{};
  // Where this call's contributions go (Spec::reductions); null when there are none.
  detail::Partials* partials = nullptr;
  // Whether this call's contributions count: every step, but with temporal blocking only a
  // group's last (its range is the block; the earlier steps recompute the overlap). A kernel
  // may skip computing what it would contribute where this is false.
  bool contributes() const { return partials != nullptr && partials->step == step; }
  // Contributes v to reduction r (the index in Spec::reductions) for this block and step;
  // ignored where contributes() is false. A step of a block may come as several calls (cache
  // tiles, in-place sweeps, streaming pieces): their contributions are folded in the order of
  // the calls, which the spec and the tile budget fix (the same for any worker or rank
  // count); max and min do not depend on it, a sum's last bits do. Every step that counts
  // must contribute to every reduction at least once, else the run stops with an Error.
  void contribute(std::size_t r, double v) const {
    if (contributes()) partials->add(r, v);
  }
};

// What a kernel declares it does beyond computing each point of its range from `in`: the
// layer may then pick sweeps and layouts that need it. The results are the same bits either
// way; a kernel that declares what it does not do reads wrong values.
struct KernelTraits {
  // It reads the values beyond the ends of a row (the last dimension's halo) only through
  // Row::before() and Row::after(), never at in[l][at - 1] or in[l][at + len]. The layer may
  // then keep them beside the rows instead of in them (docs/stencil.md, "Rows with their halo
  // beside"), where that saves memory traffic: rows of 256 points are 32 cache lines, not 33.
  bool halo_through_row = false;
  // It computes the rows of its range one after the other in for_each_row's order, each from
  // `in` before the next is written (a kernel that calls for_each_row and writes only the row
  // it is given does). In-place temporal blocking by a star may then pass it many rows of a
  // plane in one call instead of one row per call (docs/stencil.md).
  bool rows_in_order = false;
};

// A kernel: what it computes for one call (a function of the Block) and what it declares
// (KernelTraits). Any callable converts to one with no traits.
struct Kernel {
  std::function<void(const Block&)> body;
  KernelTraits traits;

  Kernel() = default;
  template <class F>
  requires std::is_invocable_v<F&, const Block&> &&
      (!std::is_same_v<std::decay_t<F>, Kernel>)Kernel(F&& f, KernelTraits t = {})
      : body(std::forward<F>(f)), traits(t) {}
  void operator()(const Block& b) const { body(b); }
  explicit operator bool() const { return static_cast<bool>(body); }
};

// Where the input the sweep reads next lies, for a kernel that prefetches it (Row::prefetch):
// empty where the input is in the cache already. Addresses, not pointers: they may lie
// beyond the buffer (a prefetch of them is harmless, a dereference is not).
struct Prefetch {
  std::uintptr_t row = 0;  // the row's first point, `onward` further in the sweep's direction
  // The line holding the value before that row where the row holds it; 0 where the layer
  // keeps it beside the row (in its neighbour's face, which the layer prefetches).
  std::uintptr_t before = 0;
  explicit operator bool() const { return row != 0; }
};

// One row of a kernel call's range (for_each_row): `len` consecutive points along the last
// dimension from element offset `at` (relative to block.in[l], block.out and block.aux[a]), at
// block-local coordinate x. The values beyond its ends -- the last dimension's halo -- lie
// wherever the layer keeps them, in the row or beside it: before() and after() find them.
struct Row {
  const Block& block;
  std::ptrdiff_t at;
  std::size_t len;
  const std::array<std::ptrdiff_t, kMaxDims>& x;

  // The values before the row's first point in level `level`: before()[-1] is the one next to
  // it, before()[-h] the farthest. `row_offset` reads those of another row instead, that many
  // elements away (sum(o[d] * stride[d]) over the dimensions but the last, for an offset o).
  const double* before(std::size_t level = 0, std::ptrdiff_t row_offset = 0) const {
    const detail::RowLayout& l = block.layout;
    return l.halo_before[level] ? l.halo_before[level] + row_of(row_offset) * l.halo_row_step
                                : block.in[level] + at + row_offset;
  }
  // The values after the row's last point: after()[0] is the one next to it, after()[h - 1]
  // the farthest; `row_offset` as for before().
  const double* after(std::size_t level = 0, std::ptrdiff_t row_offset = 0) const {
    const detail::RowLayout& l = block.layout;
    return l.halo_after[level]
               ? l.halo_after[level] + row_of(row_offset) * l.halo_row_step
               : block.in[level] + at + row_offset + static_cast<std::ptrdiff_t>(len);
  }
  // Where to prefetch the input of level `level` that the sweep reads next: this row in the
  // plane it computes after this one, moved `onward` elements further in the sweep's direction
  // (a kernel picks how far ahead it fetches); empty where there is nothing to fetch.
  Prefetch prefetch(std::ptrdiff_t onward, std::size_t level = 0) const {
    const std::ptrdiff_t next = block.layout.next_plane;
    if (next == 0) return {};
    const std::ptrdiff_t to = at + next + (next > 0 ? onward : -onward);
    const std::uintptr_t row = reinterpret_cast<std::uintptr_t>(block.in[level]) +
                               static_cast<std::uintptr_t>(to) * sizeof(double);
    return {row, block.layout.halo_before[level] ? 0 : row - sizeof(double)};
  }

 private:
  // The row (counted over every dimension but the last) `row_offset` elements from this one.
  std::ptrdiff_t row_of(std::ptrdiff_t row_offset) const {
    return (at + row_offset - block.lo[block.dims - 1]) / block.stride[block.dims - 2];
  }
};

// Calls f for every row of b's range in lexicographic order (or the reverse, where the layer
// runs a sweep up and the kernel computes its rows in order): with a Row, or with (at, len, x)
// or (at, len), `len` consecutive points along the last dimension starting at element offset
// `at` (relative to b.in[l]/b.out) and at block-local coordinate x. Inline so that the
// kernel's inner loop is compiled with it. B is Block or StageBlock (a pipeline stage's view,
// <ordo/stencil.hpp>; the (at, len[, x]) forms only).
template <class B, class F>
void for_each_row(const B& b, F&& f) {
  const std::size_t d = b.dims;
  if (d == 0) return;
  for (std::size_t i = 0; i < d; ++i)
    if (b.hi[i] <= b.lo[i]) return;
  std::array<std::ptrdiff_t, kMaxDims> x = b.lo;
  bool backwards = false;
  if constexpr (std::is_same_v<B, Block>) backwards = b.layout.backwards;
  if (backwards)
    for (std::size_t i = 0; i + 1 < d; ++i) x[i] = b.hi[i] - 1;
  const std::size_t len = static_cast<std::size_t>(b.hi[d - 1] - b.lo[d - 1]);
  for (;;) {
    std::ptrdiff_t at = 0;
    for (std::size_t i = 0; i < d; ++i) at += x[i] * b.stride[i];
    if constexpr (std::is_same_v<B, Block> && std::is_invocable_v<F, const Row&>)
      f(Row{b, at, len, x});
    else if constexpr (std::is_invocable_v<F, std::ptrdiff_t, std::size_t,
                                           const std::array<std::ptrdiff_t, kMaxDims>&>)
      f(at, len, x);
    else
      f(at, len);
    if (!(backwards ? detail::previous_row(x, b.lo, b.hi, d) : detail::next_row(x, b.lo, b.hi, d)))
      return;
  }
}

}  // namespace ordo::stencil
