// ordo-omp-heat2d: OpenMP parallel-for baseline of ordo-heat2d (see omp_heat.hpp).
#include "omp_heat.hpp"

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-omp-heat2d",
                                 [&] { return ordo::baseline::omp_heat_main<2>(argc, argv); });
}
