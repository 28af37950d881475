// The stencil layer's property test across ranks, for the multiprocess suite: every rank
// draws the same random stencils (stencil_cases.hpp: uneven block grids with 1-point blocks,
// halo widths, temporal-blocking depths, Gauss-Seidel, time levels, coefficient grids),
// places them on the job's ranks, loads only its own blocks (Stencil::set from the value at
// each global coordinate), runs, and compares the blocks it holds (get_blocks) with the
// brute force over global arrays, bit for bit. Exit 0 when every case matches on this rank,
// 1 otherwise; one summary line per rank.
//   ordorun -n 3 dist_stencils --cases 40 --workers 2 --seed 1
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "jacobi5_pipeline.hpp"
#include "stencil_cases.hpp"

using namespace ordo::test;

int main(int argc, char** argv) {
  int cases = 40;
  unsigned workers = 2;
  unsigned seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--cases")) cases = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--workers")) workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  try {
    ordo::Runtime rt({.workers = workers});
    std::mt19937 rng(seed);
    int bad = 0, run = 0;
    for (int i = 0; i < cases; ++i) {
      Case c = random_case(rng, i % 4 == 3);  // every fourth a Gauss-Seidel sweep
      std::size_t blocks = 1;
      for (std::size_t b : c.spec.blocks) blocks *= b;
      const Values values = random_values(c, rng);
      const auto& lv = values.levels;
      const auto& aux = values.aux;
      const std::uint64_t steps = values.steps;
      if (blocks < rt.ranks()) continue;  // refused on every rank alike (tested elsewhere)
      ++run;
      const auto want = brute_force(c, lv, aux, steps);
      auto at = [&](const std::vector<double>& g) {
        return [&g, &c](st::Coord x) {
          std::size_t gi = 0;
          for (std::size_t k = 0; k < c.spec.size.size(); ++k)
            gi = gi * c.spec.size[k] + static_cast<std::size_t>(x[k]);
          return g[gi];
        };
      };
      ordo::Graph g;
      st::Stencil s(g, c.spec, make_kernel(c));
      s.place(rt);
      for (std::size_t l = 0; l < lv.size(); ++l) s.set(st::PointValue(at(lv[l])), l);
      if (c.spec.aux_grids) s.set_aux(0, st::PointValue(at(aux)));
      const std::uint64_t first = steps / 2;
      if (first) s.run(rt, first);
      s.run(rt, steps - first);
      bool ok = s.steps_done() == steps;
      std::size_t seen = 0;
      s.get_blocks([&](const st::ConstBox& b) {
        st::for_each_box_row(b, [&](const double* row, st::Coord x, std::size_t len) {
          std::size_t gi = 0;
          for (std::size_t k = 0; k < c.spec.size.size(); ++k)
            gi = gi * c.spec.size[k] + static_cast<std::size_t>(x[k]);
          ok = ok && std::memcmp(row, &want[gi], len * sizeof(double)) == 0;
          seen += len;
        });
      });
      ok = ok && seen > 0;  // every rank holds a block
      // The whole grid gathered onto every rank, then onto one (another one per case).
      ok = ok && same_bits(s.gather(rt), want);
      const unsigned to = static_cast<unsigned>(i) % rt.ranks();
      const std::vector<double> one = s.gather(rt, to);
      ok = ok && (rt.rank() == to ? same_bits(one, want) : one.empty());
      // get() reads this rank's blocks: the grid on one rank, refused across ranks.
      if (rt.ranks() == 1) {
        ok = ok && same_bits(s.get(), want);
      } else {
        try {
          (void)s.get();
          ok = false;
        } catch (const ordo::Error&) {
        }
      }
      if (!ok) {
        ++bad;
        std::printf("rank %u: case %d differs: %s steps=%llu\n", rt.rank(), i,
                    describe(c.spec).c_str(), static_cast<unsigned long long>(steps));
      }
    }
    // A pipeline's grid gathered across ranks: w = 5-point(u), u = w is the Jacobi stencil,
    // whose gathered grid the cases above checked against the brute force.
    {
      const st::PointValue u0 = [](st::Coord x) { return double(x[0] * 17 + x[1] * 5 % 7) / 3.0; };
      const st::PipelineSpec p = jacobi5_pipeline({20, 15}, {4, 3});
      st::Spec s;
      s.size = p.size;
      s.blocks = {5, 2};
      s.neighbourhood = st::von_neumann(2, 1);
      ordo::Graph g1, g2;
      st::Pipeline pipe(g1, p);
      st::Stencil sten(g2, s, jacobi5_kernel());
      pipe.place(rt);
      sten.place(rt);
      pipe.set("u", u0);
      sten.set(u0);
      pipe.run(rt, 6);
      sten.run(rt, 6);
      const std::vector<double> a = pipe.gather(rt, "u", 0), b = sten.gather(rt, 0);
      ++run;
      if (rt.rank() == 0 && !same_bits(a, b)) {
        ++bad;
        std::printf("rank 0: the pipeline's gathered grid differs from the stencil's\n");
      }
      // What the stencil's graph holds on this rank (Graph::storage_held): its blocks, and for
      // each face between one of its blocks and a block of another rank the edge it exports
      // and, unless it maps the other rank's memory (shared memory on one host), the replica
      // of the edge it imports; nothing for a face between two of its blocks.
      // Blocks {5, 2}, von Neumann: faces between (i, j) and (i + 1, j), and (i, 0) and (i, 1).
      auto home = [&](std::size_t i, std::size_t j) { return sten.home_rank(i * 2 + j); };
      std::size_t blocks_here = 0, faces_out = 0;
      for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t j = 0; j < 2; ++j) {
          if (home(i, j) == rt.rank()) ++blocks_here;
          auto face = [&](unsigned x, unsigned y) {
            if (x != y && (x == rt.rank() || y == rt.rank())) ++faces_out;
          };
          if (i + 1 < 5) face(home(i, j), home(i + 1, j));
          if (j == 0) face(home(i, 0), home(i, 1));
        }
      const std::size_t held = g2.storage_held().locations;
      ++run;
      if (held != blocks_here + faces_out && held != blocks_here + 2 * faces_out) {
        ++bad;
        std::printf("rank %u: the stencil holds storage for %zu locations, want %zu blocks and "
                    "%zu faces to other ranks (one or two locations each)\n",
                    rt.rank(), held, blocks_here, faces_out);
      }
    }
    std::printf("rank %u of %u: %d of %d stencils match the brute force\n", rt.rank(),
                rt.ranks(), run - bad, run);
    return bad == 0 && run > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_stencils: %s\n", e.what());
    return 2;
  }
}
