// Graph::reduction, combine and value, and the checks of a reduction's accesses
// (runtime/reduction.hpp builds the graph; docs/api.md, "Reductions", is the tour).
#include <algorithm>
#include <exception>
#include <string>

#include "api/graph_impl.hpp"
#include "runtime/reduction.hpp"
#include "scheduler/pool.hpp"

namespace ordo {

static_assert(kReductionFanIn == rt::kReductionFanIn,
              "combine_in_order must combine as the graph's tree does");

namespace detail {

thread_local const ConditionScope* tl_condition = nullptr;

std::string refuse_reduction_access(const GraphImpl& impl, const Access& a) {
  const std::optional<rt::ReductionPart> part = impl.graph.reduction_part(a.location);
  if (!part) return {};
  const rt::Reduction& r = impl.graph.reductions()[part->reduction];
  const std::string name = "reduction '" + r.name + "'";
  if (a.has_position)
    return "gives its access of " + name +
           " a position; a reduction's accesses take none (combine() orders them)";
  switch (part->role) {
    case rt::ReductionRole::partial: {
      const std::string which = "contribution " + std::to_string(part->index) + " of " + name;
      if (a.mode != Mode::write)
        return "reads " + which +
               ", which only its contributor and the combining step touch; read the reduced "
               "value with ordo::read(r)";
      if (r.combined)
        return "contributes " + which +
               " after Graph::combine; declare every contributor before the combine";
      if (r.contributor[part->index] != rt::Reduction::kNone)
        return "contributes " + which + ", which task '" +
               impl.task_name(r.contributor[part->index]) +
               "' contributes already; give each contribution one task";
      return {};
    }
    case rt::ReductionRole::result:
      if (a.mode != Mode::read)
        return "writes " + name +
               ", which only its combining step writes; contribute with ordo::contribute(r, i) "
               "and read the value with ordo::read(r)";
      return {};
    case rt::ReductionRole::node:
    case rt::ReductionRole::copy:
      break;
  }
  return "accesses location '" + impl.graph.locations()[a.location].name + "', which " + name +
         " keeps for itself; use ordo::contribute(r, i) and ordo::read(r)";
}

void note_contributions(GraphImpl& impl, std::uint32_t task,
                        std::span<const rt::AccessDesc> accesses) {
  const auto& locs = impl.graph.locations();
  constexpr std::uint32_t kNone = rt::LocationDesc::kNoLocation;
  // A contribution lives where its task runs without it: with the first of the task's own
  // locations it writes, else the first it reads (runtime/reduction.hpp).
  std::uint32_t written = kNone, touched = kNone;
  bool contributes = false;
  for (const rt::AccessDesc& a : accesses) {
    if (locs[a.location].internal) {
      contributes = contributes || impl.graph.reduction_part(a.location)->role ==
                                       rt::ReductionRole::partial;
      continue;
    }
    if (touched == kNone) touched = a.location;
    if (written == kNone && a.mode == rt::Mode::write) written = a.location;
  }
  if (!contributes) return;
  const std::uint32_t follows = written != kNone ? written : touched;
  for (const rt::AccessDesc& a : accesses) {
    const std::optional<rt::ReductionPart> part = impl.graph.reduction_part(a.location);
    if (part && part->role == rt::ReductionRole::partial)
      impl.graph.set_contributor(part->reduction, part->index, task, follows);
  }
}

void check_reductions(const GraphImpl& impl) {
  for (const rt::Reduction& r : impl.graph.reductions())
    if (!r.combined)
      throw Error("reduction '" + r.name +
                  "' is never combined; call Graph::combine on it after declaring its "
                  "contributors (and before the tasks that read its value)");
}

std::uint32_t condition_reduction(const GraphImpl& impl, const Access& a) {
  if (a.graph == 0)
    throw Error(
        "Until::reads lists the access of a default-constructed handle, of no graph; "
        "list ordo::read(r) of the reductions the condition reads, r as "
        "Graph::reduction returned it");
  const std::string why = foreign_handle(a.graph, impl.serial, a.location);
  if (!why.empty()) throw Error("Until::reads lists a handle of another graph: " + why);
  const std::optional<rt::ReductionPart> part = impl.graph.reduction_part(a.location);
  if (!part || part->role != rt::ReductionRole::result || a.mode != Mode::read) {
    const auto& locs = impl.graph.locations();
    const std::string what = a.location < locs.size() ? "'" + locs[a.location].name + "'"
                                                      : "#" + std::to_string(a.location);
    throw Error("Until::reads lists location " + what +
                ", which is no reduction's value: a condition in the dataflow reads reduced "
                "values only; list ordo::read(r) of each reduction it reads (to test a "
                "location, reduce it into a reduction, or leave Until::reads empty)");
  }
  return part->reduction;
}

}  // namespace detail

namespace {

void check_declaring(const detail::GraphImpl& impl, const std::string& what) {
  if (impl.frozen())
    throw Error("cannot " + what + " after the graph's first run; declare it before running");
  if (impl.declaring_family)
    throw Error("cannot " + what + " inside the access pattern of task family '" +
                *impl.declaring_family + "'; do it before or after the family");
}

void check_names_free(const detail::GraphImpl& impl, const std::string& reduction,
                      const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (impl.graph.find_location(n) >= 0)
      throw Error("a location called '" + n + "' already exists, and reduction '" + reduction +
                  "' needs that name; rename one of them");
}

}  // namespace

void Graph::add_reduction(const std::string& name, std::uint32_t contributors,
                          std::size_t elem_size, const std::type_info& type, Combine op,
                          std::uint32_t& first_partial, std::uint32_t& result) {
  check_declaring(*impl_, "declare reduction '" + name + "'");
  if (contributors == 0)
    throw Error("reduction '" + name + "' has 0 contributions; give it at least one");
  if (impl_->graph.locations().size() + contributors + 1 >= (std::uint64_t{1} << 32))
    throw Error("reduction '" + name + "' would make the graph hold more than 2^32 - 1 "
                "locations; combine fewer, larger contributions");
  std::vector<std::string> names{name};
  for (std::uint32_t i = 0; i < contributors; ++i)
    names.push_back(name + ".part[" + std::to_string(i) + "]");
  if (impl_->graph.find_location(name) >= 0)
    throw Error("a location called '" + name + "' already exists; a reduction takes its name");
  check_names_free(*impl_, name, names);
  // The operator's exceptions stop the run as an Error naming the reduction.
  rt::Combine combine = [name, op = std::move(op)](const std::byte* a, const std::byte* b,
                                                  std::byte* out) {
    try {
      op(a, b, out);
    } catch (const std::exception& e) {
      throw Error("the operator of reduction '" + name + "' threw: " + e.what() +
                  "; a reduction's operator must return a value for any two values");
    } catch (...) {
      throw Error("the operator of reduction '" + name +
                  "' threw something that is not a std::exception; a reduction's operator "
                  "must return a value for any two values");
    }
  };
  const std::uint32_t r =
      impl_->graph.add_reduction(name, contributors, elem_size, type, std::move(combine));
  first_partial = impl_->graph.reductions()[r].first_partial;
  result = impl_->graph.reductions()[r].result;
}

void Graph::combine_reduction(std::uint64_t graph, std::uint32_t result) {
  impl_->check_handle(graph, result, "Graph::combine");
  const std::optional<rt::ReductionPart> part = impl_->graph.reduction_part(result);
  if (!part || part->role != rt::ReductionRole::result)
    throw Error("Graph::combine: location #" + std::to_string(result) + " is no reduction");
  const rt::Reduction& r = impl_->graph.reductions()[part->reduction];
  check_declaring(*impl_, "combine reduction '" + r.name + "'");
  if (r.combined)
    throw Error("reduction '" + r.name + "' is combined already; combine each reduction once");
  for (std::uint32_t i = 0; i < r.contributors; ++i)
    if (r.contributor[i] == rt::Reduction::kNone)
      throw Error("contribution " + std::to_string(i) + " of reduction '" + r.name +
                  "' has no task; declare one with ordo::contribute(r, " + std::to_string(i) +
                  ") among its accesses before Graph::combine");
  check_names_free(*impl_, r.name, impl_->graph.combine_names(part->reduction));
  impl_->graph.add_combine(part->reduction);
}

const void* Graph::reduction_value(std::uint64_t graph, std::uint32_t result,
                                   const std::type_info& type) const {
  impl_->check_handle(graph, result, "Graph::value");
  const std::optional<rt::ReductionPart> part = impl_->graph.reduction_part(result);
  if (!part || part->role != rt::ReductionRole::result)
    throw Error("Graph::value: location #" + std::to_string(result) + " is no reduction");
  const rt::Reduction& r = impl_->graph.reductions()[part->reduction];
  if (*r.type != type)
    throw Error("Graph::value: reduction '" + r.name + "' holds " + std::to_string(r.elem_size) +
                "-byte values of another type than the handle reads; use the Reduction<T> that "
                "Graph::reduction returned (the same T)");
  if (!impl_->engine)
    throw Error("reduction '" + r.name +
                "' has no value before the graph's first run; run the graph first");
  if (const detail::ConditionScope* c = detail::tl_condition; c && c->graph == impl_.get()) {
    if (std::find(c->results->begin(), c->results->end(), result) == c->results->end())
      throw Error("run_until's stop condition reads reduction '" + r.name +
                  "', which Until::reads does not list; list ordo::read(" + r.name +
                  ") there too (a condition in the dataflow sees only the values it declared)");
  } else if (sched::Pool::current_worker() >= 0) {
    throw Error("Graph::value of reduction '" + r.name +
                "' called from a task body; a body declares ordo::read(r) among its accesses "
                "and calls Context::value(r)");
  }
  // Across ranks each rank reads its own copy (runtime/reduction.hpp): never a replica.
  if (r.copies != 0) return impl_->graph.data(r.first_copy + impl_->net->rank());
  return impl_->graph.data(r.result);
}

}  // namespace ordo
