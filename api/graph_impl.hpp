// Private to the api layer: what a public Graph holds.
#pragma once

#include <memory>
#include <vector>

#include "engine.hpp"
#include "graph.hpp"
#include "ordo/ordo.hpp"

namespace ordo::detail {

class GraphImpl {
 public:
  rt::Graph graph;
  std::unique_ptr<rt::Engine> engine;  // created by the first run; the graph is frozen then
  // Names this graph in trace files for the life of the process (addresses can be reused).
  const std::uint64_t serial = next_serial();
  // The users' bodies. A task's runtime body refers to its entry by index through a pointer to
  // this object (stable: a Graph holds it by unique_ptr), which fits std::function's inline
  // storage, so declaring a task does not allocate a second closure.
  std::vector<Graph::Body> bodies;

  bool frozen() const { return engine != nullptr; }
  // Compiles the lock plans and builds the engine on first use. Throws Error.
  rt::Engine& prepare();
  // Compiles without keeping the result. Throws Error.
  void check() const;

 private:
  static std::uint64_t next_serial();
};

struct ContextImpl {
  const rt::Instance& instance;
};

struct FiberContextImpl {
  const rt::Instance& instance;  // its worker is updated by the engine at every resume
};

}  // namespace ordo::detail
