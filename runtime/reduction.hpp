// Deterministic reductions, built from locations and tasks (docs/model.md, "Reductions").
//
// A reduction of n contributions is, in the graph:
//   - n *partial* locations of one element, partial i written by the task that contributes i
//     (its access is an ordinary write, declared like any other);
//   - a *combining tree*, declared where the program calls combine: level 1 folds the partials
//     in groups of kReductionFanIn in index order, each level above folds the groups of the
//     one below, and the single node of the last level is the *result* location, which tasks
//     declared after the combine read in the same iteration. The tree's shape depends on n
//     alone, never on workers, ranks or placement, so the bits of the result do not either;
//   - across ranks, one *copy* of the result per rank, written every iteration at the end of
//     program order by a task on that rank from its parent's copy (a binary tree rooted at the
//     result's home: O(log ranks) hops). Between iterations (run_until's condition, after a
//     run) every rank reads its own copy, which it holds as home: never a stale replica.
//
// Placement: these locations are `internal` (left out of the default chunks, which count the
// user's locations only) and `follow` what they serve: a partial the first location its
// contributor writes (else reads), a node its first input, the result the last node's first
// input; copies are homed on their rank. So contributions and most of the tree stay on the
// ranks that hold the data, and the user's locations are placed as without the reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

namespace ordo::rt {

// Inputs each combining task folds. The public reference (ordo::combine_in_order) uses the same.
constexpr std::uint32_t kReductionFanIn = 8;

// out = op(a, b) on one element of the reduction's type; `out` may be `a`.
using Combine = std::function<void(const std::byte* a, const std::byte* b, std::byte* out)>;

struct Reduction {
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  std::string name;
  std::uint32_t contributors = 0;
  std::size_t elem_size = 0;
  const std::type_info* type = nullptr;
  Combine op;
  std::uint32_t first_partial = 0;          // partial i is location first_partial + i
  std::uint32_t result = 0;                 // location
  std::vector<std::uint32_t> contributor;   // per partial: the task contributing it, or kNone
  bool combined = false;
  std::uint32_t combine_task = kNone;       // the last level's task (it writes the result)
  std::uint32_t first_copy = kNone;         // rank r's copy is location first_copy + r
  std::uint32_t first_copy_task = kNone;    // the copies' family (one member per rank)
  unsigned copies = 0;
};

enum class ReductionRole : std::uint8_t { partial, result, node, copy };

// What a location is to a reduction.
struct ReductionPart {
  std::uint32_t reduction;
  ReductionRole role;
  std::uint32_t index;  // partial: the contribution; copy: the rank; node, result: 0
};

// The number of combining tasks on each level of the tree over n contributions, level 1
// first; the last level has one (it writes the result).
std::vector<std::uint32_t> combine_levels(std::uint32_t contributors);

}  // namespace ordo::rt
