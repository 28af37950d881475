// A pool of worker threads that execute opaque work items, with work stealing, NUMA-aware
// placement and idle parking. The protocol and its correctness argument open pool.cpp; the
// policy is described for users in docs/scheduler.md.
//
// The scheduler layer knows nothing of locks, tasks or graphs: an item is a 64-bit word that
// the attached Executor interprets (the runtime uses a task index). This keeps the direction of
// dependence one way (runtime -> scheduler) and keeps queue slots one machine word wide.
//
// Usage:
//   attach(exec)     -- one executor at a time; items pushed before attach are not allowed.
//   push(item[, n])  -- any thread; the item is executed exactly once by some worker. From a
//                       worker it goes to that worker's deque (or, with a node hint naming
//                       another NUMA node, to that node's queue); from outside the pool, to an
//                       injection queue (the hinted node's, if any).
//   detach()         -- caller guarantees that no item is queued or running (the runtime knows
//                       this from its own completion count); workers then park.
// Workers that find nothing to do, even by stealing, park and use no CPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/core_share.hpp"
#include "scheduler/deque.hpp"
#include "scheduler/topology.hpp"

namespace ordo::sched {

// One step of a spin-wait: tells the core this thread only polls (the pool's idle workers and
// the engine's lanes both spin with it).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The end of a spin-wait (the pool's idle workers, the engine's lanes). The clock is read once
// every kLooksPerClock looks: a read costs about one look (a pause and a few loads), so it takes
// a few percent of the spin, which ends at most that many looks late (docs/benchmarks.md,
// "Figures behind defaults").
class SpinDeadline {
 public:
  static constexpr unsigned kLooksPerClock = 32;
  explicit SpinDeadline(std::chrono::nanoseconds spin)
      : until_(std::chrono::steady_clock::now() + spin) {}
  // Counts one look; true once the spin's time has passed (seen at every kLooksPerClock-th).
  bool is_over() {
    return ++looks_ % kLooksPerClock == 0 && std::chrono::steady_clock::now() >= until_;
  }

 private:
  std::chrono::steady_clock::time_point until_;
  unsigned looks_ = 0;
};

using Item = std::uint64_t;

// Interprets items. execute() runs on a worker thread; it may push further items.
class Executor {
 public:
  virtual void execute(Item item, unsigned worker) = 0;

 protected:
  ~Executor() = default;
};

// Receives scheduler events (for tracing). Callbacks run on the worker concerned and must be
// cheap and non-blocking.
class Observer {
 public:
  virtual void on_park(unsigned worker) = 0;    // the worker found no work and goes to sleep
  virtual void on_unpark(unsigned worker) = 0;  // it woke up
  virtual void on_steal(unsigned thief, unsigned victim) = 0;

 protected:
  ~Observer() = default;
};

// Lets idle workers drive something else's progress (the runtime's network), so that an
// incoming message is handled by the worker that will run the task it enables, on its core,
// with no hand-off between threads. The scheduler knows nothing of what is polled.
class Poller {
 public:
  enum class Result {
    work,   // it did something (items may have been pushed): search again at once
    idle,   // nothing to do now
    taken,  // another thread is polling: this worker need not keep polling
  };
  // An idle worker's turn. Cheap when there is nothing to do; never blocks.
  virtual Result poll(unsigned worker) = 0;
  // How long a worker that polls (poll() did not answer `taken`) keeps polling without result
  // before it parks.
  virtual std::chrono::nanoseconds idle_spin() const = 0;
  // The worker stops polling and parks: whatever polls when no worker does must take over.
  virtual void parking(unsigned worker) = 0;

 protected:
  ~Poller() = default;
};

struct PoolConfig {
  // Number of workers; 0: one per core. Spread over the cores (docs/scheduler.md).
  unsigned workers = 0;
  // OS indices of the processing units for the workers: worker i runs on pus[i % size]; with
  // workers == 0, one worker per listed unit. Empty: the spread over the cores. An index the
  // topology lacks is refused (std::invalid_argument). parse_unit_list() reads taskset's syntax.
  std::vector<unsigned> pus{};
  // Where pus came from, for the message that refuses one ("ORDO_PUS=0,2"); empty: the caller.
  std::string pus_origin{};
  // Where the machine description comes from: empty for this machine, "synthetic:<hwloc
  // synthetic description>" or "xml:<lstopo XML file>" (tests; nothing is bound then).
  std::string topology{};
  // This process's share of the machine when several processes of one job run on it (local
  // rank `share_index` of `share_count`): whole NUMA nodes when the processes divide them,
  // otherwise a contiguous run of cores (core_share.hpp), so that the ranks on one host use
  // disjoint cores. With more processes than cores no share is disjoint: the workers spread
  // over all cores and are not bound. Ignored when units are picked (pus).
  unsigned share_index = 0;
  unsigned share_count = 1;
  bool bind = true;        // bind each worker to its processing unit (only on this system)
  bool steal_far = true;   // thieves may take work queued on other NUMA nodes
  bool verbose = false;    // print the mode and the worker map on stderr at start-up
  std::size_t deque_capacity = 256;  // initial capacity of each worker's deque (it grows)
  // How long an idle worker keeps searching, with a pause and no system call between looks,
  // before it starts yielding and then parks. Not when threads share cores (the searcher would
  // keep the producer of its next item off the core) nor with a poller (which has its own).
  // Zero: yield at once (tests use it to reach parking quickly).
  std::chrono::nanoseconds idle_spin = std::chrono::microseconds(20);
};

class Pool {
 public:
  // The most workers a pool takes: kWorkersPerUnit per processing unit, at least
  // kMinWorkerLimit (more is refused with std::invalid_argument).
  static constexpr std::size_t kWorkersPerUnit = 4;
  static constexpr std::size_t kMinWorkerLimit = 256;
  // A push from a worker looks at this many of the nearest workers' mailboxes.
  static constexpr std::size_t kMailboxScan = 4;

  // Throws std::invalid_argument for a bad topology description or processing-unit list, and
  // for more workers than the limit above.
  explicit Pool(PoolConfig config);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()); }

  void attach(Executor& exec);
  void detach();
  // The two largest values are the pool's own (kClosed, kOpen): items are smaller.
  static constexpr Item kClosed = ~Item{0};
  static constexpr Item kOpen = ~Item{0} - 1;
  void push(Item item) { push(item, -1); }
  // `node`: placement hint, the NUMA node (in [0, nodes()), wrapped modulo nodes()) whose
  // workers should run the item; -1 for none. Ignored in flat mode.
  void push(Item item, int node);

  // An item for worker `worker` alone: it takes it before anything else it finds, and no
  // thief does; if it is parked, it alone is woken. At most one pinned item per worker at a
  // time (the runtime's lanes: one item per lane, lane i on worker i, so that a lane waits for
  // its neighbours on a worker of its own, as an MPI rank does). Any thread.
  // Throws std::invalid_argument for a worker the pool lacks or a reserved item (kOpen,
  // kClosed), and std::logic_error when the worker has not taken its previous pinned item yet
  // (a broken protocol of the caller: the earlier item stays, this one is not queued).
  void push_to(unsigned worker, Item item);

  // Installs the observer. Call only while no executor is attached. Workers may call it at any
  // time (parking is not tied to runs), so it must outlive the pool: construct it first.
  // release: pairs with the acquire loads on the workers, which may be parking right now.
  void set_observer(Observer* observer) { observer_.store(observer, std::memory_order_release); }

  // Installs the poller idle workers call (nullptr: none). Same rules as set_observer: the
  // poller must outlive the pool, or be removed while no worker can be polling (no executor).
  void set_poller(Poller* poller) { poller_.store(poller, std::memory_order_release); }

  // Index of the calling worker in its pool, or -1 on a thread that is not a worker.
  static int current_worker();

  // How long an idle worker spins before it yields: PoolConfig::idle_spin, zero when threads
  // share cores (the spinner would keep its producer off the core). Whatever else waits for
  // work on a worker (the engine's lanes) spins no longer.
  std::chrono::nanoseconds idle_spin() const { return idle_spin_; }

  // Placement. The pool numbers the NUMA nodes its workers sit on 0..nodes()-1 (nodes without
  // a worker are left out). numa_mode() is false (flat work stealing, hints ignored) when that
  // is one node, or without hwloc.
  unsigned nodes() const { return static_cast<unsigned>(node_hw_.size()); }
  bool numa_mode() const { return nodes() > 1; }
  unsigned node_of(unsigned worker) const { return workers_[worker]->node; }
  // OS index of the processing unit worker `worker` runs on (is bound to, when binding).
  unsigned pu_of(unsigned worker) const { return topo_->pus()[workers_[worker]->pu].os_index; }
  // OS indices of the processing units worker `worker` may run on: its own unit, or this
  // process's share when it has more workers than units, or every unit of the machine when
  // oversubscribed. The decision, also on a topology that is not this system (where nothing is
  // bound): binds_threads() says whether it is applied.
  std::vector<unsigned> allowed_pus(unsigned worker) const;
  bool binds_threads() const { return binds_threads_; }
  // True when more processes run on this machine than it has cores, or this process has more
  // workers than processing units: threads then share cores.
  bool is_oversubscribed() const { return !oversubscribed_note_.empty(); }
  // The workers `worker` steals from, nearest first.
  std::vector<unsigned> steal_order(unsigned worker) const;
  // Whether `worker` spins idle with its mailbox open and empty right now (a snapshot, for
  // tests that must know a push will be delivered).
  bool has_open_mailbox(unsigned worker) const {
    return workers_[worker]->mailbox.load(std::memory_order_relaxed) == kOpen;
  }
  // Binds the whole pages of an area to pool node `node` (see Topology::bind_memory).
  Binding bind_memory(void* data, std::size_t bytes, unsigned node) const;
  // Pool node holding the area's first whole page, or -1 when it cannot be told.
  int memory_node(const void* data, std::size_t bytes) const;
  const Topology& topology() const { return *topo_; }
  // The start-up report (mode, topology, worker map), as printed when verbose.
  std::string describe() const;

 private:
  // Where a worker looks for work after its own deque: a node's injection queue or another
  // worker's deque.
  struct Source {
    bool inbox;
    unsigned index;  // node or worker
  };
  struct alignas(64) Worker {
    explicit Worker(std::size_t capacity) : deque(capacity), own(deque.owner()) {}
    Deque<Item> deque;
    Deque<Item>::Owner own;
    unsigned index = 0;
    std::size_t pu = 0;  // index into topo_->pus()
    unsigned node = 0;   // pool node
    std::vector<Source> sources;  // nearest first
    std::uint32_t ticks = 0;      // owner only: finds so far, to look at the inbox now and then
    std::vector<unsigned> near;   // the nearest workers of its node, at most kMailboxScan
    std::thread thread;
    // kClosed; kOpen while the owner spins idle; or an item put there for the owner (pool.cpp,
    // "Mailboxes"). On a line of its own: the pusher writes it, the spinning owner reads it.
    alignas(64) std::atomic<Item> mailbox{kClosed};
    // kClosed, or the item push_to() pinned to this worker (its owner empties it). On a line
    // of its own: the owner reads it at every search.
    alignas(64) std::atomic<Item> pinned{kClosed};
    // Parking (pool.cpp): the worker sleeps on its own condition variable, so that a pinned
    // item wakes it alone. Both guarded by park_mu_; `asleep`: it is listed in sleepers_. Off
    // the pinned slot's line, which the owner reads at every search.
    alignas(64) std::condition_variable wake;
    bool asleep = false;
  };
  struct alignas(64) Inbox {
    std::atomic<std::size_t> count{0};  // items, readable without the lock
    std::mutex mu;
    std::deque<Item> items;  // guarded by mu
  };

  void worker_main(Worker& w);
  bool find(Worker& w, Item& item);
  bool poll_while_idle(Worker& w, Poller& p, Item& item);
  bool spin_while_idle(Worker& w, Item& item);
  bool take_inbox(unsigned node, Item& item);
  // Puts `item` into the open mailbox of a worker near `self`; false when none is open.
  bool deliver(const Worker& self, Item item);
  bool close_mailbox(Worker& w, Item& item);
  bool steal_from(Worker& thief, unsigned victim, Item& item);
  void run(Worker& w, Item item);
  // Wakes a parked worker for an item queued on pool node `node`: any one, or with steal_far
  // off one of that node (a worker sees only its own node's work).
  void notify(unsigned node);
  // Wakes `w` if it is parked (its pinned item is published).
  void notify_pinned(Worker& w);
  std::uint64_t prepare_wait();
  void cancel_wait();
  void commit_wait(Worker& w, std::uint64_t epoch);
  // Takes `w` off sleepers_; under park_mu_.
  void unlist_sleeper(Worker& w);

  std::unique_ptr<Topology> topo_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;  // one per pool node
  std::vector<unsigned> node_hw_;                // pool node -> topology node
  // How workers are bound: each to its unit, each to the whole share (more workers than the
  // share has units), or not at all.
  enum class Bind { unit, share, none };
  Bind bind_ = Bind::none;
  bool binds_threads_ = false;  // bind_ is applied (this machine, hwloc, asked for)
  std::vector<std::size_t> share_pus_;  // this process's units (indices into topo_->pus())
  bool steal_far_ = true;
  std::chrono::nanoseconds idle_spin_{0};  // PoolConfig::idle_spin, 0 when oversubscribed
  std::string bind_note_;  // why binding is off, for describe()
  std::string share_note_;          // this process's share, for describe(); empty: the machine
  std::string oversubscribed_note_;  // what shares cores, for describe(); empty: nothing
  std::atomic<std::uint32_t> next_inbox_{0};  // round robin for outside pushes without a hint

  // Parking (pool.cpp): low 32 bits the number of workers between prepare_wait and the end of
  // commit/cancel_wait, high 32 bits an epoch bumped by every notification.
  alignas(64) std::atomic<std::uint64_t> state_{0};
  std::mutex park_mu_;
  std::vector<unsigned> sleepers_;  // the workers waiting in commit_wait; guarded by park_mu_
  std::atomic<bool> stop_{false};  // written under park_mu_

  std::atomic<Executor*> exec_{nullptr};
  std::atomic<Observer*> observer_{nullptr};
  std::atomic<Poller*> poller_{nullptr};
};

}  // namespace ordo::sched
