// ordo-omp-heat3d: OpenMP parallel-for baseline of ordo-heat3d (see omp_heat.hpp).
#include "omp_heat.hpp"

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-omp-heat3d",
                                 [&] { return ordo::baseline::omp_heat_main<3>(argc, argv); });
}
