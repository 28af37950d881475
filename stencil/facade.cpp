// The facades' one core (facade.hpp): Stencil and Pipeline call these with their own buffers.
#include "stencil/facade.hpp"

#include <cstring>

namespace ordo::stencil::core {

void place_blocks(Placement& placement, const BlockedGrid& grid, const Graph& graph, unsigned rank,
                  unsigned ranks, const std::function<void(std::size_t, unsigned)>& set_home,
                  const std::function<unsigned(std::size_t)>& home_of) {
  placement.home = grid.place(graph, ranks, set_home, home_of);
  placement.rank = rank;
  placement.placed = true;
}

BoxFill Facade::from_global(std::span<const double> global, const std::vector<std::size_t>& size,
                            const std::string& call) const {
  if (global.size() != grid_.points())
    throw Error(who_ + ": " + call + " got " + std::to_string(global.size()) +
                " values for a grid of " + geometry::join(size) + " = " +
                std::to_string(grid_.points()));
  return core::from_global(global, size);
}

void Facade::check_given(bool given, const std::string& call) const {
  if (!given) throw Error(who_ + ": " + call + " got an empty function");
}

void Facade::visit_held(const BoxVisit& visit, const Padded& padded) const {
  for (std::size_t b = 0; b < grid_.count(); ++b)
    if (placement_.holds(b)) grid_.visit(b, padded(b), visit);
}

std::vector<double> Facade::get(const Padded& padded, const std::string& call,
                                const std::string& gather_args) const {
  for (std::size_t b = 0; b < grid_.count(); ++b)
    if (!placement_.holds(b))
      throw Error(who_ + ": " + call +
                  " across ranks: this rank holds only its own blocks "
                  "(block " +
                  std::to_string(b) + " lives on rank " + std::to_string(placement_.home[b]) +
                  "); collect the grid with gather(runtime, " + gather_args +
                  "rank) or gather(runtime, " + gather_args +
                  "ordo::kAllRanks) on every rank, or read this rank's blocks with get_blocks()");
  std::vector<double> out(grid_.points());
  for (std::size_t b = 0; b < grid_.count(); ++b) grid_.gather(b, padded(b), out);
  return out;
}

// One gathered piece per block, its padded buffer from its home, as it is, halo included; a
// receiving rank copies each block's owned points into the global grid (BlockedGrid::gather).
std::vector<double> Facade::gather(Runtime& runtime, unsigned to, const Padded& padded,
                                   const std::string& what) const {
  const std::string who = "gather of " + what;
  runtime.check_gather(to, who);
  if (runtime.ranks() > 1 && !placement_.placed)
    throw Error(who +
                ": the blocks are not placed on ranks yet; call place(runtime) (or run) "
                "first, then set the blocks each rank holds");
  const unsigned rank = runtime.rank();
  std::vector<GatherPiece> pieces(grid_.count());
  std::vector<const double*> held(grid_.count(), nullptr);
  for (std::size_t b = 0; b < grid_.count(); ++b) {
    pieces[b] = {grid_.block(b).pad.count * sizeof(double),
                 placement_.placed ? placement_.home[b] : 0};
    if (placement_.holds(b)) held[b] = padded(b);
  }
  std::vector<double> out;
  if (to == kAllRanks || to == rank) out.resize(grid_.points());
  runtime.gather_pieces(
      who, what, pieces, to,
      [&](std::size_t b, std::span<std::byte> dst) {
        std::memcpy(dst.data(), held[b], dst.size());
      },
      [&](std::size_t b, std::span<const std::byte> src) {
        grid_.gather(b, reinterpret_cast<const double*>(src.data()), out);
      });
  return out;
}

unsigned Facade::home_rank(std::size_t block,
                           const std::function<unsigned(std::size_t)>& home_of) const {
  if (block >= grid_.count())
    throw Error(who_ + ": block " + std::to_string(block) + " out of range; the " + kind_ +
                " has " + std::to_string(grid_.count()));
  return placement_.placed ? placement_.home[block] : home_of(block);
}

}  // namespace ordo::stencil::core
