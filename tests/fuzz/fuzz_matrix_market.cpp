// Fuzz target: the sparse layer's Matrix Market reader (sparse/matrix_market.cpp), header and
// rows, as ordo-spcg reads them on a rank holding parts 0 and 2 of 3 (or all of fewer), with
// the symmetry check CG asks for. Anything malformed must be refused with ordo::Error; what is
// accepted must be rows the header allows: in range, columns increasing, no more entries than
// the file has lines for.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include <ordo/sparse.hpp>

#include "memory_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return read_as_file(data, size, [](std::FILE* f, std::size_t size) {
    const auto h = ordo::sparse::read_matrix_market_header(f, size, "fuzz.mtx");
    if (h.rows > size || h.entries > size) __builtin_trap();  // sized beyond the file
    const std::uint32_t parts = h.rows < 3 ? std::uint32_t(h.rows) : 3;
    const auto part = ordo::sparse::Partition::blocks(h.rows, parts);
    std::vector<bool> held(parts, true);
    if (parts == 3) held[1] = false;
    const auto rows =
        ordo::sparse::read_matrix_market_rows(f, size, "fuzz.mtx", h, part, held, true);
    std::uint64_t total = 0;
    for (std::uint32_t p = 0; p < parts; ++p) {
      const auto& r = rows[p];
      if (!held[p]) continue;
      if (r.first != part.begin(p) || r.rows() != part.count(p)) __builtin_trap();
      for (std::size_t i = 0; i < r.rows(); ++i) {
        if (r.start[i + 1] <= r.start[i]) __builtin_trap();  // an empty row accepted
        for (std::uint64_t k = r.start[i]; k < r.start[i + 1]; ++k) {
          if (r.col[k] >= h.rows) __builtin_trap();
          if (k > r.start[i] && r.col[k] <= r.col[k - 1]) __builtin_trap();
        }
      }
      total += r.nonzeros();
    }
    if (total > 2 * h.entries) __builtin_trap();  // more than the entries and their mirrors
  });
}
