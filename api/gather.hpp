// The public gather's one mechanism (docs/distributed.md, "Gather"), shared by
// Runtime::gather, Runtime::gather_values, Stencil::gather and Pipeline::gather. Internal to
// api/.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace ordo::detail {

// One piece of what is gathered (the public Runtime::gather_pieces takes the same).
using ordo::GatherPiece;

// Throws Error unless `to` is a rank of the job or kAllRanks, and unless called from outside
// any task body. `what` opens the message ("Runtime::gather of location 'u'").
void check_gather(const Runtime& runtime, unsigned to, const std::string& what);

// How a gather's bytes travel between ranks (docs/distributed.md, "Gather"):
//   tree    up the control plane's binomial tree (tree.hpp: each rank collects its subtree's
//           pieces from its children) to rank 0, then down it again onto every rank, or from
//           rank 0 to the one receiving rank: a rank talks to its tree neighbours only (and
//           rank 0 to the receiver), so its endpoints do not grow with the ranks;
//   direct  each piece from its home straight to the receiving rank, which talks to every
//           home: each byte moves once, and no rank holds another's share on the way.
enum class GatherRoute { tree, direct };

// A gather onto every rank goes by the tree (each rank holds the whole result anyway, and
// the all-to-all made every rank talk to every rank); onto one rank, by the tree while the
// whole gather is at most kGatherTreeBytes (then latency, not bandwidth, bounds it), direct
// above (a rank halfway up the tree would hold half the data, and forwarding costs a copy and
// a hop per level).
inline constexpr std::size_t kGatherTreeBytes = 64 * 1024;
GatherRoute gather_route(std::span<const GatherPiece> pieces, unsigned to);

// The graph of a gather across `ranks` ranks (at least 2) by `route`, declared into `g`
// (empty) identically on every rank; `prefix` begins every name. Its one iteration calls
// fill(i, destination) for each piece on a worker of its home rank and take(i, bytes) for
// each piece, in piece order, on a worker of each receiving rank (`to`, or every rank with
// kAllRanks), one task per rank. fill, take and `pieces` must outlive the graph's run.
void declare_gather(Graph& g, const std::string& prefix, unsigned ranks,
                    std::span<const GatherPiece> pieces, unsigned to, GatherRoute route,
                    const std::function<void(std::size_t, std::span<std::byte>)>& fill,
                    const std::function<void(std::size_t, std::span<const std::byte>)>& take);

// Collective: every rank calls it with the same pieces, `to` and `name`, between runs. `what`
// opens error messages. Each
// piece's home rank gives its bytes (fill(i, destination), on a worker of that rank during the
// gather's run: it must not call Graph::data) and every receiving rank (`to`, or all with
// kAllRanks) gets them (take(i, bytes), likewise). Across ranks this runs a small graph named
// "ordo.gather[" + name + "]..." (declare_gather, by gather_route): the data moves on the
// transport's data plane, the engine's graph check refuses ranks that gather different
// things, and a rank that fails ends it on every rank. On one rank the pieces go from fill to
// take directly.
void gather_pieces(Runtime& runtime, const std::string& what, const std::string& name,
                   std::span<const GatherPiece> pieces, unsigned to,
                   const std::function<void(std::size_t, std::span<std::byte>)>& fill,
                   const std::function<void(std::size_t, std::span<const std::byte>)>& take);

}  // namespace ordo::detail
