// Executes a compiled graph on a scheduler pool.
//
// State machine per location (see plan.hpp for why this is the ORWL FIFO):
//   phase      -- index of the granted phase in the location's cyclic phase list
//   remaining  -- holders of that phase that have not released yet
// release(l): the holder that drops `remaining` to zero advances `phase` (wrapping into the next
// iteration), stores the new phase's size in `remaining`, then grants every member. Because the
// grant reaches each member before that member can release, `phase` needs no lock: it is only
// written by the thread that completed the previous phase, and read by the one that completes
// this one, ordered through the grant -> queue -> execute chain.
//
// State per task: `missing` counts the grants the task's next instance still lacks. The
// instance fires when it reaches zero. Grants for instance k+1 can only arrive after instance k
// has fired (each of the task's locations stays at the task's phase until instance k releases
// it), so one counter, reset when the instance fires, serves every iteration.
//
// Iteration gate: an instance of iteration >= limit_ is held instead of queued. A run raises
// the limit; convergence checks raise it in steps, so that a predicate is evaluated on the
// contents after exactly iteration k, with nothing of k+1 started: the stop is deterministic.
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
// Fiber tasks (local view, ORWL's orwl_handle2 driven by the body; docs/fibers.md). Their
// requests are declared like a dataflow task's and sit in the same cyclic plans (declaring is
// ORWL's proactive request). What differs is when the body runs and when handles release:
//   - instance k starts, on a fiber, as soon as instance k-1 has finished and k is below the
//     iteration gate, without waiting for grants (ready() is called at the end of k-1);
//   - fiber_acquire(h) returns once h's grant for k has arrived, else suspends the fiber; the
//     worker goes on with other items;
//   - fiber_release(h) releases h's hold of iteration k at once (the request for k+1 is
//     implied by the cyclic plan, as in orwl_release2); handles not released by the body are
//     acquired and released after it returns.
// Per handle, one word counts the grants received: the grant for iteration i is the (i+1)-th
// one, since the task is one member of every phase cycle of that lock. So "granted for k" is
// count > k, and a grant for k+1 that arrives while instance k still runs (after it released
// the handle early) is simply count > k+1 already when k+1 asks. A grant for k+2 cannot come
// before instance k+1 has released the handle. The word's low bit says "the fiber is parked
// on this handle":
//   fiber:   count > k ? go on : record the handle, suspend to the worker;
//   worker:  CAS the bit in, unless count > k by now (then resume the fiber at once);
//   granter: fetch_add(2); if the bit was set, clear it and push a resume item.
// Exactly one of worker and granter sees the other, so the fiber is resumed exactly once.
// A resume item is the task index with kResume set; a start item is the plain index.
//
// Shutdown of a run: every instance below the limit has completed (counted after its
// releases), so no worker touches the graph's data; the last one wakes the caller while holding
// done_mu_, so the caller cannot free the engine under a worker's feet.
//
// Across ranks (net_ set; DESIGN.md §3). Every rank builds the same graph and compiles the same
// plan. Each location has a home rank, which runs its phase machine; each task runs on one rank
// (owner computes: the home of the first location it writes) and only there. At the home, a
// phase's `remaining` counts the local members plus one per remote rank with members in it.
// Entering a phase grants the local members and sends one GRANT (location, phase, the bytes)
// to each such remote rank: one copy per destination process, however many of its tasks read.
// There the location's proxy copies the bytes into its replica, sets its own `remaining` to its
// local members and grants them; when the last one releases it sends one RELEASE back (with
// the bytes after a write phase), which the home counts as one release. The cyclic plan makes
// the re-request implicit, so the FIFO order is the same on every rank by construction. A proxy
// holds at most one phase of a location at a time (the home waits for its release before it
// moves on), hence no ordering between messages is needed, and a sent buffer is never written
// before its receiver has answered (zero copy is safe). Small read phases are granted early
// (distributed.cpp): the home counts that rank only until the transport has the bytes
// (Net::send's `sent`), not until its RELEASE. Ranks of one host share the memory of small
// locations (share_memory(), distributed.cpp): their GRANTs and RELEASEs carry no bytes, the
// proxy's tasks use the home's buffer during a run, and such reads are never granted early.
// A run ends with a quiescence barrier (control rounds exchanging message counts until no
// protocol message is in flight), so each rank's home locations are final when run returns.
// A body exception or a failed peer on any rank reaches every rank as ABORT; all drain the
// current step without running bodies and rethrow.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "scheduler/fiber.hpp"
#include "runtime/graph.hpp"
#include "runtime/net.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"
#include "runtime/trace.hpp"

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

class Engine final : public sched::Executor {
 public:
  // `net` (optional, outlives the engine) spreads the graph over ranks on `channel`, which
  // every rank must give the same graph; nullptr: one process. A graph that the ranks did not
  // all build alike is reported by the first run (the engine is then broken()).
  // `share`: share the memory of locations with the ranks of this host that share
  // theirs (when the graph keeps them in a SharedArena); false: copy them.
  Engine(Graph& graph, Plan plan, Net* net = nullptr, std::uint32_t channel = 0,
         bool share = true);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs up to `iterations` further iterations on `pool`. When `until` is set it is called on
  // the caller's thread after every `check_every` iterations (and after the last), with the
  // number of iterations completed so far, while no instance runs; returning true stops the
  // run there. Returns the number of iterations run. An exception thrown by a body stops the
  // run and is rethrown here; the engine is unusable afterwards (see broken()).
  // Fiber tasks take their stacks from `stacks`; nullptr: a pool of the default stack size
  // that the engine owns.
  std::uint64_t run(sched::Pool& pool, std::uint64_t iterations,
                    const std::function<bool(std::uint64_t)>& until, std::uint64_t check_every,
                    sched::StackPool* stacks = nullptr);

  std::uint64_t iterations_done() const { return done_iterations_; }
  unsigned rank() const { return rank_; }
  unsigned ranks() const { return nranks_; }
  // Home rank of a location: its contents are final there after a run.
  unsigned home(std::uint32_t location) const { return net_ ? dist_.home[location] : 0; }
  // Rank that runs a task.
  unsigned task_rank(std::uint32_t task) const { return net_ ? dist_.task_rank[task] : 0; }
  // Home node of `location` on the pool of the latest run (0 before any run or when flat).
  unsigned home_node(std::uint32_t location) const { return home_.empty() ? 0 : home_[location]; }
  bool broken() const { return broken_; }
  // Why this rank's locations could not all get storage at construction (the first run),
  // naming every rank that lacked memory; empty when they all did. run() then throws it.
  const std::string& storage_error() const { return storage_error_; }
  // Whether some task writes `location` (else each rank keeps what the program put there).
  bool is_written(std::uint32_t location) const { return plan_.locks[location].locked; }

  void execute(sched::Item item, unsigned worker) override;

  // For fiber task bodies, on the instance's own fiber. `access` indexes the task's
  // TaskDesc::accesses. The api layer checks misuse (see hold()) before calling these.
  enum class Hold : std::uint8_t { requested, held, released };
  Hold hold(const Instance& inst, std::uint32_t access) const;
  // Whether the caller runs on `inst`'s fiber (and not on another thread or after the body).
  bool on_own_fiber(const Instance& inst) const;
  // Returns once the access is granted for inst.iteration (suspending the fiber meanwhile).
  // Precondition: hold() == requested.
  void fiber_acquire(const Instance& inst, std::uint32_t access);
  // Releases the access's hold of this iteration. Precondition: hold() == held.
  void fiber_release(const Instance& inst, std::uint32_t access);

  static constexpr sched::Item kResume = sched::Item{1} << 63;

  // Records this engine's events into `recorder` from the next run on (null: tracing off).
  // Call between runs only.
  // The Runtime attaches its recorder for each run and detaches it after, so the engine never
  // holds it between runs. trace_mu_ makes this safe against a remote message handled meanwhile
  // on the transport's thread (on_message holds it).
  void set_trace(trace::Recorder* recorder) {
    std::lock_guard lock(trace_mu_);
    trace_ = recorder;
  }
  // Across ranks, returns once every rank has called it (one control round); a no-op in one
  // process. The Runtime calls it at the start of every run, after attaching a recorder, so that
  // no rank's first GRANT of a run reaches a rank whose recorder is not attached yet (it would
  // go untraced: a grant short in the trace).
  void barrier() {
    if (net_) exchange({});
  }

 private:
  struct alignas(64) LockState {
    std::atomic<std::uint32_t> remaining{0};
    std::uint32_t phase = 0;
    // Proxy (distributed.cpp): the phase held here was granted early (its RELEASE says so).
    // Written by the GRANT's handler before it grants, read by the last local releaser.
    bool early = false;
  };
  struct FiberTask;
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
  FiberTask* fiber_of(std::uint32_t task) const {
    return fibers_.empty() ? nullptr : fibers_[task].get();
  }
  struct FiberTask {
    Engine* engine = nullptr;
    Instance instance{};          // the running instance; worker updated at each resume
    sched::Fiber fiber;
    std::uint32_t waiting = 0;    // handle the fiber suspended on (read by its worker)
    std::unique_ptr<std::atomic<std::uint64_t>[]> grants;  // per handle: count << 1 | parked
    std::vector<std::int32_t> handle_of;  // per access: handle index, -1 when not locked
    std::vector<Hold> holds;              // per access, of the running instance
  };

  // `releaser` is the task whose instance `iteration` releases, on `worker` (for tracing).
  void release(std::uint32_t location, std::uint32_t releaser, std::uint64_t iteration,
               unsigned worker);
  void grant(std::uint32_t task, std::uint32_t location);
  // For tracing, before the grant: the iteration of `task`'s instance that this grant of
  // `location` is for.
  std::uint64_t granted_iteration(std::uint32_t task, std::uint32_t location) const;
  void ready(std::uint32_t task);
  void execute_one(sched::Item item, unsigned worker);
  // Access-free dataflow tasks (one process only) take no part in locking: each step, raise_limit
  // pushes one *range item* per run of consecutive such tasks, and a worker runs every task of
  // the range for the step's iterations [free_from_, free_to_), splitting off halves for
  // thieves while the range is large. One completion count per range, not per instance.
  static constexpr sched::Item kRange = sched::Item{1} << 62;
  static constexpr std::uint32_t kRangeGrain = 512;
  static sched::Item range_item(std::uint32_t begin, std::uint32_t end) {
    return kRange | (sched::Item{begin} << 31) | end;
  }
  void run_range(std::uint32_t begin, std::uint32_t end, unsigned worker);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> free_runs_;
  // Set by raise_limit before it pushes range items, while none runs (the push publishes them).
  std::uint64_t free_from_ = 0, free_to_ = 0;
  void raise_limit(std::uint64_t limit);
  static constexpr std::uint32_t kNoTask = ~std::uint32_t{0};
  void grant_phase(std::uint32_t location, std::uint32_t phase, std::uint32_t releaser,
                   std::uint64_t iteration, unsigned worker);
  void grant_traced(std::uint32_t member, std::uint32_t location, std::uint32_t releaser,
                    std::uint64_t iteration, unsigned worker);
  void record_error(std::exception_ptr error);
  void wait_step_done();

  // --- engine_storage.cpp ---
  void provide_storage();
  std::string storage_error_;

  // --- distributed.cpp ---
  struct PhaseRanks {
    std::vector<std::uint32_t> local;   // member tasks that run on this rank
    std::vector<std::uint32_t> remote;  // other ranks with members
  };
  struct Distribution {
    std::vector<std::uint32_t> home;       // per location
    std::vector<std::uint32_t> task_rank;  // per task
    std::vector<std::vector<PhaseRanks>> phases;  // per location, per phase (involved only)
    std::vector<PhaseRanks> initial;              // per location: the initial grant
  };
  void distribute();
  void check_same_graph();
  void start_initial_grants();
  void send_grant_to(std::uint32_t location, std::uint32_t phase, unsigned peer, bool initial,
                     bool early);
  // Enters `phase` of a home location across ranks (grant_phase's distributed half).
  void enter_phase(std::uint32_t location, std::uint32_t phase, std::uint32_t releaser,
                   std::uint64_t iteration, unsigned worker);
  // Whether `phase` of `location` goes to `peer` as an early read grant.
  bool early_to(std::uint32_t location, std::uint32_t phase, unsigned peer) const;
  void proxy_release(std::uint32_t location);
  void on_message(unsigned from, std::span<const std::byte> header,
                  std::span<const std::byte> payload);
  void on_failure(const std::string& what);
  // fatal: the peers take it as this rank's failure (it has stopped), not only as an error.
  void abort_everywhere(const std::string& what, bool fatal = false);
  void protocol_error(const std::string& what);
  void note_error(const std::string& what);  // an error from elsewhere: no rebroadcast
  // All-to-all control round: sends `mine` to every peer, returns what each peer sent (index =
  // rank; own entry empty). Throws if a peer failed.
  std::vector<std::vector<std::byte>> exchange(const std::vector<std::byte>& mine);
  void quiesce();
  bool vote(bool mine);
  void place(sched::Pool& pool);
  int node_of(std::uint32_t task) const { return task_node_.empty() ? -1 : task_node_[task]; }
  void instance_done(std::uint64_t count = 1);
  void run_fiber(std::uint32_t task, bool resume, unsigned worker);
  bool park(FiberTask& ft);
  void fiber_grant(std::uint32_t task, std::uint32_t location);
  void wait_grant(FiberTask& ft, std::uint32_t access);
  static void fiber_main(void* arg) noexcept;

  Graph& graph_;
  Plan plan_;
  std::unique_ptr<LockState[]> locks_;
  std::unique_ptr<TaskState[]> tasks_;
  std::vector<std::unique_ptr<FiberTask>> fibers_;  // per task when the graph has fiber tasks
  sched::Pool* pool_ = nullptr;
  const sched::Pool* placed_for_ = nullptr;  // pool the placement below was made for
  std::vector<unsigned> home_;               // per location: NUMA node
  std::vector<int> task_node_;               // per task; empty or -1: no hint
  sched::StackPool* stacks_ = nullptr;
  std::unique_ptr<sched::StackPool> own_stacks_;  // when run() was given none
  bool has_fibers_ = false;
  trace::Recorder* trace_ = nullptr;

  std::atomic<std::uint64_t> limit_{0};
  std::mutex hold_mu_;
  std::vector<std::uint32_t> held_;  // ready instances at or beyond limit_, guarded by hold_mu_

  std::atomic<std::uint64_t> completed_{0};
  // completed_ value that ends the current step. Atomic: a worker of the previous step may
  // still compare against it while the caller sets the next one (its count is below both).
  std::atomic<std::uint64_t> target_{0};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;  // guarded by done_mu_

  std::atomic<bool> aborted_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;  // first body exception, guarded by error_mu_

  std::uint64_t done_iterations_ = 0;
  bool broken_ = false;

  Net* net_ = nullptr;
  std::uint32_t channel_ = 0;
  unsigned rank_ = 0, nranks_ = 1;
  std::uint64_t local_tasks_ = 0;  // tasks that run on this rank
  Distribution dist_;
  // Trace tags: per location and rank, the GRANTs and RELEASEs exchanged so far. A location has
  // at most one message in flight towards a rank, so sender and receiver count the same
  // sequence and a send and its receive get the same tag. Touched in protocol order only.
  std::vector<std::uint32_t> grant_seq_, release_seq_;  // [location * ranks + peer]
  std::mutex trace_mu_;  // see set_trace()
  bool stopped_ = false;  // a peer failed and the run ended: messages are dropped (trace_mu_)
  // Early read grants (distributed.cpp, "Early read grants"), home side, per location and
  // remote rank [location * ranks + peer], guarded by early_mu_[location]: `held` while that rank holds
  // an early-granted version it has not released; `pending`, a phase whose GRANT waits for
  // that release.
  static constexpr std::size_t kEarlyMaxBytes = std::size_t{256} << 10;
  static constexpr std::uint32_t kNoPhase = ~std::uint32_t{0};
  struct EarlyState {
    bool held = false;
    std::uint32_t pending = kNoPhase;
  };
  // Early GRANTs whose bytes the transport still reads (quiesce() waits for them).
  std::atomic<std::uint64_t> early_unsent_{0};
  // early_sent() acts until a peer's failure ends a run (like on_message, stopped_), which
  // may leave GRANTs unsent: run() closes it then and waits for those inside (seq_cst pair,
  // see early_sent()).
  std::atomic<bool> sent_open_{true};
  std::atomic<unsigned> sent_running_{0};
  void early_sent(std::uint32_t location);
  std::unique_ptr<std::mutex[]> early_mu_;  // per location: phases of others never wait
  std::vector<EarlyState> early_;
  std::uint64_t trace_tag(bool grant, std::uint32_t location, unsigned peer);
  unsigned trace_buffer() const;
  std::unique_ptr<std::atomic<std::uint64_t>[]> sent_;  // protocol messages sent, per peer
  std::unique_ptr<std::atomic<std::uint64_t>[]> recv_;  // ... received and handled, per peer
  std::mutex ctl_mu_;
  std::condition_variable ctl_cv_;
  std::uint64_t ctl_seq_ = 0;  // control rounds started by this rank (caller's thread)
  // Control payloads received, per peer, keyed by round; guarded by ctl_mu_.
  std::vector<std::vector<std::pair<std::uint64_t, std::vector<std::byte>>>> ctl_in_;
  std::atomic<bool> failed_{false};  // a peer failed (set under ctl_mu_ and done_mu_)
  // Instances queued or executing (distributed mode only): a run that stops on a failed peer
  // waits for zero before returning, so no worker touches the engine afterwards.
  std::atomic<std::int64_t> inflight_{0};

  // Shared memory between ranks of one host (distributed.cpp, "Shared memory"), set once by
  // share_memory() before any GRANT goes out: per peer, whether the two share location memory;
  // per location homed on such a peer, its buffer as mapped here (null: copied), which run()
  // makes the graph's data() for the run's duration.
  void share_memory();
  // A replica of a location this rank shares with its home is never used (the home's buffer
  // is): its storage goes (engine_storage.cpp).
  void release_shared_replicas();
  bool shared_with(std::uint32_t location, unsigned peer) const;
  bool share_memory_ = true;
  std::vector<char> share_peer_;
  std::vector<std::byte*> shared_view_;
  std::vector<PeerMapping> mappings_;
};

}  // namespace ordo::rt
