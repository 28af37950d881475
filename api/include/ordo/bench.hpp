// Hooks for ordo's own benchmarks and apps: what their result lines and baselines measure
// (control messages, cache sizes, the huge-page threshold). A program that only declares and
// runs graphs needs none of it; <ordo/ordo.hpp> and <ordo/stencil.hpp> do not include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ordo/ordo.hpp>

namespace ordo::bench {

// Locations of this many bytes or more start on a huge-page boundary and are advised onto
// transparent huge pages; smaller ones share pages. For programs that place memory of their
// own as ordo places locations (the benchmarks' STREAM triad does).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Control messages `runtime` has sent since it was built: the ranks' graph checks, the barrier
// that starts each run, quiescence at the end of each step, run_until's votes (GRANTs and
// RELEASEs, which carry the data, are not counted). Across ranks they travel on a tree,
// O(log ranks) per rank per collective (docs/distributed.md); 0 in one process. Take the
// difference around a run to count that run's.
std::uint64_t control_messages(const Runtime& runtime);

// Bytes of location contents this rank has sent for `graph` over its runs so far, as handed to
// the transport: the payloads of the GRANTs and RELEASEs that carry locations between ranks
// (docs/distributed.md), the program's locations and the runtime's own (reductions' partials
// and copies) apart. Locations the ranks of a host share (ORDO_SHARED_MEMORY) travel as none;
// 0 in one process and before the first run. Take the difference around a run to count it.
struct BytesSent {
  std::uint64_t program = 0, runtime = 0;
};
BytesSent bytes_sent(const Graph& graph);

// The data caches of this machine's first core, as the kernel reports them (sysfs, whose
// figures hold under a hypervisor too; sysconf when it says nothing; 0 when neither does).
// Probed once. The stencil layer sizes its cache tiles and in-place slabs from them; the apps
// use last_level to tell whether a grid fits in the cache.
struct CacheSizes {
  std::size_t l2 = 0;
  std::size_t last_level = 0;  // the largest data or unified cache
};
const CacheSizes& cache_sizes();

}  // namespace ordo::bench
