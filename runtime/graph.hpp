// The declared graph: locations (named, typed, contiguous buffers) and iterative tasks with
// their accesses. This is pure description plus storage; the lock plans are compiled from it
// by plan.hpp and executed by engine.hpp.
//
// The runtime reports bad input as diagnostics (strings); the api layer turns them into
// exceptions at the public boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

namespace ordo::rt {

enum class Mode : std::uint8_t { read, write };

struct Instance;  // engine.hpp

// A body: a plain function pointer plus an opaque closure owned by the task.
using Body = std::function<void(const Instance&)>;

struct LocationDesc {
  std::string name;
  std::size_t elem_size = 0;
  std::size_t count = 0;
  const std::type_info* type = nullptr;
  std::int32_t home = -1;  // rank holding the master copy; -1: the default placement
  int place = -1;  // home NUMA node the user asked for (Graph::place), -1: the default policy
};

struct AccessDesc {
  std::uint32_t location = 0;
  Mode mode = Mode::read;
  bool has_position = false;  // explicit ORWL priority for this location's initial FIFO
  std::int64_t position = 0;
};

struct TaskDesc {
  std::string name;
  std::vector<AccessDesc> accesses;
  Body body;
  // A fiber task's body runs on a fiber and acquires and releases its accesses itself
  // (Engine::fiber_acquire / fiber_release); a dataflow task's body runs once everything is
  // granted.
  bool fiber = false;
};

// Zero-initialised storage of one location: 64-byte aligned, page aligned (and padded to whole
// pages) from one page up, so that a buffer can be bound to a NUMA node without moving another.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t bytes);
  std::byte* data() const { return ptr_.get(); }
  std::size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte, Free> ptr_;
  std::size_t bytes_ = 0;
};

class Graph {
 public:
  // Returns the new location's index. `name` must be unique (checked by the caller).
  std::uint32_t add_location(std::string name, std::size_t elem_size, std::size_t count,
                             const std::type_info& type);
  std::uint32_t add_task(TaskDesc task);

  // Asks for `location`'s memory and writers to live on NUMA node `node` (wrapped modulo the
  // node count of the pool that runs the graph).
  void place(std::uint32_t location, unsigned node);
  // The home node of every location on a pool of `nodes` NUMA nodes (docs/scheduler.md): the
  // node given to place(), else contiguous chunks in declaration order -- location i of n goes
  // to node i * nodes / n -- so that neighbouring blocks share a node.
  std::vector<unsigned> homes(unsigned nodes) const;

  // Index of the location called `name`, or -1.
  std::int64_t find_location(const std::string& name) const;

  void set_home(std::uint32_t location, std::int32_t rank) { locations_[location].home = rank; }

  const std::vector<LocationDesc>& locations() const { return locations_; }
  const std::vector<TaskDesc>& tasks() const { return tasks_; }
  std::byte* data(std::uint32_t location) const { return buffers_[location].data(); }

 private:
  std::vector<LocationDesc> locations_;
  std::vector<Buffer> buffers_;
  std::vector<TaskDesc> tasks_;
};

}  // namespace ordo::rt
