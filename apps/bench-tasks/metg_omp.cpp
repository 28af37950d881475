// OpenMP's side of ordo-bench-tasks --metg (metg.hpp): one thread of a parallel region creates
// the tasks of every step in order, each with depend(in:) on the three tiles it reads in one
// buffer and depend(out:) on the tile it writes in the other; the runtime derives Task Bench's
// dependencies from them. Timed: the parallel region. The team is started untimed.
#include <omp.h>

#include "bench.hpp"
#include "metg.hpp"
#include "metg_systems.hpp"

namespace ordo::bench::metg {

namespace {

class OmpStencil final : public StencilSystem {
 public:
  explicit OmpStencil(unsigned threads) : threads_(static_cast<int>(threads)) {
    omp_set_dynamic(0);
#pragma omp parallel num_threads(threads_)
    {
    }
  }

  double run(unsigned width, std::uint64_t steps, std::uint64_t iterations,
             std::vector<std::uint64_t>& tiles) override {
    std::vector<Tile> buf[2] = {std::vector<Tile>(width), std::vector<Tile>(width)};
    const std::vector<std::uint64_t> start = initial_tiles(width);
    for (unsigned i = 0; i < width; ++i) buf[0][i].v = start[i];
    Tile* bufs[2] = {buf[0].data(), buf[1].data()};
    const unsigned n = width;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_)
#pragma omp single
    for (std::uint64_t t = 0; t < steps; ++t) {
      Tile* in = bufs[t % 2];
      Tile* out = bufs[1 - t % 2];
      for (unsigned i = 0; i < n; ++i) {
        // One construct per shape: a depend clause may not name a tile that does not exist.
        if (n == 1) {
#pragma omp task firstprivate(i, in, out) depend(in : in[i]) depend(out : out[i])
          out[i].v = task(0, in[i].v, 0, iterations);
        } else if (i == 0) {
#pragma omp task firstprivate(i, in, out) depend(in : in[i], in[i + 1]) depend(out : out[i])
          out[i].v = task(0, in[i].v, in[i + 1].v, iterations);
        } else if (i + 1 == n) {
#pragma omp task firstprivate(i, in, out) depend(in : in[i - 1], in[i]) depend(out : out[i])
          out[i].v = task(in[i - 1].v, in[i].v, 0, iterations);
        } else {
#pragma omp task firstprivate(i, in, out) depend(in : in[i - 1], in[i], in[i + 1]) \
    depend(out : out[i])
          out[i].v = task(in[i - 1].v, in[i].v, in[i + 1].v, iterations);
        }
      }
    }
    const double seconds = since(t0);
    tiles.resize(width);
    for (unsigned i = 0; i < width; ++i) tiles[i] = buf[steps % 2][i].v;
    return seconds;
  }

 private:
  int threads_;
};

}  // namespace

std::unique_ptr<StencilSystem> make_omp_stencil(unsigned threads) {
  return std::make_unique<OmpStencil>(threads);
}

}  // namespace ordo::bench::metg
