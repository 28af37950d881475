// Sequential references of the patterns and the checks every system's result goes through.
#include <fmt/core.h>

#include "bench.hpp"

namespace ordo::bench {

Expected expected_values(const Sizes& s) {
  Expected e;
  for (std::uint64_t i = 0; i < s.chain; ++i) e.chain = chain_step(e.chain, i);
  e.stencil.assign(s.tiles, 0);
  auto& t = e.stencil;
  for (std::uint32_t k = 0; k < s.iterations; ++k)
    for (std::uint32_t i = 0; i < s.tiles; ++i)
      t[i] = stencil_step(i > 0 ? t[i - 1] : 0, t[i], i + 1 < s.tiles ? t[i + 1] : 0);
  return e;
}

void check_independent(const char* system, const std::vector<std::uint64_t>& counters) {
  for (std::size_t i = 0; i < counters.size(); ++i)
    if (counters[i] != 1)
      throw VerifyError(fmt::format("{} independent: task {} ran {} times instead of once",
                                    system, i, counters[i]));
}

void check_chain(const char* system, std::uint64_t got, const Expected& e) {
  if (got != e.chain)
    throw VerifyError(fmt::format(
        "{} chain: final value {:#x}, sequential value {:#x} (tasks ran out of order)", system,
        got, e.chain));
}

void check_stencil(const char* system, const std::vector<std::uint64_t>& got,
                   const Expected& e) {
  for (std::size_t i = 0; i < e.stencil.size(); ++i)
    if (i >= got.size() || got[i] != e.stencil[i])
      throw VerifyError(fmt::format(
          "{} stencil1d: tile {} is {:#x}, sequential value {:#x} (a dependency was missed)",
          system, i, i < got.size() ? got[i] : 0, e.stencil[i]));
}

}  // namespace ordo::bench
