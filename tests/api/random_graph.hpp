// Builds random graph specs (tests/common/graph_spec.hpp) with the public API.
#pragma once

#include <ordo/ordo.hpp>

#include "graph_spec.hpp"

namespace ordo::test {

// Builds the spec as an ordo graph. Returns the locations.
inline std::vector<Location<std::uint64_t>> build(Graph& g, const GraphSpec& spec) {
  std::vector<Location<std::uint64_t>> locs;
  for (std::size_t l = 0; l < spec.sizes.size(); ++l)
    locs.push_back(g.location<std::uint64_t>("L" + std::to_string(l), spec.sizes[l]));
  for (std::uint32_t t = 0; t < spec.tasks.size(); ++t) {
    std::vector<Access> acc;
    for (const AccessSpec& a : spec.tasks[t].accesses) {
      Access x = a.write ? write(locs[a.location]) : read(locs[a.location]);
      if (a.position) x = x.at(*a.position);
      acc.push_back(x);
    }
    g.task("T" + std::to_string(t), std::move(acc), [&spec, locs, t](Context& ctx) {
      // Look up each location with the access it was declared with.
      run_body(spec, t, ctx.iteration(), [&](std::uint32_t l) -> std::span<std::uint64_t> {
        for (const AccessSpec& a : spec.tasks[t].accesses)
          if (a.location == l && a.write) return ctx.write(locs[l]);
        auto r = ctx.read(locs[l]);
        return {const_cast<std::uint64_t*>(r.data()), r.size()};  // safety: only read
      });
    });
  }
  return locs;
}

inline std::vector<std::vector<std::uint64_t>> contents(Graph& g,
                                                        const std::vector<Location<std::uint64_t>>& locs) {
  std::vector<std::vector<std::uint64_t>> out;
  for (auto l : locs) {
    auto d = g.data(l);
    out.emplace_back(d.begin(), d.end());
  }
  return out;
}

}  // namespace ordo::test
