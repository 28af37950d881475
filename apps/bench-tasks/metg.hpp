// The minimum effective task granularity (METG) measurement of ordo-bench-tasks --metg, as Task
// Bench defines it (Slaughter et al., SC 2020): one task graph, a compute-bound kernel whose
// duration is swept from 2^16 iterations down to 1, and for each duration
//   time per task = wall time x cores / tasks            (what one task costs a core)
//   efficiency    = achieved FLOP/s / peak FLOP/s        (peak: the kernel alone on every core)
// METG(50%) is the smallest time per task at which the efficiency is still >= 50%, linearly
// interpolated towards the next (smaller, below 50%) point as Task Bench's scripts do.
//
// The graph is Task Bench's stencil_1d with width = cores: W points per time step; point i of
// step t depends on points i-1, i, i+1 of step t-1 (those that exist). Every system runs it on
// two buffers of W tiles (step t reads one and writes the other), and each task sets
//   tile = stencil_step(left, self, right) ^ bits(kernel(iterations, seed from self))
// so a missing or extra dependency, or a skipped kernel, changes the result, which every run
// checks against the sequential one. Header-only parts are shared with the MPI version (its own
// executable, metg_mpi.cpp) and with the unit test of the METG computation.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "bench.hpp"

namespace ordo::bench::metg {

// 12 vectors of 4 doubles: independent chains that fill the floating-point pipelines without
// spilling registers. Each iteration multiplies and adds once per element.
using Lanes = double __attribute__((vector_size(32)));
constexpr int kVectors = 12;
constexpr double kFlopsPerIteration = 2.0 * 4 * kVectors;

// The kernel: `iterations` rounds of x = x * a + b on 48 values that converge (no overflow and
// no subnormals at any duration), seeded from the task's input so that no compiler can hoist it
// out of a loop of tasks. noinline: every system calls the same code.
[[gnu::noinline]] inline double kernel(std::uint64_t iterations, std::uint64_t seed) {
  const double s = 1.0 + static_cast<double>(seed & 1023) * 0x1p-20;
  Lanes x[kVectors];
  for (int v = 0; v < kVectors; ++v)
    for (int l = 0; l < 4; ++l) x[v][l] = s + (v * 4 + l) * 0x1p-8;
  const Lanes a = {0.999, 0.999, 0.999, 0.999}, b = {0.001, 0.002, 0.003, 0.004};
  for (std::uint64_t it = 0; it < iterations; ++it)
    for (int v = 0; v < kVectors; ++v) x[v] = x[v] * a + b;
  double sum = 0;
  for (int v = 0; v < kVectors; ++v)
    for (int l = 0; l < 4; ++l) sum += x[v][l];
  return sum;
}

// One task: the stencil step of its inputs, mixed with its kernel's result. A missing
// neighbour (either end) counts as 0.
inline std::uint64_t task(std::uint64_t left, std::uint64_t self, std::uint64_t right,
                          std::uint64_t iterations) {
  return stencil_step(left, self, right) ^ std::bit_cast<std::uint64_t>(kernel(iterations, self));
}

// The initial tiles: distinct, so that a swapped neighbour shows.
inline std::vector<std::uint64_t> initial_tiles(unsigned width) {
  std::vector<std::uint64_t> t(width);
  for (unsigned i = 0; i < width; ++i) t[i] = 0x9e3779b97f4a7c15ull * (i + 1);
  return t;
}

// The tiles after `steps` steps from initial_tiles(width): the sequential reference.
inline std::vector<std::uint64_t> reference(unsigned width, std::uint64_t steps,
                                            std::uint64_t iterations) {
  std::vector<std::uint64_t> cur = initial_tiles(width), next(width);
  for (std::uint64_t t = 0; t < steps; ++t) {
    for (unsigned i = 0; i < width; ++i)
      next[i] = task(i > 0 ? cur[i - 1] : 0, cur[i], i + 1 < width ? cur[i + 1] : 0, iterations);
    cur.swap(next);
  }
  return cur;
}

// One point of a sweep.
struct Point {
  std::uint64_t iterations = 0;
  double task_seconds = 0;  // wall time x cores / tasks
  double efficiency = 0;    // achieved / peak FLOP/s
};

// The point of a run: `seconds` for `tasks` tasks of `iterations` on `cores` cores, against
// `peak_flops` (FLOP/s of all cores together).
inline Point point(std::uint64_t iterations, double seconds, std::uint64_t tasks, unsigned cores,
                   double peak_flops) {
  Point p;
  p.iterations = iterations;
  p.task_seconds = seconds * cores / static_cast<double>(tasks);
  const double flops = kFlopsPerIteration * static_cast<double>(iterations) * static_cast<double>(tasks);
  p.efficiency = flops / seconds / peak_flops;
  return p;
}

struct Metg {
  double seconds = 0;      // METG, the interpolated time per task
  bool below_all = false;  // every point was >= the threshold: the METG is at most `seconds`
};

// METG at `threshold` (0.5) from the points of one sweep, in any order. Nothing when no point
// reaches the threshold.
inline std::optional<Metg> metg(std::vector<Point> points, double threshold = 0.5) {
  // Longest tasks first, as the sweep runs.
  std::sort(points.begin(), points.end(),
            [](const Point& a, const Point& b) { return a.iterations > b.iterations; });
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (points[i].efficiency >= threshold &&
        (!best || points[i].task_seconds < points[*best].task_seconds))
      best = i;
  if (!best) return std::nullopt;
  const std::size_t i = *best;
  Metg m{points[i].task_seconds, false};
  if (i + 1 == points.size()) {
    m.below_all = true;  // even the shortest tasks reach the threshold
  } else if (points[i + 1].efficiency < threshold) {
    // Where the efficiency line between this point and the next (shorter tasks) crosses the
    // threshold, as Task Bench interpolates.
    const Point &a = points[i], &b = points[i + 1];
    if (b.task_seconds < a.task_seconds)
      m.seconds = a.task_seconds + (threshold - a.efficiency) / (b.efficiency - a.efficiency) *
                                       (b.task_seconds - a.task_seconds);
  }
  return m;
}

}  // namespace ordo::bench::metg
