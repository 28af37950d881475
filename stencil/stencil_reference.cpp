// stencil::reference: the sequential meaning of a Spec and its kernel over one padded global
// array (no blocks, no exchange, no temporal blocking), for the apps' --verify and the tests.
// Built on the public API only.
#include <algorithm>
#include <utility>

#include "stencil/stencil_impl.hpp"

namespace ordo::stencil {

using core::Ix;
using geometry::for_each_point;
using geometry::Pad;

std::vector<std::vector<double>> reference(const Spec& spec_in, const Kernel& kernel,
                                           std::vector<std::vector<double>> levels,
                                           const std::vector<std::vector<double>>& aux,
                                           std::uint64_t steps) {
  Spec spec = spec_in;
  spec.blocks.assign(spec.size.size(), 1);
  spec.tb_depth = 1;
  const core::BlockedGrid whole("reference of stencil '" + spec.name + "'", spec.size,
                                spec.blocks, spec.boundary == Boundary::periodic);
  spec = with_defaults(std::move(spec));
  validate(spec, whole);
  const std::size_t d = spec.size.size();
  const std::size_t L = spec.time_levels;
  if (levels.size() != L || aux.size() != spec.aux_grids)
    throw Error("reference: give " + std::to_string(L) + " time level(s) and " +
                std::to_string(spec.aux_grids) + " coefficient grid(s)");
  Pad pad(d, spec.halo, spec.size);
  const auto H = static_cast<std::ptrdiff_t>(spec.halo);
  Ix plo{}, phi{};
  for (std::size_t k = 0; k < d; ++k) {
    plo[k] = -H;
    phi[k] = pad.ext[k] + H;
  }
  // Padded copy of a global grid: inside points copied; outside points fixed or wrapped.
  auto padded = [&](const std::vector<double>& g, bool is_aux) {
    std::vector<double> p(pad.count);
    std::array<std::int64_t, kMaxDims> gc{};
    for_each_point(d, plo, phi, [&](const Ix& x) {
      bool inside = true;
      std::size_t gi = 0;
      for (std::size_t k = 0; k < d; ++k) {
        std::int64_t v = x[k];
        const auto n = static_cast<std::int64_t>(spec.size[k]);
        gc[k] = v;
        if (v < 0 || v >= n) {
          if (spec.boundary == Boundary::periodic)
            v = ((v % n) + n) % n;
          else
            inside = false;
        }
        if (inside) gi = gi * spec.size[k] + static_cast<std::size_t>(v);
      }
      p[pad.index_of(x)] = inside                          ? g[gi]
                           : (is_aux || !spec.fixed_value) ? 0.0
                                                           : spec.fixed_value(Coord(gc.data(), d));
    });
    return p;
  };
  auto unpadded = [&](const std::vector<double>& p) {
    std::vector<double> g(1);
    std::size_t n = 1;
    for (std::size_t s : spec.size) n *= s;
    g.resize(n);
    Ix lo{};
    std::size_t k = 0;
    for_each_point(d, lo, pad.ext, [&](const Ix& x) { g[k++] = p[pad.index_of(x)]; });
    return g;
  };
  const bool jacobi = spec.traversal != Traversal::gauss_seidel;  // in place: the same results
  std::vector<std::vector<double>> bufs;  // bufs[0] newest
  for (auto& l : levels) bufs.push_back(padded(l, false));
  if (jacobi) bufs.push_back(bufs[0]);  // spare: its boundary is the fixed one
  std::vector<std::vector<double>> auxp;
  for (const auto& a : aux) auxp.push_back(padded(a, true));
  Block blk;
  blk.dims = d;
  blk.stride = pad.stride;
  for (std::size_t k = 0; k < d; ++k) blk.hi[k] = pad.ext[k];
  for (std::size_t a = 0; a < auxp.size(); ++a) blk.aux[a] = auxp[a].data() + pad.base;
  for (std::uint64_t t = 0; t < steps; ++t) {
    if (spec.boundary == Boundary::periodic)  // refresh the wrapped ghosts of the inputs
      for (std::size_t l = 0; l < L; ++l) {
        std::vector<double> g = unpadded(bufs[l]);
        bufs[l] = padded(g, false);
      }
    for (std::size_t l = 0; l < L; ++l) blk.in[l] = bufs[l].data() + pad.base;
    blk.out = jacobi ? bufs[L].data() + pad.base : bufs[0].data() + pad.base;
    blk.step = t;
    kernel(blk);
    if (jacobi) std::rotate(bufs.begin(), bufs.end() - 1, bufs.end());
  }
  std::vector<std::vector<double>> out;
  for (std::size_t l = 0; l < L; ++l) out.push_back(unpadded(bufs[l]));
  return out;
}

}  // namespace ordo::stencil
