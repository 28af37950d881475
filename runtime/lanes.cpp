#include "runtime/lanes.hpp"

#include <algorithm>

#include "runtime/assert.hpp"

namespace ordo::rt {

namespace {

// One location's phases in the order of one iteration's FIFO, the plan's merge of a read
// group that wraps around undone (plan.cpp): the first read group, then the plan's phases.
struct IterationPhases {
  struct Run {
    std::span<const std::uint32_t> members;
    Mode mode;
  };
  std::vector<Run> runs;
  explicit IterationPhases(const LockPlan& lp) {
    const auto members = std::span<const std::uint32_t>(lp.members);
    const bool merged = lp.initial_phase != 0;
    if (merged) runs.push_back({members.subspan(lp.initial_begin, lp.initial_end - lp.initial_begin), Mode::read});
    for (std::size_t j = 0; j < lp.phases.size(); ++j) {
      const Phase& ph = lp.phases[j];
      std::uint32_t end = ph.end;
      if (merged && j == lp.initial_phase) end = lp.initial_begin;  // the group's later part
      runs.push_back({members.subspan(ph.begin, end - ph.begin), ph.mode});
    }
  }
};

}  // namespace

Lanes::LockedTasks Lanes::LockedTasks::of(const Graph& graph, const Plan& plan) {
  LockedTasks out;
  for (const Family& f : graph.families()) {
    out.has_fiber |= f.fiber;
    if (f.offsets == Graph::kNoAccesses) continue;
    for (std::uint32_t t = f.first; t < f.first + f.count; ++t)
      if (!plan.task_locks_of(t).empty()) {
        out.tasks.push_back(t);
        if (f.combining) ++out.combining;
      }
  }
  return out;
}

bool Lanes::fits(const LockedTasks& locked, unsigned workers) {
  // The reductions' combining tasks are not counted: each folds a few values, so a lane that
  // holds one more of them than another is not the slower for it, and without them a narrow
  // graph with a reduction (two sweeps and their sum) would never divide evenly.
  const std::uint64_t n = locked.tasks.size() - locked.combining;
  return workers >= 2 && !locked.has_fiber && n > 0 && n % workers == 0 &&
         n <= std::uint64_t{kTasksPerLane} * workers;
}

Lanes::Lanes(const Graph& graph, const Plan& plan, const LockedTasks& locked, unsigned lanes) {
  ORDO_ASSERT(lanes >= 1);
  const std::uint32_t ntasks = plan.tasks;
  // Each locked task's lane: a family's members in blocks, families smaller than the lane
  // count one member per lane in turn. The locked tasks and the families are both in
  // declaration order, so one pass over each finds every task's family.
  constexpr std::uint32_t kNone = ~std::uint32_t{0};
  std::vector<std::uint32_t> lane_of(ntasks, kNone);
  unsigned turn = 0;
  const auto& families = graph.families();
  std::size_t fi = 0;
  for (std::uint32_t t : locked.tasks) {
    while (families[fi].first + families[fi].count <= t) ++fi;
    const Family& f = families[fi];
    const std::uint32_t i = t - f.first;
    lane_of[t] = f.count >= lanes ? static_cast<std::uint32_t>(std::uint64_t{i} * lanes / f.count)
                                  : turn++ % lanes;
  }
  // Each lane's tasks in sequential order (positions), lane after lane.
  lanes_.resize(lanes);
  std::vector<std::vector<std::uint32_t>> per_lane(lanes);
  for (std::uint32_t t : sequential_order(graph))
    if (lane_of[t] != kNone) per_lane[lane_of[t]].push_back(t);
  slot_of_.assign(ntasks, kNone);
  std::vector<std::uint32_t> position_of(ntasks, kNone);
  std::uint32_t slot = 0;
  for (unsigned l = 0; l < lanes; ++l) {
    lanes_[l].begin = static_cast<std::uint32_t>(order_.size());
    for (std::uint32_t t : per_lane[l]) {
      position_of[t] = static_cast<std::uint32_t>(order_.size());
      slot_of_[t] = slot++;
      order_.push_back(t);
    }
    lanes_[l].end = static_cast<std::uint32_t>(order_.size());
    slot = (slot + kWordsPerLine - 1) / kWordsPerLine * kWordsPerLine;  // the next lane's line
  }
  lines_.reset(new WordLine[std::max<std::uint32_t>(1, slot / kWordsPerLine)]);
  parked_.reset(new Parked[lanes]);

  // The edges (header): per consumer position, its producers on other lanes with the larger
  // offset when several locations give the same producer.
  std::vector<std::vector<Edge>> in(order_.size());
  auto add = [&](std::uint32_t producer, std::uint32_t consumer, std::uint32_t offset) {
    if (producer == consumer || lane_of[producer] == lane_of[consumer]) return;
    auto& list = in[position_of[consumer]];
    const std::uint32_t s = slot_of_[producer];
    auto e = std::find_if(list.begin(), list.end(), [&](const Edge& x) { return x.slot == s; });
    if (e == list.end())
      list.push_back({s, offset});
    else
      e->offset = std::max(e->offset, offset);
  };
  for (const LockPlan& lp : plan.locks) {
    if (!lp.locked) continue;
    const IterationPhases ip(lp);
    const auto& runs = ip.runs;
    const std::size_t n = runs.size();
    for (std::size_t j = 0; j < n; ++j) {
      if (runs[j].mode == Mode::read) {
        // The nearest write before it, cyclically.
        std::size_t w = j;
        do w = (w + n - 1) % n; while (runs[w].mode != Mode::write);
        const std::uint32_t offset = w < j ? 1 : 0;
        for (std::uint32_t c : runs[j].members)
          for (std::uint32_t p : runs[w].members) add(p, c, offset);
        continue;
      }
      // A write waits for every read run back to the previous write (cyclically): they form
      // one read group of the FIFO (the plan merges the last run of one iteration with the
      // first of the next), granted together. With no read between, the previous write.
      for (std::size_t back = 1; back < n; ++back) {
        const std::size_t w = (j + n - back) % n;
        if (runs[w].mode == Mode::write && back > 1) break;  // the reads waited for it
        for (std::uint32_t c : runs[j].members)
          for (std::uint32_t p : runs[w].members) add(p, c, w < j ? 1 : 0);
        if (runs[w].mode == Mode::write) break;
      }
    }
  }
  edge_offsets_.assign(order_.size() + 1, 0);
  for (std::size_t pos = 0; pos < order_.size(); ++pos) {
    edge_offsets_[pos + 1] = edge_offsets_[pos] + static_cast<std::uint32_t>(in[pos].size());
    edges_.insert(edges_.end(), in[pos].begin(), in[pos].end());
  }
  // The lanes that wait for each position (one entry per lane).
  std::vector<std::vector<std::uint32_t>> waiting(order_.size());
  std::vector<std::uint32_t> slot_position(slot, kNone);
  for (std::size_t pos = 0; pos < order_.size(); ++pos) slot_position[slot_of_[order_[pos]]] = static_cast<std::uint32_t>(pos);
  for (std::size_t pos = 0; pos < order_.size(); ++pos) {
    const std::uint32_t lane = lane_of[order_[pos]];
    for (const Edge& e : in[pos]) {
      auto& w = waiting[slot_position[e.slot]];
      if (std::find(w.begin(), w.end(), lane) == w.end()) w.push_back(lane);
    }
  }
  waiter_offsets_.assign(order_.size() + 1, 0);
  for (std::size_t pos = 0; pos < order_.size(); ++pos) {
    waiter_offsets_[pos + 1] = waiter_offsets_[pos] + static_cast<std::uint32_t>(waiting[pos].size());
    waiters_.insert(waiters_.end(), waiting[pos].begin(), waiting[pos].end());
  }
  reset(0);
}

void Lanes::reset(std::uint64_t iteration) {
  for (std::uint32_t t : order_) word(t).store(iteration, std::memory_order_relaxed);
  for (unsigned l = 0; l < size(); ++l) {
    lanes_[l].cursor = {lanes_[l].begin, iteration};
    parked_[l].value.store(0, std::memory_order_relaxed);
  }
}

bool Lanes::park(unsigned lane) {
  // Read before the store: once parked, a producer may push the lane's item, which moves it.
  const Cursor c = lanes_[lane].cursor;
  std::atomic<std::uint32_t>& p = parked_[lane].value;
  // seq_cst: against complete()'s store of done then load of parked (header).
  p.store(1, std::memory_order_seq_cst);
  // If the inputs came, the lane runs on unless a producer took the word (and pushes the item):
  // then the exchange finds 0.
  const bool parked = !has_inputs(c.position, c.iteration) ||
                      p.exchange(0, std::memory_order_acq_rel) == 0;
  // relaxed: read between runs, after the run's completions have synchronised. The pushed item
  // runs on this worker, so not before this returns.
  if (parked) parked_[lane].count.fetch_add(1, std::memory_order_relaxed);
  return parked;
}

std::uint64_t Lanes::parks() const {
  std::uint64_t n = 0;
  for (unsigned l = 0; l < size(); ++l) n += parked_[l].count.load(std::memory_order_relaxed);
  return n;
}

}  // namespace ordo::rt
