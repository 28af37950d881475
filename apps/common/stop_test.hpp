// The stop on convergence of the apps' sequential loops (--tol), as the stencil layer's
// run_until takes it: after every `every` steps (temporal blocking's depth: the layer tests
// once per group) and after the last, the largest change |new - old| of that step is tested
// against `tol`; the loop stops after the first tested step where it is at most tol, and
// `steps` says how many ran. tol < 0: no test.
#pragma once

#include <cstdint>

namespace ordo::app {

struct StopTest {
  double tol = -1;
  std::uint64_t every = 1;
  std::uint64_t steps = 0;  // out: the steps the loop ran
  bool tested(std::uint64_t done, std::uint64_t iters) const {
    return tol >= 0 && (done % every == 0 || done == iters);
  }
};

}  // namespace ordo::app
