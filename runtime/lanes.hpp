// Lanes: the lock protocol of a graph run in one process without a shared read-modify-write
// on the critical path (docs/model.md, "Lanes"). The engine uses it when the rule in
// Lanes::fits holds; otherwise the phase machine (engine.hpp) runs the graph.
//
// What replaces the locks. In every iteration each location's FIFO is the same sequence of
// phases (plan.hpp), so who waits for whom is known before the run: an instance (t, k) may
// start once, on each location it locks, the phase before its own has released. A read waits
// for the nearest write before it (cyclically: the previous iteration's last write when the
// read comes first); a write waits for every read back to the previous write, or for that
// write when no read comes between (cyclically: the read group that wraps around the iteration
// is one phase, with members of both iterations). Waiting only for the adjacent phase
// suffices: that phase's holders waited for theirs. Each such edge p -> t is stored as
// (p, offset): (t, k) needs done(p) >= k + offset, where done(p) counts p's completed
// instances and offset is 1 when p comes before t in the iteration, 0 when the edge wraps
// (p's instance of iteration k - 1). done(p) is written only by whoever runs p (a release is
// a store, not a decrement), so the waiting side reads its producers' lines, which it can
// fetch all at once, and no counter is shared by the holders of a phase.
//
// Who runs what. The tasks are split into one lane per worker (a family's members in
// contiguous blocks, so a stencil's neighbours share a lane), each lane's tasks in the graph's
// sequential order. Lane i's item is pinned to worker i (sched::Pool::push_to), so that each
// lane waits on a core of its own. It runs its lane's instances one after the other, iteration by
// iteration, up to the engine's iteration limit, and waits (spinning) for the producers of
// the next one; an edge between two tasks of one lane needs no check, since the lane runs
// them in an order that satisfies it. No deadlock: every lane runs its instances in the order
// (iteration, sequential position), which every edge respects, so the earliest unfinished
// instance of all has its inputs and its lane is waiting for it, not for a later one.
//
// Parking. A lane whose next instance is not ready after a spin gives its worker back: it
// sets `parked`, checks the inputs once more (Dekker's pattern with the producers' store of
// done then load of parked, both sequentially consistent), and returns. A producer, after
// storing done(p), reads the parked word of each lane that depends on p; whoever takes the
// word (exchange to 0) owns the lane: the producer pins its item again, or the lane, finding
// its inputs on the second check, runs on. So a lane item exists at most once, and only the
// lane item touches the lane's own state (its cursor: position and iteration).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/graph.hpp"
#include "runtime/plan.hpp"

namespace ordo::rt {

class Lanes {
 public:
  // The rule for the automatic choice, its graph part (docs/model.md, "Lanes"): no fiber
  // task, and the tasks that lock something, leaving out the reductions' combining tasks,
  // number a multiple of `workers`, at most kTasksPerLane per worker. A graph that narrow (a
  // stencil of one task per worker and step) is balanced by the static split as long as its
  // tasks are alike, and the hand-offs between the workers are most of what a step costs
  // beyond the bodies; a wider graph keeps the work stealing, which balances unequal tasks.
  static constexpr std::uint32_t kTasksPerLane = 4;
  // The tasks that lock something, in declaration order, and whether a task is a fiber: one
  // walk of the graph, made once (a compiled graph does not change), for the rule and for
  // every split into lanes.
  struct LockedTasks {
    std::vector<std::uint32_t> tasks;
    std::uint64_t combining = 0;  // how many of them fold a reduction (Family::combining)
    bool has_fiber = false;
    static LockedTasks of(const Graph& graph, const Plan& plan);
  };
  static bool fits(const LockedTasks& locked, unsigned workers);

  // The lanes of `graph` for `lanes` workers (any graph that compiled; fiber tasks excluded by
  // the caller); `locked`: LockedTasks::of(graph, plan). Every locked task starts at iteration
  // 0.
  Lanes(const Graph& graph, const Plan& plan, const LockedTasks& locked, unsigned lanes);
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

  unsigned size() const { return static_cast<unsigned>(lanes_.size()); }
  bool is_empty(unsigned lane) const { return lanes_[lane].begin == lanes_[lane].end; }
  // Every locked task, whichever lane.
  std::span<const std::uint32_t> tasks() const { return order_; }

  // Between runs only (the engine's change of protocol): every lane starts again at the first
  // task of its order, at iteration `iteration` (every locked task's next one), unparked.
  void reset(std::uint64_t iteration);

  // The lane item's state, touched only by whoever runs it.
  struct Cursor {
    std::uint32_t position;  // index into order_, within the lane
    std::uint64_t iteration;
  };
  Cursor& cursor(unsigned lane) { return lanes_[lane].cursor; }
  // Moves the cursor to the lane's next instance.
  void advance(unsigned lane) {
    Lane& ln = lanes_[lane];
    if (++ln.cursor.position == ln.end) {
      ln.cursor.position = ln.begin;
      ++ln.cursor.iteration;
    }
  }
  std::uint32_t task_at(std::uint32_t position) const { return order_[position]; }

  // Starts fetching the lines of the producers of the instance at `position`.
  void prefetch_inputs(std::uint32_t position) const {
    for (const Edge& e : inputs(position)) __builtin_prefetch(&at(e.slot), 0);
  }
  // Whether every producer of (task at `position`, `iteration`) on another lane is done.
  bool has_inputs(std::uint32_t position, std::uint64_t iteration) const {
    for (const Edge& e : inputs(position))
      if (at(e.slot).load(std::memory_order_acquire) < iteration + e.offset) return false;
    return true;
  }
  // The task at `position` completed iteration `iteration`: stores its done word, then calls
  // `wake(lane)` for every lane waiting for it whose parked word this caller took (it must push
  // that lane's item).
  template <class Wake>
  void complete(std::uint32_t position, std::uint64_t iteration, Wake&& wake) {
    const std::uint32_t first = waiter_offsets_[position], last = waiter_offsets_[position + 1];
    std::atomic<std::uint64_t>& done = word(order_[position]);
    if (first == last) {
      // release, not seq_cst: no lane waits for this position, so no lane parks on it and no
      // load of parked must be ordered after this store (the header's Dekker pattern); no
      // has_inputs reads it during the run, and the run's end orders it before the next.
      done.store(iteration + 1, std::memory_order_release);
      return;
    }
    // seq_cst: with the load of parked below, against park()'s store then load (header).
    done.store(iteration + 1, std::memory_order_seq_cst);
    for (std::uint32_t i = first; i < last; ++i) {
      std::atomic<std::uint32_t>& p = parked_[waiters_[i]].value;
      if (p.load(std::memory_order_seq_cst) != 0 && p.exchange(0, std::memory_order_acq_rel) != 0)
        wake(waiters_[i]);
    }
  }

  // The lane's worker gives up waiting: true when the lane is parked (someone else will push
  // it), false when the inputs came meanwhile and the caller keeps the lane.
  bool park(unsigned lane);
  // How many times the lanes have parked since they were built. Between runs.
  std::uint64_t parks() const;

 private:
  struct Edge {
    std::uint32_t slot;    // producer's done word
    std::uint32_t offset;  // 1: same iteration, 0: the previous one
  };
  std::span<const Edge> inputs(std::uint32_t position) const {
    return {edges_.data() + edge_offsets_[position], edges_.data() + edge_offsets_[position + 1]};
  }
  static constexpr std::uint32_t kWordsPerLine = 8;
  struct alignas(64) WordLine {
    std::atomic<std::uint64_t> words[kWordsPerLine];
  };
  std::atomic<std::uint64_t>& at(std::uint32_t slot) const {
    return lines_[slot / kWordsPerLine].words[slot % kWordsPerLine];
  }
  std::atomic<std::uint64_t>& word(std::uint32_t task) const { return at(slot_of_[task]); }

  struct alignas(64) Parked {
    std::atomic<std::uint32_t> value{0};
    // Times the lane parked: written by the lane item only, on the line park() writes anyway.
    std::atomic<std::uint64_t> count{0};
  };
  struct alignas(64) Lane {
    std::uint32_t begin = 0, end = 0;  // positions in order_
    Cursor cursor{0, 0};
  };
  std::vector<std::uint32_t> order_;      // lane after lane
  std::vector<std::uint32_t> slot_of_;    // per task (locked tasks only meaningful)
  std::vector<std::uint32_t> edge_offsets_;  // per position (CSR over edges_)
  std::vector<Edge> edges_;
  std::vector<std::uint32_t> waiter_offsets_;  // per position: lanes that wait for it (CSR)
  std::vector<std::uint32_t> waiters_;
  // Done words, one per locked task, lane after lane; each lane's on lines of their own, so
  // that a lane's stores never take a line another lane writes.
  std::unique_ptr<WordLine[]> lines_;
  std::vector<Lane> lanes_;
  std::unique_ptr<Parked[]> parked_;
};

}  // namespace ordo::rt
