#include <exception>
#include <optional>
#include <string>

#include "api/graph_impl.hpp"
#include "runtime/reduction.hpp"

namespace ordo {

// Counted on from the checkpoint a restart resumed from (rt::Graph::first_iteration).
std::uint64_t Context::iteration() const {
  return impl_.instance.graph->first_iteration() + impl_.instance.iteration;
}
unsigned Context::worker() const { return impl_.instance.worker; }

namespace {

std::string location_name(const rt::Graph& graph, std::uint32_t location) {
  const auto& locs = graph.locations();
  std::string what;  // built with append: GCC 12 warns falsely on "'" + std::string
  if (location < locs.size())
    what.append("'").append(locs[location].name).append("'");
  else
    what.append("#").append(std::to_string(location));
  return what;
}

[[noreturn]] void undeclared(const rt::Instance& inst, std::uint32_t location, const char* verb) {
  throw Error("task '" + inst.graph->task_name(inst.task) + "' " + verb + " location " +
              location_name(*inst.graph, location) +
              ", which it did not declare; add ordo::read() or ordo::write() of it to the task's "
              "accesses");
}

// A body that reaches a location with another element type than the location's: through a
// Location<T> of another T, or a Reduction<T> made to read another T (a copied handle's bytes).
[[noreturn]] void wrong_type(const rt::Instance& inst, std::uint32_t location, const char* verb) {
  const rt::Graph& g = *inst.graph;
  const std::string task = "task '" + g.task_name(inst.task) + "' ";
  const rt::LocationDesc& loc = g.locations()[location];
  if (const std::optional<rt::ReductionPart> part = g.reduction_part(location)) {
    const rt::Reduction& r = g.reductions()[part->reduction];
    throw Error(task + verb + " reduction '" + r.name + "' as another type than the " +
                std::to_string(r.elem_size) + "-byte values it was declared with; use the "
                "Reduction<T> that Graph::reduction returned (the same T)");
  }
  throw Error(task + verb + " location '" + loc.name +
              "' with another element type than it was declared with; use the Location<T> that "
              "Graph::location returned (the same T)");
}

// Refuses a handle of another graph before its number is looked up here.
void check_graph(const rt::Instance& inst, std::uint64_t handle_graph, std::uint64_t serial,
                 std::uint32_t location, const char* verb) {
  const std::string why = detail::foreign_handle(handle_graph, serial, location);
  if (!why.empty())
    throw Error("task '" + inst.graph->task_name(inst.task) + "' " + verb +
                " a location through a handle of no location it declared: " + why);
}

// The index of `location` in the task's accesses; throws Error if the task did not declare it
// or if the body runs off its fiber.
std::uint32_t fiber_access(const rt::Instance& inst, std::uint64_t serial, std::uint64_t graph,
                           std::uint32_t location, const char* verb) {
  if (graph != serial) check_graph(inst, graph, serial, location, verb);
  if (!inst.engine->is_on_own_fiber(inst))
    throw Error("task '" + inst.graph->task_name(inst.task) + "' " + verb + " location " +
                location_name(*inst.graph, location) +
                " off its body's fiber (from another thread, or through a FiberContext kept "
                "after the body returned); call acquire and release from the body itself");
  const std::int64_t i = inst.graph->find_access(inst.accesses, location);
  if (i < 0) undeclared(inst, location, verb);
  return static_cast<std::uint32_t>(i);
}

}  // namespace

FiberContext::FiberContext(const detail::FiberContextImpl& impl)
    : instance_(&impl.instance), graph_(impl.graph) {}

namespace {
const rt::Instance& instance_of(const void* instance) {
  return *static_cast<const rt::Instance*>(instance);
}
}  // namespace

std::uint64_t FiberContext::iteration() const {
  const rt::Instance& inst = instance_of(instance_);
  return inst.graph->first_iteration() + inst.iteration;
}
unsigned FiberContext::worker() const { return instance_of(instance_).worker; }

void* FiberContext::acquire_bytes(std::uint64_t graph, std::uint32_t location, Mode mode,
                                  const std::type_info& type) {
  const rt::Instance& inst = instance_of(instance_);
  const std::uint32_t access = fiber_access(inst, graph_, graph, location, "acquires");
  // Built only for a message: a name is a string, and acquire and release run per access.
  auto name = [&] { return inst.graph->task_name(inst.task); };
  const rt::LocationDesc& loc = inst.graph->locations()[location];
  if (mode == Mode::write && inst.accesses[access].mode != rt::Mode::write)
    throw Error("task '" + name() + "' calls acquire_write on location '" + loc.name +
                "' but declared it with read(); declare it with write(), or use acquire_read");
  if (*loc.type != type) wrong_type(inst, location, "acquires");
  // The C++ runtime keeps the exceptions being handled in per-thread state, which a fiber
  // resuming on another thread would corrupt (docs/fibers.md, rule 3).
  if (std::uncaught_exceptions() > 0 || std::current_exception())
    throw Error("task '" + name() + "' acquires location '" + loc.name +
                "' inside a catch block or during stack unwinding; acquire may move the fiber "
                "to another thread, which the exception being handled cannot follow. Leave the "
                "handler first, then acquire");
  switch (inst.engine->hold(inst, access)) {
    case rt::Engine::Hold::held:
      throw Error("task '" + name() + "' acquires location '" + loc.name + "' twice in iteration " +
                  std::to_string(inst.iteration) + " without releasing it; acquire once and keep the span");
    case rt::Engine::Hold::released:
      throw Error("task '" + name() + "' acquires location '" + loc.name +
                  "' again after releasing it in iteration " +
                  std::to_string(inst.iteration) +
                  "; a release hands the location on (its next grant is for iteration " +
                  std::to_string(inst.iteration + 1) +
                  "), so acquire it once per iteration and release it when done");
    case rt::Engine::Hold::requested:
      break;
  }
  inst.engine->fiber_acquire(inst, access);
  return inst.graph->data(location);
}

void FiberContext::release_location(std::uint64_t graph, std::uint32_t location) {
  const rt::Instance& inst = instance_of(instance_);
  const std::uint32_t access = fiber_access(inst, graph_, graph, location, "releases");
  auto name = [&] { return inst.graph->task_name(inst.task); };
  const rt::LocationDesc& loc = inst.graph->locations()[location];
  switch (inst.engine->hold(inst, access)) {
    case rt::Engine::Hold::requested:
      throw Error("task '" + name() + "' releases location '" + loc.name +
                  "', which it has not acquired in iteration " + std::to_string(inst.iteration) +
                  "; acquire it first, or leave it: what the body does not release is released "
                  "when it returns");
    case rt::Engine::Hold::released:
      throw Error("task '" + name() + "' releases location '" + loc.name +
                  "' twice in iteration " + std::to_string(inst.iteration) +
                  "; release each acquired location once");
    case rt::Engine::Hold::held:
      break;
  }
  inst.engine->fiber_release(inst, access);
}

void* Context::bytes(std::uint64_t graph, std::uint32_t location, Mode mode,
                     const std::type_info& type) const {
  const rt::Instance& inst = impl_.instance;
  if (graph != impl_.graph) check_graph(inst, graph, impl_.graph, location, "accesses");
  const std::int64_t i = inst.graph->find_access(inst.accesses, location);
  if (i < 0) undeclared(inst, location, "accesses");
  const rt::AccessDesc& a = inst.accesses[static_cast<std::size_t>(i)];
  const rt::LocationDesc& loc = inst.graph->locations()[location];
  if (mode == Mode::write && a.mode != rt::Mode::write)
    throw Error("task '" + inst.graph->task_name(inst.task) + "' writes location '" + loc.name +
                "' but declared it with read(); declare it with write()");
  if (*loc.type != type) wrong_type(inst, location, "accesses");
  return inst.graph->data(location);
}

void* Context::contribution(std::uint64_t graph, std::uint32_t partial,
                            const std::type_info& type) const {
  void* slot = bytes(graph, partial, Mode::write, type);
  const rt::Instance& inst = impl_.instance;
  const auto i = static_cast<std::uint64_t>(inst.graph->find_access(inst.accesses, partial));
  if (i < 64)
    impl_.made |= std::uint64_t{1} << i;
  else
    ++impl_.made_beyond;
  return slot;
}

namespace detail {

void check_contributions(const rt::Instance& inst, const std::function<bool(std::uint32_t)>& made) {
  const rt::Graph& g = *inst.graph;
  for (std::uint32_t i = 0; i < inst.accesses.size(); ++i) {
    const std::optional<rt::ReductionPart> part = g.reduction_part(inst.accesses[i].location);
    if (!part || part->role != rt::ReductionRole::partial || made(i)) continue;
    const rt::Reduction& r = g.reductions()[part->reduction];
    const std::string which = std::to_string(part->index);
    throw Error("task '" + g.task_name(inst.task) + "' declared ordo::contribute(" + r.name + ", " +
                which + ") but made no contribution " + which + " to reduction '" + r.name +
                "' in iteration " + std::to_string(g.first_iteration() + inst.iteration) +
                " (its value would be left from an earlier iteration); call ctx.contribute(r, " +
                which +
                ", value) in every iteration, with the operator's identity (0 for a sum) "
                "where the task has nothing to add");
  }
}

}  // namespace detail

}  // namespace ordo
