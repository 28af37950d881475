// Private to the api layer: what a public Graph holds.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/settings.hpp"
#include "runtime/engine.hpp"
#include "runtime/graph.hpp"
#include <ordo/ordo.hpp>

namespace ordo::detail {

class GraphImpl {
 public:
  rt::Graph graph{shared_storage_default()};
  // The transport of a distributed run, shared with the Runtime: declared before the engine so
  // that it outlives it (the engine detaches its channel when destroyed), even when the graph
  // outlives the Runtime.
  std::shared_ptr<rt::Net> net;
  std::unique_ptr<rt::Engine> engine;  // created by the first run; the graph is frozen then
  std::uint32_t channel = 0;           // the engine's channel across ranks (prepare)
  // What this graph's first run stands for in the ranks' run-start agreement, when it is not
  // a run of the program's own (a gather: "Runtime::gather of location 'x' ... onto rank 1");
  // empty: the run's own words.
  std::string collective;
  // Names this graph in trace files and in its handles (Location::graph_serial) for the life
  // of the process (addresses can be reused). Never 0, which marks a handle of no graph.
  const std::uint64_t serial = next_serial();
  // The users' bodies of Graph::task. A task's runtime body holds a pointer to its entry
  // (stable: a deque never moves its elements, and the Graph holds this object by unique_ptr),
  // which fits std::function's inline storage, so declaring a task does not allocate a second
  // closure.
  std::deque<Graph::Body> bodies;
  // Set while a task family's access pattern runs: declaring a task from inside it would
  // interleave with the family's members, so it is refused.
  const std::string* declaring_family = nullptr;
  // Checks of this rank's home locations after a restart filled them from a checkpoint, given
  // by layers that keep state of their own inside locations (the stencil layer's block
  // headers): detail::RestoredCheck, api/checkpoint.hpp. Each returns "" or what is wrong.
  std::vector<std::function<std::string(const rt::Engine&, rt::Graph&)>> restored_checks;
  // Called once, in order, when the first run is about to freeze the graph, with this rank
  // and the job's rank count: layers whose tasks depend on where their locations live (the
  // stencil layer declares its halo exchange once its blocks are placed) declare them here if
  // the program did not make them do it earlier.
  std::vector<std::function<void(unsigned rank, unsigned ranks)>> before_first_run;
  std::uint32_t declaring_count = 0;  // its members, for their names in messages
  // Set while a run, a gather of it or a restart uses the engine (RunClaim in
  // api/runtime.cpp): a second Runtime, or a second thread, that ran it at the same time would
  // share the engine's counters and lose updates or free what the first still uses.
  std::atomic<bool> in_use{false};
  // A task's name in messages, also for a member of the family being declared.
  std::string task_name(std::uint32_t task) const;

  bool frozen() const { return engine != nullptr; }
  // Compiles the lock plans and builds the engine on first use. Throws Error.
  // `net`: the Runtime's transport when it is one rank of several, with the graph's channel;
  // `share_memory`: whether this rank shares location memory with the ranks of its host.
  // `load`: the engine's (a restart fills the home locations before anything is granted).
  rt::Engine& prepare(std::shared_ptr<rt::Net> net = nullptr, std::uint32_t channel = 0,
                      bool share_memory = false,
                      const std::function<bool(rt::Engine&)>& load = {});
  // Compiles without keeping the result. Throws Error.
  void check() const;
  // Throws Error unless `location` is a location of this graph named by one of its handles
  // (`graph`: the handle's Location::graph_serial). `what` says what was asked, for the message.
  void check_handle(std::uint64_t graph, std::uint32_t location, const char* what) const;

 private:
  static std::uint64_t next_serial();
};

struct ContextImpl {
  const rt::Instance& instance;
  std::uint64_t graph;  // GraphImpl::serial, to refuse handles of other graphs
  // The contributions this instance made (Context::contribute): bit i for the task's access
  // i below 64, a count for the others.
  mutable std::uint64_t made = 0;
  mutable std::uint32_t made_beyond = 0;
};

// After a body of a task that declared contributions: throws Error naming the first one the
// instance did not make. `made(i)`: whether it made the one of access i.
void check_contributions(const rt::Instance& inst, const std::function<bool(std::uint32_t)>& made);
// The same from a Context's record, when the counts differ (else returns at once).
inline void check_contributions(const rt::Instance& inst, const ContextImpl& ctx) {
  const std::uint32_t declared = inst.graph->contributions_of(inst.task);
  if (declared == 0) return;
  if (static_cast<std::uint32_t>(__builtin_popcountll(ctx.made)) + ctx.made_beyond == declared)
    return;
  check_contributions(inst, [&](std::uint32_t i) { return i < 64 && ((ctx.made >> i) & 1) != 0; });
}

// Set on a thread while a stop condition that declared Until::reads runs: Graph::value reads
// only the reductions it lists (their results' locations), and Graph::data nothing.
struct ConditionScope {
  const GraphImpl* graph;
  const std::vector<std::uint32_t>* results;
};
extern thread_local const ConditionScope* tl_condition;
// The reduction (its index in the graph's) that an entry of Until::reads names; throws Error
// for anything but ordo::read(r) of a reduction of this graph.
std::uint32_t condition_reduction(const GraphImpl& impl, const Access& access);

struct FiberContextImpl {
  const rt::Instance& instance;  // its worker is updated by the engine at every resume
  std::uint64_t graph;
};

// Why a handle of `graph` cannot name a location of the graph `serial`, or empty when it can.
std::string foreign_handle(std::uint64_t graph, std::uint64_t serial, std::uint32_t location);

// Reductions (api/reduction.cpp). Why `access` to a reduction's location is refused for the
// task being declared (empty: allowed, or not a reduction's location).
std::string refuse_reduction_access(const GraphImpl& impl, const Access& access);
// Records the contributions of the member just declared (task `task`, accesses `accesses`).
void note_contributions(GraphImpl& impl, std::uint32_t task,
                        std::span<const rt::AccessDesc> accesses);
// Throws Error unless every reduction is combined.
void check_reductions(const GraphImpl& impl);

}  // namespace ordo::detail
