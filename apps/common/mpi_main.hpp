// The apps' exit statuses and words (app_cli.hpp) for a program of MPI ranks: the MPI baselines
// and ordo-bench-metg-mpi. Include it only where MPI is a dependency.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "app_cli.hpp"

namespace ordo::app {

// MPI_Init, `body(rank, ranks)`, MPI_Finalize; returns the exit status.
// - Bad input (ordo::Error) is found alike by every rank from the same flags: each returns 2
//   and rank 0 alone says why (the body parses with cli::parse(..., rank != 0)), so one message
//   and no MPI_Abort, whose job-wide kill hides the message among every rank's.
// - Anything else is this rank's own (out of memory, an MPI call): said in the apps' words,
//   naming the rank, and the job ends with MPI_Abort, since the others may wait for this rank
//   in a collective.
inline int mpi_guarded_main(const std::string& name, int& argc, char**& argv,
                            const std::function<int(int rank, int ranks)>& body) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: failed: MPI_Init failed; start it with mpirun -n RANKS\n",
                 name.c_str());
    return cli::kFailed;
  }
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int rc = cli::kFailed;
  try {
    rc = body(rank, ranks);
  } catch (const Error& e) {
    rc = rank == 0 ? report(name.c_str(), e) : cli::kBadInput;
  } catch (const std::exception& e) {
    MPI_Abort(MPI_COMM_WORLD, report((name + " (rank " + std::to_string(rank) + ")").c_str(), e));
  }
  MPI_Finalize();
  return rc;
}

}  // namespace ordo::app
