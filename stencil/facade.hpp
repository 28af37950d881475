// What Stencil and Pipeline do alike as facades over one blocked grid (docs/stencil.md,
// "Uneven blocks and the blocked-grid core"): putting the blocks on ranks, checking what set() is
// given, reading the blocks this rank holds and collecting the whole grid, and telling where a
// block lives. Each facade says which of its buffers a call reads (`padded`) and how its calls are
// written in messages; the rest, refusals included, is written here once. Internal to the layer.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <ordo/stencil.hpp>

#include "stencil/blocked_grid.hpp"

namespace ordo::stencil::core {

// Block b's padded buffer (halo included) as this rank holds it.
using Padded = std::function<const double*(std::size_t b)>;

// Places `grid`'s blocks on `ranks` ranks (BlockedGrid::place): set_home(b, r) puts block b's
// locations on rank r, home_of(b) says where a graph that ran already put it. Then `placement`
// holds each block's rank and this rank.
void place_blocks(Placement& placement, const BlockedGrid& grid, const Graph& graph, unsigned rank,
                  unsigned ranks, const std::function<void(std::size_t, unsigned)>& set_home,
                  const std::function<unsigned(std::size_t)>& home_of);

class Facade {
 public:
  // `kind` ("stencil", "pipeline") and `name` open every message: "stencil 'u': ...".
  Facade(const char* kind, const std::string& name, const BlockedGrid& grid,
         const Placement& placement)
      : kind_(kind),
        who_(std::string(kind) + " '" + name + "'"),
        grid_(grid),
        placement_(placement) {}

  const std::string& who() const { return who_; }

  // A global array (C order over `size`) as a fill of each block's box; refuses one of
  // another size. `call` names the call in the message ("set()", "set(\"v\")").
  BoxFill from_global(std::span<const double> global, const std::vector<std::size_t>& size,
                      const std::string& call) const;
  // Refuses an empty fill or point function given to `call`.
  void check_given(bool given, const std::string& call) const;

  // get_blocks(): visit with the owned points of every block this rank holds.
  void visit_held(const BoxVisit& visit, const Padded& padded) const;
  // get(): the whole grid, refused on a rank that does not hold every block. `call` is how the
  // message writes the call ("get()"), `gather_args` the facade's gather's arguments before
  // the rank ("", "grid, ").
  std::vector<double> get(const Padded& padded, const std::string& call,
                          const std::string& gather_args) const;
  // gather(): the whole grid onto rank `to` (kAllRanks: every rank), empty on the other
  // ranks; collective (Runtime::gather_pieces). `what` names the gather in messages and in
  // its graph ("stencil 'u' level 0").
  std::vector<double> gather(Runtime& runtime, unsigned to, const Padded& padded,
                             const std::string& what) const;
  // home_rank(): where block `block` lives; before placement, home_of(block): where the graph
  // put its locations.
  unsigned home_rank(std::size_t block, const std::function<unsigned(std::size_t)>& home_of) const;

 private:
  const char* kind_;
  std::string who_;
  const BlockedGrid& grid_;
  const Placement& placement_;
};

}  // namespace ordo::stencil::core
