// The graph side of reductions (reduction.hpp): their locations, the combining tree and the
// per-rank copies, declared as ordinary locations and task families.
#include <algorithm>
#include <cstring>

#include "runtime/engine.hpp"
#include "runtime/graph.hpp"

namespace ordo::rt {

namespace {

std::string indexed(const std::string& name, const char* what, std::uint64_t i) {
  std::string n = name;
  n.append(what).append("[").append(std::to_string(i)).append("]");
  return n;
}

// Folds `count` locations from `first` into `out`, left to right: out = in0; out = op(out, ink).
void fold(const Graph& g, const Combine& op, std::size_t elem, std::uint32_t first,
          std::uint32_t count, std::byte* out) {
  std::memcpy(out, g.data(first), elem);
  for (std::uint32_t k = 1; k < count; ++k) op(out, g.data(first + k), out);
}

}  // namespace

std::vector<std::uint32_t> combine_levels(std::uint32_t contributors) {
  std::vector<std::uint32_t> levels;
  std::uint32_t count = contributors;
  do {
    count = (count + kReductionFanIn - 1) / kReductionFanIn;
    levels.push_back(count);
  } while (count > 1);
  return levels;
}

std::uint32_t Graph::add_reduction(const std::string& name, std::uint32_t contributors,
                                   std::size_t elem_size, const std::type_info& type,
                                   Combine op) {
  Reduction r;
  r.name = name;
  r.contributors = contributors;
  r.elem_size = elem_size;
  r.type = &type;
  r.op = std::move(op);
  r.contributor.assign(contributors, Reduction::kNone);
  const auto index = static_cast<std::uint32_t>(reductions_.size());
  reserve_locations(contributors + 1);
  r.first_partial = static_cast<std::uint32_t>(locations_.size());
  for (std::uint32_t i = 0; i < contributors; ++i)
    locations_[add_location(indexed(name, ".part", i), elem_size, 1, type)].internal = true;
  r.result = add_location(name, elem_size, 1, type);
  locations_[r.result].internal = true;
  reduction_ranges_.push_back({r.first_partial, r.first_partial + contributors, index,
                               ReductionRole::partial});
  reduction_ranges_.push_back({r.result, r.result + 1, index, ReductionRole::result});
  reductions_.push_back(std::move(r));
  return index;
}

std::vector<std::string> Graph::combine_names(std::uint32_t r) const {
  const Reduction& red = reductions_[r];
  const std::vector<std::uint32_t> levels = combine_levels(red.contributors);
  std::vector<std::string> names;
  for (std::size_t level = 0; level + 1 < levels.size(); ++level)
    for (std::uint32_t j = 0; j < levels[level]; ++j)
      names.push_back(indexed(red.name, (".node" + std::to_string(level + 1)).c_str(), j));
  return names;
}

void Graph::add_combine(std::uint32_t r) {
  const std::vector<std::string> names = combine_names(r);
  const std::vector<std::uint32_t> levels = combine_levels(reductions_[r].contributors);
  // Nodes: level by level, each following its first input.
  const auto first_node = static_cast<std::uint32_t>(locations_.size());
  reserve_locations(names.size());
  {
    std::size_t k = 0;
    std::uint32_t in_first = reductions_[r].first_partial;
    for (std::size_t level = 0; level + 1 < levels.size(); ++level) {
      const std::uint32_t first = static_cast<std::uint32_t>(locations_.size());
      for (std::uint32_t j = 0; j < levels[level]; ++j) {
        const Reduction& red = reductions_[r];
        const std::uint32_t l = add_location(names[k++], red.elem_size, 1, *red.type);
        locations_[l].internal = true;
        locations_[l].follows = in_first + j * kReductionFanIn;
      }
      in_first = first;
    }
  }
  if (!names.empty())
    reduction_ranges_.push_back({first_node, static_cast<std::uint32_t>(locations_.size()), r,
                                 ReductionRole::node});
  // The tasks: one family per level; member j folds inputs [j F, (j + 1) F) of the level below
  // into node j (the result, on the last level).
  Reduction& red = reductions_[r];
  std::uint32_t in_first = red.first_partial, in_count = red.contributors;
  std::uint32_t out_first = first_node;
  for (std::size_t level = 0; level < levels.size(); ++level) {
    const bool last = level + 1 == levels.size();
    const std::uint32_t out = last ? red.result : out_first;
    if (last) locations_[red.result].follows = in_first;  // with its first input
    const std::uint32_t family_first = begin_family(
        red.name + ".combine" + std::to_string(level + 1),
        [op = red.op, elem = red.elem_size, in_first, in_count, out](const Instance& inst) {
          const std::uint32_t begin = inst.index * kReductionFanIn;
          const std::uint32_t end = std::min(begin + kReductionFanIn, in_count);
          fold(*inst.graph, op, elem, in_first + begin, end - begin,
               inst.graph->data(out + inst.index));
        });
    for (std::uint32_t j = 0; j < levels[level]; ++j) {
      const std::uint32_t begin = j * kReductionFanIn;
      const std::uint32_t end = std::min(begin + kReductionFanIn, in_count);
      add_access({out + j, Mode::write});
      for (std::uint32_t k = begin; k < end; ++k) add_access({in_first + k, Mode::read});
      end_member();
    }
    end_family();
    families_.back().combining = true;
    if (last) red.combine_task = family_first;
    in_first = out;
    in_count = levels[level];
    out_first += levels[level];
  }
  red.combined = true;
}

void Graph::set_contributor(std::uint32_t r, std::uint32_t index, std::uint32_t task,
                            std::uint32_t follows) {
  reductions_[r].contributor[index] = task;
  if (!contributions_.empty() && contributions_.back().first == task)
    ++contributions_.back().second;
  else
    contributions_.emplace_back(task, 1);
  locations_[reductions_[r].first_partial + index].follows = follows;
}

std::vector<std::string> Graph::copy_names(std::uint32_t r, unsigned ranks) const {
  std::vector<std::string> names;
  for (unsigned k = 0; k < ranks; ++k) names.push_back(indexed(reductions_[r].name, ".rank", k));
  return names;
}

void Graph::add_reduction_copies(unsigned ranks) {
  const std::vector<std::uint32_t> home = rank_homes(ranks);
  for (std::uint32_t r = 0; r < reductions_.size(); ++r) {
    const std::vector<std::string> names = copy_names(r, ranks);
    reserve_locations(ranks);
    const auto first = static_cast<std::uint32_t>(locations_.size());
    for (unsigned k = 0; k < ranks; ++k) {
      const Reduction& red = reductions_[r];
      const std::uint32_t l = add_location(names[k], red.elem_size, 1, *red.type);
      locations_[l].internal = true;
      locations_[l].home = static_cast<std::int32_t>(k);
    }
    Reduction& red = reductions_[r];
    red.first_copy = first;
    red.copies = ranks;
    reduction_ranges_.push_back({first, first + ranks, r, ReductionRole::copy});
    // A binary tree over the ranks counted from the result's home: member v (rank (root + v)
    // mod ranks) copies from member (v - 1) / 2, member 0 from the result. Parents are declared
    // first, so each copy of iteration k is the result of iteration k.
    const std::uint32_t root = home[red.result];
    auto rank_of = [root, ranks](std::uint32_t v) { return (root + v) % ranks; };
    auto source = [result = red.result, first, rank_of](std::uint32_t v) {
      return v == 0 ? result : first + rank_of((v - 1) / 2);
    };
    red.first_copy_task = begin_family(red.name + ".copy", [elem = red.elem_size, first, source,
                                                            rank_of](const Instance& inst) {
      std::memcpy(inst.graph->data(first + rank_of(inst.index)), inst.graph->data(source(inst.index)),
                  elem);
    });
    for (std::uint32_t v = 0; v < ranks; ++v) {
      add_access({first + rank_of(v), Mode::write});
      add_access({source(v), Mode::read});
      end_member();
    }
    end_family();
  }
}

std::optional<ReductionPart> Graph::reduction_part(std::uint32_t location) const {
  auto it = std::upper_bound(reduction_ranges_.begin(), reduction_ranges_.end(), location,
                             [](std::uint32_t l, const ReductionRange& r) { return l < r.begin; });
  if (it == reduction_ranges_.begin()) return std::nullopt;
  --it;
  if (location >= it->end) return std::nullopt;
  const bool counted = it->role == ReductionRole::partial || it->role == ReductionRole::copy;
  return ReductionPart{it->reduction, it->role, counted ? location - it->begin : 0};
}

}  // namespace ordo::rt
