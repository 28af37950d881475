// MPI's side of ordo-bench-tasks --metg (metg.hpp), as Task Bench's non-blocking MPI version
// runs it: one rank per point of the width-W stencil (W = ranks, one per core); every step a
// rank runs its task, then posts MPI_Irecv from each neighbour and MPI_Isend to each, and waits
// for all four with MPI_Waitall. ordo-bench-tasks runs it under mpirun -n W.
//
//   ordo-bench-metg-mpi --steps T --iterations 65536,...,1 [--reps R]
//
// For each repetition and kernel duration, rank 0 prints, after checking every rank's final
// tile against the sequential reference (exit 1 on a mismatch):
//   bench=metg system=mpi width=W steps=T iterations=N seconds=S
// where S is the slowest rank's time between two barriers.
#include <mpi.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "app_cli.hpp"
#include "bench_numbers.hpp"
#include "metg.hpp"
#include "mpi_main.hpp"

namespace ordo::bench::metg {
namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed");
}

// `steps` steps on this rank's point; returns the seconds and leaves its final tile in `self`.
double run(int rank, int ranks, std::uint64_t steps, std::uint64_t iterations,
           std::uint64_t& self) {
  const std::vector<std::uint64_t> start = initial_tiles(static_cast<unsigned>(ranks));
  self = start[static_cast<std::size_t>(rank)];
  const bool has_left = rank > 0, has_right = rank + 1 < ranks;
  std::uint64_t left = has_left ? start[static_cast<std::size_t>(rank - 1)] : 0;
  std::uint64_t right = has_right ? start[static_cast<std::size_t>(rank + 1)] : 0;
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const double t0 = MPI_Wtime();
  for (std::uint64_t t = 0; t < steps; ++t) {
    const std::uint64_t mine = task(left, self, right, iterations);
    MPI_Request req[4];
    int n = 0;
    if (has_left) {
      MPI_Irecv(&left, 1, MPI_UINT64_T, rank - 1, 0, MPI_COMM_WORLD, &req[n++]);
      MPI_Isend(&mine, 1, MPI_UINT64_T, rank - 1, 0, MPI_COMM_WORLD, &req[n++]);
    }
    if (has_right) {
      MPI_Irecv(&right, 1, MPI_UINT64_T, rank + 1, 0, MPI_COMM_WORLD, &req[n++]);
      MPI_Isend(&mine, 1, MPI_UINT64_T, rank + 1, 0, MPI_COMM_WORLD, &req[n++]);
    }
    check(MPI_Waitall(n, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
    self = mine;
  }
  const double mine = MPI_Wtime() - t0;
  double slowest = 0;
  check(MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce");
  return slowest;
}

int body(int argc, char** argv, int rank, int ranks) {
  CLI::App cli{"The METG stencil of ordo-bench-tasks --metg with non-blocking MPI (one rank per "
               "point; run under mpirun -n W)",
               "ordo-bench-metg-mpi"};
  std::uint64_t steps = 1000;
  unsigned reps = 1;
  std::string iterations_text = "1";
  cli.add_option("--steps", steps, "time steps")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  cli.add_option("--iterations", iterations_text, "kernel iterations per task, comma-separated")
      ->capture_default_str();
  cli.add_option("--reps", reps, "repetitions of the sweep")->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  // Every rank parses the same flags to the same outcome; rank 0 alone prints help and errors.
  if (int rc = cli::parse(cli, argc, argv, rank != 0); rc >= 0) return rc;
  const std::vector<std::size_t> sweep =
      parse_size_list(iterations_text, "--iterations", {1, std::uint64_t{1} << 30, 1});

  std::map<std::uint64_t, std::vector<std::uint64_t>> expected;  // rank 0: by iterations
  for (unsigned r = 0; r < reps; ++r)
    for (std::uint64_t iterations : sweep) {
      std::uint64_t tile = 0;
      const double seconds = run(rank, ranks, steps, iterations, tile);
      std::vector<std::uint64_t> tiles(static_cast<std::size_t>(ranks));
      check(MPI_Gather(&tile, 1, MPI_UINT64_T, tiles.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD),
            "MPI_Gather");
      if (rank != 0) continue;
      auto& e = expected[iterations];
      if (e.empty()) e = reference(static_cast<unsigned>(ranks), steps, iterations);
      for (int i = 0; i < ranks; ++i)
        if (tiles[static_cast<std::size_t>(i)] != e[static_cast<std::size_t>(i)]) {
          std::fprintf(stderr, "ordo-bench-metg-mpi: wrong result: point %d after %llu steps of "
                       "%llu iterations differs from the sequential one\n", i,
                       static_cast<unsigned long long>(steps),
                       static_cast<unsigned long long>(iterations));
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      std::printf("bench=metg system=mpi width=%d steps=%llu iterations=%llu seconds=%.9f\n",
                  ranks, static_cast<unsigned long long>(steps),
                  static_cast<unsigned long long>(iterations), seconds);
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace
}  // namespace ordo::bench::metg

int main(int argc, char** argv) {
  return ordo::app::mpi_guarded_main("ordo-bench-metg-mpi", argc, argv, [&](int rank, int ranks) {
    return ordo::bench::metg::body(argc, argv, rank, ranks);
  });
}
