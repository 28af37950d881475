// ordo-mpi-heat2d: MPI halo-exchange baseline of ordo-heat2d (see mpi_heat.hpp).
#include "mpi_heat.hpp"

int main(int argc, char** argv) { return ordo::baseline::mpi_heat_main<2>(argc, argv); }
