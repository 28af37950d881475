// Random task-graph specs for property tests, and an independent sequential interpreter.
//
// A spec lists locations (sizes) and tasks (accesses, optional explicit positions). Bodies mix
// every input they can see into every location they write, so any reordering of conflicting
// accesses changes the bytes. The interpreter runs the same bodies on plain vectors, one task
// at a time in a given order -- it shares no code with the runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace ordo::test {

struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  SplitMix s{a * 31 + b};
  return s.next();
}

struct AccessSpec {
  std::uint32_t location;
  bool write;
  std::optional<std::int64_t> position;
};

struct TaskSpec {
  std::vector<AccessSpec> accesses;
};

struct GraphSpec {
  std::vector<std::size_t> sizes;  // elements (uint64) per location
  std::vector<TaskSpec> tasks;
};

// The body of task `t` at iteration `k`: reads every accessed location (declared order), then
// rewrites every written one. `view(l)` gives location l's contents.
template <class View>
void run_body(const GraphSpec& spec, std::uint32_t t, std::uint64_t k, View&& view) {
  std::uint64_t acc = mix(t + 1, k + 7);
  for (const AccessSpec& a : spec.tasks[t].accesses) {
    std::span<const std::uint64_t> in = view(a.location);
    for (std::uint64_t x : in) acc = mix(acc, x);
  }
  for (const AccessSpec& a : spec.tasks[t].accesses) {
    if (!a.write) continue;
    std::span<std::uint64_t> out = view(a.location);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = mix(acc, out[i] + i);
  }
}

// Random spec: 1..max_locs locations, 1..max_tasks tasks, each task touching a random subset.
// With `positions`, every access of a location gets an explicit position.
inline GraphSpec random_spec(std::uint64_t seed, std::size_t max_locs, std::size_t max_tasks) {
  SplitMix rng{seed};
  GraphSpec spec;
  spec.sizes.resize(1 + rng.below(max_locs));
  for (auto& s : spec.sizes) s = 1 + rng.below(8);
  spec.tasks.resize(1 + rng.below(max_tasks));
  for (auto& t : spec.tasks) {
    for (std::uint32_t l = 0; l < spec.sizes.size(); ++l) {
      switch (rng.below(4)) {
        case 0: t.accesses.push_back({l, true, std::nullopt}); break;
        case 1: t.accesses.push_back({l, false, std::nullopt}); break;
        default: break;  // no access
      }
    }
    // Shuffle declared access order: the runtime must not depend on it.
    for (std::size_t i = t.accesses.size(); i > 1; --i)
      std::swap(t.accesses[i - 1], t.accesses[rng.below(i)]);
  }
  return spec;
}

// The locations rank `rank` of `ranks` should hold storage for after the first run
// (docs/distributed.md, "Memory"), worked out from the spec and `home(l)` alone: its home
// locations and those its tasks access (a task runs where the first location it writes lives,
// else its first access's, else it is spread by index), except, when the ranks share memory,
// a location some task writes and whose home is another rank (the proxy uses the home's
// buffer).
template <class Home>
std::vector<bool> expected_storage(const GraphSpec& spec, Home&& home, unsigned rank,
                                   unsigned ranks, bool shared) {
  const std::size_t nl = spec.sizes.size(), nt = spec.tasks.size();
  std::vector<bool> held(nl, false), written(nl, false);
  for (std::uint32_t l = 0; l < nl; ++l) held[l] = home(l) == rank;
  for (std::uint32_t t = 0; t < nt; ++t) {
    const auto& acc = spec.tasks[t].accesses;
    const AccessSpec* first_write = nullptr;
    for (const AccessSpec& a : acc) {
      written[a.location] = written[a.location] || a.write;
      if (a.write && first_write == nullptr) first_write = &a;
    }
    const unsigned runs_on = first_write != nullptr ? home(first_write->location)
                             : !acc.empty()         ? home(acc.front().location)
                                                    : static_cast<unsigned>(t * ranks / nt);
    if (runs_on == rank)
      for (const AccessSpec& a : acc) held[a.location] = true;
  }
  if (shared)
    for (std::uint32_t l = 0; l < nl; ++l)
      if (written[l] && home(l) != rank) held[l] = false;
  return held;
}

// The initial value of element i of location l when a test sets the locations before the
// first run (not zero, so that a location that missed it shows).
inline std::uint64_t initial_value(std::uint32_t l, std::size_t i) { return mix(l + 101, i); }

// Sequential interpreter: `iterations` times, run every task in `order`. The locations start
// at zero, or at initial_value() with `initialised`.
inline std::vector<std::vector<std::uint64_t>> interpret(const GraphSpec& spec,
                                                         const std::vector<std::uint32_t>& order,
                                                         std::uint64_t iterations,
                                                         bool initialised = false) {
  std::vector<std::vector<std::uint64_t>> data;
  for (std::size_t s : spec.sizes) data.emplace_back(s, 0);
  if (initialised)
    for (std::uint32_t l = 0; l < data.size(); ++l)
      for (std::size_t i = 0; i < data[l].size(); ++i) data[l][i] = initial_value(l, i);
  for (std::uint64_t k = 0; k < iterations; ++k)
    for (std::uint32_t t : order)
      run_body(spec, t, k, [&](std::uint32_t l) { return std::span<std::uint64_t>(data[l]); });
  return data;
}

}  // namespace ordo::test
