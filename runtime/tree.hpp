// The binomial tree rooted at rank 0 that the control plane's collectives (control_plane.hpp)
// and the start-up clock measurement (clock_sync.hpp) travel: rank r's parent is r with its
// lowest set bit cleared; its children are r + 2^k for each 2^k below that bit (every k for
// rank 0) while r + 2^k < N. A rank has at most ceil(log2 N) + 1 tree neighbours, and the
// tree is ceil(log2 N) levels deep.
#pragma once

#include <cstdint>
#include <vector>

namespace ordo::rt::tree {

inline unsigned parent(unsigned rank) { return rank & (rank - 1); }

// In increasing rank order.
inline std::vector<unsigned> children(unsigned rank, unsigned ranks) {
  std::vector<unsigned> out;
  const std::uint64_t low = rank == 0 ? ~std::uint64_t{0} : (rank & (~rank + 1));
  for (std::uint64_t bit = 1; bit < low && rank + bit < ranks; bit <<= 1)
    out.push_back(static_cast<unsigned>(rank + bit));
  return out;
}

// The number of edges between `rank` and rank 0 (its set bits).
inline unsigned depth(unsigned rank) { return static_cast<unsigned>(__builtin_popcount(rank)); }

}  // namespace ordo::rt::tree
