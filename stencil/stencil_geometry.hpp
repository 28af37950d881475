// Index geometry shared by the stencil layer's single-stage stencils (stencil.cpp) and its
// pipelines (stencil_pipeline.cpp): padded block buffers, boxes inside them, and packing a box
// to or from a contiguous array (the halo exports). Internal to the layer; not installed.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <ordo/stencil.hpp>

namespace ordo::stencil::geometry {

using Ix = std::array<std::ptrdiff_t, kMaxDims>;

// "8x6x4": a shape as the command lines and error messages write it.
inline std::string join(const std::vector<std::size_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

// Calls f(x) for every x in [lo, hi) (d dimensions), lexicographic order.
template <class F>
void for_each_point(std::size_t d, const Ix& lo, const Ix& hi, F&& f) {
  for (std::size_t i = 0; i < d; ++i)
    if (hi[i] <= lo[i]) return;
  Ix x = lo;
  for (;;) {
    f(x);
    std::size_t i = d;
    for (;;) {
      if (i == 0) return;
      --i;
      if (++x[i] < hi[i]) break;
      x[i] = lo[i];
    }
  }
}

// Geometry of one padded block buffer: owned extent B, padding below (low) and above (high)
// the block along each dimension (the halo: H = h*D where a neighbour's points land, h where
// the grid's fixed end lies, since no step computes beyond it and the kernel reads h past it).
// In 2-D and up each row (the last dimension) starts its owned points on a 64-byte boundary
// and rows are a whole number of 64-byte lines apart: the row stride is B + low + high rounded
// up to 8 doubles, and the first row's owned points start `low` rounded up to 8 doubles into
// the buffer, so that a kernel's row loop does not split its loads and stores across cache
// lines differently from row to row (the buffer itself starts 64-byte aligned: ordo's
// locations do, and the stencil keeps its buffers a multiple of 8 doubles long). In 3-D and up
// a row's high halo and the next row's low halo share the line between them: a sweep reads
// B/8 + 1 lines per row, not B/8 + 2. In 2-D each row keeps a line of its own on either side:
// with long rows the shared line saves little traffic, and it made heat2d slower
// (docs/benchmarks.md, "Figures behind defaults"). Points beyond the padding are padding
// nobody reads.
//
// With the halo beside the rows at an end of the last dimension (2-D and up;
// KernelTraits::halo_through_row, docs/stencil-in-place.md "Rows with their halo beside") the rows
// hold no halo columns at that end, and those of every padded row lie in a side array of its own
// instead: at both ends (depth 1), the rows hold their owned points only, a whole number of lines
// apart (256 points: 32 lines); at the grid's fixed ends only (temporal blocking, whose
// ranges reach into a neighbour's halo), a row holds the deep halo on its neighbour's side
// and its owned points (8 + 256 points: 33 lines, not 34). The side array has a part per end
// kept beside, the left one first: side_step values a row (h), the rows in the buffer's
// order. `low` and `high` still say how far the halo reaches; where a point of it lies is
// index_of() for the rows and, for the columns beside them, side_layout().index_of(). Each halo
// region lies wholly in the rows or wholly beside them (cells_of).
//
// Which ends of the last dimension keep their halo beside the rows.
struct BesideEnds {
  bool low = false, high = false;
};
// Where a grid's blocks keep the last dimension's halo: in the rows, beside them at both ends,
// or beside them at the grid's fixed ends only (core::BlockedGrid::set_padding).
enum class RowHalo { in_rows, beside, beside_at_fixed_ends };

struct Pad {
  std::size_t dims = 0;  // dimensions
  Ix low{}, high{};   // padding below and above the owned points, per dimension
  Ix ext{};           // owned extent B per dimension
  Ix stride{};
  std::size_t count = 0;    // doubles in the buffer
  std::ptrdiff_t base = 0;  // index of local point 0
  // The side array of the halo beside the rows (`halo_beside`: at either end; else side_count is
  // 0): its strides over the rows (side_stride[dims-2] is side_step, the values of a row in one
  // part; [dims-1] is 1), one part's size, where the right part starts (after the left one where
  // there is one), its size (whole lines), and local row 0's offset in a part. Column c < 0 of
  // row r lies at side_base + r's offset + side_step + c, column ext + c at side_right +
  // side_base + r's offset + c.
  bool halo_beside = false;
  bool beside_low = false, beside_high = false;  // which ends' columns lie beside the rows
  Ix side_stride{};
  std::ptrdiff_t side_step = 0;
  std::size_t side_part = 0, side_right = 0, side_count = 0;
  std::ptrdiff_t side_base = 0;

  Pad() = default;
  // `halo` points on every side.
  Pad(std::size_t dim_count, std::size_t halo, const std::vector<std::size_t>& block)
      : Pad(dim_count, uniform(dim_count, halo), uniform(dim_count, halo), block) {}
  Pad(std::size_t dim_count, const Ix& below, const Ix& above,
      const std::vector<std::size_t>& block, BesideEnds ends = {})
      : dims(dim_count),
        low(below),
        high(above),
        halo_beside((ends.low || ends.high) && dim_count >= 2),
        beside_low(ends.low && dim_count >= 2),
        beside_high(ends.high && dim_count >= 2) {
    const std::size_t last = dims > 0 ? dims - 1 : 0;
    // Low padding of the rows, in whole lines from 2-D on (none where it lies beside them).
    const std::ptrdiff_t low_last = beside_low  ? 0
                                    : dims >= 2 ? (low[last] + 7) / 8 * 8
                                                : low[last];
    const std::ptrdiff_t high_last = beside_high ? 0 : high[last];
    std::ptrdiff_t s = 1;
    for (std::size_t i = dims; i-- > 0;) {
      ext[i] = static_cast<std::ptrdiff_t>(block[i]);
      stride[i] = s;
      if (i == last && dims >= 3)
        s *= ((beside_low ? 0 : low[i]) + ext[i] + high_last + 7) / 8 * 8;
      else if (i == last && dims == 2)
        s *= (low_last + ext[i] + high_last + 7) / 8 * 8;
      else
        s *= low[i] + ext[i] + high[i];
    }
    // In 3-D and up the last row's high halo ends up to low_last doubles beyond the strides.
    count = static_cast<std::size_t>(dims >= 3 ? s + low_last : s);
    for (std::size_t i = 0; i < last; ++i) base += low[i] * stride[i];
    base += low_last;
    if (!halo_beside) return;
    side_step = std::max(beside_low ? low[last] : 0, beside_high ? high[last] : 0);
    std::ptrdiff_t t = 1;
    for (std::size_t i = dims; i-- > 0;) {
      side_stride[i] = t;
      t *= i == last ? side_step : padded(i);
    }
    side_part = static_cast<std::size_t>(t);
    side_right = beside_low ? side_part : 0;
    side_count = ((beside_low + beside_high) * side_part + 7) / 8 * 8;
    for (std::size_t i = 0; i < last; ++i) side_base += low[i] * side_stride[i];
  }
  std::ptrdiff_t index_of(const Ix& x) const {
    std::ptrdiff_t a = base;
    for (std::size_t i = 0; i < dims; ++i) a += x[i] * stride[i];
    return a;
  }
  // The padded extent along dimension i.
  std::ptrdiff_t padded(std::size_t i) const { return low[i] + ext[i] + high[i]; }
  // Whether the box [lo, hi) lies beside the rows (in the side array): only with `halo_beside`,
  // for a box of the last dimension's halo columns.
  bool is_beside(const Ix& lo, const Ix& hi) const {
    return (beside_low && hi[dims - 1] <= 0) || (beside_high && lo[dims - 1] >= ext[dims - 1]);
  }
  // The columns [lo, hi) of the last dimension narrowed to those in the rows.
  void clip_to_rows(std::ptrdiff_t& lo, std::ptrdiff_t& hi) const {
    if (beside_low) lo = std::max<std::ptrdiff_t>(lo, 0);
    if (beside_high) hi = std::min(hi, ext[dims - 1]);
  }
  // For detail::RowLayout's halo_before and halo_after: where the values left of local row 0
  // end in the side array `side`, and where those right of it start; null where that end's
  // halo lies in the rows.
  template <class T>
  T* west_of(T* side) const {
    return beside_low ? side + side_base + side_step : nullptr;
  }
  template <class T>
  T* east_of(T* side) const {
    return beside_high ? side + static_cast<std::ptrdiff_t>(side_right) + side_base : nullptr;
  }
  // The layout of the side array for the columns below the rows (`right` false) or above
  // them: index_of(x) is where point x of those columns lies in it.
  Pad side_layout(bool right) const {
    Pad v;
    v.dims = dims;
    v.low = low;
    v.high = high;
    v.ext = ext;
    v.stride = side_stride;
    v.count = side_count;
    v.base = right ? static_cast<std::ptrdiff_t>(side_right) + side_base - ext[dims - 1]
                   : side_base + side_step;
    return v;
  }

 private:
  static Ix uniform(std::size_t dims, std::size_t halo) {
    Ix v{};
    for (std::size_t i = 0; i < dims; ++i) v[i] = static_cast<std::ptrdiff_t>(halo);
    return v;
  }
};

inline std::size_t box_count(std::size_t d, const Ix& lo, const Ix& hi) {
  std::size_t n = 1;
  for (std::size_t i = 0; i < d; ++i) n *= static_cast<std::size_t>(hi[i] - lo[i]);
  return n;
}

// Calls f(offset in buffer a, offset in buffer b, row length) for every row of the box
// [lo, hi) of a padded buffer of layout `a` and the box of the same shape that starts at
// `b_lo` in one of layout `b` (whose strides may differ: uneven blocks), row by row in order.
// The offsets move by strides (no multiplications per row): a face across the last dimension
// is one point per row, and there are many rows.
template <class F>
void for_each_box_row(const Pad& a, const Ix& lo, const Ix& hi, const Pad& b, const Ix& b_lo,
                      F&& f) {
  const std::size_t d = a.dims, last = d - 1;
  for (std::size_t i = 0; i < d; ++i)
    if (hi[i] <= lo[i]) return;
  const auto len = static_cast<std::size_t>(hi[last] - lo[last]);
  Ix x = lo;
  std::ptrdiff_t at_a = a.index_of(lo), at_b = b.index_of(b_lo);
  for (;;) {
    f(at_a, at_b, len);
    std::size_t i = last;  // odometer over the dimensions before the last
    for (;;) {
      if (i == 0) return;
      --i;
      at_a += a.stride[i];
      at_b += b.stride[i];
      if (++x[i] < hi[i]) break;
      at_a -= (hi[i] - lo[i]) * a.stride[i];
      at_b -= (hi[i] - lo[i]) * b.stride[i];
      x[i] = lo[i];
    }
  }
}

// The layout of the box [lo, hi) packed densely, row after row (what pack_box writes): no
// padding, point 0 of the box at offset 0.
inline Pad packed_layout(std::size_t d, const Ix& lo, const Ix& hi) {
  Pad p;
  p.dims = d;
  std::ptrdiff_t stride = 1;
  for (std::size_t i = d; i-- > 0;) {
    p.ext[i] = hi[i] - lo[i];
    p.stride[i] = stride;
    stride *= p.ext[i];
  }
  p.count = static_cast<std::size_t>(stride);
  return p;
}

// Calls f(offset in the buffer, offset in the packed array, row length) for every row of the
// box [lo, hi) of a padded buffer, in the order the packed array holds them.
template <class F>
void for_each_box_row(const Pad& p, const Ix& lo, const Ix& hi, F&& f) {
  for_each_box_row(p, lo, hi, packed_layout(p.dims, lo, hi), Ix{},
                   [&](std::ptrdiff_t at, std::ptrdiff_t k, std::size_t len) {
                     f(at, static_cast<std::size_t>(k), len);
                   });
}

// Where the box [lo, hi) of a block lies: its buffer `buf` and layout, or, for a box of the
// columns beside the rows (Pad::is_beside), the side array `side` and its layout. A box that
// straddles the two is the caller's to cut (the halo regions never do).
struct Cells {
  Pad pad;
  double* data = nullptr;
};
inline Cells cells_of(const Pad& p, double* buf, double* side, const Ix& lo, const Ix& hi) {
  if (!p.is_beside(lo, hi)) return {p, buf};
  return {p.side_layout(lo[p.dims - 1] >= 0), side};
}

// Copies a row of n doubles: inline for the short rows of halos and fixed boundaries (a face
// across the last dimension is one point per row), a library copy for long ones.
inline void copy_row(double* __restrict dst, const double* __restrict src, std::size_t n) {
  if (n == 1) {  // a face across the last dimension: the loop below would become a memmove call
    *dst = *src;
    return;
  }
  if (n >= 16) {
    std::memcpy(dst, src, n * sizeof(double));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

inline void pack_box(const Pad& p, const double* buf, const Ix& lo, const Ix& hi,
                     double* packed) {
  for_each_box_row(p, lo, hi, [&](std::ptrdiff_t at, std::size_t k, std::size_t len) {
    copy_row(packed + k, buf + at, len);
  });
}

// The inverse of pack_box.
inline void unpack_box(const Pad& p, double* buf, const Ix& lo, const Ix& hi,
                       const double* packed) {
  for_each_box_row(p, lo, hi, [&](std::ptrdiff_t at, std::size_t k, std::size_t len) {
    copy_row(buf + at, packed + k, len);
  });
}

// Copies the box [slo, shi) of buffer `src` (layout ps) onto the box of the same shape that
// starts at dlo in buffer `dst` (layout pd, whose strides may differ: uneven blocks).
inline void copy_box_between(const Pad& ps, const double* src, const Ix& slo, const Ix& shi,
                             const Pad& pd, double* dst, const Ix& dlo) {
  for_each_box_row(ps, slo, shi, pd, dlo,
                   [&](std::ptrdiff_t from, std::ptrdiff_t to, std::size_t len) {
                     copy_row(dst + to, src + from, len);
                   });
}

// The sender's edge region of width h towards direction o (each o[i] in {-1, 0, 1}).
inline void send_box(const Pad& p, std::ptrdiff_t h, const Ix& o, Ix& lo, Ix& hi) {
  for (std::size_t i = 0; i < p.dims; ++i) {
    lo[i] = o[i] > 0 ? p.ext[i] - h : 0;
    hi[i] = o[i] < 0 ? h : p.ext[i];
  }
}

// The receiver's halo region of width h towards the neighbour in direction r.
inline void halo_box(const Pad& p, std::ptrdiff_t h, const Ix& r, Ix& lo, Ix& hi) {
  for (std::size_t i = 0; i < p.dims; ++i) {
    lo[i] = r[i] < 0 ? -h : r[i] > 0 ? p.ext[i] : 0;
    hi[i] = r[i] < 0 ? 0 : r[i] > 0 ? p.ext[i] + h : p.ext[i];
  }
}

// Adds to `out` the directions t in {-1,0,1}^d \ 0 whose neighbour region an offset of `nb`
// reaches: every non-zero t[i] has the sign of o[i]. every: all of them (an extended range,
// as temporal blocking computes, reads every corner).
inline void add_directions(std::size_t d, const std::vector<Offset>& nb, bool every,
                           std::set<Ix>& out) {
  Ix lo{}, hi{};
  for (std::size_t i = 0; i < d; ++i) {
    lo[i] = -1;
    hi[i] = 2;
  }
  for_each_point(d, lo, hi, [&](const Ix& t) {
    if (std::all_of(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(d),
                    [](std::ptrdiff_t v) { return v == 0; }))
      return;
    if (every) {
      out.insert(t);
      return;
    }
    for (const Offset& o : nb) {
      bool ok = true;
      for (std::size_t i = 0; i < d && ok; ++i)
        ok = t[i] == 0 || (t[i] < 0 && o[i] < 0) || (t[i] > 0 && o[i] > 0);
      if (ok) {
        out.insert(t);
        return;
      }
    }
  });
}

// Block c's number when `blocks` (counts per dimension, d of them) are numbered row-major.
inline std::size_t block_index(std::size_t d, const std::vector<std::size_t>& blocks,
                               const Ix& c) {
  std::size_t i = 0;
  for (std::size_t k = 0; k < d; ++k) i = i * blocks[k] + static_cast<std::size_t>(c[k]);
  return i;
}

// The neighbour n of block c in direction o, or false beyond a fixed (not periodic) boundary.
inline bool block_neighbour(std::size_t d, const std::vector<std::size_t>& blocks,
                            bool periodic, const Ix& c, const Ix& o, Ix& n) {
  for (std::size_t k = 0; k < d; ++k) {
    std::ptrdiff_t v = c[k] + o[k];
    const auto g = static_cast<std::ptrdiff_t>(blocks[k]);
    if (v < 0 || v >= g) {
      if (!periodic) return false;
      v = (v + g) % g;
    }
    n[k] = v;
  }
  return true;
}

// The halos the block at c exports: for every direction r its readers read from (`dirs`), it
// sends towards o = -r when a block lies there. f(o, points in the send box of depth h, o as
// "a,b,..." for location names).
template <class Dirs, class F>
void for_each_export(const Pad& p, std::ptrdiff_t h, const Dirs& dirs,
                     const std::vector<std::size_t>& blocks, bool periodic, const Ix& c, F&& f) {
  for (const Ix& r : dirs) {
    Ix o{}, n{};
    for (std::size_t k = 0; k < p.dims; ++k) o[k] = -r[k];
    if (!block_neighbour(p.dims, blocks, periodic, c, o, n)) continue;
    Ix lo{}, hi{};
    send_box(p, h, o, lo, hi);
    std::string tag;
    for (std::size_t k = 0; k < p.dims; ++k) tag += (k ? "," : "") + std::to_string(o[k]);
    f(o, box_count(p.dims, lo, hi), tag);
  }
}

}  // namespace ordo::stencil::geometry
