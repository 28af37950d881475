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
}  // namespace detail

// A typed handle to a location of one Graph. Cheap to copy; capture it by value in bodies.
template <class T>
class Location {
 public:
  Location() = default;
  std::uint32_t id() const { return id_; }
  std::size_t size() const { return size_; }

 private:
  friend class Graph;
  Location(std::uint32_t id, std::size_t size) : id_(id), size_(size) {}
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
  return Access{loc.id(), Mode::read, false, 0};
}

// Exclusive access; a write access may also read the location's current contents.
template <class T>
Access write(Location<T> loc) {
  return Access{loc.id(), Mode::write, false, 0};
}

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
  template <class T>
  std::span<const T> read(Location<T> loc) const {
    return {static_cast<const T*>(bytes(loc.id(), Mode::read, typeid(T))), loc.size()};
  }
  // Contents of a location the task declared with write(). Throws Error otherwise.
  template <class T>
  std::span<T> write(Location<T> loc) const {
    return {static_cast<T*>(bytes(loc.id(), Mode::write, typeid(T))), loc.size()};
  }

  explicit Context(const detail::ContextImpl& impl) : impl_(impl) {}

 private:
  void* bytes(std::uint32_t location, Mode mode, const std::type_info& type) const;
  const detail::ContextImpl& impl_;
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
  template <class T>
  Location<T> location(const std::string& name, std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "location elements must be trivially copyable");
    return Location<T>(add_location(name, sizeof(T), count, typeid(T)), count);
  }

  using Body = std::function<void(Context&)>;

  // Declares an iterative task. Each location may appear once in `accesses`.
  // Returns the task's index (declaration order).
  std::uint32_t task(const std::string& name, std::vector<Access> accesses, Body body);

  // A location's contents between runs: to initialise inputs and read results.
  template <class T>
  std::span<T> data(Location<T> loc) {
    return {static_cast<T*>(data_bytes(loc.id(), typeid(T))), loc.size()};
  }
  template <class T>
  std::span<const T> data(Location<T> loc) const {
    return {static_cast<const T*>(data_bytes(loc.id(), typeid(T))), loc.size()};
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
  std::uint32_t add_location(const std::string& name, std::size_t elem_size, std::size_t count,
                             const std::type_info& type);
  void* data_bytes(std::uint32_t location, const std::type_info& type) const;
  std::unique_ptr<detail::GraphImpl> impl_;
};

struct RuntimeOptions {
  unsigned workers = 0;  // 0: one per hardware thread
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
