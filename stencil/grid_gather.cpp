// A blocked grid collected onto one rank or every rank (grid_gather.hpp): one gathered piece
// per block, its padded buffer from its home; a receiving rank copies each block's owned
// points into the global grid (BlockedGrid::gather).
#include "stencil/grid_gather.hpp"

#include <cstring>

namespace ordo::stencil::core {

std::vector<double> gather_grid(Runtime& runtime, const BlockedGrid& grid,
                                const Placement& placement,
                                const std::function<const double*(std::size_t)>& padded,
                                unsigned to, const std::string& what) {
  const std::string who = "gather of " + what;
  runtime.check_gather(to, who);
  if (runtime.ranks() > 1 && !placement.placed)
    throw Error(who + ": the blocks are not placed on ranks yet; call place(runtime) (or run) "
                "first, then set the blocks each rank holds");
  const unsigned rank = runtime.rank();
  std::vector<GatherPiece> pieces(grid.count());
  std::vector<const double*> held(grid.count(), nullptr);
  for (std::size_t b = 0; b < grid.count(); ++b) {
    pieces[b] = {grid.block(b).pad.count * sizeof(double), placement.placed ? placement.home[b] : 0};
    if (placement.holds(b)) held[b] = padded(b);
  }
  std::vector<double> out;
  if (to == kAllRanks || to == rank) out.resize(grid.points());
  runtime.gather_pieces(
      who, what, pieces, to,
      [&](std::size_t b, std::span<std::byte> dst) {
        std::memcpy(dst.data(), held[b], dst.size());
      },
      [&](std::size_t b, std::span<const std::byte> src) {
        grid.gather(b, reinterpret_cast<const double*>(src.data()), out);
      });
  return out;
}

}  // namespace ordo::stencil::core
