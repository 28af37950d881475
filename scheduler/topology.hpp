// The machine as the scheduler sees it: processing units, the cores and NUMA nodes they belong
// to, and how near two of them are. Built from hwloc when the build has it (topology.cpp is the
// only file that touches hwloc), otherwise a flat machine of hardware_concurrency() units on one
// node.
//
// A topology may also come from an hwloc synthetic description or XML file instead of this
// machine: the scheduler then makes all the same mapping decisions but binds nothing (the
// units do not exist here). Tests use this to check placement on machines they do not have.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace ordo::sched {

// Parses a list of processing units' OS indices in taskset's syntax ("0,2,4-7"). Throws
// std::invalid_argument saying what is wrong (the caller names where the text came from).
std::vector<unsigned> parse_unit_list(const std::string& text);

struct ProcessingUnit {
  unsigned os_index = 0;  // the number the OS uses (taskset, /proc/cpuinfo)
  unsigned core = 0;      // logical index of its core
  unsigned node = 0;      // logical index of its NUMA node
};

// What happened when memory was asked to live on a node.
enum class Binding {
  bound,            // the pages are bound to (and were migrated to) the node
  not_this_system,  // the topology is synthetic or XML: nothing to bind
  no_hwloc,         // built without hwloc
  too_small,        // the area covers no whole page
  failed,           // the OS refused (e.g. no NUMA support in the kernel); memory stays put
};

class Topology {
 public:
  // `source`: empty for this machine; "synthetic:<hwloc synthetic description>" (for example
  // "synthetic:pack:2 numa:2 core:4 pu:1"); or "xml:<path of an lstopo XML export>".
  // Throws std::invalid_argument when the description cannot be loaded or needs hwloc in a
  // build without it. For this machine, a failing hwloc falls back to a flat topology and
  // says why in fallback_reason().
  explicit Topology(const std::string& source = "");
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  // True when the build has hwloc.
  static bool hwloc_available();

  // Every processing unit, in hwloc's logical order (siblings next to each other).
  const std::vector<ProcessingUnit>& pus() const { return pus_; }
  unsigned cores() const { return cores_; }
  unsigned nodes() const { return nodes_; }
  // True when the units are this machine's, so threads and memory can be bound.
  bool is_this_system() const { return this_system_; }
  bool from_hwloc() const { return hw_ != nullptr; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  // One line saying where the topology came from and its shape.
  std::string describe() const;

  // Nearness of two units (indices into pus()): the depth of their deepest common ancestor in
  // the hwloc tree, greater is nearer. Only the order matters. Flat topology: all equal.
  int affinity(std::size_t pu_a, std::size_t pu_b) const;

  // Binds the calling thread to unit `pu` (index into pus()). Returns false if it could not
  // (never tried on a topology that is not this system's).
  bool bind_thread(std::size_t pu) const;
  // Binds the calling thread to the set of units `pus` (indices into pus()): the OS may move it
  // among them. Same return as bind_thread.
  bool bind_thread(const std::vector<std::size_t>& pus) const;

  // Binds the whole pages inside [data, data + bytes) to NUMA node `node` and migrates them.
  Binding bind_memory(void* data, std::size_t bytes, unsigned node) const;

  // The NUMA node that holds the first whole page of [data, data + bytes), or -1 when it cannot
  // be told (flat, not this system, or the kernel does not say). For tests and diagnostics.
  int memory_node(const void* data, std::size_t bytes) const;

 private:
  struct Hw;  // hwloc state, defined in topology.cpp
  void load_flat(unsigned units);

  std::unique_ptr<Hw> hw_;
  std::vector<ProcessingUnit> pus_;
  unsigned cores_ = 0;
  unsigned nodes_ = 1;
  bool this_system_ = true;
  std::string source_;
  std::string fallback_reason_;
};

}  // namespace ordo::sched
