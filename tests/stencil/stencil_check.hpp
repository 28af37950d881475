// Helpers shared by the stencil layer's and the pipeline's randomised tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ordo::test {

// "size=A,B, blocks=C,D," for a Spec or a PipelineSpec, to open a case's INFO line.
template <class Spec>
std::string describe_grid(const Spec& s) {
  std::string t = "size=";
  for (auto v : s.size) t += std::to_string(v) + ",";
  t += " blocks=";
  for (auto v : s.blocks) t += std::to_string(v) + ",";
  return t;
}

// Number of points of the whole grid.
template <class Spec>
std::size_t points(const Spec& s) {
  std::size_t n = 1;
  for (auto e : s.size) n *= e;
  return n;
}

// Bit-for-bit equality (NaNs and signed zeros included), the oracle of every stencil test.
inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// The C-order index of global coordinate x (any coordinate: wrapped across a periodic end),
// or nothing when x lies beyond a fixed boundary. Written for the brute forces only.
inline std::optional<std::size_t> global_index(const std::vector<std::size_t>& size,
                                               bool periodic, std::vector<std::int64_t> x) {
  std::size_t gi = 0;
  for (std::size_t k = 0; k < size.size(); ++k) {
    const auto e = static_cast<std::int64_t>(size[k]);
    if (x[k] < 0 || x[k] >= e) {
      if (!periodic) return std::nullopt;
      x[k] = ((x[k] % e) + e) % e;
    }
    gi = gi * size[k] + static_cast<std::size_t>(x[k]);
  }
  return gi;
}

}  // namespace ordo::test
