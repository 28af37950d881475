static_assert(__cplusplus >= 202002L, "ordo needs C++20 (-std=c++20)");
// (Checked first, so that a compiler in an older mode says so before any other error.)
// ordo: iterative task graphs over ordered read-write locks (the ORWL model).
//
// A program declares *locations* (named, typed, contiguous buffers, each with one FIFO lock)
// and *tasks* (a body plus its read and write accesses), then runs the graph for a number of
// iterations. Every iteration runs every task once. By default each location's FIFO lists the
// accesses in the order the tasks were declared, so the result is exactly that of a sequential
// program that, for each iteration, runs every task in declaration order -- whatever the
// number of workers.
//
//   ordo::Graph g;
//   auto a = g.location<double>("a", 1024);
//   auto b = g.location<double>("b", 1024);
//   g.task("scale", {ordo::read(a), ordo::write(b)}, [=](ordo::Context& ctx) {
//     auto in = ctx.read(a);
//     auto out = ctx.write(b);
//     for (std::size_t i = 0; i < in.size(); ++i) out[i] = 2 * in[i];
//   });
//   ordo::Runtime rt({.workers = 2});
//   rt.run(g, 100);                 // 100 iterations
//
// Tasks come in two styles over the same locks. A dataflow task (Graph::task) gets its body
// called once every access is granted. A fiber task (Graph::fiber_task) is the local view of
// ORWL programs: its body runs on a fiber and acquires and releases its accesses itself, so
// it can hand a location on before it ends; see FiberContext and docs/fibers.md.
//
// Errors in how the API is used, and bad input, throw ordo::Error with a message saying what
// is wrong and what to do. An exception thrown by a task body stops the run and is rethrown by
// Runtime::run as it was. Across ranks, a failure elsewhere stops the run on every rank with a
// typed error derived from ordo::Error: PeerFailure (another rank died, stopped, or a body
// threw there), ProtocolError (a peer sent what the protocol never sends), GraphMismatch (the
// ranks declared different graphs).
//
// Longer than 600 lines on purpose: this is the whole public API of the core (the stencil
// layer is <ordo/stencil.hpp>), so that a program includes one header; most of its length is
// the comments that document each call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace ordo {

// Thrown on API misuse and bad input, and (as the types below) when a run fails across ranks.
// Never for an exception raised by a task body, which is rethrown as it was.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Another rank of the job failed, so this run stopped too (every rank's does): that rank's
// process died or became unreachable, it stopped on an error, or one of its task bodies threw
// (the message says which, and the body's own message). rank() is the rank at fault as far as
// this one can tell. Thrown by Runtime::run and run_until; the graph cannot run again.
//   try { rt.run(g, 100); } catch (const ordo::PeerFailure& e) { report(e.rank(), e.what()); }
class PeerFailure : public Error {
 public:
  PeerFailure(const std::string& what, unsigned rank) : Error(what), rank_(rank) {}
  unsigned rank() const { return rank_; }

 private:
  unsigned rank_;
};

// A peer sent a message ordo's protocol never sends (a corrupt peer, or ranks of different
// ordo builds): this rank stopped, and told the others (who see a PeerFailure of this rank).
// rank() is the sender; this rank itself when the message could pass for a genuine one and
// only the step's message counts showed it (one handled more than sent: no rank can tell
// whose it was).
class ProtocolError : public PeerFailure {
 public:
  using PeerFailure::PeerFailure;
};

// The ranks did not all declare the same graph: every rank must declare the same locations
// and tasks, in the same order, with the same accesses (SPMD). The message names the first
// difference. Thrown by the graph's first run, on every rank.
class GraphMismatch : public Error {
 public:
  using Error::Error;
};

class Graph;

namespace detail {
class GraphImpl;
struct ContextImpl;
struct FiberContextImpl;
// The library's view of a graph (api/graph_impl.hpp); not for programs.
GraphImpl& impl_of(const Graph& graph);
}  // namespace detail

// A typed handle to a location of one Graph. Cheap to copy; capture it by value in bodies.
// A handle knows its graph: given to another Graph (or default-constructed), every call that
// takes it throws Error instead of touching a location of the same number there.
template <class T>
class Location {
 public:
  Location() = default;
  std::uint32_t id() const { return id_; }
  std::size_t size() const { return size_; }
  // Names the graph that declared the location, unique in this process (0: no graph).
  std::uint64_t graph_serial() const { return graph_; }

 private:
  friend class Graph;
  Location(std::uint64_t graph, std::uint32_t id, std::size_t size)
      : graph_(graph), id_(id), size_(size) {}
  std::uint64_t graph_ = 0;
  std::uint32_t id_ = 0;
  std::size_t size_ = 0;
};

enum class Mode : std::uint8_t { read, write };

// One access of a task to a location. Build it with ordo::read() or ordo::write().
struct Access {
  std::uint32_t location = 0;
  Mode mode = Mode::read;
  // Explicit position in the location's initial FIFO (an ORWL priority). Either every access
  // of a location gives one or none does; none means declaration order. Equal positions are
  // allowed for reads (they form a read group). The graph is checked before it runs: an order
  // that would deadlock is refused with an Error naming the cycle.
  bool has_position = false;
  std::int64_t position = 0;
  // The graph of the location (Location::graph_serial); an access of another graph is refused.
  std::uint64_t graph = 0;

  Access at(std::int64_t pos) const {
    Access a = *this;
    a.has_position = true;
    a.position = pos;
    return a;
  }
};

// Shared access: granted together with the other reads next to it in the FIFO.
template <class T>
Access read(Location<T> loc) {
  return Access{loc.id(), Mode::read, false, 0, loc.graph_serial()};
}

// Exclusive access; a write access may also read the location's current contents.
template <class T>
Access write(Location<T> loc) {
  return Access{loc.id(), Mode::write, false, 0, loc.graph_serial()};
}

// Operators for Graph::reduction; any callable taking two `const T&` and returning a T will
// do. Min and Max return the first of equal values.
struct Sum {
  template <class T>
  T operator()(const T& a, const T& b) const { return a + b; }
};
struct Min {
  template <class T>
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
struct Max {
  template <class T>
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

// Contributions each combining step folds (see combine_in_order).
inline constexpr std::uint32_t kReductionFanIn = 8;

// What a reduction of `parts.size()` contributions computes from them, in the one order every
// reduction combines in: groups of kReductionFanIn consecutive contributions, each folded left
// to right (acc = op(acc, next)), then groups of those results, and so on until one is left.
// The order depends on the number of contributions alone. A sequential reference that calls
// this gets the graph's bits. Throws Error for no contributions.
//   double dot = ordo::combine_in_order<double>(partial_sums);  // as a Reduction<double> would
template <class T, class Op = Sum>
T combine_in_order(std::span<const T> parts, Op op = {}) {
  if (parts.empty()) throw Error("combine_in_order: no contributions; give at least one");
  std::vector<T> level(parts.begin(), parts.end());
  while (true) {
    std::vector<T> next;
    next.reserve((level.size() + kReductionFanIn - 1) / kReductionFanIn);
    for (std::size_t j = 0; j < level.size(); j += kReductionFanIn) {
      T acc = level[j];
      const std::size_t end = j + kReductionFanIn < level.size() ? j + kReductionFanIn : level.size();
      for (std::size_t k = j + 1; k < end; ++k) acc = op(acc, level[k]);
      next.push_back(acc);
    }
    if (next.size() == 1) return next[0];
    level = std::move(next);
  }
}

// A handle to a reduction of one Graph (Graph::reduction): a value of type T combined from a
// fixed number of contributions every iteration. Cheap to copy; capture it by value in bodies.
//   tasks that compute contribution i declare ordo::contribute(r, i) and call
//     ctx.contribute(r, i, value);
//   Graph::combine(r) declares, at that point of program order, the step combining them;
//   tasks declared after it that declare ordo::read(r) get this iteration's value from
//     ctx.value(r) (declared before it, the previous iteration's; before the first, T's zero
//     bytes);
//   between runs and in run_until's condition, Graph::value(r) gives the last iteration's
//   value on every rank.
template <class T>
class Reduction {
 public:
  Reduction() = default;
  std::uint32_t contributors() const { return contributors_; }
  // Names the graph that declared the reduction (Location::graph_serial).
  std::uint64_t graph_serial() const { return graph_; }
  // The numbers of the locations behind the reduction, for ordo::contribute and ordo::read:
  // contribution `index`'s (throws Error beyond contributors()), and the result's.
  std::uint32_t partial(std::uint32_t index) const {
    if (index >= contributors_)
      throw Error("contribution " + std::to_string(index) + " of a reduction of " +
                  std::to_string(contributors_) +
                  " contributions; give an index below that (a default-constructed Reduction "
                  "has none)");
    return first_partial_ + index;
  }
  std::uint32_t result() const { return result_; }

 private:
  friend class Graph;
  Reduction(std::uint64_t graph, std::uint32_t first_partial, std::uint32_t contributors,
            std::uint32_t result)
      : graph_(graph), first_partial_(first_partial), contributors_(contributors), result_(result) {}
  std::uint64_t graph_ = 0;
  std::uint32_t first_partial_ = 0;
  std::uint32_t contributors_ = 0;
  std::uint32_t result_ = 0;
};

// The access of the task computing contribution `index` to `r` (an exclusive access to that
// contribution's slot; one task per contribution).
template <class T>
Access contribute(Reduction<T> r, std::uint32_t index) {
  return Access{r.partial(index), Mode::write, false, 0, r.graph_serial()};
}

// The access of a task reading the value of `r` (Context::value).
template <class T>
Access read(Reduction<T> r) {
  return Access{r.result(), Mode::read, false, 0, r.graph_serial()};
}

// The accesses of one member of a task family (Graph::task_family), filled by the family's
// access pattern. Each location may appear once per member, as in Graph::task.
class AccessList {
 public:
  // Adds one access; throws Error for a location of another graph or one listed twice.
  void add(Access access);
  // The member whose accesses are being listed.
  std::uint32_t index() const { return index_; }

  AccessList(const AccessList&) = delete;
  AccessList& operator=(const AccessList&) = delete;

 private:
  friend class Graph;
  AccessList(detail::GraphImpl& graph, const std::string& name, std::uint32_t count,
             std::uint32_t index)
      : graph_(graph), name_(name), count_(count), index_(index) {}
  detail::GraphImpl& graph_;
  const std::string& name_;  // of the family, for error messages
  std::uint32_t count_;
  std::uint32_t index_;
};

// What a running task body sees: its iteration and the locations it declared.
// Valid only during the body's call; not thread-safe (one per running instance).
class Context {
 public:
  // The iteration of this instance, counted from 0 over every run of the graph.
  std::uint64_t iteration() const;
  // The worker thread running this instance, in [0, Runtime::workers()).
  unsigned worker() const;

  // Contents of a location the task declared with read() or write(). Throws Error if the task
  // did not declare it.
  // O(1) whatever the number of accesses.
  template <class T>
  std::span<const T> read(Location<T> loc) const {
    return {static_cast<const T*>(bytes(loc.graph_serial(), loc.id(), Mode::read, typeid(T))),
            loc.size()};
  }
  // Contents of a location the task declared with write(). Throws Error otherwise.
  template <class T>
  std::span<T> write(Location<T> loc) const {
    return {static_cast<T*>(bytes(loc.graph_serial(), loc.id(), Mode::write, typeid(T))),
            loc.size()};
  }

  // Writes contribution `index` to `r`; the task declared ordo::contribute(r, index), and
  // calls this in every iteration (a contribution left out stops the run with an Error).
  template <class T>
  void contribute(Reduction<T> r, std::uint32_t index, const std::type_identity_t<T>& value) const {
    *static_cast<T*>(contribution(r.graph_serial(), r.partial(index), typeid(T))) = value;
  }
  // The value of `r`; the task declared ordo::read(r). Declared after Graph::combine(r), the
  // value combined from this iteration's contributions.
  template <class T>
  T value(Reduction<T> r) const {
    return *static_cast<const T*>(bytes(r.graph_serial(), r.result(), Mode::read, typeid(T)));
  }

  explicit Context(const detail::ContextImpl& impl) : impl_(impl) {}

 private:
  void* bytes(std::uint64_t graph, std::uint32_t location, Mode mode,
              const std::type_info& type) const;
  // bytes() of a contribution's slot, noting that this instance made it.
  void* contribution(std::uint64_t graph, std::uint32_t partial, const std::type_info& type) const;
  const detail::ContextImpl& impl_;
};

// What the body of a fiber task sees: its iteration, and the handles of the accesses it
// declared, which it acquires and releases itself. The ORWL mapping (Saied 2018 ch. 2):
//   declaring the access in Graph::fiber_task  = orwl_handle2 request (proactive: the request
//                                                for each iteration is in the FIFO at the
//                                                position program order, or .at(), gives it)
//   acquire_read / acquire_write               = orwl_acquire2: returns the contents once
//                                                the grant for this iteration is in; until
//                                                then the fiber is suspended and its worker
//                                                runs other tasks
//   release                                    = orwl_release2: hands the location on now
//                                                and (implicitly) requests it for the next
//                                                iteration
// Accesses not released when the body returns are released then (after waiting for their
// grant if the body never acquired them). A span must not be used after its release.
//
//   g.fiber_task("relax", {ordo::write(a), ordo::read(b)}, [=](ordo::FiberContext& ctx) {
//     auto in = ctx.acquire_read(b);
//     double s = 0;
//     for (double v : in) s += v;
//     ctx.release(b);                    // b is free for its next writer from here on
//     auto out = ctx.acquire_write(a);
//     out[0] = s;
//   });
//
// Misuse throws Error (and so stops the run): acquiring a location the task did not declare,
// acquire_write on a read() access, acquiring a location twice in one iteration, releasing
// one that is not held, or using the context off its body's fiber (another thread, or after
// the body returned). A fiber must never block its worker thread: no mutex held across an
// acquire, no blocking system call or wait on another task; nor acquire inside a catch block,
// nor rely on thread_local or errno across an acquire (the fiber may resume on another
// thread); see docs/fibers.md.
// Valid only during the body's call; not thread-safe.
class FiberContext {
 public:
  // The iteration of this instance, counted from 0 over every run of the graph.
  std::uint64_t iteration() const;
  // The worker thread running the fiber now; it can change at every acquire.
  unsigned worker() const;

  // Waits (suspending the fiber) until this iteration's grant of `loc` is in and returns its
  // contents. Works for read() and write() accesses.
  template <class T>
  std::span<const T> acquire_read(Location<T> loc) {
    return {static_cast<const T*>(
                acquire_bytes(loc.graph_serial(), loc.id(), Mode::read, typeid(T))),
            loc.size()};
  }
  // As acquire_read, for an access declared with write().
  template <class T>
  std::span<T> acquire_write(Location<T> loc) {
    return {static_cast<T*>(acquire_bytes(loc.graph_serial(), loc.id(), Mode::write, typeid(T))),
            loc.size()};
  }
  // Releases this iteration's hold of `loc`, which must be held.
  template <class T>
  void release(Location<T> loc) {
    release_location(loc.graph_serial(), loc.id());
  }

  // As Context::contribute and Context::value: acquire, write or read, release.
  template <class T>
  void contribute(Reduction<T> r, std::uint32_t index, const std::type_identity_t<T>& value) {
    *static_cast<T*>(acquire_bytes(r.graph_serial(), r.partial(index), Mode::write, typeid(T))) =
        value;
    release_location(r.graph_serial(), r.partial(index));
  }
  template <class T>
  T value(Reduction<T> r) {
    const T v =
        *static_cast<const T*>(acquire_bytes(r.graph_serial(), r.result(), Mode::read, typeid(T)));
    release_location(r.graph_serial(), r.result());
    return v;
  }

  explicit FiberContext(const detail::FiberContextImpl& impl);

 private:
  void* acquire_bytes(std::uint64_t graph, std::uint32_t location, Mode mode,
                      const std::type_info& type);
  void release_location(std::uint64_t graph, std::uint32_t location);
  // Copied from the body's own: the instance record is the engine's, kept as long as the
  // graph, so a copy used after the body returned finds it and is refused with an Error
  // rather than reading the body's finished stack frame.
  const void* instance_;
  std::uint64_t graph_;
};

// Throws Error unless this process can still get `bytes` more bytes from the system: the
// host's available memory (MemAvailable + SwapFree, or its cgroup's headroom) and its own
// limits (ulimit -v, -d). The same probe judges a rank's locations at a graph's first run
// (docs/distributed.md, "Memory"); a program checks its own arrays with it before allocating
// them. `what` opens the message ("--size 8192x8192 is too large: its 3 grids"), which goes on
// with the bytes needed and available and what limits them.
void check_memory_available(std::uint64_t bytes, const std::string& what);

// What a graph's locations cost one rank (Graph::storage_held).
struct StorageStats {
  std::size_t locations = 0;  // locations this rank holds storage for
  std::size_t bytes = 0;      // their bytes: elements x element size
  // Their memory as allocated: each location's bytes rounded up to 64 bytes below 4 KiB and
  // to whole 4 KiB pages from there (a location of 2 MiB and more starts on a huge page, but
  // its length is not rounded to one).
  std::size_t reserved = 0;
};

class Restored;

// A task graph: locations, tasks and, once run, the state of every lock. Not thread-safe:
// declare and run from one thread. Locations and tasks can be added until the first run.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // Declares a location of `count` elements of T, zero-initialised. T must be trivially
  // copyable (locations are moved as bytes between processes). Names must be unique.
  // O(1) amortised, however many locations the graph holds.
  template <class T>
  Location<T> location(const std::string& name, std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "location elements must be trivially copyable");
    return Location<T>(serial(), add_location(name, sizeof(T), count, typeid(T)), count);
  }

  // Declares a *family* of `count` locations at once, member i named "name[i]" and holding
  // `size` elements of T: the same as `count` calls of location() in a loop (declaration
  // order, placement, results), in one call that checks every name before it adds any. A
  // refused family adds nothing. Returns the members' handles, in order.
  //   auto block = g.location_family<double>("block", 64, 4096);  // block[0] .. block[63]
  template <class T>
  std::vector<Location<T>> location_family(const std::string& name, std::uint32_t count,
                                           std::size_t size) {
    return location_family<T>(name, count, [size](std::uint32_t) { return size; });
  }
  // The same with member i holding size_of(i) elements (uneven blocks, say). size_of is called
  // once per member, in order, during this call only.
  template <class T, class SizeOf>
    requires std::is_invocable_r_v<std::size_t, SizeOf, std::uint32_t>
  std::vector<Location<T>> location_family(const std::string& name, std::uint32_t count,
                                           SizeOf&& size_of) {
    static_assert(std::is_trivially_copyable_v<T>, "location elements must be trivially copyable");
    check_family_count(name, count);  // before `sizes`, which a huge count could not allocate
    std::vector<std::size_t> sizes(count);
    for (std::uint32_t i = 0; i < count; ++i) sizes[i] = size_of(i);
    const std::uint32_t first = add_location_family(name, sizeof(T), sizes, typeid(T));
    std::vector<Location<T>> members;
    members.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) members.push_back(Location<T>(serial(), first + i, sizes[i]));
    return members;
  }

  // Puts a location on NUMA node `node`: its memory is bound there and the tasks that write it
  // run on that node's workers (work stealing may still move them when a node runs dry). By
  // default locations are spread over the nodes in contiguous chunks of declaration order
  // (docs/scheduler.md). `node` counts the nodes the Runtime's workers span
  // (Runtime::numa_nodes()) and wraps around, so a program placed for a larger machine still
  // runs on a smaller one. No effect on a one-node machine; never changes results.
  // Call before the first run.
  // (Ranks are set_home_rank's; the stencil layer's place() puts blocks on ranks.)
  //   g.set_home_node(a, 1);  // a lives on the second node
  template <class T>
  void set_home_node(Location<T> loc, unsigned node) {
    place_location(loc.graph_serial(), loc.id(), node);
  }

  // Across ranks (a program started by ordorun, mpirun or srun; docs/distributed.md): every
  // rank declares the same graph; each location has a home rank that holds its master copy, and
  // each task runs on the home rank of the first location it writes. By default locations go
  // to ranks in contiguous chunks of declaration order. set_home_rank() overrides that (before
  // the first run); home_rank() tells, after the first run, where a location's final contents
  // are: Graph::data() of a location is the result only on its home rank.
  template <class T>
  void set_home_rank(Location<T> loc, unsigned rank) {
    set_home_rank_of(loc.graph_serial(), loc.id(), rank);
  }
  template <class T>
  unsigned home_rank(Location<T> loc) const {
    return home_rank_of(loc.graph_serial(), loc.id());
  }

  using Body = std::function<void(Context&)>;

  // Declares an iterative task. Each location may appear once in `accesses`.
  // Returns the task's index (declaration order).
  std::uint32_t task(const std::string& name, std::vector<Access> accesses, Body body);

  using IndexedBody = std::function<void(Context&, std::uint32_t index)>;
  using AccessPattern = std::function<void(std::uint32_t index, AccessList& accesses)>;

  // Declares a *family* of `count` iterative tasks at once: member i (0 <= i < count) is the
  // task declared i-th in this call, with the accesses `accesses(i, list)` adds to `list`, and
  // runs body(ctx, i). A family is exactly the same as `count` calls of task() in a loop --
  // same FIFO order, same results -- but it stores one name and one body for all its members,
  // so declaring it costs a few nanoseconds per member instead of a string, a std::function
  // and a vector each. Errors name member i as "name[i]". Returns the index of member 0 (the
  // members' indices are consecutive). `accesses` is called count times, in order, during
  // this call only.
  //   auto x = g.location<long>("x", 1);
  //   g.task_family("step", n, [x](std::uint32_t, ordo::AccessList& acc) {
  //     acc.add(ordo::write(x));
  //   }, [x](ordo::Context& ctx, std::uint32_t i) { ctx.write(x)[0] += i; });
  std::uint32_t task_family(const std::string& name, std::uint32_t count,
                            const AccessPattern& accesses, IndexedBody body);
  // A family of `count` tasks without accesses (they share nothing, so they may run in any
  // order and in parallel; each member still runs once per iteration).
  //   g.task_family("work", n, [&](ordo::Context&, std::uint32_t i) { out[i] = f(i); });
  std::uint32_t task_family(const std::string& name, std::uint32_t count, IndexedBody body);

  using FiberBody = std::function<void(FiberContext&)>;

  // Declares an iterative fiber task: the same accesses and FIFO order as task(), but the body
  // runs on a fiber and acquires and releases its accesses itself (FiberContext). Instance k
  // starts once instance k-1 has ended, without waiting for grants. Dataflow and fiber tasks
  // mix freely in one graph. Returns the task's index (declaration order).
  std::uint32_t fiber_task(const std::string& name, std::vector<Access> accesses,
                           FiberBody body);

  // Declares a reduction of `contributors` values of T (trivially copyable), combined with
  // `op` (Sum, Min, Max or any callable T(const T&, const T&)) in the fixed order of
  // combine_in_order: the same bits for any number of workers or ranks. Its name is taken, and
  // so are "name.part[i]" (a location per contribution) and, once combined, the tree's
  // "name.node<level>[j]". An exception thrown by `op` stops the run with an Error naming the
  // reduction. Declare every contributor, then combine(); see Reduction.
  //   auto dot = g.reduction<double>("dot", blocks);
  //   g.task_family("partial", blocks, [&](std::uint32_t b, ordo::AccessList& acc) {
  //     acc.add(ordo::read(x[b]));
  //     acc.add(ordo::contribute(dot, b));
  //   }, [=](ordo::Context& ctx, std::uint32_t b) { ctx.contribute(dot, b, local_dot(ctx, b)); });
  //   g.combine(dot);
  //   ... until.done = [&](const ordo::Graph& g) { return g.value(dot) < 1e-12; };
  template <class T, class Op = Sum>
  Reduction<T> reduction(const std::string& name, std::uint32_t contributors, Op op = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "reduced values must be trivially copyable");
    static_assert(std::is_invocable_v<const Op&, const T&, const T&>,
                  "a reduction's operator is called as op(const T&, const T&)");
    static_assert(std::is_convertible_v<std::invoke_result_t<const Op&, const T&, const T&>, T>,
                  "a reduction's operator returns the reduced type T");
    std::uint32_t first_partial = 0, result = 0;
    add_reduction(name, contributors, sizeof(T), typeid(T),
                  [op = std::move(op)](const void* a, const void* b, void* out) {
                    const T z = op(*static_cast<const T*>(a), *static_cast<const T*>(b));
                    *static_cast<T*>(out) = z;
                  },
                  first_partial, result);
    return Reduction<T>(serial(), first_partial, contributors, result);
  }

  // Declares the step that combines `r`'s contributions, here in program order: every
  // contribution's task is declared before it, and tasks reading `r` after it get this
  // iteration's value. Throws Error if a contribution has no task, or if `r` is combined
  // already. Every reduction must be combined before the graph runs.
  template <class T>
  void combine(Reduction<T> r) {
    combine_reduction(r.graph_serial(), r.result());
  }

  // The value of `r` after the last iteration run, on every rank (each holds its own copy):
  // for run_until's condition and after a run. Throws Error before the graph's first run and
  // from inside a task body (a body declares ordo::read(r) and calls Context::value).
  template <class T>
  T value(Reduction<T> r) const {
    return *static_cast<const T*>(reduction_value(r.graph_serial(), r.result(), typeid(T)));
  }

  // A location's contents between runs: to initialise inputs and read results.
  // Before the graph's first run any location may be set (or read) on any rank; a location
  // gets its storage on this rank at the first call (zeros, or what the program writes).
  // After it, only the location's home rank reads or writes it here: another rank holds at
  // most a replica its own tasks use (docs/distributed.md, "Memory"), so Graph::data refuses
  // it with an Error saying to collect it with Runtime::gather. Called from a task body it
  // throws too: a body uses its Context.
  template <class T>
  std::span<T> data(Location<T> loc) {
    return {static_cast<T*>(data_bytes(loc.graph_serial(), loc.id(), typeid(T))), loc.size()};
  }
  template <class T>
  std::span<const T> data(Location<T> loc) const {
    return {static_cast<const T*>(data_bytes(loc.graph_serial(), loc.id(), typeid(T))),
            loc.size()};
  }

  std::size_t locations() const;
  std::size_t tasks() const;
  // What this graph's locations cost this rank now. Declaring a location allocates nothing: a
  // rank gives a location storage at its first Graph::data, or at the graph's first run if it
  // uses it (its home locations, the replicas its tasks access), and frees at the first run
  // what it gave a location it does not use. Memory nothing has written is not touched yet,
  // and the system provides it only when a task (or the program) first writes it.
  StorageStats storage_held() const;
  // Iterations completed by every run of this graph so far.
  std::uint64_t iterations_done() const;

  // Checks the graph (lock order, deadlock freedom) without running it. Throws Error.
  void validate();

  // Extension points for libraries built on this API that keep locations and tasks of their
  // own in a program's graph (the stencil layer is one; docs/architecture.md, "Layers"): the
  // two moments a graph reaches without passing through such a library.
  //
  // on_first_run: the graph's first run (Runtime::run or run_until, Runtime::restart, or a
  // gather of it) calls each hook once, in the order given, just before it freezes the graph,
  // with this rank and the job's rank count (0 and 1 in one process). A hook may still declare
  // locations and tasks and place them: a library whose tasks depend on where its locations
  // live declares them there when the program did not make it do so earlier. An Error it
  // throws ends that run before anything runs. Give hooks before the first run.
  //   g.on_first_run([&lib](unsigned rank, unsigned ranks) { lib.place(rank, ranks); });
  using FirstRunHook = std::function<void(unsigned rank, unsigned ranks)>;
  void on_first_run(FirstRunHook hook);
  // on_restore: once Runtime::restart has filled this rank's home locations from a checkpoint,
  // and before anything reads them, each check is called, in the order given, with what was
  // loaded (Restored). It returns "" or what is wrong, and restart then refuses the checkpoint
  // as corrupt with an Error quoting it, on every rank. For state whose bad values would do
  // harm rather than give wrong numbers (a header that becomes pointer offsets): a checkpoint
  // no run could have written is refused instead of read out of bounds. A check that passes
  // then rebuilds what its library marked derived (set_derived below) through Restored::write.
  // Give checks before the first run.
  using RestoreCheck = std::function<std::string(Restored&)>;
  void on_restore(RestoreCheck check);
  // Derived state, for a library whose locations and tasks depend on the rank count (the
  // stencil layer's halo exchange: export locations for the blocks of other ranks, copies
  // between blocks of one rank). A checkpoint does not save a derived location, and the graph's
  // fingerprint leaves out derived locations, every access to them and derived tasks, so that
  // the checkpoint restarts on another rank count. What they hold at an iteration's end (a
  // derived location, what a derived task writes into another) the library rebuilds from the
  // restored locations, in its on_restore check (Restored::write). Call before the first run.
  //   g.set_derived(edge);                      // b's edge, packed for a block of another rank
  //   g.set_derived_task(g.task("copy", ...));  // copies b's edge into a halo on b's rank
  template <class T>
  void set_derived(Location<T> loc) {
    derive_location(loc.graph_serial(), loc.id());
  }
  void set_derived_task(std::uint32_t task);

 private:
  friend detail::GraphImpl& detail::impl_of(const Graph& graph);
  std::uint64_t serial() const;
  std::uint32_t add_location(const std::string& name, std::size_t elem_size, std::size_t count,
                             const std::type_info& type);
  std::uint32_t add_location_family(const std::string& name, std::size_t elem_size,
                                    const std::vector<std::size_t>& sizes,
                                    const std::type_info& type);
  // Throws Error when `count` more locations would exceed what a graph holds.
  void check_family_count(const std::string& name, std::uint32_t count) const;
  void* data_bytes(std::uint64_t graph, std::uint32_t location, const std::type_info& type) const;
  void set_home_rank_of(std::uint64_t graph, std::uint32_t location, unsigned rank);
  unsigned home_rank_of(std::uint64_t graph, std::uint32_t location) const;
  void place_location(std::uint64_t graph, std::uint32_t location, unsigned node);
  using Combine = std::function<void(const void* a, const void* b, void* out)>;
  void add_reduction(const std::string& name, std::uint32_t contributors, std::size_t elem_size,
                     const std::type_info& type, Combine op, std::uint32_t& first_partial,
                     std::uint32_t& result);
  void combine_reduction(std::uint64_t graph, std::uint32_t result);
  void derive_location(std::uint64_t graph, std::uint32_t location);
  const void* reduction_value(std::uint64_t graph, std::uint32_t result,
                              const std::type_info& type) const;
  std::unique_ptr<detail::GraphImpl> impl_;
};

// A graph's locations as Runtime::restart loaded them, for a check given with
// Graph::on_restore: valid during that check only.
class Restored {
 public:
  // Whether this rank is `loc`'s home: the checkpoint filled only the home locations.
  template <class T>
  bool is_home(Location<T> loc) const {
    return home_here(loc.graph_serial(), loc.id());
  }
  // `loc`'s contents as loaded. Throws Error unless this rank is its home.
  template <class T>
  std::span<const T> data(Location<T> loc) const {
    return {static_cast<const T*>(bytes(loc.graph_serial(), loc.id(), typeid(T))), loc.size()};
  }
  // `loc`'s contents, to rebuild what Graph::set_derived left out of the checkpoint: a derived
  // location, or what derived tasks write into a location (a halo), from what was loaded, as
  // the run leaves them at an iteration's end. Throws Error unless this rank is its home.
  template <class T>
  std::span<T> write(Location<T> loc) {
    return {static_cast<T*>(const_cast<void*>(bytes(loc.graph_serial(), loc.id(), typeid(T)))),
            loc.size()};
  }

 private:
  friend class Graph;
  struct View;
  explicit Restored(const View& view) : view_(view) {}
  bool home_here(std::uint64_t graph, std::uint32_t location) const;
  const void* bytes(std::uint64_t graph, std::uint32_t location, const std::type_info& type) const;
  const View& view_;
};

// Settings of a Runtime's connection to the other ranks (used only when the process is one
// rank of several). A field left at its default takes the value of the environment variable
// named beside it, else the built-in default (docs/configuration.md).
struct TransportOptions {
  // How long a rank keeps polling the network after the last message before its threads sleep;
  // 0: sleep at once. Negative: ORDO_PROGRESS_SPIN_US (microseconds), else 100 us.
  std::chrono::microseconds progress_spin{-1};
  // Bound on start-up: reaching the launcher and the first exchange with every rank. 0:
  // ORDO_TIMEOUT (seconds; ordorun sets it from --timeout-startup), else 30 s.
  std::chrono::milliseconds startup_timeout{0};
  // The network devices UCX may use, as UCX_NET_DEVICES takes them ("lo", "eth0",
  // "mlx5_0:1", comma-separated): a rank listens on every device it may use, so this is how
  // to keep it off a network (docs/comm.md, "What a rank exposes"). Empty: ORDO_NET_DEVICES,
  // else UCX's own choice (UCX_NET_DEVICES, else every device).
  std::string net_devices{};
};

// Settings of a Runtime. A field left at its default takes the value of the environment
// variable named beside it, read when the Runtime is built, else the built-in default
// (docs/configuration.md lists them all).
//   ordo::Runtime rt({.workers = 4, .trace_path = "run.trace"});
struct RuntimeOptions {
  // Worker threads; 0: one per core (of this process's share of the host when several ranks
  // run on it).
  unsigned workers = 0;
  // OS indices of the processing units the workers run on: worker i on units[i % n] (with
  // workers 0, one worker per unit). Empty: ORDO_PUS (taskset syntax, "0,2,4-7"), else spread
  // over the cores.
  std::vector<unsigned> processing_units{};
  // Print the scheduler's mode and worker map on stderr when the Runtime starts. Unset:
  // ORDO_VERBOSE (set and not 0: yes), else no.
  std::optional<bool> verbose{};
  // Usable stack bytes of each fiber (fiber tasks), rounded up to pages; 0: ORDO_FIBER_STACK
  // (bytes, or with K/M/G), else 256 KiB. A fiber that overflows it ends the process with a
  // report naming the task.
  std::size_t fiber_stack_size = 0;
  // Trace file (docs/tracing.md). Empty: ORDO_TRACE, if set; both empty: tracing off, at no
  // cost. The file is complete after every run; read it with the ordo-trace tool.
  std::string trace_path{};  // "{}": callers may leave it out of designated initializers
  // Events each worker's trace buffer holds before it is written out; 0: ORDO_TRACE_BUFFER,
  // else 65536.
  std::size_t trace_buffer_events = 0;
  // Ranks of one host share the memory of their small locations instead of copying them
  // (docs/distributed.md). Unset: ORDO_SHARED_MEMORY (1 or on, 0 or off), else yes when the
  // process is one rank of several. (A graph is declared before any Runtime exists, so it keeps
  // its locations in shareable memory where the environment's default says: false here turns
  // sharing off, true cannot turn it on.)
  std::optional<bool> shared_memory{};
  // Checkpoints (docs/checkpoint.md): every `checkpoint_every` iterations of a graph (counted
  // from its first, restarts included), between two iterations, each rank writes its home
  // locations into a new checkpoint in `checkpoint_dir` (created if missing), and the older
  // one is removed once the new one is complete. Empty / 0: ORDO_CHECKPOINT_DIR /
  // ORDO_CHECKPOINT_EVERY; both unset: no checkpoints. Give both or neither.
  std::string checkpoint_dir{};
  std::uint64_t checkpoint_every = 0;
  TransportOptions transport{};
};

struct RunStats {
  std::uint64_t iterations = 0;  // iterations this run executed
  double seconds = 0;            // wall time of the run
};

// Where a gather delivers: onto every rank of the job rather than one (Runtime::gather).
inline constexpr unsigned kAllRanks = ~0u;

// One piece of what Runtime::gather_pieces collects: `bytes` bytes that rank `home` provides.
struct GatherPiece {
  std::size_t bytes = 0;
  unsigned home = 0;
};

// Stop rule for Runtime::run_until (docs/convergence.md).
//   ordo::Until until{.done = [&](const ordo::Graph& g) { return g.value(residual) < tol; },
//                     .reads = {ordo::read(residual)}};
struct Until {
  // The condition, called after every `check_every` iterations (and after the last); returning
  // true stops the run there, after that iteration on every rank.
  //  - With `reads` empty: called between iterations, on the caller's thread, while no task
  //    runs; it reads the graph's reduced values with Graph::value (the same bits on every
  //    rank) and, with Graph::data, the locations whose home is this rank (another rank's is
  //    refused). A check stops every worker and, across ranks, costs a quiescence and a vote.
  //  - With `reads` listing ordo::read(r) of the reductions it reads: called in the dataflow,
  //    on the worker that combined the last of their values of the checked iteration (across
  //    ranks, on every rank, from its own copy), while the next iteration's tasks wait for it
  //    as for a lock; it may read those reductions with Graph::value and nothing else. A check
  //    costs what a barrier costs: nothing stops, and no rank votes.
  // An exception it throws ends the run as a task body's would (on every rank).
  std::function<bool(const Graph&)> done;
  std::uint64_t check_every = 1;        // iterations between two checks
  std::uint64_t max_iterations = 1000;  // the run stops after this many in any case
  std::vector<Access> reads{};          // ordo::read(r) of each reduction `done` reads
};

class Runtime;
namespace bench {
std::uint64_t control_messages(const Runtime& runtime);  // <ordo/bench.hpp>
}

// Worker threads that run graphs. Reuse one Runtime for many runs.
class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  unsigned workers() const;
  // NUMA nodes the workers span; 1 when the scheduler runs flat (one node, or no hwloc).
  // RuntimeOptions::verbose prints the scheduler's mode and worker map at start-up.
  unsigned numa_nodes() const;
  // This process's rank and the number of ranks of the job: 0 and 1 unless the program was
  // started by ordorun -n N, mpirun or srun (the Runtime connects to the other ranks when it is
  // built; every rank must build one). Across ranks, run_until stops when the condition holds
  // on every rank.
  unsigned rank() const;
  unsigned ranks() const;
  // Runs `iterations` iterations of every task (at least 1). Blocks until they are done.
  RunStats run(Graph& graph, std::uint64_t iterations);

  // Runs until `until.done` holds after a checked iteration, or until.max_iterations.
  // The stop is deterministic: the graph holds exactly the contents after that iteration.
  // Throws Error for an Until::reads entry that is no reduction of this graph.
  // docs/convergence.md: where the condition runs and what a check costs.
  RunStats run_until(Graph& graph, const Until& until);

  // Collects `loc`'s contents from its home rank onto rank `to`, or onto every rank with
  // kAllRanks: how a rank reads a location whose home is another rank (Graph::data refuses
  // it there). Collective: every rank calls it between runs, with the same arguments at the
  // same point of the program; ranks that gather different things are refused with an Error
  // on every rank. Returns the contents on the ranks it delivers to, an empty vector on the
  // others. Throws Error for a rank that does not exist, from a task body, and across ranks
  // before the graph's first run (homes are decided then). docs/distributed.md, "Gather".
  template <class T>
  std::vector<T> gather(const Graph& graph, Location<T> loc, unsigned to = kAllRanks) {
    std::vector<T> out;
    gather_location(graph, loc.graph_serial(), loc.id(), typeid(T), to, [&](std::size_t n) {
      out.resize(n);
      return static_cast<void*>(out.data());
    });
    return out;
  }
  // Every rank's `mine`, indexed by rank, onto rank `to` or every rank (kAllRanks); empty on
  // the others. Collective like gather(); it returns on a rank only once every rank has
  // called it, so it is a barrier too.
  template <class T>
  std::vector<T> gather_values(const T& mine, unsigned to = kAllRanks) {
    static_assert(std::is_trivially_copyable_v<T>, "gather_values moves values as bytes");
    std::vector<T> out;
    gather_value_bytes(&mine, sizeof(T), to, [&](std::size_t n) {
      out.resize(n);
      return static_cast<void*>(out.data());
    });
    return out;
  }
  // For libraries built on this API that keep one array in pieces of their own (the stencil
  // layer's blocks): collects piece i, pieces[i].bytes bytes that rank pieces[i].home provides,
  // onto rank `to` or every rank (kAllRanks). On a piece's home rank fill(i, destination)
  // writes it, and on each receiving rank take(i, bytes) reads it, in piece order; across
  // ranks both run on workers of a small graph named "ordo.gather[" + name + "]...", and must
  // not call Graph::data. Collective like gather(): ranks that gather different pieces, names
  // or destinations are refused with an Error on every rank. `what` opens error messages.
  // Throws Error for a rank that does not exist and from a task body.
  using PieceFill = std::function<void(std::size_t piece, std::span<std::byte> destination)>;
  using PieceTake = std::function<void(std::size_t piece, std::span<const std::byte> bytes)>;
  void gather_pieces(const std::string& what, const std::string& name,
                     std::span<const GatherPiece> pieces, unsigned to, const PieceFill& fill,
                     const PieceTake& take);
  // What gather_pieces checks before anything moves, for a library that reads its pieces
  // before it calls it: throws the Error gather_pieces would for `to` or from a task body.
  void check_gather(unsigned to, const std::string& what) const;
  // ordo::check_memory_available for what each rank allocates besides a graph's locations (its
  // share of a problem, before it fills it) when the ranks of a host share its memory.
  // Collective: every rank calls it at the same point of the program, with its own `bytes`.
  // Each rank's bytes are judged against its own limits and, with those of the ranks of its
  // host together, against the host's memory; every rank throws the same Error, opened by
  // `what` and naming each rank that does not fit with its bytes and what is available. A rank
  // that calls it while another runs a graph or gathers something else is refused with an
  // Error (so is the other), never left waiting. On one rank: ordo::check_memory_available.
  void check_memory_on_all_ranks(std::uint64_t bytes, const std::string& what);
  // Resumes `graph` from the newest complete checkpoint in `dir` (written by an earlier run of
  // the same program on as many ranks, RuntimeOptions::checkpoint_dir): loads the contents of
  // every location after that iteration, and the graph's runs continue from there exactly as
  // the uninterrupted run did (Context::iteration() counts on from it). Call it on every rank,
  // after declaring the graph and setting its initial contents, before its first run. Returns
  // the checkpoint's iteration; run the remaining ones. Throws Error naming what does not
  // match: no complete checkpoint in `dir`, one of another graph or another rank count, or a
  // part missing, truncated or not this checkpoint's.
  std::uint64_t restart(Graph& graph, const std::string& dir);

  // Stops every rank of the job now, as MPI_Abort does, for a program that finds on one rank
  // that the job cannot go on: this rank prints "ordo: rank R aborted the job: <message>" on
  // its standard error and tells every other rank, which each print the same line and exit;
  // every rank, this one included, exits with `status` (1 to 125) without returning or
  // running destructors (standard streams are flushed). Under ordorun, ordorun names this
  // rank and its message and exits with `status`. Any thread. Throws Error for a status
  // outside 1-125, before anything is told.
  [[noreturn]] void abort(const std::string& message, int status = 1);

 private:
  // `out(n)` sizes the result for n elements and returns where they go (receiving ranks only).
  using GatherOut = std::function<void*(std::size_t)>;
  void gather_location(const Graph& graph, std::uint64_t serial, std::uint32_t location,
                       const std::type_info& type, unsigned to, const GatherOut& out);
  void gather_value_bytes(const void* mine, std::size_t size, unsigned to, const GatherOut& out);
  friend std::uint64_t bench::control_messages(const Runtime& runtime);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ordo
