// The one file of the library that reads the environment (settings.hpp says why and how to add
// a setting; docs/configuration.md lists them for users).
#include "api/settings.hpp"

#include "api/checkpoint.hpp"

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "comm/ucx_signals.hpp"
#include "runtime/trace.hpp"
#include "scheduler/fiber.hpp"
#include "scheduler/topology.hpp"

namespace ordo::detail {

namespace {

// The variable's value, or nullptr when it is unset or empty (an empty variable means "not
// set" for every setting: `ORDO_TRACE= prog` turns tracing off).
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// "NAME='value'" for messages.
std::string quoted(const char* name, const char* value) {
  return std::string(name) + "='" + value + "'";
}

// A non-negative decimal number without sign or suffix, at most `max`; nullopt otherwise.
std::optional<unsigned long long> number(const char* text, unsigned long long max) {
  if (*text < '0' || *text > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return std::nullopt;
  return v;
}

// Runs when libordo is loaded, after UCX's libraries (it depends on them), which have installed
// their error-signal handlers by then: a program that links ordo keeps its signals' default
// actions (comm/ucx_signals.hpp) unless UCX_HANDLE_ERRORS asks for UCX's (docs/configuration.md).
[[gnu::constructor]] void give_back_error_signals() {
  if (env("UCX_HANDLE_ERRORS") == nullptr) comm::restore_signals_taken_by_ucx();
}

enum class Switch { unset, on, off, invalid };

Switch switch_env(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return Switch::unset;
  const std::string_view s(v);
  if (s == "1" || s == "on") return Switch::on;
  if (s == "0" || s == "off") return Switch::off;
  return Switch::invalid;
}

comm::Launch launch_from_environment() {
  try {
    return comm::Launch::from([](const char* name) { return std::getenv(name); });
  } catch (const comm::CommError& e) {
    throw Error(std::string("cannot tell how this process was started: ") + e.what());
  }
}

constexpr std::size_t kMaxTraceBuffer = std::size_t{1} << 26;

}  // namespace

Settings resolve(const RuntimeOptions& o) {
  Settings s;
  s.launch = launch_from_environment();

  s.pool.workers = o.workers;
  s.pool.pus = o.processing_units;
  if (s.pool.pus.empty())
    if (const char* v = env("ORDO_PUS")) {
      try {
        s.pool.pus = sched::parse_unit_list(v);
        s.pool.pus_origin = "ORDO_PUS=" + std::string(v);
      } catch (const std::invalid_argument&) {
        throw Error(quoted("ORDO_PUS", v) +
                    " is not a list of processing units; write OS indices and ranges separated "
                    "by commas, e.g. ORDO_PUS=0,2,4-7");
      }
    }
  if (o.verbose) {
    s.pool.verbose = *o.verbose;
  } else if (const char* v = env("ORDO_VERBOSE")) {
    s.pool.verbose = std::string_view(v) != "0";
  }

  s.fiber_stack_size = o.fiber_stack_size;
  if (s.fiber_stack_size == 0) {
    if (const char* v = env("ORDO_FIBER_STACK")) {
      s.fiber_stack_size = sched::StackPool::parse_size(v);
      if (s.fiber_stack_size == 0)
        throw Error(quoted("ORDO_FIBER_STACK", v) +
                    " is not a size; give bytes or a number with K, M or G (for example "
                    "ORDO_FIBER_STACK=512K)");
    } else {
      s.fiber_stack_size = sched::StackPool::kDefaultStackSize;
    }
  }

  s.trace_path = o.trace_path;
  if (s.trace_path.empty())
    if (const char* v = env("ORDO_TRACE")) s.trace_path = v;
  s.trace_buffer_events = o.trace_buffer_events;
  if (s.trace_buffer_events == 0) {
    s.trace_buffer_events = rt::trace::RecorderConfig{}.buffer_events;
    if (const char* v = env("ORDO_TRACE_BUFFER")) {
      const auto n = number(v, kMaxTraceBuffer);
      if (!n || *n < 2)
        throw Error(quoted("ORDO_TRACE_BUFFER", v) +
                    " is not a number of events in [2, 67108864]; unset it for the default");
      s.trace_buffer_events = static_cast<std::size_t>(*n);
    }
  } else if (s.trace_buffer_events < 2 || s.trace_buffer_events > kMaxTraceBuffer) {
    throw Error("RuntimeOptions::trace_buffer_events = " + std::to_string(s.trace_buffer_events) +
                " is not a number of events in [2, 67108864]; give one, or 0 for the default");
  }

  if (o.shared_memory) {
    s.shared_memory = *o.shared_memory;
  } else {
    switch (switch_env("ORDO_SHARED_MEMORY")) {
      case Switch::on: s.shared_memory = true; break;
      case Switch::off: s.shared_memory = false; break;
      case Switch::unset: s.shared_memory = s.launch.is_one_of_several(); break;
      case Switch::invalid:
        throw Error(quoted("ORDO_SHARED_MEMORY", env("ORDO_SHARED_MEMORY")) +
                    " is not understood: give 1 (or on) to share the locations of ranks on one "
                    "host, 0 (or off) to copy them, or leave it unset (shared when the process "
                    "is one rank of several)");
    }
  }

  // Placement off: the scheduler's topology of this machine counts one NUMA node (topology.cpp,
  // "one-node"), so the pool runs flat on the same cores. A variable only, for measurements.
  switch (switch_env("ORDO_NUMA_PLACEMENT")) {
    case Switch::off: s.pool.topology = "one-node"; break;
    case Switch::on:
    case Switch::unset: break;
    case Switch::invalid:
      throw Error(quoted("ORDO_NUMA_PLACEMENT", env("ORDO_NUMA_PLACEMENT")) +
                  " is not understood: give 1 (or on) to place locations and tasks on NUMA "
                  "nodes, 0 (or off) to run as on one node, or leave it unset (on)");
  }

  const TransportOptions& t = o.transport;
  s.transport.spin = t.progress_spin;
  if (s.transport.spin.count() < 0) {
    s.transport.spin = comm::kDefaultProgressSpin;
    if (const char* v = env("ORDO_PROGRESS_SPIN_US")) {
      const auto us = number(v, 1000000);
      if (!us)
        throw Error(quoted("ORDO_PROGRESS_SPIN_US", v) +
                    " is not a number of microseconds in [0, 1000000]; unset it for the "
                    "default (100)");
      s.transport.spin = std::chrono::microseconds(*us);
    }
  }
  s.startup_timeout = t.startup_timeout;
  if (s.startup_timeout.count() < 0)
    throw Error("TransportOptions::startup_timeout is negative; give a positive duration, or 0 "
                "for the default");
  if (s.startup_timeout.count() == 0) {
    s.startup_timeout = comm::kDefaultStartupTimeout;
    if (const char* v = env("ORDO_TIMEOUT")) {
      char* end = nullptr;
      const double seconds = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(seconds > 0) || seconds > 1e6)
        throw Error(quoted("ORDO_TIMEOUT", v) +
                    " is not a positive number of seconds (ordorun sets it from "
                    "--timeout-startup); unset it for the default (30)");
      s.startup_timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    }
  }
  s.transport.net_devices = t.net_devices;
  if (s.transport.net_devices.empty())
    if (const char* v = env("ORDO_NET_DEVICES")) s.transport.net_devices = v;
  s.checkpoint_dir = o.checkpoint_dir;
  if (s.checkpoint_dir.empty())
    if (const char* v = env("ORDO_CHECKPOINT_DIR")) s.checkpoint_dir = v;
  s.checkpoint_every = o.checkpoint_every;
  if (s.checkpoint_every == 0)
    if (const char* v = env("ORDO_CHECKPOINT_EVERY")) {
      const auto n = number(v, std::uint64_t{1} << 62);
      if (!n || *n == 0)
        throw Error(quoted("ORDO_CHECKPOINT_EVERY", v) +
                    " is not a number of iterations in [1, 2^62]; unset it to write no "
                    "checkpoints");
      s.checkpoint_every = *n;
    }
  if (s.checkpoint_dir.empty() != (s.checkpoint_every == 0))
    throw Error(s.checkpoint_dir.empty()
                    ? "checkpoints every " + std::to_string(s.checkpoint_every) +
                          " iterations, but no directory for them; give "
                          "RuntimeOptions::checkpoint_dir or ORDO_CHECKPOINT_DIR"
                    : "a checkpoint directory ('" + s.checkpoint_dir +
                          "') but no interval; give RuntimeOptions::checkpoint_every or "
                          "ORDO_CHECKPOINT_EVERY (iterations between checkpoints)");

  // The user's own UCX_RNDV_THRESH is UCX's to apply; ordo's default threshold yields to it.
  s.transport.keep_ucx_rndv_threshold = env("UCX_RNDV_THRESH") != nullptr;
  return s;
}

unsigned checkpoint_keep_setting() {
  const char* v = env("ORDO_CHECKPOINT_KEEP");
  if (v == nullptr) return 2;
  const auto n = number(v, 1000000);
  if (!n || *n == 0)
    throw Error(quoted("ORDO_CHECKPOINT_KEEP", v) +
                " is not a number of checkpoints in [1, 1000000]; unset it to keep 2");
  return static_cast<unsigned>(*n);
}

bool checkpoint_copy_setting() {
  switch (switch_env("ORDO_CHECKPOINT_COPY")) {
    case Switch::on:
    case Switch::unset: return true;
    case Switch::off: return false;
    case Switch::invalid: break;
  }
  throw Error(quoted("ORDO_CHECKPOINT_COPY", env("ORDO_CHECKPOINT_COPY")) +
              " is not understood: give 1 (or on) to copy a checkpoint's bytes and write them "
              "while the run goes on, 0 (or off) to write them with the run stopped (no copy "
              "in memory), or leave it unset (on)");
}

bool checkpoint_keep_going_setting() {
  const char* v = env("ORDO_CHECKPOINT_ON_FAILURE");
  if (v == nullptr || std::string_view(v) == "stop") return false;
  if (std::string_view(v) == "continue") return true;
  throw Error(quoted("ORDO_CHECKPOINT_ON_FAILURE", v) +
              " is not understood: give 'stop' (a checkpoint that cannot be written stops the "
              "run) or 'continue' (it is reported and the run goes on), or leave it unset (stop)");
}

std::optional<CheckpointTestKill> checkpoint_test_kill_setting() {
  // A test's hook, "stage:iteration:rank": the writer kills its own process there, as a crash
  // at that moment would (tests/api/checkpoint_test.py).
  const char* v = env("ORDO_CHECKPOINT_TEST_KILL");
  if (v == nullptr) return std::nullopt;
  const std::string s(v);
  const std::size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  std::optional<unsigned long long> k, r;
  if (b != std::string::npos) {
    k = number(s.substr(a + 1, b - a - 1).c_str(), ~0ull);
    r = number(s.substr(b + 1).c_str(), 1u << 30);
  }
  if (!k || !r)
    throw Error(quoted("ORDO_CHECKPOINT_TEST_KILL", v) +
                " is not 'stage:iteration:rank' (a test's hook); unset it");
  return CheckpointTestKill{s.substr(0, a), *k, static_cast<unsigned>(*r)};
}

unsigned relaunch_setting() {
  // Like ORDO_RANK it says how the process was started: a value that is not a count is the
  // launcher's mistake, reported.
  const char* v = env("ORDO_RELAUNCH");
  if (v == nullptr) return 0;
  const auto n = number(v, 1000000);
  if (!n)
    throw Error(quoted("ORDO_RELAUNCH", v) +
                " is not a relaunch count (ordorun --restarts sets it); unset it");
  return static_cast<unsigned>(*n);
}

bool shared_storage_default() {
  static const bool on = [] {
    switch (switch_env("ORDO_SHARED_MEMORY")) {
      case Switch::on: return true;
      case Switch::off:
      case Switch::invalid: return false;  // the Runtime reports an invalid value
      case Switch::unset: break;
    }
    try {
      return launch_from_environment().is_one_of_several();
    } catch (const Error&) {
      return false;  // the Runtime reports it
    }
  }();
  return on;
}

}  // namespace ordo::detail
