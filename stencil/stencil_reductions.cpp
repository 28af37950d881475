// Reductions of the stencil layer (stencil/stencil_reductions.hpp, docs/stencil.md "Reductions and
// stopping on convergence"). Built on the public API only.
#include "stencil/stencil_reductions.hpp"

#include <set>

namespace ordo::stencil {

namespace detail {

void Partials::refuse(std::size_t r) const {
  throw Error("a kernel contributed to reduction " + std::to_string(r) + " of " +
              std::to_string(count) +
              " it may contribute to; give an index below that (the order of Spec::reductions, "
              "or of Stage::contributes in a pipeline)");
}

void ReductionSet::declare(Graph& g, const std::string& prefix, std::uint32_t contributors) {
  graph = &g;
  if (specs.size() > kMaxReductions)
    throw Error(who + ": " + std::to_string(specs.size()) + " reductions; at most " +
                std::to_string(kMaxReductions) + " (combine several values into fewer)");
  std::set<std::string> names;
  for (const ReductionSpec& r : specs) {
    if (r.name.empty()) throw Error(who + ": a reduction needs a name");
    if (!names.insert(r.name).second)
      throw Error(who + ": reduction '" + r.name + "' is declared twice; give each its own name");
  }
  for (const ReductionSpec& r : specs) {
    const std::string name = prefix + "." + r.name;
    switch (r.op) {
      case Reduce::sum: handles.push_back(g.reduction<double>(name, contributors, Sum{})); break;
      case Reduce::max: handles.push_back(g.reduction<double>(name, contributors, Max{})); break;
      case Reduce::min: handles.push_back(g.reduction<double>(name, contributors, Min{})); break;
    }
  }
}

std::size_t ReductionSet::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return i;
  std::string known;
  for (const ReductionSpec& r : specs) known += (known.empty() ? "'" : ", '") + r.name + "'";
  throw Error(who + ": no reduction '" + name + "', so no kernel contributes to it; " +
              (known.empty() ? std::string("it declares none") : "it declares " + known) +
              ": declare it in the spec's reductions and contribute to it in the kernel");
}

void ReductionSet::add_accesses(std::vector<Access>& acc, std::uint32_t index,
                                const std::vector<std::size_t>& which) const {
  if (which.empty())
    for (const auto& h : handles) acc.push_back(ordo::contribute(h, index));
  else
    for (std::size_t r : which) acc.push_back(ordo::contribute(handles[r], index));
}

void ReductionSet::combine(Graph& g) const {
  for (const auto& h : handles) g.combine(h);
}

Partials ReductionSet::partials(const std::vector<std::size_t>& which, std::uint64_t step) const {
  Partials p;
  p.count = which.empty() ? specs.size() : which.size();
  for (std::size_t j = 0; j < p.count; ++j) p.op[j] = specs[which.empty() ? j : which[j]].op;
  p.step = step;
  return p;
}

void ReductionSet::contribute(Context& ctx, std::uint32_t index, const Partials& p,
                              const std::vector<std::size_t>& which, std::size_t block,
                              const char* unit, std::uint64_t at, const char* how) const {
  for (std::size_t j = 0; j < p.count; ++j) {
    const std::size_t r = which.empty() ? j : which[j];
    if ((p.made & (std::uint32_t{1} << j)) == 0)
      throw Error(who + ": the kernel made no contribution to reduction '" + specs[r].name +
                  "' in " + unit + " " + std::to_string(at) + " of block " + std::to_string(block) +
                  "; " + how);
    ctx.contribute(handles[r], index, p.value[j]);
  }
}

void ReductionSet::check_can_stop(const StopCondition& done) const {
  if (specs.empty())
    throw Error(who +
                ": run_until stops on a condition on reductions, and this one declares "
                "none; declare them in the spec's reductions and contribute to them in "
                "the kernel, or run a fixed number of steps with run()");
  if (!done) throw Error(who + ": run_until got an empty condition; give a callable");
}

Until ReductionSet::until(const StopCondition& done, std::uint64_t max_iterations,
                          bool& met) const {
  Until u;
  u.check_every = 1;
  u.max_iterations = max_iterations;
  // The condition reads these reductions alone, so the runtime takes it in the dataflow where
  // their values are combined: a check costs what a barrier does, and nothing stops.
  for (const auto& h : handles) u.reads.push_back(ordo::read(h));
  u.done = [this, &done, &met](const Graph&) {
    met = done(Values(*this));
    return met;
  };
  return u;
}

}  // namespace detail

double Values::operator[](const std::string& name) const {
  return set_->graph->value(set_->handles[set_->index_of(name)]);
}

double Values::operator[](std::size_t index) const {
  if (index >= set_->specs.size())
    throw Error(set_->who + ": reduction " + std::to_string(index) + " out of range; it declares " +
                std::to_string(set_->specs.size()));
  return set_->graph->value(set_->handles[index]);
}

std::size_t Values::size() const { return set_->specs.size(); }

}  // namespace ordo::stencil
