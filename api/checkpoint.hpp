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

// The lock of a checkpoint directory, held by one rank of the job that writes there (flock on
// DIR/lock, released when the holder goes, also when it is killed).
class CheckpointLock {
 public:
  CheckpointLock() = default;
  ~CheckpointLock();
  CheckpointLock(CheckpointLock&& o) noexcept;
  CheckpointLock& operator=(CheckpointLock&& o) noexcept;

 private:
  friend CheckpointLock prepare_checkpoint_dir(const std::string& dir, bool lock);
  int fd_ = -1;
};

// Creates `dir` if it is missing and checks that this process can write there; with `lock`
// (rank 0 of the job), also that no other job writes there, and holds it for the returned
// lock's lifetime. Throws Error naming the setting or the other job otherwise (called when the
// Runtime is built, so a bad directory fails before any iteration runs).
CheckpointLock prepare_checkpoint_dir(const std::string& dir, bool lock);

// Collective (a pause of Engine::run, every rank): writes this rank's part of the checkpoint of
// `graph` after `iteration`, then rank 0 the manifest, then removes the checkpoints older than
// the newest `keep` complete ones.
// Returns "" once the checkpoint is complete, else what went wrong (the same on every rank).
std::string write_checkpoint(rt::Engine& engine, const rt::Graph& graph, const std::string& dir,
                             std::uint64_t iteration, unsigned keep);

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

// Whether `dir` holds a checkpoint that restart would take: a complete one, or one an older
// ordo wrote (which restart then refuses, naming its format). False for a directory without
// checkpoints, or with incomplete ones only.
bool has_checkpoint_to_resume(const std::string& dir);

// ORDO_CHECKPOINT_KEEP (complete checkpoints kept, default 2) and ORDO_RELAUNCH (which relaunch
// of the job this is, 0 for a first launch: ordorun --restarts sets it). Read in settings.cpp,
// the library's one reader of the environment; throw Error for a value that is not a count.
unsigned checkpoint_keep_setting();
unsigned relaunch_setting();

}  // namespace ordo::detail
