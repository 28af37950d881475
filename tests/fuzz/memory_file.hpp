// What the fuzz targets of the sparse layer's readers share: the input as a FILE, as the readers
// take their files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include <ordo/ordo.hpp>

// Runs `read(f, size)` on the input opened as a FILE (fmemopen); an ordo::Error is the refusal
// a malformed input earns, anything else escapes to the fuzzer. Returns libFuzzer's 0.
template <class Read>
int read_as_file(const std::uint8_t* data, std::size_t size, Read read) {
  if (size == 0) return 0;  // fmemopen refuses an empty buffer
  std::FILE* f = fmemopen(const_cast<std::uint8_t*>(data), size, "rb");
  if (f == nullptr) return 0;
  try {
    read(f, size);
  } catch (const ordo::Error&) {
  }
  std::fclose(f);
  return 0;
}
