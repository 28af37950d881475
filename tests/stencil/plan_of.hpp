// The in-place plan a spec gets (stencil/stencil_plan.hpp), for the tests that check which
// strategy and numbers a stencil runs with, without running it.
#pragma once

#include <cstddef>

#include <ordo/bench.hpp>
#include <ordo/stencil.hpp>

#include "stencil/stencil_impl.hpp"
#include "stencil/stencil_plan.hpp"

namespace plan_test {

struct Planned {
  ordo::stencil::InPlacePlan plan;
  ordo::stencil::core::BlockedGrid grid;  // padded as the plan pads it
};

// The plan of spec s as a Stencil would make it, with an L2 of `l2` bytes (0: this machine's)
// for the budgets the spec does not give.
inline Planned plan_of(ordo::stencil::Spec s, ordo::stencil::KernelTraits traits = {},
                       std::size_t l2 = 0) {
  namespace st = ordo::stencil;
  Planned p;
  p.grid = st::core::BlockedGrid("stencil '" + s.name + "'", s.size, s.blocks,
                                 s.boundary == st::Boundary::periodic);
  s = st::with_defaults(std::move(s));
  st::validate(s, p.grid);
  if (l2 == 0)
    l2 = ordo::bench::cache_sizes().l2 ? ordo::bench::cache_sizes().l2 : std::size_t{1} << 20;
  p.plan = st::plan_in_place(
      s, traits, p.grid, s.schedule.tile_bytes ? s.schedule.tile_bytes : st::default_tile_bytes(),
      l2);
  return p;
}

// Whether spec s runs a star's wavefronts of moves in strips of rows: some block's strips are
// narrower than its rows.
inline bool planned_strips(const ordo::stencil::Spec& s,
                           const ordo::stencil::KernelTraits& traits) {
  const Planned p = plan_of(s, traits);
  if (p.plan.group != ordo::stencil::InPlacePlan::Group::wavefront) return false;
  for (std::size_t b = 0; b < p.grid.count(); ++b) {
    const auto& pad = p.grid.block(b).pad;
    if (p.plan.wavefront_strip_rows(pad, p.plan.wavefront_steps) < pad.ext[1]) return true;
  }
  return false;
}

}  // namespace plan_test
