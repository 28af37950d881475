// What a stencil does once Runtime::restart has loaded its blocks (Graph::on_restore): checks
// their headers, then rebuilds the halo exchange, which the checkpoint left out.
//
// The exchange depends on which rank holds which block (stencil_impl.hpp: exports towards
// other ranks, halo tasks between blocks of one rank), so the layer marks its export locations
// and its export and halo tasks derived (Graph::set_derived): the checkpoint's fingerprint
// leaves them out and its parts hold only the blocks, which restart on any rank count. At an
// iteration's end the uninterrupted run has packed every export and copied every same-rank halo
// from the blocks as they are now; the rebuild does the same from the restored blocks, so the
// next step reads exactly what it would have. A halo from a block now on another rank is
// unpacked from its export by the next compute task anyway; the rest of a block (its fixed
// halo beyond the grid's ends, its header) is in the checkpoint.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include <ordo/stencil.hpp>

#include "stencil/stencil_impl.hpp"

namespace ordo::stencil {

namespace {
std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}
}  // namespace

std::string Stencil::Impl::check_restored(const Restored& restored) const {
  const std::size_t spare = plan.shift_planes != 0 ? plan.spare_units : 0;
  std::optional<double> steps;
  for (std::size_t b = 0; b < grid.count(); ++b) {
    if (!restored.is_home(locs[b].main)) continue;
    const double* h = restored.data(locs[b].main).data();
    const std::string block =
        "stencil '" + spec.name + "': block " + spec.name + "[" + grid.block(b).tag + "]";
    // Whole, at most 2^53 (every step count a double holds exactly), the same in every
    // block: all stop at the same iteration gate.
    if (!(h[0] >= 0 && h[0] <= 9007199254740992.0 && std::floor(h[0]) == h[0]))
      return block + " says " + number(h[0]) + " steps done, which is no step count";
    if (steps && *steps != h[0])
      return block + " says " + number(h[0]) + " steps done, another block " + number(*steps);
    steps = h[0];
    // Where each buffer's block lies (stencil_impl.hpp, kHeader): at rest, or moved by
    // in-place sweeps by a whole number of units up to the buffer's room; nothing else.
    for (std::size_t i = 0; i < buffer_count; ++i) {
      const double mark = h[1 + i];
      if (mark >= 0 && mark <= static_cast<double>(spare) && std::floor(mark) == mark) continue;
      std::string why = block + " marks where it lies in buffer " + std::to_string(i) + " as " +
                        number(mark) + ", where a sweep marks " +
                        (spare > 0 ? "0 (where set() puts it) to " + std::to_string(spare) +
                                         " (moved by that many units towards the buffer's start "
                                         "by in-place sweeps)"
                                   : std::string("0 (this traversal never moves a block)"));
      if (spare > 0 && mark == -static_cast<double>(plan.shift_planes))
        why += "; an older ordo marked a moved block -" + std::to_string(plan.shift_planes) +
               ", so an older ordo wrote this checkpoint: run from the start, or finish with "
               "the ordo that wrote it (docs/checkpoint.md)";
      return why;
    }
  }
  return "";
}

void Stencil::Impl::rebuild_exchange(Restored& restored) const {
  // The export tasks' work, from the buffers (no stage: what a staged export holds is the
  // block's edge, which the buffer holds too).
  for (std::size_t b = 0; b < grid.count(); ++b)
    if (!halo.exports[b].empty() && restored.is_home(locs[b].main))
      pack_exports(b, restored.data(locs[b].main),
                   [&](Location<double> l) { return restored.write(l); });
  // The halo tasks' work: both blocks of a push are on this rank (else it would be an export).
  for (const Push& p : pushes)
    if (restored.is_home(locs[p.from].main))
      push_halo(p, restored.data(locs[p.from].main), restored.write(locs[p.to].main));
}

std::string Stencil::Impl::restore(Restored& restored) const {
  if (std::string e = check_restored(restored); !e.empty()) return e;
  rebuild_exchange(restored);
  return "";
}

}  // namespace ordo::stencil
