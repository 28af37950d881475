// The apps' exit statuses and words (app_cli.hpp) for a program of MPI ranks: the MPI baselines
// and ordo-bench-metg-mpi. Include it only where MPI is a dependency.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
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

// Runs `check`, a verdict of this rank's own (the memory its limits allow), and makes it every
// rank's before any acts on it: a rank that stopped alone would leave the others waiting for it
// in their next collective. Returns -1 when every rank passed; else the exit status 2 on every
// rank, and the lowest refused rank alone says why (its Error), naming itself. Collective.
inline int mpi_check_on_every_rank(const std::string& name, int rank, int ranks,
                                   const std::function<void()>& check) {
  std::optional<Error> refusal;
  try {
    check();
  } catch (const Error& e) {
    refusal = e;
  }
  int first_refused = refusal ? rank : ranks;
  if (MPI_Allreduce(MPI_IN_PLACE, &first_refused, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    throw std::runtime_error("MPI_Allreduce failed");
  if (first_refused == ranks) return -1;
  if (first_refused == rank) report((name + " (rank " + std::to_string(rank) + ")").c_str(), *refusal);
  return cli::kBadInput;
}

}  // namespace ordo::app
