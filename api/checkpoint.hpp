// Checkpoints of a graph's locations between iterations, and the restart from them
// (docs/checkpoint.md). A checkpoint is a directory DIR/ckpt-<iteration> holding one part per
// rank (rank-<r>.part: that rank's home locations, written from a copy while the run goes on,
// or with the run stopped) and a manifest that rank 0 writes last, once every rank's part is on
// disk: without the manifest the checkpoint does not count.
// Every file is written atomically (a temporary file beside it, fsync, rename). Files are read
// as hostile input: every size is checked against the file and the graph before anything is
// read into a location.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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

// How a job writes its checkpoints (docs/checkpoint.md): where, how many it keeps, whether it
// copies each checkpoint's bytes and writes them while the run goes on (ORDO_CHECKPOINT_COPY),
// and whether a checkpoint that cannot be written stops the run (ORDO_CHECKPOINT_ON_FAILURE).
struct CheckpointPolicy {
  std::string dir;
  unsigned keep = 2;
  bool copy = true;
  bool keep_going = false;
};

// Writes the checkpoints of one run at its pauses. With `copy`, a pause copies this rank's
// saved locations into memory and a thread writes them while the next iterations run; the
// checkpoint is completed (rank 0's manifest, once every part is durably on disk) by that
// thread as soon as it sees every part, at the latest at the next pause or at the run's end.
// Without `copy`, a pause writes the part and the manifest with the run stopped.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(CheckpointPolicy policy);
  // The threads that share a copy: as many as the workers, idle in a pause.
  void set_copy_threads(unsigned n) { copy_threads_ = n; }
  ~CheckpointWriter();  // abandon()
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Collective (a pause of Engine::run, every rank): completes the checkpoint still being
  // written, then begins the one of `iteration`. "" to go on, else why the run stops there
  // (the same on every rank); a failed checkpoint with keep_going is reported instead.
  std::string at_pause(rt::Engine& engine, const rt::Graph& graph, std::uint64_t iteration);
  // Collective, once a run returned: completes the checkpoint still being written. "" or why
  // it failed (with keep_going: reported, and "").
  std::string finish(rt::Engine& engine);
  // A failed run: stops the thread, without talking to the other ranks; a checkpoint still
  // being written stays incomplete.
  void abandon();
  // At a run's start: where the copy will need more room than it has, a thread maps and
  // faults in its pages while the first iterations run, instead of the first pause (where
  // 512 MiB of first touches took 0.77 s, with every worker waiting).
  void reserve_copy(const rt::Engine& engine, const rt::Graph& graph);

  struct Pending;  // the checkpoint a thread writes (checkpoint.cpp)

 private:
  // What the first round of a completion found: the pending checkpoint's iteration, why it
  // failed (known to every rank), and rank 0's manifest error (told in the second round).
  struct Completion {
    std::optional<std::uint64_t> iteration;
    std::string failed, mine;
  };
  // The first round (collective): every rank's part written? Rank 0 then completes the
  // checkpoint, and removes a failed one and what a killed job left of `next`. False when a
  // rank failed.
  bool collect(rt::Engine& engine, Completion& c, std::optional<std::uint64_t> next);
  // After the second round (rank 0's manifest error in `manifests`): "" or why the run stops.
  std::string verdict(const rt::Engine& engine, Completion& c,
                      const std::vector<std::string>& manifests);
  // Both rounds, for the checkpoint still being written (none: nothing to do).
  std::string complete_pending(rt::Engine& engine);
  // This rank's part of the checkpoint of `iteration`; `copied` when its bytes are copied.
  std::unique_ptr<Pending> prepare(const rt::Engine& engine, const rt::Graph& graph,
                                   std::uint64_t iteration, bool& copied);
  // Starts the thread that writes `p`, now the pending checkpoint.
  void start(std::unique_ptr<Pending> p);
  CheckpointPolicy policy_;
  std::unique_ptr<Pending> pending_;
  // The copy of this rank's part, laid out as the file (header, table, names, bytes) and
  // page-aligned, so that the thread can write it past the page cache; kept between pauses.
  struct Mapping {
    void* at = nullptr;
    std::size_t bytes = 0;
    ~Mapping();
  };
  static std::unique_ptr<Mapping> map_copy(std::uint64_t bytes, bool fault_in);
  std::unique_ptr<Mapping> copy_;
  std::thread reserving_;  // reserve_copy's thread, which fills reserved_
  std::unique_ptr<Mapping> reserved_;
  unsigned copy_threads_ = 1;
  bool copy_refused_ = false;  // said once: no memory for the copy, written with the run stopped
};

// Checks this rank's home locations after a checkpoint filled them and before anything reads
// them: "" or what is wrong. Layers that keep state of their own inside locations (the stencil
// layer's block headers: steps done, buffer shifts, which become pointer offsets) give one,
// so that a lying checkpoint is refused instead of read out of bounds.
using RestoredCheck = std::function<std::string(const rt::Engine&, rt::Graph&)>;

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
// ORDO_CHECKPOINT_COPY (on unless 0/off) and ORDO_CHECKPOINT_ON_FAILURE (stop, the default, or
// continue: true); Error for another value.
bool checkpoint_copy_setting();
bool checkpoint_keep_going_setting();
// ORDO_CHECKPOINT_TEST_KILL=stage:iteration:rank, a test's hook: that rank kills its own
// process (SIGKILL) at that stage of the checkpoint of that iteration (stages: copy, write,
// fsync, rename, manifest, remove), as a crash there would.
struct CheckpointTestKill {
  std::string stage;
  std::uint64_t iteration = 0;
  unsigned rank = 0;
};
std::optional<CheckpointTestKill> checkpoint_test_kill_setting();

}  // namespace ordo::detail
