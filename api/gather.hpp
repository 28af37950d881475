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

// One piece of what is gathered: `bytes` bytes that rank `home` provides.
struct GatherPiece {
  std::size_t bytes = 0;
  unsigned home = 0;
};

// Throws Error unless `to` is a rank of the job or kAllRanks, and unless called from outside
// any task body. `what` opens the message ("Runtime::gather of location 'u'").
void check_gather(const Runtime& runtime, unsigned to, const std::string& what);

// Collective: every rank calls it with the same pieces, `to` and `name`, between runs. `what`
// opens error messages. Each
// piece's home rank gives its bytes (fill(i, destination), on a worker of that rank during the
// gather's run: it must not call Graph::data) and every receiving rank (`to`, or all with
// kAllRanks) gets them (take(i, bytes), likewise). Across ranks this runs a small graph named
// "ordo.gather[" + name + "]...": the data moves on the transport's data plane, the engine's
// graph check refuses ranks that gather different things, and a rank that fails ends it on
// every rank. On one rank the pieces go from fill to take directly.
void gather_pieces(Runtime& runtime, const std::string& what, const std::string& name,
                   std::span<const GatherPiece> pieces, unsigned to,
                   const std::function<void(std::size_t, std::span<std::byte>)>& fill,
                   const std::function<void(std::size_t, std::span<const std::byte>)>& take);

}  // namespace ordo::detail
