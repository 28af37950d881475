// ordo-petsc-cg: PETSc's KSPCG (no preconditioner) on ordo-spcg's generated matrices, with its
// right-hand side (b_i = hash01(i)) and x0 = 0, for exactly --iters iterations (no norm, no
// convergence test): the baseline of ordo-bench-sparse. An MPI program (mpirun -n R); PETSc
// splits the rows in contiguous blocks as ordo's block partition does. PETSc's sums depend on
// the rank count, so its residual differs in its last bits from one rank count to another;
// ordo's does not (docs/sparse.md).
#include <petscksp.h>

#include <cmath>
#include <string>

#include "app_cli.hpp"
#include "sparse_app.hpp"
#include "stencil_app.hpp"

namespace {

#define ORDO_PETSC(call)                                               \
  do {                                                                 \
    const PetscErrorCode ordo_rc = (call);                             \
    if (ordo_rc != 0)                                                  \
      throw ordo::Error(std::string("PETSc: ") + #call + " failed (" + \
                        std::to_string(int(ordo_rc)) + ")");           \
  } while (0)

int run(int argc, char** argv) {
  CLI::App cli{"PETSc KSPCG (no preconditioner) on ordo-spcg's generated matrices",
               "ordo-petsc-cg"};
  ordo::app::MatrixSource src;
  std::string l2, l3;
  std::uint64_t iters = 100;
  ordo::app::add_matrix_flags(cli, src, l2, l3);
  cli.add_option("--iters", iters, "iterations")
      ->check(ordo::cli::Integer(1, ordo::app::max_iters));
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (int rc = ordo::cli::parse(cli, argc, argv, rank != 0); rc >= 0) return rc;
  ordo::app::finish_matrix_flags(src, l2, l3);
  if (!src.path.empty()) throw ordo::Error("ordo-petsc-cg takes a generated matrix, not --matrix");
  const auto n = PetscInt(ordo::app::generated_size(src));
  Mat a;
  Vec x, b;
  KSP ksp;
  PC pc;
  ORDO_PETSC(
      MatCreateAIJ(PETSC_COMM_WORLD, PETSC_DECIDE, PETSC_DECIDE, n, n, 7, nullptr, 6, nullptr, &a));
  PetscInt lo = 0, hi = 0;
  ORDO_PETSC(MatGetOwnershipRange(a, &lo, &hi));
  const ordo::sparse::Rows rows =
      ordo::app::generated_rows(src, ordo::sparse::Index(lo), ordo::sparse::Index(hi));
  for (std::size_t i = 0; i < rows.rows(); ++i) {
    const PetscInt row = lo + PetscInt(i);
    std::vector<PetscInt> cols;
    for (std::uint64_t k = rows.start[i]; k < rows.start[i + 1]; ++k)
      cols.push_back(PetscInt(rows.col[k]));
    ORDO_PETSC(MatSetValues(a, 1, &row, PetscInt(cols.size()), cols.data(),
                            &rows.val[rows.start[i]], INSERT_VALUES));
  }
  ORDO_PETSC(MatAssemblyBegin(a, MAT_FINAL_ASSEMBLY));
  ORDO_PETSC(MatAssemblyEnd(a, MAT_FINAL_ASSEMBLY));
  ORDO_PETSC(MatCreateVecs(a, &x, &b));
  for (PetscInt i = lo; i < hi; ++i) {
    const PetscScalar v = ordo::app::hash01(std::uint64_t(i));
    ORDO_PETSC(VecSetValues(b, 1, &i, &v, INSERT_VALUES));
  }
  ORDO_PETSC(VecAssemblyBegin(b));
  ORDO_PETSC(VecAssemblyEnd(b));
  ORDO_PETSC(VecSet(x, 0.0));
  ORDO_PETSC(KSPCreate(PETSC_COMM_WORLD, &ksp));
  ORDO_PETSC(KSPSetOperators(ksp, a, a));
  ORDO_PETSC(KSPSetType(ksp, KSPCG));
  ORDO_PETSC(KSPGetPC(ksp, &pc));
  ORDO_PETSC(PCSetType(pc, PCNONE));
  ORDO_PETSC(KSPSetNormType(ksp, KSP_NORM_NONE));
  ORDO_PETSC(KSPSetTolerances(ksp, 0.0, 0.0, 1e300, PetscInt(iters)));
  ORDO_PETSC(KSPSetConvergenceTest(ksp, KSPConvergedSkip, nullptr, nullptr));
  ORDO_PETSC(KSPSetUp(ksp));
  ORDO_PETSC(MPI_Barrier(PETSC_COMM_WORLD));
  const double start = MPI_Wtime();
  ORDO_PETSC(KSPSolve(ksp, b, x));
  const double seconds = MPI_Wtime() - start;
  PetscInt done = 0;
  ORDO_PETSC(KSPGetIterationNumber(ksp, &done));
  // |b - A x| / |b|, computed after the timed solve.
  Vec r;
  ORDO_PETSC(VecDuplicate(b, &r));
  ORDO_PETSC(MatMult(a, x, r));
  ORDO_PETSC(VecAYPX(r, -1.0, b));
  PetscReal rn = 0, bn = 0;
  ORDO_PETSC(VecNorm(r, NORM_2, &rn));
  ORDO_PETSC(VecNorm(b, NORM_2, &bn));
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (rank == 0)
    fmt::print(
        "app=spcg system=petsc matrix={} rows={} iters={} ranks={} seconds={:.6f} "
        "residual={:.6e}\n",
        src.describe(), n, done, ranks, seconds, double(rn / bn));
  ORDO_PETSC(VecDestroy(&r));
  ORDO_PETSC(VecDestroy(&x));
  ORDO_PETSC(VecDestroy(&b));
  ORDO_PETSC(MatDestroy(&a));
  ORDO_PETSC(KSPDestroy(&ksp));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (PetscInitialize(&argc, &argv, nullptr, nullptr) != 0) return 1;
  const int rc = ordo::app::guarded_main("ordo-petsc-cg", [&] { return run(argc, argv); });
  PetscFinalize();
  return rc;
}
