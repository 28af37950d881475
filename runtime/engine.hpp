// Executes a compiled graph on a scheduler pool: the local phase machine and the iteration
// gate, and the run that drives the engine's parts:
//   fiber_driver.hpp   fiber tasks (their bodies acquire and release locations themselves);
//   remote_locks.hpp   the locks across ranks (GRANT/RELEASE, early grants, placement);
//   control_plane.hpp  what the ranks agree on (graph check, quiescence, votes, barriers);
//   shared_peers.hpp   location memory shared with the ranks of this host;
//   distribution.hpp   which rank is each location's home and runs each task.
// One process uses the phase machine and, for fiber tasks, the fiber driver; the others exist
// only when the graph is spread over ranks (a Net is given). A narrow graph in one process
// runs on lanes instead (lanes.hpp, engine_lanes.cpp: no shared counter between the workers;
// the rule: docs/model.md, "Lanes").
//
// State machine per location (see plan.hpp for why this is the ORWL FIFO):
//   phase      -- index of the granted phase in the location's cyclic phase list
//   remaining  -- holders of that phase that have not released yet
// release(l): the holder that drops `remaining` to zero advances `phase` (wrapping into the next
// iteration), stores the new phase's size in `remaining`, then grants every member. Because the
// grant reaches each member before that member can release, `phase` needs no lock: it is only
// written by the thread that completed the previous phase, and read by the one that completes
// this one, ordered through the grant -> queue -> execute chain. Across ranks this runs at the
// location's home, for the home's members and one count per remote rank involved
// (remote_locks.hpp); elsewhere the location's proxy (in RemoteLocks) stands in for it.
//
// State per task: `missing` counts the grants the task's next instance still lacks. The
// instance fires when it reaches zero. Grants for instance k+1 can only arrive after instance k
// has fired (each of the task's locations stays at the task's phase until instance k releases
// it), so one counter, reset when the instance fires, serves every iteration.
//
// Releasing an instance (one process): the lines a release writes (its locations' states, the
// task's own, and the states of the tasks it grants) are usually held by another worker, which
// released or granted them in the same step, and a locked decrement waits for its line, one
// after the other. So the release first prefetches its own and its locations' lines for
// writing (the misses overlap), then decrements each location's count, prefetching the state of
// every task that a completed phase grants, and grants them once every location is released,
// with one decrement of `missing` for all the grants a task gets from this release (the last
// releaser of a 1-D stencil step grants each successor twice). The grants come after the phase
// updates, as in release() (docs/benchmarks.md, "METG": what each saves).
//
// Iteration gate: an instance of iteration >= limit_ is held instead of queued. A run raises
// the limit; convergence checks raise it in steps, so that a predicate is evaluated on the
// contents after exactly iteration k, with nothing of k+1 started: the stop is deterministic.
// Across ranks a step ends when this rank's instances below the limit have completed and the
// control plane finds no protocol message in flight (quiescence), so that each rank's home
// locations are final.
//
// Lock-free tasks (one process): a dataflow task with no locked location waits for nothing but
// its own previous instance. It has no TaskState in use and never enters held_: raise_limit
// pushes one range item per run of consecutive such tasks (free_runs_), after setting the
// step's iterations [free_from_, free_to_). That is safe without a lock because raise_limit
// only runs once every instance below the old limit has completed (no range item is running),
// and the push publishes the two fields to the worker that pops the item. A range item splits
// off halves while large, runs each task's instances in iteration order, and adds its instance
// count to completed_ in one step (instance_done(count)).
//
// Placement: at the start of a run on a pool it has not run on, every location gets its home
// NUMA node (Graph::homes), its buffer is bound there, and each task its node: the home of the
// first location it writes (else of the first it reads). ready() pushes instances with that
// node as the pool's placement hint. On a flat pool there is nothing to do.
//
// Shutdown of a run: every instance below the limit has completed (counted after its
// releases), so no worker touches the graph's data; the last one wakes the caller while holding
// done_mu_, so the caller cannot free the engine under a worker's feet.
//
// Failures (failure.hpp): every one goes through fail(). In one process a body exception
// drains: bodies are skipped from then on, the current step completes, and run() rethrows it.
// Across ranks every failure but a graph mismatch stops the run at once, on every rank: the
// control plane stops, messages are dropped, parked fibers are woken, and run() returns once
// no instance is queued or running (a body's exception rethrown on its rank, a RunError on
// the others: "rank R failed: ..."). The failure relay (failure_relay.hpp) tells the other
// ranks, and a rank that hears of a failure passes it on along the control plane's tree, so
// that one message, forged or not, ends the run everywhere.
//
// Threads and what pairs across them:
//   - grant()'s acq_rel decrement of `missing` pairs with the other grants of the instance;
//     release()'s acq_rel decrement of `remaining` with the other holders' releases.
//   - raise_limit()'s release store of limit_ pairs with ready()'s acquire load; held_ is
//     guarded by hold_mu_.
//   - instance_done()'s acq_rel increment of completed_ pairs with the caller's acquire load;
//     the last increment notifies done_cv_ under done_mu_.
//   - set_trace() runs between runs, while the remote-lock protocol's message handling is
//     paused (RemoteLocks::pause()).
//   - fail() records the first failure under error_mu_; a stopping one sets failed_ under
//     done_mu_ (waking the run's waits), then stops the control plane and the fiber driver,
//     so that whoever returns from a wait because of them sees failed_.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/assert.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/distribution.hpp"
#include "runtime/failure.hpp"
#include "runtime/failure_relay.hpp"
#include "runtime/fiber_driver.hpp"
#include "runtime/graph.hpp"
#include "runtime/lanes.hpp"
#include "runtime/net.hpp"
#include "runtime/plan.hpp"
#include "runtime/remote_locks.hpp"
#include "runtime/shared_peers.hpp"
#include "runtime/trace.hpp"
#include "scheduler/fiber.hpp"
#include "scheduler/pool.hpp"

namespace ordo::rt {

class Engine;

// What a body sees of the instance it runs.
struct Instance {
  const Graph* graph;
  std::uint32_t task;
  std::uint64_t iteration;
  unsigned worker;         // a fiber task's instance may move between workers when it suspends
  Engine* engine;          // set for fiber tasks: their acquire and release go through it
  std::uint32_t index = 0;                  // member index in the task's family
  std::span<const AccessDesc> accesses{};   // the task's accesses
};

// The parts reach the engine only through the interfaces it implements privately for them
// (FiberDriver::Host, RemoteLocks::Host): no part sees its state. Engine is final, so its own
// calls of those functions are direct.
class Engine final : public sched::Executor, private FiberDriver::Host, private RemoteLocks::Host {
 public:
  // The most tasks a graph may have: a range item (below) holds two task indices of 31 bits.
  static constexpr std::uint64_t kMaxTasks = (std::uint64_t{1} << 31) - 1;
  // Whether an engine can run a graph of `tasks` tasks. The API asks while the graph is
  // declared, so that a graph too large is refused before it is built; the constructor refuses
  // it too.
  static constexpr bool can_run_tasks(std::uint64_t tasks) { return tasks <= kMaxTasks; }

  // `net` (optional, outlives the engine) spreads the graph over ranks on `channel`, which
  // every rank must give the same graph; nullptr: one process. A graph that the ranks did not
  // all build alike is reported by the first run (the engine is then broken()).
  // `share`: share the memory of locations with the ranks of this host that share
  // theirs (when the graph keeps them in a SharedArena); false: copy them.
  // Throws std::length_error for a graph of more than kMaxTasks tasks.
  // `load` (optional) runs once every rank has built its engine and before any location is
  // granted (across ranks: before the initial GRANTs carry their bytes), so it may fill this
  // rank's home locations (a restart); returning false leaves the engine broken() with nothing
  // granted. It may call gather() (every rank calls `load`, or none).
  Engine(Graph& graph, Plan plan, Net* net = nullptr, std::uint32_t channel = 0,
         bool share = true, const std::function<bool(Engine&)>& load = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs up to `iterations` further iterations on `pool`. When `until` is set it is called on
  // the caller's thread after every `check_every` iterations (and after the last), with the
  // number of iterations completed so far, while no instance runs; returning true stops the
  // run there. Returns the number of iterations run. An exception thrown by a body on this
  // rank stops the run and is rethrown here; any other failure (failure.hpp) is thrown as a
  // RunError. The engine is unusable afterwards (see broken()).
  // Fiber tasks take their stacks from `stacks`; nullptr: a pool of the default stack size
  // that the engine owns.
  // `pause` (optional): the run also stops between the iterations whose number (counted from
  // Graph::first_iteration()) is a multiple of `pause->every`, and calls `pause->at` there with
  // that number, on the caller's thread, while no instance runs and (across ranks) no message
  // is in flight; returning false ends the run there. Every rank pauses at the same iterations,
  // so `at` may call gather(). `until` is still checked every `check_every` iterations of this
  // run, as without pauses.
  struct Pause {
    std::uint64_t every = 0;  // 0: never
    std::function<bool(std::uint64_t iteration)> at;
  };
  // A stop condition on reduced values only, taken in the dataflow (docs/convergence.md): at
  // a checked iteration k the gate stays at k + 1 until this rank's value of every reduction
  // in `reductions` (indices in Graph::reductions()) is final here -- the instance of its last
  // combining task (one process) or of this rank's copy (across ranks) has run -- and the
  // worker that ran the last of them calls `test` with the iterations completed (k + 1):
  // true ends the run there, false opens the gate to the next check. No thread stops and no
  // rank votes: every rank computes the same bits, so every rank decides alike. `test` may
  // throw: the exception is this rank's failure, as a body's. A run given `decision` takes
  // no `until`. Where the dataflow cannot take it (tasks without locks, which run as range
  // items over a whole step), `test` runs on the caller's thread as `until` would.
  struct Decision {
    std::vector<std::uint32_t> reductions;
    std::function<bool(std::uint64_t iterations)> test;
  };
  std::uint64_t run(sched::Pool& pool, std::uint64_t iterations,
                    const std::function<bool(std::uint64_t)>& until, std::uint64_t check_every,
                    sched::StackPool* stacks = nullptr, const Pause* pause = nullptr,
                    const Decision* decision = nullptr);
  // Whether a run given a Decision takes it in the dataflow (else on the caller's thread).
  bool decides_in_dataflow() const { return free_runs_.empty(); }

  // Across ranks, every rank's `mine` (in rank order), or nullopt when the run was stopped by a
  // failure; one process: {mine}. Collective: on the caller's thread, between runs, in `load`
  // or in a pause, where every rank calls it in the same order.
  std::optional<std::vector<std::string>> gather(const std::string& mine);

  std::uint64_t iterations_done() const { return done_iterations_; }
  unsigned rank() const { return dist_ ? dist_->dist.rank : 0; }
  unsigned ranks() const { return dist_ ? dist_->dist.ranks : 1; }
  // Home rank of a location: its contents are final there after a run.
  unsigned home(std::uint32_t location) const { return dist_ ? dist_->dist.home[location] : 0; }
  // Rank that runs a task.
  unsigned task_rank(std::uint32_t task) const { return dist_ ? dist_->dist.task_rank[task] : 0; }
  // Home node of `location` on the pool of the latest run (0 before any run or when flat).
  unsigned home_node(std::uint32_t location) const { return home_.empty() ? 0 : home_[location]; }
  bool broken() const { return broken_; }
  // Why this rank's locations could not all get storage at construction (the first run),
  // naming every rank that lacked memory; empty when they all did. run() then throws it.
  const std::string& storage_error() const { return storage_error_; }
  // Whether some task writes `location` (else each rank keeps what the program put there).
  bool is_written(std::uint32_t location) const { return plan_.locks[location].locked; }

  void execute(sched::Item item, unsigned worker) override;

  // Which protocol runs the graph in one process (lanes.hpp, docs/model.md "Lanes"):
  // `automatic` takes lanes when Lanes::fits and the pool is flat and not oversubscribed;
  // `always` whenever they can run at all; `never` keeps the phase machine. Lanes never run
  // across ranks, with fiber tasks or while tracing (the trace records the phase machine's
  // grants). Between runs; the next run changes protocol if needed.
  enum class LaneChoice { automatic, always, never };
  void set_lanes(LaneChoice choice) { lane_choice_ = choice; }
  // Whether the latest run ran on lanes.
  bool ran_lanes() const { return lanes_on_; }
  // How many times a lane has given its worker back to wait for its inputs (parked), over all
  // of this engine's runs, also across a new split of the lanes (for a pool of another size).
  // Between runs.
  // Bytes of location contents this rank's protocol messages carried over the engine's runs
  // (RemoteLocks::payload_bytes); 0 in one process.
  std::uint64_t payload_bytes(bool internal) const {
    return dist_ ? dist_->remote.payload_bytes(internal) : 0;
  }
  std::uint64_t lane_parks() const { return earlier_lane_parks_ + (lanes_ ? lanes_->parks() : 0); }

  // For fiber task bodies (fiber_driver.hpp), on the instance's own fiber.
  using Hold = FiberDriver::Hold;
  Hold hold(const Instance& inst, std::uint32_t access) const { return fibers_->hold(inst, access); }
  bool is_on_own_fiber(const Instance& inst) const {
    return fibers_ && fibers_->is_on_own_fiber(inst);
  }
  void fiber_acquire(const Instance& inst, std::uint32_t access) { fibers_->acquire(inst, access); }
  void fiber_release(const Instance& inst, std::uint32_t access) { fibers_->release(inst, access); }

  static constexpr sched::Item kResume = sched::Item{1} << 63;
  // A lane item: the lane's instances up to the limit (kLane | lane), pinned to worker `lane`
  // (public for tests that stand in for the lanes' protocol).
  static constexpr sched::Item kLane = sched::Item{1} << 61;

  // Records this engine's events into `recorder` from the next run on (null: tracing off).
  // Call between runs only.
  // The Runtime attaches its recorder for each run and detaches it after, so the engine never
  // holds it between runs. Pausing the protocol's message handling makes this safe against a
  // remote message handled meanwhile on the transport's thread.
  void set_trace(trace::Recorder* recorder);
  // Across ranks, returns once every rank has called it (one control round); a no-op in one
  // process. The Runtime calls it at the start of every run, after attaching a recorder, so that
  // no rank's first GRANT of a run reaches a rank whose recorder is not attached yet (it would
  // go untraced: a grant short in the trace).
  void barrier() {
    if (dist_) dist_->control.barrier();
  }

 private:
  struct alignas(64) LockState {
    std::atomic<std::uint32_t> remaining{0};
    std::uint32_t phase = 0;
  };
  // Trivially constructible and only initialised for tasks that take part in locking, so that
  // the states of access-free tasks (run by range items, below) are never touched: a fresh
  // large allocation then costs no page faults. `missing` is accessed through atomic_ref.
  struct TaskState {
    std::uint32_t missing;
    std::uint32_t requests;
    std::uint64_t iteration;  // of the next instance to fire (or firing)
    const Family* family;     // in Graph::families() (stable addresses)
  };
  static std::atomic_ref<std::uint32_t> missing(TaskState& ts) { return std::atomic_ref(ts.missing); }

  // The parts of an engine spread over ranks, built in this order (each uses the earlier).
  struct Distributed {
    Distributed(Engine& engine, Net& net, std::uint32_t channel);
    Distribution dist;
    ControlPlane control;
    FailureRelay relay;
    SharedPeers shared;
    RemoteLocks remote;
  };

  // `releaser` is the task whose instance `iteration` releases, on `worker` (for tracing).
  void release(std::uint32_t location, std::uint32_t releaser, std::uint64_t iteration,
               unsigned worker) override;
  void grant(std::uint32_t task, std::uint32_t location) override;
  // One process, a dataflow instance whose body has returned (header, "Releasing an
  // instance"): prefetch_release starts fetching its own state's and its locations' lines,
  // then release_all releases its `locks` and grants each task the phases that follow,
  // counting a task's grants from several of the locks with one decrement.
  void prefetch_release(std::uint32_t task, std::span<const std::uint32_t> locks) const;
  void release_all(std::span<const std::uint32_t> locks, std::uint32_t releaser,
                   std::uint64_t iteration, unsigned worker);
  // Grants gathered by release_all: (task, count) pairs, at most kSize distinct tasks.
  struct Grants {
    static constexpr std::uint32_t kSize = 16;
    std::uint32_t size = 0;
    std::uint32_t tasks[kSize];
    std::uint32_t counts[kSize];
    // False when full (grant_all empties it).
    bool add(std::uint32_t task) {
      for (std::uint32_t i = 0; i < size; ++i)
        if (tasks[i] == task) {
          ++counts[i];
          return true;
        }
      if (size == kSize) return false;
      tasks[size] = task;
      counts[size++] = 1;
      return true;
    }
  };
  void grant_all(Grants& grants);
  // For tracing, before the grant: the iteration of `task`'s instance that this grant of
  // `location` is for.
  std::uint64_t granted_iteration(std::uint32_t task, std::uint32_t location) const;
  void ready(std::uint32_t task);
  void execute_one(sched::Item item, unsigned worker, std::uint64_t& uncounted);
  // The one sequence that runs a body, for every kind of item (an instance, a range item's, a
  // lane's, a fiber's on its fiber): skipped once the run is aborted, traced between task
  // begin and end, its exception this rank's failure. `settle` runs after the body, skipped or
  // not, and before the end is traced: a fiber's handles that its body left. `inst.worker` is
  // read again for the end (a fiber may have moved to another worker). Inline: it is on every
  // instance's path.
  template <class Settle>
  void run_body(const Family& f, const Instance& inst, Settle&& settle) {
    if (aborted_.load(std::memory_order_relaxed)) {
      settle();
      return;
    }
    if (trace_) [[unlikely]]
      trace_->task_begin(inst.worker, inst.task, inst.iteration);
    try {
      f.body(inst);
    } catch (const RunStopped&) {
      // A fiber's acquire after the run stopped on a failure the engine holds already.
    } catch (...) {
      fail_body();
    }
    settle();
    if (trace_) [[unlikely]]
      trace_->task_end(inst.worker, inst.task, inst.iteration);
  }
  void run_body(const Family& f, const Instance& inst) {
    run_body(f, inst, [] {});
  }
  // Access-free dataflow tasks (one process only) take no part in locking: each step, raise_limit
  // pushes one *range item* per run of consecutive such tasks, and a worker runs every task of
  // the range for the step's iterations [free_from_, free_to_), splitting off halves for
  // thieves while the range is large. One completion count per range, not per instance.
  static constexpr sched::Item kRange = sched::Item{1} << 62;
  static constexpr std::uint32_t kRangeGrain = 512;
  static sched::Item range_item(std::uint32_t begin, std::uint32_t end) {
    ORDO_ASSERT(begin <= end && can_run_tasks(end));
    return kRange | (sched::Item{begin} << 31) | end;
  }
  void run_range(std::uint32_t begin, std::uint32_t end, unsigned worker);
  // --- engine_lanes.cpp (lanes.hpp) ---
  void run_lane(unsigned lane, unsigned worker);
  // Pins the item of `lane`, whose parked word this worker took, to its worker; a refusal
  // (the worker still holds a pinned item: the lanes' protocol broke) fails the run.
  void pin_lane(unsigned lane);
  // Spins for the inputs of the lane's next instance; false when the lane parked instead.
  bool wait_lane_inputs(unsigned lane, std::uint32_t position, std::uint64_t iteration);
  // At the start of a run, before raise_limit: picks the protocol for `pool` and, when it
  // changes, carries the state over (every locked task is at iteration done_iterations_).
  void choose_protocol(const sched::Pool& pool);
  // The phase machine's state before the iteration every locked task is at: the initial phase
  // of every lock granted, the instances it makes ready held.
  void grant_initial();
  void raise_limit(std::uint64_t limit);
  // The phase machine's part of raising the gate: stores the limit and pushes the instances
  // held below it (collected in `go`, the caller's buffer).
  void release_held(std::uint64_t limit, std::vector<std::uint32_t>& go);
  static constexpr std::uint32_t kNoTask = RemoteLocks::Host::kFromPeer;
  // A release of `location` at its home: true (the phase it advanced to) when it was the
  // phase's last holder, which then grants that phase.
  // Inline: on every release's path, and a library's global function is called through the PLT.
  std::optional<std::uint32_t> complete_phase(std::uint32_t location) {
    LockState& ls = locks_[location];
    // acq_rel: the last holder must see every other holder's work before it advances.
    const std::uint32_t holders = ls.remaining.fetch_sub(1, std::memory_order_acq_rel);
    ORDO_ASSERT(holders != 0);  // a release without a hold
    if (holders != 1) return std::nullopt;
    const LockPlan& lp = plan_.locks[location];
    ls.phase = ls.phase + 1 == lp.phases.size() ? 0 : ls.phase + 1;
    return ls.phase;
  }
  // The grant event of `member` on `location` when tracing, before the grant itself.
  void trace_grant(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                   std::uint64_t iteration, unsigned worker) {
    if (trace_) [[unlikely]]
      record_grant(member, location, releaser, iteration, worker);
  }
  void record_grant(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                    std::uint64_t iteration, unsigned worker);
  void grant_traced(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                    std::uint64_t iteration, unsigned worker) override;
  // The trace buffer of the calling thread: its worker's, else the control buffer (the
  // transport's thread handling a message).
  unsigned trace_buffer() const override;
  trace::Recorder* trace() const override { return trace_; }
  // The rest of the fiber driver's interface (FiberDriver::Host).
  std::uint64_t next_iteration(std::uint32_t task) const override { return tasks_[task].iteration; }
  void run_fiber_body(const Family& family, const Instance& inst, void (*settle)(void*),
                      void* arg) override {
    run_body(family, inst, [settle, arg] { settle(arg); });
  }
  void resume(std::uint32_t task) override { pool_->push(task | kResume); }
  void wait_step_done();
  // Across ranks, after a step: the quiescence that makes every rank's home locations final.
  // False when the run must stop (a failure, or a message no rank sent).
  bool quiesce_step();

  // --- the stop condition in the dataflow (Decision; engine_decision.cpp) ---
  static constexpr std::uint64_t kNoCheck = ~std::uint64_t{0};
  // Called after the body of every instance while a Decision runs: counts this rank's
  // deciders of the checked iteration and decides after the last.
  void maybe_decide(std::uint32_t task, std::uint64_t iteration) {
    if (iteration != check_at_.load(std::memory_order_acquire)) return;
    for (std::uint32_t d : deciders_)
      if (d == task) {
        // acq_rel: the last decider sees every other decider's value.
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) decide(iteration);
        return;
      }
  }
  void decide(std::uint64_t iteration);
  // The check after `gate` iterations, if the gate is a check point of the run: gate - 1.
  std::uint64_t check_of(std::uint64_t gate) const;
  // The decider's: raises the gate while instances of the step before it still run.
  void open_gate(std::uint64_t limit);
  // A lane at the gate of a checked iteration: spins for the decision, then parks. Returns the
  // new limit, or 0 when the lane's item ends (the run stops or the lane parked).
  std::uint64_t wait_gate(unsigned lane, std::uint64_t iteration);
  std::uint64_t run_deciding(std::uint64_t start, std::uint64_t end, std::uint64_t check_every,
                             const Pause* pause);
  const Decision* decision_ = nullptr;   // set for a run that decides in the dataflow
  std::vector<std::uint32_t> deciders_;  // this rank's deciding tasks (one per reduction)
  std::uint64_t decide_start_ = 0, decide_every_ = 1, decide_end_ = 0;  // the run's
  std::uint64_t segment_end_ = 0;  // the caller's step: the run's end or the next pause
  std::atomic<std::uint64_t> check_at_{kNoCheck};  // the checked iteration the gate waits on
  std::atomic<std::uint32_t> pending_{0};          // its deciders still to run here
  std::atomic<bool> stopped_{false};               // the test held at check_at_
  std::uint64_t stopped_after_ = 0;                // iterations done when it held
  // Per lane: parked at the gate of a checked iteration (the decider takes it and pins the
  // lane's item again, as a producer does for a lane parked on its inputs).
  std::unique_ptr<std::atomic<std::uint8_t>[]> gate_parked_;
  unsigned gate_lanes_ = 0;
  std::vector<std::uint32_t> gate_go_;  // open_gate's: the held instances it lets through

  // --- engine_storage.cpp (docs/distributed.md, "Memory") ---
  // Gives this rank's locations storage at construction (the first run); across ranks two
  // control rounds, on every rank. A problem that does not fit sets storage_error_.
  void provide_storage();
  // A replica this rank shares with its home is never used (the home's buffer is): its
  // storage goes, once the shared memory is set up.
  void release_shared_replicas();
  std::string storage_error_;
  void place(sched::Pool& pool);
  int node_of(std::uint32_t task) const { return task_node_.empty() ? -1 : task_node_[task]; }
  void instance_done(std::uint64_t count = 1);
  // A fiber instance of `task` ended (every handle released): the next may start.
  void fiber_done(std::uint32_t task, std::uint64_t iteration) override;
  // Across ranks, at construction: the graph check, shared memory, the initial grants.
  void start_distributed(bool share, const std::function<bool(Engine&)>& load);

  // The one failure path (failure.hpp): records the first failure, has the relay tell the
  // other ranks (failure_relay.hpp: this rank's own, and one it heard of, passed on along the
  // tree), and, for a failure that stops the run, wakes every waiter. Any thread; never
  // blocks on the run.
  void fail(Failure failure) override;
  // The body exception being handled (in a catch block), as this rank's failure.
  void fail_body();
  void stop_run();
  bool has_failed() const;
  [[noreturn]] void rethrow_failure();

  Graph& graph_;
  Plan plan_;
  std::unique_ptr<LockState[]> locks_;  // per location (across ranks: used at its home)
  std::unique_ptr<TaskState[]> tasks_;
  std::unique_ptr<FiberDriver> fibers_;  // when the graph has fiber tasks
  sched::Pool* pool_ = nullptr;
  const sched::Pool* placed_for_ = nullptr;  // pool the placement below was made for
  std::vector<unsigned> home_;               // per location: NUMA node
  std::vector<int> task_node_;               // per task; empty or -1: no hint
  std::unique_ptr<sched::StackPool> own_stacks_;  // when run() was given none
  trace::Recorder* trace_ = nullptr;

  LaneChoice lane_choice_ = LaneChoice::automatic;
  std::unique_ptr<Lanes> lanes_;  // built at the first run that takes them, for its pool's size
  bool lanes_on_ = false;         // the current state is the lanes' (else the phase machine's)
  std::uint64_t earlier_lane_parks_ = 0;  // the parks of the lanes split before lanes_
  // The graph's locked tasks, walked once, at the first run that considers lanes (Lanes::fits
  // and every Lanes built, one per pool size, read it).
  std::unique_ptr<const Lanes::LockedTasks> locked_tasks_;

  std::vector<std::pair<std::uint32_t, std::uint32_t>> free_runs_;
  // Set by raise_limit before it pushes range items, while none runs (the push publishes them).
  std::uint64_t free_from_ = 0, free_to_ = 0;

  std::atomic<std::uint64_t> limit_{0};
  std::mutex hold_mu_;
  std::vector<std::uint32_t> held_;  // ready instances at or beyond limit_, guarded by hold_mu_

  // On a line of its own: every worker adds to it, and ready() reads limit_ above.
  alignas(64) std::atomic<std::uint64_t> completed_{0};
  // completed_ value that ends the current step. Atomic: a worker of the previous step may
  // still compare against it while the caller sets the next one (its count is below both).
  alignas(64) std::atomic<std::uint64_t> target_{0};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;  // guarded by done_mu_
  // Instances queued or executing (distributed mode only): a run that stops on a failed peer
  // waits for zero before returning, so no worker touches the engine afterwards.
  std::atomic<std::int64_t> inflight_{0};

  std::atomic<bool> aborted_{false};  // bodies are skipped (any failure)
  mutable std::mutex error_mu_;
  std::optional<Failure> failure_;  // the first, guarded by error_mu_
  std::atomic<bool> failed_{false};  // a failure stopped the run (set under done_mu_)

  std::uint64_t done_iterations_ = 0;
  std::uint64_t local_tasks_ = 0;  // tasks that run on this rank
  bool broken_ = false;

  Net* net_ = nullptr;
  std::uint32_t channel_ = 0;
  std::unique_ptr<Distributed> dist_;  // when spread over ranks
};

}  // namespace ordo::rt
