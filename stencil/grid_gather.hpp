// A blocked grid collected onto one rank or every rank, for Stencil::gather and
// Pipeline::gather (grid_gather.cpp). Internal to api/.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "stencil/blocked_grid.hpp"

namespace ordo::stencil::core {

// The grid's owned points as one global array (C order) on rank `to`, or on every rank with
// kAllRanks; empty on the other ranks. Collective (gather.hpp). Each block's padded buffer
// travels from its home (placement.home) as it is, halo included; `padded(b)` gives it for a
// block this rank holds, on the caller's thread. `what` names the gather in messages and in
// its graph ("stencil 'u' level 0").
std::vector<double> gather_grid(Runtime& runtime, const BlockedGrid& grid,
                                const Placement& placement,
                                const std::function<const double*(std::size_t)>& padded,
                                unsigned to, const std::string& what);

}  // namespace ordo::stencil::core
