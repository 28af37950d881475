// Checkpoints of a graph's locations between iterations, and the restart from them
// (docs/checkpoint.md). A checkpoint is a directory DIR/ckpt-<iteration> holding one part per
// rank (rank-<r>.part: that rank's home locations) and a manifest that rank 0 writes last,
// once every rank's part is on disk: without the manifest the checkpoint does not count.
// Every file is written atomically (a temporary file beside it, fsync, rename). Files are read
// as hostile input: every size is checked against the file and the graph before anything is
// read into a location.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "api/checkpoint_manifest.hpp"
#include "runtime/engine.hpp"
#include "runtime/graph.hpp"

namespace ordo::detail {

// Creates `dir` if it is missing and checks that this process can write there; throws Error
// naming the setting otherwise (called when the Runtime is built, so a bad directory fails
// before any iteration runs).
void prepare_checkpoint_dir(const std::string& dir);

// Collective (a pause of Engine::run, every rank): writes this rank's part of the checkpoint of
// `graph` after `iteration`, then rank 0 the manifest, then removes the older checkpoints.
// Returns "" once the checkpoint is complete, else what went wrong (the same on every rank).
std::string write_checkpoint(rt::Engine& engine, const rt::Graph& graph, const std::string& dir,
                             std::uint64_t iteration);

// Checks this rank's home locations after a checkpoint filled them and before anything reads
// them: "" or what is wrong. Layers that keep state of their own inside locations (the stencil
// layer's block headers: steps done, buffer shifts, which become pointer offsets) give one,
// so that a lying checkpoint is refused instead of read out of bounds.
using RestoredCheck = std::function<std::string(const rt::Engine&, const rt::Graph&)>;

// Collective (the engine's `load`, every rank): fills this rank's home locations from the
// newest complete checkpoint in `dir`, runs `check` on them, and sets
// graph.first_iteration() to its iteration. Returns "" on success, else why the checkpoint
// cannot be used (the same on every rank).
std::string load_checkpoint(rt::Engine& engine, rt::Graph& graph, const std::string& dir,
                            const RestoredCheck& check = {});

}  // namespace ordo::detail
