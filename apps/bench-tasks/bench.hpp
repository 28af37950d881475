// Shared by the files of ordo-bench-tasks: the patterns, the work a task body does, the
// sequential reference of each pattern, and the interface every measured system implements
// (one file per system: ordo.cpp, omp.cpp, tbb.cpp, starpu.cpp).
//
// Every system runs exactly the same tasks with exactly the same dependencies:
//   independent  N tasks, no shared data; task i adds 1 to its own counter out[i].
//   chain        N tasks that all write one location x, in order: x = chain_step(x, i).
//   stencil1d    T tiles x K iterations; in program order task (k, i) reads tiles i-1, i, i+1
//                (those that exist) and writes tile i: t[i] = stencil_step(t[i-1], t[i], t[i+1]).
//                Its predecessors are therefore (k, i-1) (wrote tile i-1, read tile i),
//                (k-1, i) (wrote tile i) and (k-1, i+1) (wrote tile i+1, read tile i).
// The steps are cheap and order-sensitive, so a missing dependency changes the result: every
// run is checked against the sequential value and a mismatch fails the benchmark.
#pragma once

#include <chrono>
#include <functional>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ordo::bench {

enum class Pattern { independent, chain, stencil1d };

inline const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::independent: return "independent";
    case Pattern::chain: return "chain";
    case Pattern::stencil1d: return "stencil1d";
  }
  return "?";
}

struct Sizes {
  std::uint64_t independent = 1'000'000;  // tasks
  std::uint64_t chain = 100'000;          // tasks
  std::uint32_t tiles = 64;               // stencil1d tiles (tasks per iteration)
  std::uint32_t iterations = 1000;        // stencil1d iterations

  std::uint64_t tasks(Pattern p) const {
    switch (p) {
      case Pattern::independent: return independent;
      case Pattern::chain: return chain;
      case Pattern::stencil1d: return std::uint64_t{tiles} * iterations;
    }
    return 0;
  }
};

// The body of chain task i.
inline std::uint64_t chain_step(std::uint64_t x, std::uint64_t i) {
  return x * 6364136223846793005ull + i + 1;
}
// The body of a stencil1d task; a missing neighbour (at either end) counts as 0.
inline std::uint64_t stencil_step(std::uint64_t left, std::uint64_t self, std::uint64_t right) {
  return 3 * left + 5 * self + 7 * right + 1;
}

// One tile of stencil1d for the peers that keep tiles in an array: one cache line each, as
// ordo's locations are, so that no system pays for false sharing the others do not.
struct alignas(64) Tile {
  std::uint64_t v = 0;
};

// A system computed a result that differs from the sequential one.
class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Sequential references (computed once per size by main, handed to the systems).
struct Expected {
  std::uint64_t chain = 0;
  std::vector<std::uint64_t> stencil;  // tiles after `iterations` iterations
};
Expected expected_values(const Sizes& s);

// Throws VerifyError naming the system and pattern when a result is wrong.
void check_independent(const char* system, const std::vector<std::uint64_t>& counters);
void check_chain(const char* system, std::uint64_t got, const Expected& e);
void check_stencil(const char* system, const std::vector<std::uint64_t>& got, const Expected& e);

// One system with a fixed number of threads. Created before its measurements (thread pools,
// library initialisation are not timed) and destroyed after them, so that no two systems'
// threads exist at the same time.
class System {
 public:
  virtual ~System() = default;
  // Creates the pattern's tasks, executes them and frees what they used; returns the seconds
  // that took. Checks the result afterwards (untimed) and throws VerifyError if it is wrong.
  double run(Pattern p, const Sizes& s, const Expected& e) {
    return within([&] {
      switch (p) {
        case Pattern::independent: return independent(s);
        case Pattern::chain: return chain(s, e);
        case Pattern::stencil1d: return stencil(s, e);
      }
      return 0.0;
    });
  }

 protected:
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  // Where a system's patterns must run (oneTBB: inside its arena, which sets the thread count).
  // Outside the timed region.
  virtual double within(const std::function<double()>& pattern) { return pattern(); }
  // One per pattern, with the contract of run().
  virtual double independent(const Sizes& s) = 0;
  virtual double chain(const Sizes& s, const Expected& e) = 0;
  virtual double stencil(const Sizes& s, const Expected& e) = 0;
};

// Factories. A system whose library was not found at configure time has no factory; main
// prints the reason instead (see main.cpp). They throw std::runtime_error when the library is
// there but cannot start (the message says why); main then skips that system.
std::unique_ptr<System> make_ordo(unsigned threads);          // task_family form
std::unique_ptr<System> make_ordo_pertask(unsigned threads);  // one Graph::task per task
std::unique_ptr<System> make_omp(unsigned threads);
std::unique_ptr<System> make_tbb(unsigned threads);
std::unique_ptr<System> make_starpu(unsigned threads);

// The busy-cores measurement (busy.cpp): a stencil1d graph run by ordo with `workers` workers
// and task bodies of at least `task_us` microseconds. Returns the fraction of the workers'
// time spent inside task bodies: sum of body durations / (workers x wall time of the run).
struct BusyResult {
  double fraction = 0;
  double seconds = 0;
  std::uint64_t tasks = 0;
  double cpu_fraction = 0;  // bodies' CPU time / the process's CPU time during the run
};
BusyResult measure_busy(unsigned workers, double task_us, std::uint32_t tiles,
                        std::uint32_t iterations);

}  // namespace ordo::bench
