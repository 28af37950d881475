// The five-point Jacobi step two ways, for tests that check one against the other: a two-stage
// pipeline whose feedback read of u gives one step per iteration (relax: w = 5-point(u); back:
// u = w), and the single-stage layer's kernel of the same step. After any number of
// iterations the pipeline's u equals the stencil's grid bit for bit (test_pipeline.cpp on one
// rank; dist_stencils.cpp gathered across ranks).
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include <ordo/stencil.hpp>

namespace ordo::test {

// The step at index `at` of a grid whose rows are `row` apart, in one fixed order of additions.
inline double jacobi5_point(const double* u, std::ptrdiff_t at, std::ptrdiff_t row) {
  return 0.2 * ((((u[at] + u[at - row]) + u[at + row]) + u[at - 1]) + u[at + 1]);
}

// The pipeline on a 2-D grid of `size` in `blocks`.
inline stencil::PipelineSpec jacobi5_pipeline(std::vector<std::size_t> size,
                                              std::vector<std::size_t> blocks) {
  namespace st = ordo::stencil;
  st::PipelineSpec p;
  p.size = std::move(size);
  p.blocks = std::move(blocks);
  p.stages.push_back({"relax", {"u"}, {"w"}, st::von_neumann(2, 1), [](const st::StageBlock& b) {
                        st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
                          for (std::size_t k = 0; k < len; ++k)
                            b.out[0][at + std::ptrdiff_t(k)] =
                                jacobi5_point(b.in[0], at + std::ptrdiff_t(k), b.stride[0]);
                        });
                      }});
  p.stages.push_back({"back", {"w"}, {"u"}, {}, [](const st::StageBlock& b) {
                        st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
                          std::memcpy(b.out[0] + at, b.in[0] + at, len * sizeof(double));
                        });
                      }});
  return p;
}

// The single-stage kernel of the same step (a Spec with von_neumann(2, 1)).
inline stencil::Kernel jacobi5_kernel() {
  namespace st = ordo::stencil;
  return [](const st::Block& b) {
    st::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
      for (std::size_t k = 0; k < len; ++k)
        b.out[at + std::ptrdiff_t(k)] = jacobi5_point(b.in[0], at + std::ptrdiff_t(k), b.stride[0]);
    });
  };
}

}  // namespace ordo::test
