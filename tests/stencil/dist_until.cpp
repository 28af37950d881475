// Stencil::run_until across ranks, for the multiprocess suite: every rank draws the same random
// cases (until_cases.hpp), places them on the job's ranks, runs to the tolerance and compares
// the stop step, the reduced values and the blocks it holds with the brute force, bit for bit.
// Exit 0 when every case matches on this rank, 1 otherwise; one summary line per rank.
//   ordorun -n 3 dist_until --cases 20 --workers 2 --seed 1
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "until_cases.hpp"

using namespace ordo::test::until;

int main(int argc, char** argv) {
  int cases = 20;
  unsigned workers = 2, seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--cases")) cases = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--workers")) workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  try {
    ordo::Runtime rt({.workers = workers});
    std::mt19937 rng(seed);
    int bad = 0;
    for (int i = 0; i < cases; ++i) {
      const Case c = random_case(rng, rt.ranks());
      const std::string why = check(c, rt);
      if (!why.empty()) {
        ++bad;
        std::fprintf(stderr, "rank %u: case %d (%s):%s\n", rt.rank(), i, c.describe().c_str(),
                     why.c_str());
      }
    }
    std::printf("dist_until rank %u of %u: %d cases, %d differ\n", rt.rank(), rt.ranks(), cases,
                bad);
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_until: %s\n", e.what());
    return 1;
  }
}
