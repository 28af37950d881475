// OpenMP's side of ordo-bench-tasks: explicit tasks with depend clauses, created by one thread
// of a parallel region (`single`) and waited for by the region's closing barrier.
//   independent  N tasks without depend clauses.
//   chain        N tasks with depend(inout: x).
//   stencil1d    K x T tasks created in program order with depend(in: t[i-1], t[i+1]) and
//                depend(inout: t[i]); the runtime derives the predecessors of bench.hpp.
// Timed: the parallel region (task creation, execution, the barrier). The thread team is
// created untimed, by a first empty region.
#include <omp.h>

#include <chrono>

#include "bench.hpp"

namespace ordo::bench {

namespace {

class OmpSystem final : public System {
 public:
  explicit OmpSystem(unsigned threads) : threads_(static_cast<int>(threads)) {
    omp_set_dynamic(0);
#pragma omp parallel num_threads(threads_)
    {
    }
  }

 private:

  double independent(const Sizes& s) override {
    std::vector<std::uint64_t> counters(s.independent, 0);
    std::uint64_t* c = counters.data();
    const std::uint64_t n = s.independent;
    auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_)
#pragma omp single
    for (std::uint64_t i = 0; i < n; ++i) {
#pragma omp task firstprivate(i)
      ++c[i];
    }
    double secs = since(t0);
    check_independent("omp", counters);
    return secs;
  }

  double chain(const Sizes& s, const Expected& e) override {
    std::uint64_t x = 0;
    const std::uint64_t n = s.chain;
    auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_) shared(x)
#pragma omp single
    for (std::uint64_t i = 0; i < n; ++i) {
#pragma omp task firstprivate(i) shared(x) depend(inout : x)
      x = chain_step(x, i);
    }
    double secs = since(t0);
    check_chain("omp", x, e);
    return secs;
  }

  double stencil(const Sizes& s, const Expected& e) override {
    std::vector<Tile> tiles(s.tiles);
    Tile* t = tiles.data();
    const std::uint32_t n = s.tiles, iters = s.iterations;
    auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_)
#pragma omp single
    for (std::uint32_t k = 0; k < iters; ++k) {
      for (std::uint32_t i = 0; i < n; ++i) {
        // One construct per shape: a depend clause may not name a tile that does not exist.
        if (n == 1) {
#pragma omp task firstprivate(i) depend(inout : t[i])
          t[i].v = stencil_step(0, t[i].v, 0);
        } else if (i == 0) {
#pragma omp task firstprivate(i) depend(inout : t[i]) depend(in : t[i + 1])
          t[i].v = stencil_step(0, t[i].v, t[i + 1].v);
        } else if (i + 1 == n) {
#pragma omp task firstprivate(i) depend(in : t[i - 1]) depend(inout : t[i])
          t[i].v = stencil_step(t[i - 1].v, t[i].v, 0);
        } else {
#pragma omp task firstprivate(i) depend(in : t[i - 1], t[i + 1]) depend(inout : t[i])
          t[i].v = stencil_step(t[i - 1].v, t[i].v, t[i + 1].v);
        }
      }
    }
    double secs = since(t0);
    std::vector<std::uint64_t> result(n);
    for (std::uint32_t i = 0; i < n; ++i) result[i] = tiles[i].v;
    check_stencil("omp", result, e);
    return secs;
  }

  int threads_;
};

}  // namespace

std::unique_ptr<System> make_omp(unsigned threads) { return std::make_unique<OmpSystem>(threads); }

}  // namespace ordo::bench
