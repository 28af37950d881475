// ordo-mpi-heat3d: MPI halo-exchange baseline of ordo-heat3d (see mpi_heat.hpp).
#include "mpi_heat.hpp"

int main(int argc, char** argv) { return ordo::baseline::mpi_heat_main<3>(argc, argv); }
