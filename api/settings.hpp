// Where every setting of ordo comes from. A Runtime is configured by RuntimeOptions (and its
// TransportOptions); each field the program leaves at its default takes the value of one
// environment variable, else a built-in default. The launcher's variables (ordorun's, PMIx's)
// say how the process was started: comm::Launch reads them, and the bootstrap built from it
// alone answers rank, size, local rank and local size.
//
// settings.cpp is the only file of the library that reads the environment. How to add a
// setting, step by step with the files and tests to copy: docs/developing.md, "Adding a setting".
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "comm/bootstrap.hpp"
#include "comm/transport.hpp"
#include "scheduler/pool.hpp"
#include <ordo/ordo.hpp>

namespace ordo::detail {

// A Runtime's settings, each one decided.
struct Settings {
  // Workers, processing units, verbose; the share of the host's cores comes from the
  // bootstrap (Runtime), not from here.
  sched::PoolConfig pool;
  std::size_t fiber_stack_size = 0;   // bytes; never 0 once resolved
  std::string trace_path;             // empty: tracing off
  std::size_t trace_buffer_events = 0;
  bool shared_memory = false;
  std::chrono::milliseconds startup_timeout{0};
  comm::TransportOptions transport;
  comm::Launch launch;
  std::string checkpoint_dir;         // empty: no checkpoints
  std::uint64_t checkpoint_every = 0; // iterations; > 0 exactly when checkpoint_dir is set
};

// Decides every setting from `options`, the environment and the defaults, in that order.
// Throws Error naming the field or variable whose value is unusable and saying what to give.
// Reads the environment once per call (the Runtime calls it once, when it is built).
Settings resolve(const RuntimeOptions& options);

// Whether a graph keeps its small locations in memory that ranks of one host can share:
// ORDO_SHARED_MEMORY, else whether this process is one rank of several (comm::Launch). Read
// once per process (graphs are declared before any Runtime exists); an unusable value means
// no, and the Runtime reports it.
bool shared_storage_default();

}  // namespace ordo::detail
