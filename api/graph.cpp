#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include <ordo/bench.hpp>

#include "api/graph_impl.hpp"
#include "runtime/plan.hpp"
#include "runtime/storage.hpp"
#include "scheduler/pool.hpp"

static_assert(ordo::bench::kHugePageBytes == ordo::rt::kHugePageBytes,
              "the public huge-page threshold is the runtime's");

namespace ordo {

namespace detail {

void GraphImpl::check() const {
  check_reductions(*this);
  rt::CompileResult compiled = rt::compile(graph);
  if (!compiled.error.empty()) throw Error(compiled.error);
}

std::uint64_t GraphImpl::next_serial() {
  static std::atomic<std::uint64_t> serial{1};
  return serial.fetch_add(1, std::memory_order_relaxed);
}

std::string foreign_handle(std::uint64_t graph, std::uint64_t serial, std::uint32_t location) {
  if (graph == serial) return {};
  std::string why = "location #" + std::to_string(location);
  if (graph == 0)
    return why + " comes from a default-constructed Location (or an Access not built by "
                 "ordo::read or ordo::write), which names no graph; use the handle that "
                 "Graph::location returned";
  return why + " belongs to another Graph; use the handles this graph's location() returned";
}

void GraphImpl::check_handle(std::uint64_t handle_graph, std::uint32_t location,
                             const char* what) const {
  std::string why = foreign_handle(handle_graph, serial, location);
  if (why.empty() && location >= graph.locations().size())  // a handle never says this
    why = "location #" + std::to_string(location) + " does not belong to this graph";
  if (!why.empty()) throw Error(std::string(what) + ": " + why);
}

rt::Engine& GraphImpl::prepare(std::shared_ptr<rt::Net> with, std::uint32_t channel,
                               bool share_memory, const std::function<bool(rt::Engine&)>& load) {
  if (engine) return *engine;
  const unsigned ranks = with ? with->size() : 1;
  for (const auto& f : before_first_run) f(with ? with->rank() : 0, ranks);
  for (const rt::LocationDesc& l : graph.locations())
    if (l.home >= static_cast<std::int32_t>(ranks))
      throw Error("location '" + l.name + "' is placed on rank " + std::to_string(l.home) +
                  " but the job has " + std::to_string(ranks) +
                  " rank(s); place it on a rank below that, or start more ranks");
  check_reductions(*this);
  rt::CompileResult compiled = rt::compile(graph);
  if (!compiled.error.empty()) throw Error(compiled.error);
  if (ranks > 1 && !graph.reductions().empty() && graph.reductions()[0].copies == 0) {
    // Every rank gets its copy of each reduced value (runtime/reduction.hpp). Added only
    // once the graph compiled as declared, so that a refused graph is left as it was.
    for (std::uint32_t r = 0; r < graph.reductions().size(); ++r)
      for (const std::string& name : graph.copy_names(r, ranks))
        if (graph.find_location(name) >= 0)
          throw Error("a location called '" + name + "' already exists, and reduction '" +
                      graph.reductions()[r].name + "' needs that name for its copy on a rank; "
                      "rename the location");
    graph.add_reduction_copies(ranks);
    compiled = rt::compile(graph);
    if (!compiled.error.empty()) throw Error(compiled.error);
  }
  net = std::move(with);
  this->channel = channel;
  engine = std::make_unique<rt::Engine>(graph, std::move(compiled.plan), net.get(), channel,
                                        share_memory, load);
  return *engine;
}

std::string GraphImpl::task_name(std::uint32_t task) const {
  // The family being declared counts only its members so far: name them as it will.
  if (declaring_family && declaring_count > 1 && task >= graph.families().back().first)
    return *declaring_family + "[" + std::to_string(task - graph.families().back().first) + "]";
  return graph.task_name(task);
}

GraphImpl& impl_of(const Graph& graph) { return *graph.impl_; }

}  // namespace detail

Graph::Graph() : impl_(std::make_unique<detail::GraphImpl>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

std::uint64_t Graph::serial() const { return impl_->serial; }

namespace {

void check_new_location(const detail::GraphImpl& impl, const std::string& name,
                        std::size_t elem_size, std::size_t count) {
  if (impl.frozen())
    throw Error("cannot add location '" + name +
                "' after the graph's first run; declare every location before running");
  if (count == 0)
    throw Error("location '" + name + "' has 0 elements; give it at least one");
  if (count > std::numeric_limits<std::size_t>::max() / elem_size)
    throw Error("location '" + name + "' has " + std::to_string(count) + " elements of " +
                std::to_string(elem_size) + " bytes, more bytes than an address space holds; "
                "give it fewer elements");
  if (impl.graph.find_location(name) >= 0)
    throw Error("a location called '" + name + "' already exists; location names must be unique");
}

// Locations are numbered in 32 bits (Location::id).
constexpr std::uint64_t kMaxLocations = std::uint64_t{1} << 32;

void check_location_count(const detail::GraphImpl& impl, const std::string& name,
                          std::uint64_t more) {
  if (impl.graph.locations().size() + more >= kMaxLocations)
    throw Error("location '" + name + "' would make the graph hold more than " +
                std::to_string(kMaxLocations - 1) +
                " locations; merge small locations into larger ones");
}

}  // namespace

std::uint32_t Graph::add_location(const std::string& name, std::size_t elem_size,
                                  std::size_t count, const std::type_info& type) {
  check_new_location(*impl_, name, elem_size, count);
  check_location_count(*impl_, name, 1);
  return impl_->graph.add_location(name, elem_size, count, type);
}

void Graph::check_family_count(const std::string& name, std::uint32_t count) const {
  check_location_count(*impl_, name + "[" + std::to_string(count - 1) + "]", count);
  // Each member costs bookkeeping before any data (its size, its description and name), which
  // a huge family cannot get: refused as an Error naming it, not a bare std::bad_alloc.
  const std::uint64_t each = sizeof(std::size_t) + sizeof(rt::LocationDesc) + name.size() + 12;
  check_memory_available(std::uint64_t(count) * each,
                         "location family '" + name + "' of " + std::to_string(count) +
                             " members is too large: their bookkeeping alone, before any data,");
}

std::uint32_t Graph::add_location_family(const std::string& name, std::size_t elem_size,
                                         const std::vector<std::size_t>& sizes,
                                         const std::type_info& type) {
  const auto first = static_cast<std::uint32_t>(impl_->graph.locations().size());
  check_location_count(*impl_, name, sizes.size());
  const std::size_t n = sizes.size();
  std::vector<std::string> names(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    names[i].reserve(name.size() + 12);
    names[i].append(name).append("[").append(std::to_string(i)).append("]");
  }
  // Every member is checked before any is added: a refused family adds nothing.
  for (std::size_t i = 0; i < n; ++i) check_new_location(*impl_, names[i], elem_size, sizes[i]);
  rt::Graph& graph = impl_->graph;
  graph.reserve_locations(n);
  for (std::size_t i = 0; i < n; ++i)
    graph.add_location(std::move(names[i]), elem_size, sizes[i], type);
  return first;
}

namespace {

void check_declare(const detail::GraphImpl& impl, const std::string& name, std::uint64_t count,
                   bool has_body) {
  if (impl.frozen())
    throw Error("cannot add task '" + name +
                "' after the graph's first run; declare every task before running");
  if (!has_body) throw Error("task '" + name + "' has no body; pass a callable");
  if (impl.declaring_family)
    throw Error("cannot declare task '" + name + "' inside the access pattern of task family '" +
                *impl.declaring_family +
                "'; the pattern may only add accesses. Declare it before or after the family");
  if (!rt::Engine::can_run_tasks(impl.graph.task_count() + count))
    throw Error("task '" + name + "' would make the graph hold more than " +
                std::to_string(rt::Engine::kMaxTasks) +
                " tasks; split the work into fewer, larger tasks");
}

// The name of member `index` in error messages (families of more than one: "name[i]").
std::string member_name(const std::string& name, std::uint32_t count, std::uint32_t index) {
  if (count == 1) return name;
  std::string n = name;
  n.append("[").append(std::to_string(index)).append("]");
  return n;
}

// Checks one access of the member being declared and adds it. `who` names the member.
template <class Who>
void add_checked(detail::GraphImpl& impl, const Access& a, Who&& who) {
  const auto& locs = impl.graph.locations();
  std::string foreign = detail::foreign_handle(a.graph, impl.serial, a.location);
  if (foreign.empty() && a.location >= locs.size())  // an Access a handle did not build
    foreign = "location #" + std::to_string(a.location) + " does not belong to this graph";
  if (!foreign.empty()) throw Error("task '" + who() + "' cannot access it: " + foreign);
  if (!impl.graph.reductions().empty()) {
    const std::string why = detail::refuse_reduction_access(impl, a);
    if (!why.empty()) throw Error("task '" + who() + "' " + why);
  }
  // Duplicates: a scan over the usual handful of accesses; longer lists are checked once
  // complete (end_checked).
  const auto current = impl.graph.current_member();
  if (current.size() < rt::Graph::kLinearScan &&
      std::any_of(current.begin(), current.end(),
                  [&](const rt::AccessDesc& d) { return d.location == a.location; }))
    throw Error("task '" + who() + "' lists location '" + locs[a.location].name +
                "' twice; give one access per location (write() also allows reading)");
  impl.graph.add_access({a.location, a.mode == Mode::write ? rt::Mode::write : rt::Mode::read,
                         a.has_position, a.position});
}

template <class Who>
void end_checked(detail::GraphImpl& impl, Who&& who) {
  const std::int64_t twice = impl.graph.end_member();
  if (twice >= 0)
    throw Error("task '" + who() + "' lists location '" +
                impl.graph.locations()[static_cast<std::size_t>(twice)].name +
                "' twice; give one access per location (write() also allows reading)");
  if (!impl.graph.reductions().empty()) {
    const std::uint32_t task = impl.graph.task_count() - 1;
    detail::note_contributions(impl, task, impl.graph.last_member());
  }
}

// Declares one task (a family of one) with `body` and `accesses`; undoes it if refused.
std::uint32_t declare_one(detail::GraphImpl& impl, const std::string& name,
                          const std::vector<Access>& accesses, rt::Body body, bool fiber) {
  const std::uint32_t t = impl.graph.begin_family(name, std::move(body), fiber);
  try {
    auto who = [&] { return name; };
    for (const Access& a : accesses) add_checked(impl, a, who);
    end_checked(impl, who);
    impl.graph.end_family();
  } catch (...) {
    impl.graph.abandon_family();
    throw;
  }
  return t;
}

}  // namespace

void AccessList::add(Access access) {
  add_checked(graph_, access, [&] { return member_name(name_, count_, index_); });
}

std::uint32_t Graph::task(const std::string& name, std::vector<Access> accesses, Body body) {
  check_declare(*impl_, name, 1, static_cast<bool>(body));
  detail::GraphImpl* impl = impl_.get();
  const Body* user = &impl->bodies.emplace_back(std::move(body));
  try {
    return declare_one(*impl, name, accesses, [user, serial = impl->serial](const rt::Instance& inst) {
      detail::ContextImpl ctx_impl{inst, serial};
      Context ctx(ctx_impl);
      (*user)(ctx);
      detail::check_contributions(inst, ctx_impl);
    }, false);
  } catch (...) {
    impl->bodies.pop_back();  // keep bodies and tasks in step if the task was refused
    throw;
  }
}

std::uint32_t Graph::task_family(const std::string& name, std::uint32_t count,
                                 const AccessPattern& accesses, IndexedBody body) {
  check_declare(*impl_, name, count, static_cast<bool>(body));
  if (!accesses) throw Error("task family '" + name + "' has no access pattern; pass a callable");
  const std::uint32_t first = impl_->graph.task_count();
  if (count == 0) return first;
  rt::Body run = [body = std::move(body), serial = impl_->serial](const rt::Instance& inst) {
    detail::ContextImpl ctx_impl{inst, serial};
    Context ctx(ctx_impl);
    body(ctx, inst.index);
    detail::check_contributions(inst, ctx_impl);
  };
  detail::GraphImpl& impl = *impl_;
  impl.graph.begin_family(name, std::move(run));
  impl.declaring_family = &name;
  impl.declaring_count = count;
  try {
    for (std::uint32_t i = 0; i < count; ++i) {
      AccessList list(impl, name, count, i);
      accesses(i, list);
      end_checked(impl, [&] { return member_name(name, count, i); });
    }
    impl.graph.end_family();
  } catch (...) {
    impl.declaring_family = nullptr;
    impl.graph.abandon_family();
    throw;
  }
  impl.declaring_family = nullptr;
  return first;
}

std::uint32_t Graph::task_family(const std::string& name, std::uint32_t count,
                                 IndexedBody body) {
  check_declare(*impl_, name, count, static_cast<bool>(body));
  if (count == 0) return impl_->graph.task_count();
  return impl_->graph.add_free_family(name, count, [body = std::move(body), serial = impl_->serial](
                                                        const rt::Instance& inst) {
    detail::ContextImpl ctx_impl{inst, serial};
    Context ctx(ctx_impl);
    body(ctx, inst.index);
  });
}

std::uint32_t Graph::fiber_task(const std::string& name, std::vector<Access> accesses,
                                FiberBody body) {
  check_declare(*impl_, name, 1, static_cast<bool>(body));
  return declare_one(*impl_, name, accesses, [body = std::move(body), serial = impl_->serial](
                                                 const rt::Instance& inst) {
    detail::FiberContextImpl impl{inst, serial};
    FiberContext ctx(impl);
    body(ctx);
    // A contribution's slot the body never acquired was not written this iteration.
    if (inst.graph->contributions_of(inst.task) != 0)
      detail::check_contributions(inst, [&](std::uint32_t i) {
        return inst.engine->hold(inst, i) != rt::Engine::Hold::requested;
      });
  }, true);
}

void* Graph::data_bytes(std::uint64_t graph, std::uint32_t location,
                        const std::type_info& type) const {
  impl_->check_handle(graph, location, "Graph::data");
  const auto& locs = impl_->graph.locations();
  if (*locs[location].type != type)
    throw Error("Graph::data: location '" + locs[location].name +
                "' holds another element type; read it through the Location<T> that "
                "Graph::location returned (the same T)");
  const std::string& name = locs[location].name;
  if (detail::tl_condition && detail::tl_condition->graph == impl_.get())
    throw Error("run_until's stop condition reads location '" + name +
                "' with Graph::data, but it lists its reads in Until::reads: such a condition "
                "runs in the dataflow, where only the values of the reductions it lists are "
                "final. Reduce what it needs of the location into a reduction and list that, "
                "or leave Until::reads empty (the condition then runs between iterations, "
                "with every task stopped)");
  // A body reading through the graph would bypass the locks that order its accesses.
  if (sched::Pool::current_worker() >= 0)
    throw Error("Graph::data of location '" + name + "' called from a task body; a body reads "
                "and writes the locations among its accesses through its Context (ctx.read, "
                "ctx.write), in the order the locks give");
  // After the first run only the home's copy is the location: a replica here is stale, or
  // absent (a rank holds only what it uses).
  if (impl_->engine && impl_->engine->home(location) != impl_->engine->rank()) {
    const rt::Engine& e = *impl_->engine;
    const std::string home = std::to_string(e.home(location)), rank = std::to_string(e.rank());
    throw Error("Graph::data: location '" + name + "' lives on rank " + home +
                " (its home); rank " + rank + " holds at most a replica of it, current only "
                "while its own tasks use it. Collect it with Runtime::gather(graph, location, " +
                rank + "), or onto every rank with ordo::kAllRanks (every rank calls it)");
  }
  rt::Graph& g = impl_->graph;
  if (!g.has_storage(location)) {
    if (!g.provide_storage(location, true))
      throw Error("Graph::data: cannot allocate " + rt::format_bytes(g.bytes_of(location)) +
                  " for location '" + name + "' on this rank: the system has no memory to give; "
                  "make the location smaller or spread the problem over more ranks");
  }
  return g.data(location);
}

void check_memory_available(std::uint64_t bytes, const std::string& what) {
  const rt::MemoryAvailable m = rt::memory_available();
  const bool process_limits = m.process < m.host;
  const std::uint64_t available = process_limits ? m.process : m.host;
  if (bytes <= available) return;
  throw Error(what + " need " + rt::format_bytes(bytes) + ", but this process can get " +
              rt::format_bytes(available) + " (" +
              rt::describe(process_limits ? m.process_source : m.host_source) +
              "); make the problem smaller or spread it over more ranks or hosts");
}

StorageStats Graph::storage_held() const {
  return {impl_->graph.locations_held(), impl_->graph.bytes_held(),
          impl_->graph.bytes_reserved()};
}

void Graph::place_location(std::uint64_t graph, std::uint32_t location, unsigned node) {
  impl_->check_handle(graph, location, "Graph::set_home_node");
  if (impl_->frozen())
    throw Error("cannot set the home node of location '" + impl_->graph.locations()[location].name +
                "' after the graph's first run; call Graph::set_home_node before running");
  impl_->graph.place(location, node);
}

void Graph::set_home_rank_of(std::uint64_t graph, std::uint32_t location, unsigned rank) {
  impl_->check_handle(graph, location, "Graph::set_home_rank");
  // Homes are stored signed, -1 meaning the default placement.
  if (rank > static_cast<unsigned>(std::numeric_limits<std::int32_t>::max()))
    throw Error("Graph::set_home_rank: rank " + std::to_string(rank) + " for location '" +
                impl_->graph.locations()[location].name +
                "' is not a rank number; give one below Runtime::ranks()");
  if (impl_->frozen())
    throw Error("cannot place location '" + impl_->graph.locations()[location].name +
                "' on a rank after the graph's first run; place locations before running");
  impl_->graph.set_home(location, static_cast<std::int32_t>(rank));
}

unsigned Graph::home_rank_of(std::uint64_t graph, std::uint32_t location) const {
  impl_->check_handle(graph, location, "Graph::home_rank");
  if (!impl_->engine)
    throw Error("a location's home rank is decided at the graph's first run; ask after it");
  return impl_->engine->home(location);
}

std::size_t Graph::locations() const { return impl_->graph.locations().size(); }
std::size_t Graph::tasks() const { return impl_->graph.task_count(); }
std::uint64_t Graph::iterations_done() const {
  return impl_->engine ? impl_->engine->iterations_done() : 0;
}

void Graph::validate() { impl_->check(); }

namespace {
// Refuses an extension point's empty function (`what`: "hook", "check"), and one given once the
// graph has run.
void check_extension(const detail::GraphImpl& impl, bool given, const std::string& call,
                     const std::string& what) {
  if (!given) throw Error(call + ": the " + what + " is an empty function; give one");
  if (impl.frozen())
    throw Error(call + ": this graph has run already; give its " + what + "s before the first run");
}
}  // namespace

void Graph::on_first_run(FirstRunHook hook) {
  check_extension(*impl_, bool(hook), "Graph::on_first_run", "hook");
  impl_->before_first_run.push_back(std::move(hook));
}

// What a Restored reads: the engine a restart is building, its graph, and the serial of the
// Graph its handles must name.
struct Restored::View {
  const rt::Engine& engine;
  rt::Graph& graph;
  std::uint64_t serial;
};

void Graph::on_restore(RestoreCheck check) {
  check_extension(*impl_, bool(check), "Graph::on_restore", "check");
  impl_->restored_checks.push_back([check = std::move(check), serial = impl_->serial](
                                       const rt::Engine& engine, rt::Graph& graph) {
    const Restored::View view{engine, graph, serial};
    Restored restored(view);
    return check(restored);
  });
}

void Graph::derive_location(std::uint64_t graph, std::uint32_t location) {
  impl_->check_handle(graph, location, "Graph::set_derived");
  if (impl_->frozen())
    throw Error("Graph::set_derived: this graph has run already; mark location '" +
                impl_->graph.locations()[location].name + "' derived before the first run");
  impl_->graph.set_derived(location);
}

void Graph::set_derived_task(std::uint32_t task) {
  if (task >= impl_->graph.task_count())
    throw Error("Graph::set_derived_task: task #" + std::to_string(task) +
                " does not belong to this graph (it has " +
                std::to_string(impl_->graph.task_count()) + " tasks)");
  if (impl_->frozen())
    throw Error("Graph::set_derived_task: this graph has run already; mark task '" +
                impl_->graph.task_name(task) + "' derived before the first run");
  impl_->graph.set_derived_task(task);
}

bool Restored::home_here(std::uint64_t graph, std::uint32_t location) const {
  std::string why = detail::foreign_handle(graph, view_.serial, location);
  if (why.empty() && location >= view_.graph.locations().size())
    why = "location #" + std::to_string(location) + " does not belong to this graph";
  if (!why.empty()) throw Error("Restored: " + why);
  return view_.engine.home(location) == view_.engine.rank();
}

const void* Restored::bytes(std::uint64_t graph, std::uint32_t location,
                            const std::type_info& type) const {
  const bool home = home_here(graph, location);
  const rt::LocationDesc& l = view_.graph.locations()[location];
  if (*l.type != type)
    throw Error("Restored::data: location '" + l.name +
                "' holds another element type; read it through the Location<T> that "
                "Graph::location returned (the same T)");
  if (!home)
    throw Error("Restored::data: location '" + l.name + "' lives on rank " +
                std::to_string(view_.engine.home(location)) + ", and a restart fills only " +
                "this rank's (" + std::to_string(view_.engine.rank()) +
                ") home locations; ask Restored::is_home first");
  return view_.graph.data(location);
}

}  // namespace ordo
