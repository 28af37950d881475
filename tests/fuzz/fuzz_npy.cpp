// Fuzz target: the .npy header check (apps/common/npy.hpp), on arbitrary file starts and sizes.
// The input's first 8 bytes give the file size the header is checked against (so that a
// header may claim more, or less, than the "file" holds); the rest is the file's beginning.
// Anything that is not a usable .npy must be refused with ordo::Error; an accepted header must
// describe exactly the file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint64_t file_size = size;
  if (size >= 8) {
    std::memcpy(&file_size, data, 8);
    data += 8;
    size -= 8;
    file_size %= std::uint64_t{1} << 48;  // any plausible file
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto h = ordo::app::parse_npy_header(bytes, file_size, "fuzz.npy");
    std::size_t count = 1;
    for (std::size_t e : h.shape) count *= e;
    if (count != h.count || h.data_offset + h.count * sizeof(double) != file_size || h.shape.empty())
      __builtin_trap();  // accepted a header that does not describe the file
  } catch (const ordo::Error&) {
  }
  return 0;
}
