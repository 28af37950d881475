#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "graph_impl.hpp"
#include "plan.hpp"

namespace ordo {

namespace detail {

void GraphImpl::check() const {
  rt::CompileResult compiled = rt::compile(graph);
  if (!compiled.error.empty()) throw Error(compiled.error);
}

std::uint64_t GraphImpl::next_serial() {
  static std::atomic<std::uint64_t> serial{0};
  return serial.fetch_add(1, std::memory_order_relaxed);
}

rt::Engine& GraphImpl::prepare(std::shared_ptr<rt::Net> with, std::uint32_t channel) {
  if (engine) return *engine;
  const unsigned ranks = with ? with->size() : 1;
  for (const rt::LocationDesc& l : graph.locations())
    if (l.home >= static_cast<std::int32_t>(ranks))
      throw Error("location '" + l.name + "' is placed on rank " + std::to_string(l.home) +
                  " but the job has " + std::to_string(ranks) +
                  " rank(s); place it on a rank below that, or start more ranks");
  rt::CompileResult compiled = rt::compile(graph);
  if (!compiled.error.empty()) throw Error(compiled.error);
  net = std::move(with);
  engine = std::make_unique<rt::Engine>(graph, std::move(compiled.plan), net.get(), channel);
  return *engine;
}

}  // namespace detail

Graph::Graph() : impl_(std::make_unique<detail::GraphImpl>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

std::uint32_t Graph::add_location(const std::string& name, std::size_t elem_size,
                                  std::size_t count, const std::type_info& type) {
  if (impl_->frozen())
    throw Error("cannot add location '" + name +
                "' after the graph's first run; declare every location before running");
  if (count == 0)
    throw Error("location '" + name + "' has 0 elements; give it at least one");
  if (impl_->graph.find_location(name) >= 0)
    throw Error("a location called '" + name + "' already exists; location names must be unique");
  return impl_->graph.add_location(name, elem_size, count, type);
}

namespace {

// Checks a task declaration and turns it into the runtime's description (without the body).
rt::TaskDesc describe_task(const detail::GraphImpl& impl, const std::string& name,
                           const std::vector<Access>& accesses, bool has_body) {
  if (impl.frozen())
    throw Error("cannot add task '" + name +
                "' after the graph's first run; declare every task before running");
  if (!has_body) throw Error("task '" + name + "' has no body; pass a callable");
  const auto& locs = impl.graph.locations();
  // Duplicate check: a linear scan for the usual handful of accesses (no allocation), a hash
  // set for long lists.
  constexpr std::size_t kLinearScan = 16;
  std::unordered_set<std::uint32_t> seen;
  rt::TaskDesc desc;
  desc.name = name;
  desc.accesses.reserve(accesses.size());
  for (const Access& a : accesses) {
    if (a.location >= locs.size())
      throw Error("task '" + name + "' accesses location #" + std::to_string(a.location) +
                  ", which this graph did not declare (a Location of another Graph?); declare "
                  "it with Graph::location first");
    const bool duplicate =
        accesses.size() <= kLinearScan
            ? std::any_of(desc.accesses.begin(), desc.accesses.end(),
                          [&](const rt::AccessDesc& d) { return d.location == a.location; })
            : !seen.insert(a.location).second;
    if (duplicate)
      throw Error("task '" + name + "' lists location '" + locs[a.location].name +
                  "' twice; give one access per location (write() also allows reading)");
    desc.accesses.push_back({a.location, a.mode == Mode::write ? rt::Mode::write : rt::Mode::read,
                             a.has_position, a.position});
  }
  return desc;
}

}  // namespace

std::uint32_t Graph::task(const std::string& name, std::vector<Access> accesses, Body body) {
  rt::TaskDesc desc = describe_task(*impl_, name, accesses, static_cast<bool>(body));
  detail::GraphImpl* impl = impl_.get();
  const std::size_t index = impl->bodies.size();
  impl->bodies.push_back(std::move(body));
  desc.body = [impl, index](const rt::Instance& inst) {
    detail::ContextImpl ctx_impl{inst};
    Context ctx(ctx_impl);
    impl->bodies[index](ctx);
  };
  try {
    return impl->graph.add_task(std::move(desc));
  } catch (...) {
    impl->bodies.pop_back();  // keep bodies and tasks in step if the runtime refused it
    throw;
  }
}

std::uint32_t Graph::fiber_task(const std::string& name, std::vector<Access> accesses,
                                FiberBody body) {
  rt::TaskDesc desc = describe_task(*impl_, name, accesses, static_cast<bool>(body));
  desc.fiber = true;
  desc.body = [body = std::move(body)](const rt::Instance& inst) {
    detail::FiberContextImpl impl{inst};
    FiberContext ctx(impl);
    body(ctx);
  };
  return impl_->graph.add_task(std::move(desc));
}

void* Graph::data_bytes(std::uint32_t location, const std::type_info& type) const {
  const auto& locs = impl_->graph.locations();
  if (location >= locs.size())
    throw Error("location #" + std::to_string(location) + " does not belong to this graph");
  if (*locs[location].type != type)
    throw Error("location '" + locs[location].name + "' holds another element type");
  return impl_->graph.data(location);
}

void Graph::place_location(std::uint32_t location, unsigned node) {
  const auto& locs = impl_->graph.locations();
  if (location >= locs.size())
    throw Error("location #" + std::to_string(location) + " does not belong to this graph");
  if (impl_->frozen())
    throw Error("cannot place location '" + locs[location].name +
                "' after the graph's first run; call Graph::place before running");
  impl_->graph.place(location, node);
}

void Graph::set_home_rank_of(std::uint32_t location, unsigned rank) {
  if (impl_->frozen())
    throw Error("cannot place location '" + impl_->graph.locations().at(location).name +
                "' on a rank after the graph's first run; place locations before running");
  if (location >= impl_->graph.locations().size())
    throw Error("location #" + std::to_string(location) + " does not belong to this graph");
  impl_->graph.set_home(location, static_cast<std::int32_t>(rank));
}

unsigned Graph::home_rank_of(std::uint32_t location) const {
  if (!impl_->engine)
    throw Error("a location's home rank is decided at the graph's first run; ask after it");
  if (location >= impl_->graph.locations().size())
    throw Error("location #" + std::to_string(location) + " does not belong to this graph");
  return impl_->engine->home(location);
}

std::size_t Graph::locations() const { return impl_->graph.locations().size(); }
std::size_t Graph::tasks() const { return impl_->graph.tasks().size(); }
std::uint64_t Graph::iterations_done() const {
  return impl_->engine ? impl_->engine->iterations_done() : 0;
}

void Graph::validate() { impl_->check(); }

}  // namespace ordo
