// A checkpoint's manifest (docs/checkpoint.md): what rank 0 writes last, once every rank's part
// is on disk. Apart from checkpoint.hpp, which needs the engine, so that the fuzz target
// (tests/fuzz/fuzz_manifest.cpp) reads manifests without building one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ordo::detail {

// What a checkpoint's manifest says.
struct Manifest {
  std::uint64_t graph = 0, iteration = 0;
  unsigned ranks = 0;    // of the job that wrote it; a restart may have any number
  unsigned version = 2;  // of the checkpoint format: 2, or 1 (an older ordo's, refused)
};

// The text of a manifest (what write_checkpoint writes: four lines, nothing else; the first
// names the format, "ordo checkpoint 2").
std::string format_manifest(const Manifest& m);

// Reads a manifest's bytes: exactly what format_manifest writes for some Manifest (decimal
// numbers without sign or leading zero, 16 lower-case hexadecimal digits, at least 1 rank,
// format 1 or 2),
// else nullopt, and `why` names the first line that is not. Input from outside: fuzzed.
std::optional<Manifest> parse_manifest(std::string_view text, std::string& why);

}  // namespace ordo::detail
