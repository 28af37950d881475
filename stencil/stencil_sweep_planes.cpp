// Sweep::by_planes of the in-place plan (docs/stencil-in-place.md, "One step: a shifted
// sweep"): the one-step sweep moves the block by h + unit_planes planes, one unit of planes
// (and, in 3-D and up, a slab's rows) per kernel call; a slab's last h rows wait in a store
// until the next slab has read their old values.
#include <algorithm>
#include <cstdint>

#include "stencil/stencil_in_place.hpp"

namespace ordo::stencil {

using in_place::base_of;
using in_place::copy_box;
using in_place::is_empty;
using in_place::Ix;
using in_place::Pad;

void Stencil::Impl::sweep_planes(std::size_t b, std::span<double> main, Block& blk,
                                 std::uint64_t rot, const Ix& lo, const Ix& hi,
                                 std::span<const LateFace> late, bool down, double* out) const {
  const Pad& pad = grid.block(b).pad;
  const auto h = static_cast<std::ptrdiff_t>(spec.halo);
  const std::ptrdiff_t unit = plan.unit_planes;  // planes per kernel call
  const in_place::Base out_base = base_of(out, 0);
  // Slabs of `slab` rows along dimension 1 (d >= 3) keep the planes a unit reaches in half the L2
  // (or tile_bytes). A slab's last h rows are read, old, by the next slab, so their new values
  // wait in a store (h rows per plane) until that slab has passed the plane they go to.
  const std::ptrdiff_t slab = dims >= 3 ? plan.slab_rows(pad, lo[1], hi[1]) : 0;
  const std::ptrdiff_t planes = hi[0] - lo[0];
  const std::ptrdiff_t units = (planes + unit - 1) / unit;
  const std::ptrdiff_t slot = dims >= 3 ? h * pad.stride[1] : 0;  // one plane's deferred rows
  double* const deferred =
      dims >= 3 && slab < hi[1] - lo[1]
          ? detail_stencil::thread_scratch(1, static_cast<std::size_t>(planes * slot))
          : nullptr;
  auto run = [&](const Ix& ulo, const Ix& uhi, double* o) {
    if (is_empty(dims, ulo, uhi)) return;
    blk.lo = ulo;
    blk.hi = uhi;
    blk.out = o + pad.base;
    kernel(blk);
  };
  // Whether the previous slab deferred its last rows, [held - h, held) (negative rows too: a
  // temporal-blocking step's range reaches into the halo).
  bool holding = false;
  std::ptrdiff_t held = 0;
  const std::ptrdiff_t j_end = dims >= 3 ? hi[1] : lo[1] + 1;
  for (std::ptrdiff_t j0 = lo[1]; j0 < j_end; j0 += dims >= 3 ? slab : 1) {
    const std::ptrdiff_t j1 = dims >= 3 ? std::min(j0 + slab, hi[1]) : hi[1];
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
        copy_box(pad, out_base, base_of(deferred + (next - lo[0]) * slot, pad.index_of(clo)), clo,
                 chi);
      }
    };
    // The late faces' planes unpacked so far for this slab's rows (and the h rows on either
    // side, which its kernel calls read too), in sweep order.
    std::ptrdiff_t unpacked = down ? lo[0] - h : hi[0] - 1 + h;
    const std::ptrdiff_t r0 = dims >= 3 ? j0 - h : 0, r1 = dims >= 3 ? j1 + h : 0;
    for (std::ptrdiff_t i = 0; i < units; ++i) {
      const std::ptrdiff_t a = lo[0] + (down ? i : units - 1 - i) * unit;
      const std::ptrdiff_t z = std::min(a + unit, hi[0]);
      // This unit reads planes [a - h, z + h): unpack those not yet, before the kernel does.
      if (!late.empty()) {
        for (; down ? unpacked < z + h : unpacked >= a - h; unpacked += down ? 1 : -1)
          for (const LateFace& f : late) unpack_late(b, main, rot, f, unpacked, r0, r1);
      }
      // Planes computed so far end at a - 1 (down) or begin at z (up): a deferred row of
      // plane q goes s = h + unit planes away, where this slab has read its last old value.
      commit_to(down ? std::min(a - 1 + unit, hi[0] - 1) : std::max(z - unit, lo[0]));
      Ix ulo = lo, uhi = hi;
      ulo[0] = a;
      uhi[0] = z;
      if (dims >= 3) {
        ulo[1] = j0;
        uhi[1] = defer ? j1 - h : j1;
      }
      run(ulo, uhi, out);
      if (defer) {  // unit is 1 here
        ulo[1] = j1 - h;
        uhi[1] = j1;
        run(ulo, uhi,
            reinterpret_cast<double*>(base_of(deferred + (a - lo[0]) * slot, pad.index_of(ulo))));
      }
    }
    commit_to(down ? hi[0] - 1 : lo[0]);
    holding = defer;
    held = j1;
  }
}

}  // namespace ordo::stencil
