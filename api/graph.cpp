#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "api/graph_impl.hpp"
#include "runtime/plan.hpp"

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

// Range items encode task indices in 31 bits (runtime/engine.hpp).
constexpr std::uint64_t kMaxTasks = (std::uint64_t{1} << 31) - 1;

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
  if (impl.graph.task_count() + count > kMaxTasks)
    throw Error("task '" + name + "' would make the graph hold more than " +
                std::to_string(kMaxTasks) + " tasks; split the work into fewer, larger tasks");
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
  if (a.location >= locs.size())
    throw Error("task '" + who() + "' accesses location #" + std::to_string(a.location) +
                ", which this graph did not declare (a Location of another Graph?); declare "
                "it with Graph::location first");
  // Duplicates: a linear scan over the usual handful of accesses; long lists are checked once
  // complete (check_long_member).
  const auto current = impl.graph.current_member();
  constexpr std::size_t kLinearScan = 16;
  if (current.size() < kLinearScan &&
      std::any_of(current.begin(), current.end(),
                  [&](const rt::AccessDesc& d) { return d.location == a.location; }))
    throw Error("task '" + who() + "' lists location '" + locs[a.location].name +
                "' twice; give one access per location (write() also allows reading)");
  impl.graph.add_access({a.location, a.mode == Mode::write ? rt::Mode::write : rt::Mode::read,
                         a.has_position, a.position});
}

template <class Who>
void end_checked(detail::GraphImpl& impl, Who&& who) {
  const auto current = impl.graph.current_member();
  if (current.size() > 16) {
    std::vector<std::uint32_t> ids;
    ids.reserve(current.size());
    for (const rt::AccessDesc& d : current) ids.push_back(d.location);
    std::sort(ids.begin(), ids.end());
    auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end())
      throw Error("task '" + who() + "' lists location '" +
                  impl.graph.locations()[*dup].name +
                  "' twice; give one access per location (write() also allows reading)");
  }
  impl.graph.end_member();
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
    return declare_one(*impl, name, accesses, [user](const rt::Instance& inst) {
      detail::ContextImpl ctx_impl{inst};
      Context ctx(ctx_impl);
      (*user)(ctx);
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
  rt::Body run = [body = std::move(body)](const rt::Instance& inst) {
    detail::ContextImpl ctx_impl{inst};
    Context ctx(ctx_impl);
    body(ctx, inst.index);
  };
  detail::GraphImpl& impl = *impl_;
  impl.graph.begin_family(name, std::move(run));
  impl.declaring_family = &name;
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
  return impl_->graph.add_free_family(name, count, [body = std::move(body)](const rt::Instance& inst) {
    detail::ContextImpl ctx_impl{inst};
    Context ctx(ctx_impl);
    body(ctx, inst.index);
  });
}

std::uint32_t Graph::fiber_task(const std::string& name, std::vector<Access> accesses,
                                FiberBody body) {
  check_declare(*impl_, name, 1, static_cast<bool>(body));
  return declare_one(*impl_, name, accesses, [body = std::move(body)](const rt::Instance& inst) {
    detail::FiberContextImpl impl{inst};
    FiberContext ctx(impl);
    body(ctx);
  }, true);
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
std::size_t Graph::tasks() const { return impl_->graph.task_count(); }
std::uint64_t Graph::iterations_done() const {
  return impl_->engine ? impl_->engine->iterations_done() : 0;
}

void Graph::validate() { impl_->check(); }

}  // namespace ordo
