// Relaunch support for programs that write checkpoints (docs/checkpoint.md, "Relaunching by
// itself").
#pragma once

#include <cstdint>
#include <string>

#include <ordo/ordo.hpp>

namespace ordo {

// runtime.restart(graph, dir) when this job is a relaunch (ordorun --restarts after a rank died
// sets ORDO_RELAUNCH) and `dir`, the program's checkpoint directory, holds a complete
// checkpoint; otherwise 0 and nothing loaded, so that a first launch, or a relaunch before any
// checkpoint was complete, runs from the start. Call it where restart would be called (every
// rank, before the graph's first run). Rank 0 says on stderr from which iteration it resumed,
// on how many ranks.
std::uint64_t resume(Runtime& runtime, Graph& graph, const std::string& dir);

}  // namespace ordo
