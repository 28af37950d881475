// The reductions of a stencil or pipeline (Spec::reductions, PipelineSpec::reductions): each
// block's task contributes its kernel's partial of the step (detail::Partials) to one
// ordo::Reduction<double> per declared reduction, whose combining step folds the blocks' partials
// in combine_in_order's order. Internal to the layer; not installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ordo/stencil.hpp>

namespace ordo::stencil::detail {

struct ReductionSet {
  std::string who;  // "stencil 'u'", for messages
  std::vector<ReductionSpec> specs;
  std::vector<Reduction<double>> handles;
  const Graph* graph = nullptr;

  // Checks the names (non-empty, unique, at most kMaxReductions) and declares one reduction
  // per spec, named prefix.<name>, of `contributors` contributions.
  void declare(Graph& g, const std::string& prefix, std::uint32_t contributors);
  bool empty() const { return specs.empty(); }
  // The index of reduction `name`; Error naming the declared ones otherwise.
  std::size_t index_of(const std::string& name) const;
  // The accesses of contribution `index` to every reduction in `which` (all: empty).
  void add_accesses(std::vector<Access>& acc, std::uint32_t index,
                    const std::vector<std::size_t>& which) const;
  void combine(Graph& g) const;
  // Partials for the reductions in `which` (all: empty), counting at `step`.
  Partials partials(const std::vector<std::size_t>& which, std::uint64_t step) const;
  // Throws Error unless the kernel contributed to every reduction of p, then contributes
  // p's values as contribution `index` (block `block`; `unit` "step" or "iteration" `at`;
  // `how` says what the kernel must do).
  void contribute(Context& ctx, std::uint32_t index, const Partials& p,
                  const std::vector<std::size_t>& which, std::size_t block, const char* unit,
                  std::uint64_t at, const char* how) const;
  // Runs `run_until` on the graph with the condition on these values; Error when there are
  // no reductions or no condition.
  Until until(const StopCondition& done, std::uint64_t max_iterations, bool& met) const;
  void check_can_stop(const StopCondition& done) const;
};

}  // namespace ordo::stencil::detail
