// What ordo-spcg, ordo-pagerank and ordo-bench-sparse share: where a matrix comes from (a
// Matrix Market file or a generator), its partition (block rows or METIS), and the exchange's
// bytes against the minimum, on the sparse layer (<ordo/sparse.hpp>).
#pragma once

#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <ordo/bench.hpp>
#include <ordo/ordo.hpp>
#include <ordo/sparse.hpp>

#include "app_cli.hpp"
#include "output_file.hpp"

namespace ordo::app {

using sparse::Index;

// A matrix given on the command line: a file, or one of the generators.
struct MatrixSource {
  std::string path;                    // --matrix FILE.mtx
  std::vector<std::size_t> laplace2d;  // --laplace2d NxM
  std::vector<std::size_t> laplace3d;  // --laplace3d NxMxK
  Index random_spd = 0;                // --random-spd N
  std::uint64_t seed = 1;

  // "laplace3d:100x100x100", "file:x.mtx", ... for the result line.
  std::string describe() const {
    if (!path.empty()) return "file:" + path;
    if (!laplace2d.empty()) return "laplace2d:" + join_shape(laplace2d);
    if (!laplace3d.empty()) return "laplace3d:" + join_shape(laplace3d);
    return "random-spd:" + std::to_string(random_spd);
  }
};

// Adds --matrix and the generator flags; `fallback` is used when none is given.
inline void add_matrix_flags(CLI::App& cli, MatrixSource& src, std::string& l2, std::string& l3) {
  cli.add_option("--matrix", src.path,
                 "a Matrix Market file (coordinate; real, integer or pattern; "
                 "general or symmetric)")
      ->type_name("FILE.mtx");
  cli.add_option("--laplace2d", l2, "the 5-point Laplacian of an NxM grid")->type_name("NxM");
  cli.add_option("--laplace3d", l3, "the 7-point Laplacian of an NxMxK grid (default 32x32x32)")
      ->type_name("NxMxK");
  cli.add_option("--random-spd", src.random_spd, "a random SPD matrix of N rows")
      ->check(cli::Integer(1, std::uint64_t{1} << 32));
  cli.add_option("--seed", src.seed, "seed of --random-spd")
      ->check(cli::Integer(0, ~std::uint64_t{0} >> 1));
}

// Reads the generator shapes and refuses two sources at once; defaults to a 32^3 Laplacian.
inline void finish_matrix_flags(MatrixSource& src, const std::string& l2, const std::string& l3) {
  int given = !src.path.empty() + !l2.empty() + !l3.empty() + (src.random_spd != 0);
  if (given > 1) throw Error("give one matrix: --matrix, --laplace2d, --laplace3d or --random-spd");
  if (!l2.empty()) src.laplace2d = parse_shape(l2, 2, "--laplace2d");
  if (!l3.empty()) src.laplace3d = parse_shape(l3, 3, "--laplace3d");
  if (given == 0) src.laplace3d = {32, 32, 32};
  const auto check = [](const std::vector<std::size_t>& s, const char* flag) {
    std::uint64_t n = 1;
    for (std::size_t e : s) {
      if (n > (std::uint64_t{1} << 40) / e)
        throw Error(std::string(flag) + " " + join_shape(s) + " has more than 2^40 rows");
      n *= e;
    }
  };
  if (!src.laplace2d.empty()) check(src.laplace2d, "--laplace2d");
  if (!src.laplace3d.empty()) check(src.laplace3d, "--laplace3d");
}

// The rows [first, end) a generator makes.
inline sparse::Rows generated_rows(const MatrixSource& s, Index first, Index end) {
  if (!s.laplace2d.empty()) return sparse::laplacian_2d(s.laplace2d[0], s.laplace2d[1], first, end);
  if (!s.laplace3d.empty())
    return sparse::laplacian_3d(s.laplace3d[0], s.laplace3d[1], s.laplace3d[2], first, end);
  return sparse::random_spd(s.random_spd, s.seed, first, end);
}

inline Index generated_size(const MatrixSource& s) {
  if (!s.laplace2d.empty()) return s.laplace2d[0] * s.laplace2d[1];
  if (!s.laplace3d.empty()) return s.laplace3d[0] * s.laplace3d[1] * s.laplace3d[2];
  return s.random_spd;
}

// The rows of the parts `held` of `partition` (every rank the same partition): read from the
// file (the whole file scanned, only those rows kept) or generated. Throws Error.
inline std::vector<sparse::Rows> source_rows(const MatrixSource& src,
                                             const sparse::Partition& partition,
                                             const std::vector<bool>& held,
                                             bool require_symmetric) {
  const std::uint32_t parts = partition.parts();
  std::vector<sparse::Rows> rows(parts);
  if (!src.path.empty()) {
    auto [f, bytes] = sparse::open_input(src.path);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
    const sparse::MatrixMarketHeader h = sparse::read_matrix_market_header(f, bytes, src.path);
    return sparse::read_matrix_market_rows(f, bytes, src.path, h, partition, held,
                                           require_symmetric);
  }
  for (std::uint32_t p = 0; p < parts; ++p)
    if (held[p]) rows[p] = generated_rows(src, partition.begin(p), partition.end(p));
  return rows;
}

// The matrix's row count: the file's header (checked), or the generator's.
inline Index source_size(const MatrixSource& src) {
  if (src.path.empty()) return generated_size(src);
  auto [f, bytes] = sparse::open_input(src.path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  return sparse::read_matrix_market_header(f, bytes, src.path).rows;
}

// A matrix split over parts, the rows of the parts `held` only: block rows, or METIS's parts
// renumbered so that each is contiguous (then every rank reads every row, to partition them
// alike, and keeps its own).
struct PartedRows {
  sparse::Partition partition;
  std::vector<sparse::Rows> rows;  // per part (empty where not held)
  std::vector<Index> old_of_new;   // METIS: the matrix's row of each new row; block: empty
  std::string partitioner = "block";
};

// Which parts of `partition` this rank holds (rank kAllRanks: every part), with the index
// map's default homes.
inline std::vector<bool> held_parts(const sparse::Partition& partition, unsigned ranks,
                                    unsigned rank) {
  const sparse::IndexMap homes(partition, ranks);
  std::vector<bool> held(partition.parts());
  for (std::uint32_t p = 0; p < partition.parts(); ++p)
    held[p] = rank == kAllRanks || homes.home(p) == rank;
  return held;
}

// METIS's parts of `all` (every row of a square matrix), renumbered so that each part is
// contiguous, and the rows of the parts this rank holds in the new numbering.
inline PartedRows metis_rows(const sparse::Rows& all, std::uint32_t parts, unsigned ranks,
                             unsigned rank) {
  PartedRows out;
  out.partitioner = "metis";
  const sparse::Renumbering rn = sparse::renumber(sparse::metis_partition(all, parts).part, parts);
  out.partition = rn.partition;
  const std::vector<bool> held = held_parts(out.partition, ranks, rank);
  out.rows.resize(parts);
  for (std::uint32_t p = 0; p < parts; ++p)
    if (held[p])
      out.rows[p] = sparse::permute_rows(all, rn, out.partition.begin(p), out.partition.end(p));
  out.old_of_new = rn.old_of_new;
  return out;
}

inline PartedRows parted_rows(const MatrixSource& src, Index n, std::uint32_t parts, bool metis,
                              unsigned ranks, unsigned rank, bool require_symmetric) {
  if (metis)
    return metis_rows(
        std::move(source_rows(src, sparse::Partition::blocks(n, 1), {true}, require_symmetric)[0]),
        parts, ranks, rank);
  PartedRows out;
  out.partition = sparse::Partition::blocks(n, parts);
  out.rows =
      source_rows(src, out.partition, held_parts(out.partition, ranks, rank), require_symmetric);
  return out;
}

// Entries of `rows` (a part's, owning [begin, end)) whose column lies outside the part; with
// `later_only`, only those past it (in a symmetric matrix, each cut edge once).
inline std::uint64_t cut_of(const sparse::Rows& rows, Index begin, Index end, bool later_only) {
  std::uint64_t cut = 0;
  for (Index c : rows.col) cut += c >= end || (!later_only && c < begin) ? 1 : 0;
  return cut;
}

// The edge cut of every rank's parts together (collective): cut_of over the parts each holds.
inline std::uint64_t edge_cut(Runtime& rt, const sparse::Partition& partition,
                              const std::vector<sparse::Rows>& rows, bool later_only) {
  std::uint64_t cut = 0;
  for (std::uint32_t p = 0; p < partition.parts(); ++p)
    cut += cut_of(rows[p], partition.begin(p), partition.end(p), later_only);
  const auto cuts = rt.gather_values(cut);
  return std::accumulate(cuts.begin(), cuts.end(), std::uint64_t{0});
}

// The runs of consecutive original indices among the new indices [begin, begin + values.size())
// (METIS renumbers; `old_of_new` empty: none), as .npy segments in the original numbering.
inline void add_original_segments(std::vector<NpySegment>& segments, Index begin,
                                  std::span<const double> values,
                                  const std::vector<Index>& old_of_new) {
  const auto original = [&](Index i) { return old_of_new.empty() ? i : old_of_new[i]; };
  std::size_t i = 0;
  while (i < values.size()) {
    const Index at = original(begin + i);
    std::size_t j = i + 1;
    while (j < values.size() && original(begin + j) == at + (j - i)) ++j;
    segments.push_back({std::size_t(at), values.subspan(i, j - i)});
    i = j;
  }
}

// A matrix split over `parts` parts, the rows of this rank's parts only.
struct LoadedMatrix {
  std::shared_ptr<const sparse::Matrix> matrix;
  std::string partitioner = "block";
  std::uint64_t edge_cut = 0;     // entries (i, j) whose column lies in a later part than row i
  std::vector<Index> old_of_new;  // METIS's renumbering (empty: none)
  // The matrix's own index of row i (as the file or the generator numbers it).
  Index original(Index i) const { return old_of_new.empty() ? i : old_of_new[i]; }
};

// Every rank reads (or generates) only its parts' rows (all of them with METIS); a file is
// checked by every rank for what it sees and the ranks agree on one verdict (exit 2 on every
// rank). `require_symmetric`: refuse a general file whose entries are not symmetric (CG).
inline LoadedMatrix load_matrix(Runtime& rt, const MatrixSource& src, std::uint32_t parts,
                                bool metis, bool require_symmetric) {
  Index n = 0;
  std::string problem;
  try {
    n = source_size(src);
    if (parts > n)
      throw Error("--parts " + std::to_string(parts) + " for a matrix of " + std::to_string(n) +
                  " rows: give at most " + std::to_string(n));
  } catch (const Error& e) {
    problem = e.what();
  }
  sparse::agree(rt, problem);
  PartedRows pr;
  try {
    pr = parted_rows(src, n, parts, metis, rt.ranks(), rt.ranks() == 1 ? kAllRanks : rt.rank(),
                     require_symmetric);
  } catch (const Error& e) {
    problem = e.what();
  }
  sparse::agree(rt, problem);
  LoadedMatrix out;
  out.partitioner = pr.partitioner;
  out.old_of_new = std::move(pr.old_of_new);
  out.edge_cut = edge_cut(rt, pr.partition, pr.rows, true);
  sparse::IndexMap map(pr.partition, rt.ranks());
  out.matrix = std::make_shared<const sparse::Matrix>(rt, std::move(map), std::move(pr.rows));
  return out;
}

// "bytes_sent=A,B bytes_min=C,D bytes_wire=E,F", per rank: what the `exchanges` exchanges of
// `v` send by the plan (the message locations of this rank's parts), the minimum the ghost
// sets imply, and what this rank's transport was really handed for the graph's own locations
// during the run (`wire`: ordo::bench::bytes_sent's difference around it; 0 where the ranks
// of a host share their locations' memory).
template <class T>
std::string bytes_fields(Runtime& rt, const sparse::Vector<T>& v, std::uint64_t exchanges,
                         std::uint64_t wire) {
  const auto sent = rt.gather_values(v.bytes_sent(rt.rank()) * exchanges);
  const auto least = rt.gather_values(v.map().entries_sent(rt.rank()) * sizeof(T) * exchanges);
  const auto measured = rt.gather_values(wire);
  std::string a, b, c;
  for (unsigned r = 0; r < sent.size(); ++r) {
    a += (r ? "," : "") + std::to_string(sent[r]);
    b += (r ? "," : "") + std::to_string(least[r]);
    c += (r ? "," : "") + std::to_string(measured[r]);
  }
  return "bytes_sent=" + a + " bytes_min=" + b + " bytes_wire=" + c;
}

}  // namespace ordo::app
