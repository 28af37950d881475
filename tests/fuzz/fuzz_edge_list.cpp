// Fuzz target: the sparse layer's edge-list reader (sparse/matrix_market.cpp) and graph_rows,
// as ordo-pagerank reads a file on a rank holding parts 0 and 2 of 3 (or all of fewer): the
// header, then the memory the graph needs judged before anything is sized by the header's
// counts (graph_rows_bytes; a budget of 64 MiB stands for the machine's memory, which
// ordo-pagerank asks Runtime::check_memory_on_all_ranks for), then the rows. Anything
// malformed must be refused with ordo::Error; what is accepted must be edges in range, as
// many as the header says, and rows and out-degrees that account for each of them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <ordo/sparse.hpp>

#include "memory_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return read_as_file(data, size, [](std::FILE* f, std::size_t size) {
    const auto h = ordo::sparse::read_edge_list_header(f, size, "fuzz.txt");
    if (h.edges > size) __builtin_trap();  // an edge count the file cannot hold
    const std::uint32_t parts = h.vertices < 3 ? std::uint32_t(h.vertices) : 3;
    const auto part = ordo::sparse::Partition::blocks(h.vertices, parts);
    std::vector<bool> held(parts, true);
    if (parts == 3) held[1] = false;
    if (ordo::sparse::graph_rows_bytes(part, held, h.edges) > (std::uint64_t{64} << 20))
      return;  // refused for want of memory, as the app does
    std::uint64_t edges = 0, into = 0, from = 0;
    const auto gr = ordo::sparse::graph_rows(
        part, held, [&](const std::function<void(ordo::sparse::Edge)>& each) {
          ordo::sparse::read_edge_list(f, size, "fuzz.txt", h, [&](ordo::sparse::Edge e) {
            if (e.from >= h.vertices || e.to >= h.vertices) __builtin_trap();
            ++edges;
            into += held[part.owner(e.to)] ? 1 : 0;
            from += held[part.owner(e.from)] ? 1 : 0;
            each(e);
          });
        });
    if (edges != h.edges) __builtin_trap();
    std::uint64_t counted_into = 0, counted_from = 0;
    for (std::uint32_t p = 0; p < parts; ++p) {
      if (!held[p]) continue;
      const auto& r = gr.rows[p];
      if (r.first != part.begin(p) || r.rows() != part.count(p)) __builtin_trap();
      if (gr.out_degree[p].size() != part.count(p)) __builtin_trap();
      for (std::size_t i = 0; i < r.rows(); ++i)
        for (std::uint64_t k = r.start[i]; k < r.start[i + 1]; ++k) {
          if (r.col[k] >= h.vertices || r.val[k] < 1) __builtin_trap();
          if (k > r.start[i] && r.col[k] <= r.col[k - 1]) __builtin_trap();
          counted_into += std::uint64_t(r.val[k]);
        }
      for (std::uint32_t d : gr.out_degree[p]) counted_from += d;
    }
    if (counted_into != into || counted_from != from) __builtin_trap();
  });
}
