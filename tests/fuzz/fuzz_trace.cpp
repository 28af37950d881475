// Fuzz target: one rank's trace file (tools/ordo-trace/trace_file.hpp, parse_rank), from its
// bytes. Anything malformed must be refused with TraceError, allocating no more than the bytes
// given can fill (libFuzzer's -rss_limit_mb and -malloc_limit_mb catch the rest).
#include <cstddef>
#include <cstdint>
#include <span>

#include "trace_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto r = ordo::tracefile::parse_rank(std::span<const std::uint8_t>(data, size), "fuzz.trace");
    (void)r;
  } catch (const ordo::tracefile::TraceError&) {
  }
  return 0;
}
