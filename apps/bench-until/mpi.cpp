// ordo-bench-until-mpi: MPI_Allreduce of one double between the ranks of one host, the
// reference of ordo-bench-until's check across ranks. Rank 0 prints
//   bench=until what=mpi_allreduce ranks=R calls=N us_per_call=X
// The C API only (Open MPI's C++ bindings do not build warning-free).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long calls = argc > 1 ? std::atol(argv[1]) : 100000;
  if (calls < 1) calls = 1;
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  double mine = 1.0 + rank, sum = 0;
  for (long i = 0; i < calls / 10 + 1; ++i)  // warm-up
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long i = 0; i < calls; ++i) {
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (sum < 0) break;  // the test, as a solver's
  }
  const double us = (MPI_Wtime() - t0) / static_cast<double>(calls) * 1e6;
  if (rank == 0)
    std::printf("bench=until what=mpi_allreduce ranks=%d calls=%ld us_per_call=%.4f\n", ranks,
                calls, us);
  MPI_Finalize();
  return 0;
}
