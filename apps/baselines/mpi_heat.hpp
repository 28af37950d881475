// MPI baseline of the heat apps: the hand-written halo exchange a careful MPI programmer
// writes, one single-threaded rank per worker.
//
// Decomposition: --blocks P0xP1[xP2] (product = rank count; default ranks x 1 [x 1], slabs
// along the slowest dimension, whose faces are contiguous). Rank r has block coordinates r in
// row-major order and owns the extents [N*p/P, N*(p+1)/P) in each dimension, stored with a
// ghost layer (baseline_common.hpp). Ghost layers on the global boundary hold the Dirichlet
// values for the whole run; the others receive a neighbour's face.
//
// One step, on buffers a (old) and b (new):
//   1. post MPI_Irecv into a's ghost faces and MPI_Isend of a's boundary faces, for every
//      decomposed dimension (faces are MPI subarray types: no packing code, no copies for
//      contiguous faces); a missing neighbour is MPI_PROC_NULL, whose requests complete at once;
//   2. update the inner box of b, the points whose stencil reads no ghost of a decomposed
//      dimension, while the halos travel;
//   3. MPI_Waitall, then update the shell (the faces of the decomposed dimensions);
//   4. swap a and b.
// Only a's ghosts are written while a's interior is read, so the overlap is race-free; the
// Waitall of step 3 also completes the sends, so a may be overwritten as b in the next step.
//
// Tags: a face sent towards the lower neighbour in dimension d travels with tag 2d, towards the
// upper one with 2d+1; the receiver posts the matching tag on the opposite side.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "baseline_common.hpp"
#include "heat_reference.hpp"
#include "mpi_main.hpp"

namespace ordo::baseline {

template <int D>
struct Box {
  std::array<std::size_t, D> lo{}, hi{};  // ghosted indices, inclusive
  bool empty() const {
    for (int d = 0; d < D; ++d)
      if (hi[static_cast<std::size_t>(d)] < lo[static_cast<std::size_t>(d)]) return true;
    return false;
  }
};

template <int D>
void update_box(const Grid<D>& g, const double* a, double* b, const Box<D>& box) {
  if constexpr (D == 2) {
    for (std::size_t i = box.lo[0]; i <= box.hi[0]; ++i)
      update_run<D>(g, a, b, i * g.stride[0], box.lo[1], box.hi[1]);
  } else {
    for (std::size_t i = box.lo[0]; i <= box.hi[0]; ++i)
      for (std::size_t j = box.lo[1]; j <= box.hi[1]; ++j)
        update_run<D>(g, a, b, i * g.stride[0] + j * g.stride[1], box.lo[2], box.hi[2]);
  }
}

// Splits the local interior into the inner box (first) and the shell boxes: for each
// decomposed dimension d in order, the two faces of d, spanning [2, L-1] in the decomposed
// dimensions before d and everything in the others. Each point lies in exactly one box.
template <int D>
std::vector<Box<D>> split_boxes(const std::array<std::size_t, D>& ext,
                                const std::array<bool, D>& decomposed) {
  std::vector<Box<D>> boxes;
  Box<D> inner;
  for (std::size_t e = 0; e < D; ++e) {
    inner.lo[e] = decomposed[e] ? 2 : 1;
    inner.hi[e] = decomposed[e] ? ext[e] - 1 : ext[e];
  }
  boxes.push_back(inner);  // may be empty (an extent <= 2): the caller drops empty boxes
  for (std::size_t d = 0; d < D; ++d) {
    if (!decomposed[d]) continue;
    for (std::size_t face : {std::size_t{1}, ext[d]}) {
      Box<D> b;
      for (std::size_t e = 0; e < D; ++e) {
        if (e == d) {
          b.lo[e] = b.hi[e] = face;
        } else if (e < d && decomposed[e]) {
          b.lo[e] = 2;
          b.hi[e] = ext[e] - 1;
        } else {
          b.lo[e] = 1;
          b.hi[e] = ext[e];
        }
      }
      boxes.push_back(b);
      if (ext[d] == 1) break;  // both faces are the same layer
    }
  }
  return boxes;
}

struct MpiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw MpiError(std::string(what) + " failed (MPI error " +
                                        std::to_string(rc) + ")");
}

template <int D>
int mpi_heat_body(int argc, char** argv, int rank, int ranks) {
  const std::string name = std::string("ordo-mpi-") + app_name<D>();
  CLI::App cli{std::string("MPI halo-exchange baseline of ordo-") + app_name<D>() +
                   " (same kernel, same result line); run it under mpirun -n RANKS",
               name};
  Options o;
  Flags f;
  add_flags<D>(cli, o, f, "must equal the rank count if given (mpirun -n sets it)",
               D == 2 ? "rank grid PxQ, product = rank count (default RANKSx1)"
                      : "rank grid PxQxR, product = rank count (default RANKSx1x1)");
  // Every rank parses the same flags to the same outcome; rank 0 alone prints help and errors.
  if (int rc = cli::parse(cli, argc, argv, rank != 0); rc >= 0) return rc;
  finish_flags<D>(o, f);
  if (int rc = app::mpi_check_on_every_rank(name, rank, ranks, [&] { check_grids_fit<D>(o, f); });
      rc >= 0)
    return rc;
  if (o.workers != 0 && o.workers != static_cast<unsigned>(ranks))
    throw Error("--workers " + std::to_string(o.workers) + " but mpirun started " +
                std::to_string(ranks) + " rank(s): each rank is one worker, so start it with " +
                "mpirun -n " + std::to_string(o.workers));
  if (o.blocks.empty()) {
    o.blocks.assign(D, 1);
    o.blocks[0] = static_cast<std::size_t>(ranks);
  }
  app::check_blocks_fit(o.size, o.blocks, app::join_shape(o.size), app::join_shape(o.blocks));
  std::size_t product = 1;
  for (std::size_t d = 0; d < D; ++d) {
    product *= o.blocks[d];
    if (o.size[d] + 2 > static_cast<std::size_t>(INT_MAX))
      throw Error("--size " + app::join_shape(o.size) + ": an extent exceeds MPI's int counts");
  }
  if (product != static_cast<std::size_t>(ranks))
    throw Error("--blocks " + app::join_shape(o.blocks) + " makes " + std::to_string(product) +
                " blocks but mpirun started " + std::to_string(ranks) +
                " rank(s): the product of the rank grid must equal the rank count");

  // This rank's block: coordinates (row-major), extents, neighbours.
  std::array<std::size_t, D> coord{}, ext{}, offset{};
  std::array<bool, D> decomposed{};
  std::array<std::array<int, 2>, D> nb{};
  {
    std::size_t rest = static_cast<std::size_t>(rank);
    for (int d = D - 1; d >= 0; --d) {
      const auto e = static_cast<std::size_t>(d);
      coord[e] = rest % o.blocks[e];
      rest /= o.blocks[e];
    }
    std::size_t stride = 1;
    for (int d = D - 1; d >= 0; --d) {
      const auto e = static_cast<std::size_t>(d);
      offset[e] = o.size[e] * coord[e] / o.blocks[e];
      ext[e] = o.size[e] * (coord[e] + 1) / o.blocks[e] - offset[e];
      decomposed[e] = o.blocks[e] > 1;
      nb[e][0] = coord[e] > 0 ? rank - static_cast<int>(stride) : MPI_PROC_NULL;
      nb[e][1] = coord[e] + 1 < o.blocks[e] ? rank + static_cast<int>(stride) : MPI_PROC_NULL;
      stride *= o.blocks[e];
    }
  }
  const Grid<D> g(ext);
  std::unique_ptr<double[]> ubuf(new double[g.total]), vbuf(new double[g.total]);
  init_boundary<D>(g, ubuf.get(), coord[0] == 0);
  init_boundary<D>(g, vbuf.get(), coord[0] == 0);

  // Face types: [d][0] send low, [d][1] send high, [d][2] recv low ghost, [d][3] recv high.
  std::array<std::array<MPI_Datatype, 4>, D> face;
  for (auto& per_dim : face) per_dim.fill(MPI_DATATYPE_NULL);
  for (std::size_t d = 0; d < D; ++d) {
    if (!decomposed[d]) continue;
    const std::array<std::size_t, 4> at{1, ext[d], 0, ext[d] + 1};
    for (std::size_t k = 0; k < 4; ++k) {
      int sizes[D], sub[D], starts[D];
      for (std::size_t e = 0; e < D; ++e) {
        sizes[e] = static_cast<int>(ext[e] + 2);
        sub[e] = e == d ? 1 : static_cast<int>(ext[e]);
        starts[e] = e == d ? static_cast<int>(at[k]) : 1;
      }
      check_mpi(MPI_Type_create_subarray(D, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE,
                                         &face[d][k]),
                "MPI_Type_create_subarray");
      check_mpi(MPI_Type_commit(&face[d][k]), "MPI_Type_commit");
    }
  }
  std::vector<Box<D>> shell = split_boxes<D>(ext, decomposed);
  const Box<D> inner = shell.front();
  shell.erase(shell.begin());
  std::erase_if(shell, [](const Box<D>& b) { return b.empty(); });

  double* a = ubuf.get();
  double* b = vbuf.get();
  std::vector<MPI_Request> req;
  req.reserve(4 * D);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const double start = MPI_Wtime();
  for (std::uint64_t it = 0; it < o.iters; ++it) {
    req.clear();
    for (std::size_t d = 0; d < D; ++d) {
      if (!decomposed[d]) continue;
      const int tag_down = static_cast<int>(2 * d), tag_up = tag_down + 1;
      MPI_Request r[4];
      check_mpi(MPI_Irecv(a, 1, face[d][2], nb[d][0], tag_up, MPI_COMM_WORLD, &r[0]), "MPI_Irecv");
      check_mpi(MPI_Irecv(a, 1, face[d][3], nb[d][1], tag_down, MPI_COMM_WORLD, &r[1]),
                "MPI_Irecv");
      check_mpi(MPI_Isend(a, 1, face[d][0], nb[d][0], tag_down, MPI_COMM_WORLD, &r[2]),
                "MPI_Isend");
      check_mpi(MPI_Isend(a, 1, face[d][1], nb[d][1], tag_up, MPI_COMM_WORLD, &r[3]), "MPI_Isend");
      req.insert(req.end(), r, r + 4);
    }
    if (!inner.empty()) update_box<D>(g, a, b, inner);
    check_mpi(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    for (const Box<D>& box : shell) update_box<D>(g, a, b, box);
    std::swap(a, b);
  }
  double seconds = MPI_Wtime() - start, slowest = 0;
  check_mpi(MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
            "MPI_Reduce");
  for (auto& per_dim : face)
    for (MPI_Datatype& t : per_dim)
      if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);

  int failed = 0;
  std::string verdict = "skipped";
  if (o.verify) {  // gather every block's interior on rank 0 and compare there
    std::vector<double> mine = interior<D>(g, a);
    if (rank != 0) {
      check_mpi(MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, 0, 99,
                         MPI_COMM_WORLD),
                "MPI_Send");
    } else {
      std::size_t total = 1;
      for (std::size_t e : o.size) total *= e;
      std::vector<double> got(total);
      for (int r = 0; r < ranks; ++r) {
        std::array<std::size_t, D> c{}, lo{}, n{};
        std::size_t rest = static_cast<std::size_t>(r);
        for (int d = D - 1; d >= 0; --d) {
          const auto e = static_cast<std::size_t>(d);
          c[e] = rest % o.blocks[e];
          rest /= o.blocks[e];
          lo[e] = o.size[e] * c[e] / o.blocks[e];
          n[e] = o.size[e] * (c[e] + 1) / o.blocks[e] - lo[e];
        }
        std::vector<double> part;
        if (r == 0) {
          part = mine;
        } else {
          std::size_t count = 1;
          for (std::size_t e : n) count *= e;
          part.resize(count);
          check_mpi(MPI_Recv(part.data(), static_cast<int>(count), MPI_DOUBLE, r, 99,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                    "MPI_Recv");
        }
        // Rows of the last dimension are contiguous in both layouts.
        const std::size_t rows = part.size() / n[D - 1];
        for (std::size_t row = 0; row < rows; ++row) {
          std::size_t global = 0, rest_row = row;
          std::array<std::size_t, D> x{};
          for (int d = D - 2; d >= 0; --d) {
            const auto e = static_cast<std::size_t>(d);
            x[e] = rest_row % n[e] + lo[e];
            rest_row /= n[e];
          }
          x[D - 1] = lo[D - 1];
          for (std::size_t e = 0; e < D; ++e) global = global * o.size[e] + x[e];
          std::memcpy(&got[global], &part[row * n[D - 1]], n[D - 1] * sizeof(double));
        }
      }
      std::vector<double> want;
      if constexpr (D == 2)
        want = app::reference_heat2d(o.size[0], o.size[1], o.iters);
      else
        want = app::reference_heat3d(o.size[0], o.size[1], o.size[2], o.iters);
      failed = std::memcmp(got.data(), want.data(), got.size() * sizeof(double)) != 0 ||
               !app::is_finite_result(got);
    }
    check_mpi(MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    verdict = failed ? "fail" : "ok";
  }
  if (rank == 0)
    print_result(app_name<D>(), o.size, o.blocks, o.iters, static_cast<unsigned>(ranks),
                 slowest, verdict, "mpi");
  return failed ? 1 : 0;
}

// The body under MPI with the apps' exit statuses and words (mpi_main.hpp).
template <int D>
int mpi_heat_main(int argc, char** argv) {
  return app::mpi_guarded_main(std::string("ordo-mpi-") + app_name<D>(), argc, argv,
                               [&](int rank, int ranks) {
                                 return mpi_heat_body<D>(argc, argv, rank, ranks);
                               });
}

}  // namespace ordo::baseline
