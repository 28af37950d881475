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
// Runtime::run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace ordo {

// Thrown on API misuse and bad input (never for an exception raised by a task body, which is
// rethrown as it was).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
class GraphImpl;
struct ContextImpl;
struct FiberContextImpl;
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

  explicit Context(const detail::ContextImpl& impl) : impl_(impl) {}

 private:
  void* bytes(std::uint64_t graph, std::uint32_t location, Mode mode,
              const std::type_info& type) const;
  const detail::ContextImpl& impl_;
};

// What the body of a fiber task sees: its iteration, and the handles of the accesses it
// declared, which it acquires and releases itself. The ORWL mapping (papers/004 ch. 2):
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

  explicit FiberContext(const detail::FiberContextImpl& impl) : impl_(impl) {}

 private:
  void* acquire_bytes(std::uint64_t graph, std::uint32_t location, Mode mode,
                      const std::type_info& type);
  void release_location(std::uint64_t graph, std::uint32_t location);
  const detail::FiberContextImpl& impl_;
};

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
  //   g.place(a, 1);  // a lives on the second node
  template <class T>
  void place(Location<T> loc, unsigned node) {
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

  // A location's contents between runs: to initialise inputs and read results.
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
  // Iterations completed by every run of this graph so far.
  std::uint64_t iterations_done() const;

  // Checks the graph (lock order, deadlock freedom) without running it. Throws Error.
  void validate();

  // Internal: the runtime's view of the graph.
  detail::GraphImpl& impl() const { return *impl_; }

 private:
  std::uint64_t serial() const;
  std::uint32_t add_location(const std::string& name, std::size_t elem_size, std::size_t count,
                             const std::type_info& type);
  std::uint32_t add_location_family(const std::string& name, std::size_t elem_size,
                                    const std::vector<std::size_t>& sizes,
                                    const std::type_info& type);
  void* data_bytes(std::uint64_t graph, std::uint32_t location, const std::type_info& type) const;
  void set_home_rank_of(std::uint64_t graph, std::uint32_t location, unsigned rank);
  unsigned home_rank_of(std::uint64_t graph, std::uint32_t location) const;
  void place_location(std::uint64_t graph, std::uint32_t location, unsigned node);
  std::unique_ptr<detail::GraphImpl> impl_;
};

struct RuntimeOptions {
  unsigned workers = 0;  // 0: one per core (ORDO_PUS picks the processing units)
  // Usable stack bytes of each fiber (fiber tasks), rounded up to pages; 0: the environment
  // variable ORDO_FIBER_STACK (bytes, or with K/M/G), else 256 KiB. A fiber that overflows it
  // ends the process with a report naming the task.
  std::size_t fiber_stack_size = 0;
  // Trace file (docs/tracing.md). Empty: the environment variable ORDO_TRACE, if set; both
  // empty: tracing off, at no cost. The file is complete after every run; read it with the
  // ordo-trace tool.
  std::string trace_path{};  // "{}": callers may leave it out of designated initializers
};

struct RunStats {
  std::uint64_t iterations = 0;  // iterations this run executed
  double seconds = 0;            // wall time of the run
};

// Stop rule for Runtime::run_until.
struct Until {
  // Called between iterations, on the caller's thread, while no task runs; reads the graph's
  // locations with Graph::data. Returning true stops the run there.
  std::function<bool(const Graph&)> done;
  std::uint64_t check_every = 1;        // iterations between two checks
  std::uint64_t max_iterations = 1000;  // the run stops after this many in any case
};

// Worker threads that run graphs. Reuse one Runtime for many runs.
class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  unsigned workers() const;
  // NUMA nodes the workers span; 1 when the scheduler runs flat (one node, or no hwloc).
  // ORDO_VERBOSE=1 in the environment prints the scheduler's mode and worker map at start-up.
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
  RunStats run_until(Graph& graph, const Until& until);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ordo
