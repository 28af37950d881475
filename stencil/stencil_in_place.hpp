// Helpers shared by the in-place sweeps (stencil_in_place.cpp and one file per strategy:
// stencil_sweep_planes.cpp, stencil_sweep_rows.cpp, stencil_wavefront.cpp,
// stencil_windows.cpp). Internal to the stencil layer; not installed.
#pragma once

#include <cstdint>

#include "stencil/stencil_impl.hpp"

namespace ordo::stencil::in_place {

using core::Ix;
using geometry::Pad;

// An address `base` such that base + pad.index_of(x) * 8 is point x, held as an integer: the window
// it describes covers only some planes, so base itself may lie outside any object. safety: it
// becomes a pointer only with an offset that lands inside the window (addr), or as a kernel's
// in/out pointer, to which the kernel adds such offsets.
using Base = std::uintptr_t;
inline Base base_of(const double* p, std::ptrdiff_t shift) {
  return reinterpret_cast<std::uintptr_t>(p) - static_cast<std::uintptr_t>(shift) * sizeof(double);
}
inline double* addr(Base base, std::ptrdiff_t at) {
  return reinterpret_cast<double*>(base + static_cast<std::uintptr_t>(at) * sizeof(double));
}

// Copies box [lo, hi) between two buffers of the layout `pad`.
inline void copy_box(const Pad& pad, Base dst, Base src, const Ix& lo, const Ix& hi) {
  geometry::for_each_box_row(pad, lo, hi, [&](std::ptrdiff_t at, std::size_t, std::size_t len) {
    geometry::copy_row(addr(dst, at), addr(src, at), len);
  });
}

inline bool is_empty(std::size_t d, const Ix& lo, const Ix& hi) {
  for (std::size_t k = 0; k < d; ++k)
    if (hi[k] <= lo[k]) return true;
  return false;
}

// Points level l of the kernel's block at the halo beside the rows of layout `pad` (its side
// array `side`), read through Row::before/after.
inline void point_at_side(Block& blk, std::size_t l, const Pad& pad, const double* side) {
  blk.layout.halo_before[l] = pad.west_of(side);
  blk.layout.halo_after[l] = pad.east_of(side);
  blk.layout.halo_row_step = pad.side_step;
}

}  // namespace ordo::stencil::in_place
