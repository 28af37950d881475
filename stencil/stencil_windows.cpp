// Group::windows of the in-place plan (docs/stencil-in-place.md, "Temporal blocking",
// "Windows are rings mapped twice", "Strips"): a group of several steps as one wavefront along
// dimension 0, step s lagging s*h planes behind step 0, strip by strip along dimension 1.
// Step s < steps-1 writes into a window of its own, a ring of planes mapped twice back to back
// (stencil/mirrored_ring.hpp), so that the planes a kernel call reads are contiguous wherever the
// ring wraps; step 0 reads the buffer, step s > 0 the window of step s-1, and the last step
// writes into the buffer directly: step 0 has passed those planes by (steps-1)*h >= h, so
// nobody reads their old values again. Beyond a fixed boundary a window holds what the buffer
// holds there (the fixed values), copied. Strip t covers the last step's rows
// [t*strip_rows, (t+1)*strip_rows) and, at step s, those rows moved up by (steps-1-s)h, so
// step s of strip t+1 reads 2h rows of step s-1 that strip t computed: they are carried in a
// per-step store (2h rows of every plane).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "stencil/mirrored_ring.hpp"
#include "stencil/stencil_in_place.hpp"

namespace ordo::stencil {

namespace {

using in_place::addr;
using in_place::Base;
using in_place::base_of;
using in_place::copy_box;
using in_place::is_empty;
using in_place::Ix;
using in_place::Pad;
}  // namespace

// One group's wavefront through windows over one block: the numbers the plan gives it, the
// windows this thread lends it, and the rows each strip holds.
class Stencil::Impl::WindowedStrips {
 public:
  WindowedStrips(const Impl& m, std::size_t b, std::span<double> main, Block& blk,
                 std::uint64_t rot, std::size_t steps, const std::vector<Ix>& slo,
                 const std::vector<Ix>& shi)
      : m_(m),
        b_(b),
        main_(main),
        blk_(blk),
        rot_(rot),
        steps_(steps),
        slo_(slo),
        shi_(shi),
        pad_(m.grid.block(b).pad),
        d_(m.dims),
        h_(static_cast<std::ptrdiff_t>(m.spec.halo)),
        w_(m.plan.windows(pad_, steps)) {}

  // Runs the group; false, with nothing run, where it has no windows: none fit even one-row
  // strips, or a ring cannot be mapped (thread_ring said why).
  bool run();

 private:
  // Works out what each step reads beyond its range and the planes it covers.
  void measure();
  // Strip t's first row at step s: the last step's rows [t*strip_rows, (t+1)*strip_rows) of
  // the block, skewed by h per step before it (clipped to the step's range).
  std::ptrdiff_t edge(std::ptrdiff_t t, std::size_t s) const;
  // Window s of strip t holds rows [held_lo(t, s), held_hi(t, s)): what step s+1 of the strip
  // reads, and above it the rows step s computes. Below the computed rows they were computed
  // by earlier strips: carried (at most 2h rows), or fixed (a rim, copied from the buffer).
  std::ptrdiff_t held_lo(std::ptrdiff_t t, std::size_t s) const { return edge(t, s + 1) - h_; }
  std::ptrdiff_t held_hi(std::ptrdiff_t t, std::size_t s) const {
    return std::max(edge(t + 1, s), edge(t + 1, s + 1) + h_);
  }
  // A box of planes [p0, p1), rows [r0, r1) and step s's window section beyond dimension 1
  // (its range and the fixed rims). The columns beside the rows (at fixed ends: fixed values)
  // are read where set() put them, by every step, and copied to no window: a box stops at the
  // rows' ends there.
  void box(std::size_t s, std::ptrdiff_t p0, std::ptrdiff_t p1, std::ptrdiff_t r0,
           std::ptrdiff_t r1, Ix& lo, Ix& hi) const;
  // Window s as a base in which plane p lies in its slot of the ring and the ring's other
  // planes follow in the mirror.
  Base window_base(std::size_t s, std::ptrdiff_t p) const;
  // Plane p's slot of step s's carry, as a base for the rows from `ref` on (2h of them).
  Base carry_base(std::size_t s, std::ptrdiff_t p, std::ptrdiff_t ref) const;
  // The fixed values step s+1 reads in window s of strip t, beyond fixed ends of the grid
  // around the rows the window holds: 3^(d-1) - 1 regions of a plane at most (along
  // dimension 1 the held rows beyond the range), the same for every plane the step computes;
  // the planes beyond the grid are copied whole (copy_rims).
  void find_rims(std::ptrdiff_t t, std::size_t s);
  void copy_rims(std::ptrdiff_t t, std::size_t s, std::ptrdiff_t a, std::ptrdiff_t z) const;
  // Step s of strip t over the planes [a, z) of its wavefront position.
  void run_step(std::ptrdiff_t t, std::size_t s, std::ptrdiff_t a, std::ptrdiff_t z);

  const Impl& m_;
  const std::size_t b_;
  const std::span<double> main_;
  Block& blk_;
  const std::uint64_t rot_;
  const std::size_t steps_;
  const std::vector<Ix>& slo_;
  const std::vector<Ix>& shi_;
  const Pad& pad_;
  const std::size_t d_;
  const std::ptrdiff_t h_;
  const InPlacePlan::Windows w_;
  // What step s+1 reads beyond step s's range, the planes each step covers ([from, to)) and
  // the wavefront's ([first_plane, end_plane)).
  std::vector<Ix> rim_lo_, rim_hi_;
  std::vector<std::ptrdiff_t> from_, to_;
  std::ptrdiff_t first_plane_ = 0, end_plane_ = 0;
  std::ptrdiff_t strips_ = 1;
  std::ptrdiff_t row_ = 0;    // doubles per row (dimension 1)
  double* target_ = nullptr;  // the buffer the group overwrites (with one level, the only one)
  Base target_base_ = 0;
  std::vector<double*> window_, carry_;
  std::vector<std::ptrdiff_t> held_;  // the row at the start of each window's planes
  std::vector<std::vector<std::pair<Ix, Ix>>> rims_;
};

void Stencil::Impl::WindowedStrips::measure() {
  const std::size_t n = steps_;
  // What step s+1 reads beyond step s's range: the fixed values beyond a fixed end of the
  // grid, where the ranges stop shrinking (elsewhere step s's range is step s+1's plus h).
  rim_lo_.assign(n, Ix{});
  rim_hi_.assign(n, Ix{});
  for (std::size_t s = 0; s + 1 < n; ++s)
    for (std::size_t k = 0; k < d_; ++k) {
      rim_lo_[s][k] = slo_[s][k] - (slo_[s + 1][k] - h_);
      rim_hi_[s][k] = shi_[s + 1][k] + h_ - shi_[s][k];
    }
  // The planes each step covers: its range, and for a window the fixed planes beyond it.
  from_.resize(n);
  to_.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    from_[s] = slo_[s][0] - rim_lo_[s][0];
    to_[s] = shi_[s][0] + rim_hi_[s][0];
    const auto lag = static_cast<std::ptrdiff_t>(s) * h_;
    first_plane_ = s == 0 ? from_[s] + lag : std::min(first_plane_, from_[s] + lag);
    end_plane_ = s == 0 ? to_[s] + lag : std::max(end_plane_, to_[s] + lag);
  }
  held_.assign(n - 1, 0);
  rims_.resize(n - 1);
  row_ = d_ >= 2 ? pad_.stride[1] : 0;
  strips_ = d_ >= 2 ? (pad_.ext[1] + w_.strip_rows - 1) / w_.strip_rows : 1;
}

std::ptrdiff_t Stencil::Impl::WindowedStrips::edge(std::ptrdiff_t t, std::size_t s) const {
  if (d_ < 2) return 0;
  if (t <= 0) return slo_[s][1];
  if (t >= strips_) return shi_[s][1];
  return std::clamp(t * w_.strip_rows + static_cast<std::ptrdiff_t>(steps_ - 1 - s) * h_,
                    slo_[s][1], shi_[s][1]);
}

void Stencil::Impl::WindowedStrips::box(std::size_t s, std::ptrdiff_t p0, std::ptrdiff_t p1,
                                        std::ptrdiff_t r0, std::ptrdiff_t r1, Ix& lo,
                                        Ix& hi) const {
  lo[0] = p0;
  hi[0] = p1;
  if (d_ >= 2) {
    lo[1] = r0;
    hi[1] = r1;
  }
  for (std::size_t k = 2; k < d_; ++k) {
    lo[k] = slo_[s][k] - rim_lo_[s][k];
    hi[k] = shi_[s][k] + rim_hi_[s][k];
  }
  if (d_ >= 3) pad_.clip_to_rows(lo[d_ - 1], hi[d_ - 1]);
}

Base Stencil::Impl::WindowedStrips::window_base(std::size_t s, std::ptrdiff_t p) const {
  const auto ring = static_cast<std::ptrdiff_t>(w_.window_bytes / sizeof(double));
  const std::ptrdiff_t at = ((p - from_[s]) * pad_.stride[0] % ring + ring) % ring;
  const std::ptrdiff_t planes_below = pad_.low[0];  // planes below the block in its buffer
  return base_of(window_[s] + at,
                 (p + planes_below) * pad_.stride[0] + (held_[s] + pad_.low[1]) * row_);
}

Base Stencil::Impl::WindowedStrips::carry_base(std::size_t s, std::ptrdiff_t p,
                                               std::ptrdiff_t ref) const {
  Ix lo{}, hi{};
  box(s, p, p + 1, ref, ref + 2 * h_, lo, hi);
  return base_of(carry_[s] + (p - slo_[s][0]) * 2 * h_ * row_, pad_.index_of(lo));
}

void Stencil::Impl::WindowedStrips::find_rims(std::ptrdiff_t t, std::size_t s) {
  rims_[s].clear();
  Ix lo{}, hi{}, tlo{}, thi{};
  box(s, 0, 1, held_lo(t, s), held_hi(t, s), lo, hi);
  for (std::size_t k = 1; k < d_; ++k) {
    tlo[k] = -1;
    thi[k] = 2;
  }
  thi[0] = 1;
  geometry::for_each_point(d_, tlo, thi, [&](const Ix& c) {
    Ix rlo = lo, rhi = hi;
    bool any = false;
    for (std::size_t k = 1; k < d_; ++k) {
      if (c[k] < 0) rhi[k] = std::min(hi[k], slo_[s][k]);
      if (c[k] > 0) rlo[k] = std::max(lo[k], shi_[s][k]);
      if (c[k] == 0) {
        rlo[k] = k == 1 ? edge(t, s) : slo_[s][k];
        rhi[k] = k == 1 ? edge(t + 1, s) : shi_[s][k];
      }
      any = any || c[k] != 0;
    }
    if (any && !is_empty(d_, rlo, rhi)) rims_[s].emplace_back(rlo, rhi);
  });
}

void Stencil::Impl::WindowedStrips::copy_rims(std::ptrdiff_t t, std::size_t s, std::ptrdiff_t a,
                                              std::ptrdiff_t z) const {
  for (std::ptrdiff_t p = a; p < z; ++p) {
    const Base win = window_base(s, p);
    if (p < slo_[s][0] || p >= shi_[s][0]) {
      Ix lo{}, hi{};
      box(s, p, p + 1, held_lo(t, s), held_hi(t, s), lo, hi);
      copy_box(pad_, win, target_base_, lo, hi);
      continue;
    }
    for (auto [lo, hi] : rims_[s]) {
      lo[0] = p;
      hi[0] = p + 1;
      copy_box(pad_, win, target_base_, lo, hi);
    }
  }
}

void Stencil::Impl::WindowedStrips::run_step(std::ptrdiff_t t, std::size_t s, std::ptrdiff_t a,
                                             std::ptrdiff_t z) {
  const bool last = s + 1 == steps_;
  const std::ptrdiff_t r0 = edge(t, s), r1 = edge(t + 1, s);  // the rows computed
  Ix lo{}, hi{};
  // The rows below the strip's that the next step reads, from the strip before.
  const std::ptrdiff_t ca = std::max(a, slo_[s][0]), cz = std::min(z, shi_[s][0]);
  if (!last && t > 0 && d_ >= 2)
    for (std::ptrdiff_t p = ca; p < cz; ++p) {
      box(s, p, p + 1, std::max(held_[s], slo_[s][1]), r0, lo, hi);
      copy_box(pad_, window_base(s, p), carry_base(s, p, r0 - 2 * h_), lo, hi);
    }
  blk_.in[0] = s == 0 ? target_ + pad_.base : addr(window_base(s - 1, ca - h_), pad_.base);
  blk_.out = last ? target_ + pad_.base : addr(window_base(s, ca), pad_.base);
  blk_.step = rot_ + s;
  blk_.lo = slo_[s];
  blk_.hi = shi_[s];
  blk_.lo[0] = ca;
  blk_.hi[0] = cz;
  if (d_ >= 2) {
    blk_.lo[1] = r0;
    blk_.hi[1] = r1;
  }
  if (!is_empty(d_, blk_.lo, blk_.hi)) m_.kernel(blk_);
  if (last) return;
  copy_rims(t, s, a, z);
  // The rows the next strip's steps read from this one: the top 2h (or fewer) below where the
  // next strip starts, computed here or carried through a narrow strip.
  if (t + 1 < strips_ && d_ >= 2)
    for (std::ptrdiff_t p = ca; p < cz; ++p) {
      const std::ptrdiff_t top = edge(t + 1, s);
      box(s, p, p + 1, std::max(held_lo(t + 1, s), slo_[s][1]), top, lo, hi);
      copy_box(pad_, carry_base(s, p, top - 2 * h_), window_base(s, p), lo, hi);
    }
}

bool Stencil::Impl::WindowedStrips::run() {
  if (w_.strip_rows <= 0) return false;
  window_.assign(steps_ - 1, nullptr);
  for (std::size_t s = 0; s + 1 < steps_; ++s) {
    window_[s] = detail_stencil::thread_ring(s, w_.window_bytes);
    if (window_[s] == nullptr) return false;
  }
  measure();
  target_ = m_.level_data(b_, main_, rot_, 1);
  target_base_ = base_of(target_, 0);
  if (pad_.halo_beside)
    in_place::point_at_side(blk_, 0, pad_, m_.side_data(b_, main_, m_.buffer_index(rot_, 1)));
  // Slot 1 is sweep_planes' deferred rows.
  carry_.assign(steps_ - 1, nullptr);
  if (strips_ > 1)
    for (std::size_t s = 0; s + 1 < steps_; ++s)
      carry_[s] = detail_stencil::thread_scratch(
          2 + s, static_cast<std::size_t>((shi_[s][0] - slo_[s][0]) * 2 * h_ * row_));
  const std::ptrdiff_t unit = w_.unit_planes;
  for (std::ptrdiff_t t = 0; t < strips_; ++t) {
    for (std::size_t s = 0; s + 1 < steps_; ++s) {
      held_[s] = held_lo(t, s);
      find_rims(t, s);
    }
    for (std::ptrdiff_t q = first_plane_; q < end_plane_; q += unit) {
      for (std::size_t s = 0; s < steps_; ++s) {
        const auto lag = static_cast<std::ptrdiff_t>(s) * h_;
        const std::ptrdiff_t a = std::max(from_[s], q - lag), z = std::min(to_[s], q + unit - lag);
        if (a < z) run_step(t, s, a, z);
      }
    }
  }
  return true;
}

bool Stencil::Impl::sweep_windows(std::size_t b, std::span<double> main, Block& blk,
                                  std::uint64_t rot, std::size_t steps, const std::vector<Ix>& slo,
                                  const std::vector<Ix>& shi) const {
  return WindowedStrips(*this, b, main, blk, rot, steps, slo, shi).run();
}

}  // namespace ordo::stencil
