// What a stencil's compute task does (see stencil_impl.hpp): unpack the neighbours' halos,
// then run the group's kernel steps over the block, cut into cache tiles (docs/stencil.md,
// "Cache tiles") and, with streaming stores, into scratch pieces copied out non-temporally
// ("Memory traffic of one step"). Built on the public API only.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <ordo/bench.hpp>

#include "stencil/stencil_impl.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace ordo::stencil {

namespace {

using core::Ix;
using geometry::for_each_point;

// Streaming pieces: the kernel writes at most this much into the per-thread scratch before
// the layer copies it out (in L2; big enough that a kernel's per-call overhead, e.g. harris'
// recomputed rim, stays small).
constexpr std::size_t kScratchDoubles = std::size_t{128} << 10 >> 3;

// Cache tiles of one block (docs/stencil.md, "Cache tiles"). Dimension 0 is cut into slabs
// of `slab` planes, run as a wavefront (innermost); dimensions 1 .. dims-1 are cut into tiles
// of `edge` points (outer loops). With S > 1 steps per group every cut is skewed: step s of
// tile i covers [q0 + i*edge - s*lag, q0 + (i+1)*edge - s*lag) along each cut dimension.
struct Tiling {
  std::size_t dims = 0;  // 0: the block is one tile; else dimensions 0 .. dims-1 are cut
  std::ptrdiff_t slab = 0, edge = 0;
};

// The cut whose working set fits in `budget`: while a tile runs its S steps the cache holds
// about slab + S*lag + 2h planes (the wavefront's skew and the stencil's reach) of the tile's
// cross-section, for every buffer and coefficient grid (`point_bytes` per point). Cuts as few
// (slowest) dimensions as allows an edge of at least max(S*lag, 8): below that the re-read
// rim of every tile outweighs it. One step (S = 1) gains from the cut only when the 2h+1
// planes the stencil reaches do not fit (3-D and up).
Tiling choose_tiling(std::size_t d, const Ix& padded, std::size_t steps, std::ptrdiff_t lag,
                     std::ptrdiff_t h, double point_bytes, double budget) {
  const std::ptrdiff_t rim = steps > 1 ? static_cast<std::ptrdiff_t>(steps) * lag : 0;
  double whole = point_bytes;
  for (std::size_t k = 0; k < d; ++k) whole *= static_cast<double>(padded[k]);
  if (whole <= budget) return {};
  if (d == 1) {  // no cross-section: slabs of points
    const auto slab = static_cast<std::ptrdiff_t>(budget / point_bytes) - rim - 2 * h;
    if (steps <= 1) return {};
    return {1, std::max<std::ptrdiff_t>({slab, rim, 1}), 0};
  }
  const std::ptrdiff_t slab = 1;
  const double planes = static_cast<double>(slab + rim + 2 * h);
  const std::ptrdiff_t min_edge = std::max<std::ptrdiff_t>(rim, 8);
  for (std::size_t m = 1; m <= d; ++m) {
    double rest = point_bytes * planes;
    for (std::size_t k = m; k < d; ++k) rest *= static_cast<double>(padded[k]);
    if (m == 1) {
      if (rest <= budget) return steps > 1 ? Tiling{1, slab, 0} : Tiling{};
      continue;
    }
    const auto side = static_cast<std::ptrdiff_t>(
        std::floor(std::pow(budget / rest, 1.0 / static_cast<double>(m - 1))));
    if (side - rim - 2 * h >= min_edge) return {m, slab, side - rim - 2 * h};
  }
  return {d, slab, std::max<std::ptrdiff_t>(rim, 1)};  // nothing fits: small tiles (tests)
}

}  // namespace

namespace detail_stencil {

// Copies n doubles with non-temporal stores (no write-allocate read of dst's lines). The
// caller issues the fence (stream_fence) before the data may be read by another thread.
void stream_copy(double* dst, const double* src, std::size_t n) {
#if defined(__SSE2__) && defined(__x86_64__)
  std::size_t i = 0;
  if (n > 0 && reinterpret_cast<std::uintptr_t>(dst) % 16 != 0) {
    _mm_stream_si64(reinterpret_cast<long long*>(dst), std::bit_cast<long long>(src[0]));
    i = 1;
  }
  for (; i + 2 <= n; i += 2) _mm_stream_pd(dst + i, _mm_loadu_pd(src + i));
  if (i < n)
    _mm_stream_si64(reinterpret_cast<long long*>(dst + i), std::bit_cast<long long>(src[i]));
#else
  std::memcpy(dst, src, n * sizeof(double));
#endif
}
// Orders the streaming stores before the task's release of the location (the engine's
// release is an ordinary release store, which does not order non-temporal stores on x86).
void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

namespace {

class Scratch {
 public:
  double* get(std::size_t n) {
    if (n > size_) {
      data_.reset(new double[n]);  // default-initialised: untouched until used
      size_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<double[]> data_;
  std::size_t size_ = 0;
};

}  // namespace

double* thread_scratch(std::size_t slot, std::size_t n) {
  thread_local std::vector<std::unique_ptr<Scratch>> s;
  while (s.size() <= slot) s.push_back(std::make_unique<Scratch>());
  return s[slot]->get(n);
}

}  // namespace detail_stencil

std::size_t default_tile_bytes() {
  static const std::size_t v = [] {
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const bench::CacheSizes& c = bench::cache_sizes();
    const std::size_t l2 = c.l2 ? c.l2 : std::size_t{1} << 20;
    return std::max(l2, c.last_level / (2 * cores));
  }();
  return v;
}

void Stencil::Impl::compute(Context& ctx, std::size_t b, ExportStage& stage) const {
  const core::BlockGeom& geo = grid.block(b);
  const geometry::Pad& pad = geo.pad;
  std::span<double> main = ctx.write(locs[b].main);
  auto rot = static_cast<std::uint64_t>(main[0]);
  const std::size_t S = shared->steps_per_iteration;
  // Halo fill (Dido's Global Update lands here): every level from the neighbours' exports,
  // except the faces the in-place sweep unpacks as it goes.
  std::vector<LateFace> late;
  for (const core::Import& i : halo.imports[b]) {
    std::span<const double> src = ctx.read(i.loc);
    if (plan.is_late_face(i.dir, S)) {
      late.push_back({&i, src.data()});
      continue;
    }
    for (std::size_t l = 0; l < levels; ++l) {
      const auto delta = -static_cast<std::ptrdiff_t>(l);
      grid.unpack(b, halo, i, src.data() + l * i.count, level_data(b, main, rot, delta),
                  level_side(b, main, rot, delta));
    }
  }
  Block blk;
  blk.dims = dims;
  blk.stride = pad.stride;
  blk.layout.next_plane = pad.stride[0];
  blk.origin = geo.origin;
  // The group's last step contributes to the reductions (its range is the block).
  detail::Partials part = reds.partials({}, rot + S - 1);
  if (!reds.empty()) blk.partials = &part;
  auto contribute = [&] {
    if (!reds.empty())
      reds.contribute(ctx, static_cast<std::uint32_t>(b), part, {}, b, "step", rot + S - 1,
                      "the kernel must call Block::contribute(r, value) for each reduction r "
                      "in every call where Block::contributes()");
  };
  if (spec.aux_grids > 0) {
    std::span<const double> aux = ctx.read(locs[b].aux);
    for (std::size_t a = 0; a < spec.aux_grids; ++a)
      blk.aux[a] = aux.data() + a * pad.count + pad.base;
  }
  // Step s's range: the block extended by h*(S-1-s), clipped to the grid (fixed boundary).
  std::vector<Ix> slo(S), shi(S);
  for (std::size_t s = 0; s < S; ++s) {
    const auto e = static_cast<std::ptrdiff_t>(spec.halo * (S - 1 - s));
    for (std::size_t k = 0; k < dims; ++k) {
      slo[s][k] = -e;
      shi[s][k] = pad.ext[k] + e;
      if (spec.boundary == Boundary::fixed) {  // never compute outside the grid
        slo[s][k] = std::max<std::ptrdiff_t>(slo[s][k], -geo.origin[k]);
        shi[s][k] = std::min<std::ptrdiff_t>(
            shi[s][k], static_cast<std::ptrdiff_t>(spec.size[k]) - geo.origin[k]);
      }
    }
  }
  auto step = [&](std::size_t s, const Ix& lo, const Ix& hi) {
    for (std::size_t k = 0; k < dims; ++k)
      if (hi[k] <= lo[k]) return;
    const std::uint64_t r = rot + s;
    for (std::size_t l = 0; l < levels; ++l)
      blk.in[l] = level_data(b, main, r, -static_cast<std::ptrdiff_t>(l)) + pad.base;
    blk.out = level_data(b, main, r, 1) + pad.base;
    blk.step = r;
    blk.lo = lo;
    blk.hi = hi;
    // Only a one-step group's output leaves the cache before it is read again; with S > 1
    // the last step writes lines the group has already brought into the cache.
    run_range(b, blk, streaming && S == 1);
  };
  if (spec.traversal == Traversal::jacobi_in_place) {
    run_in_place(b, main, blk, rot, S, slo, shi, late, stage);
    main[0] = static_cast<double>(rot + S);
    contribute();
    return;
  }
  Ix padded{};
  for (std::size_t k = 0; k < dims; ++k) padded[k] = pad.padded(k);
  const double point_bytes = 8.0 * static_cast<double>(buffer_count + spec.aux_grids);
  const double budget = static_cast<double>(tile_budget());
  const auto lag = static_cast<std::ptrdiff_t>(spec.halo);
  const Tiling t = choose_tiling(dims, padded, S, lag, lag, point_bytes, budget);
  if (t.dims == 0) {
    for (std::size_t s = 0; s < S; ++s) step(s, slo[s], shi[s]);
  } else {
    // Skewed tiles (time skewing; one step: plain cache blocking). Step s of a tile covers the
    // skewed coordinates q = x + s*lag in [q0 + i*e, q0 + (i+1)*e) along each cut dimension;
    // all S steps of a tile run before the next tile, dimension 0 innermost (a wavefront
    // through the slabs), the cross-section tiles outside it. Why that is exact with the
    // rotating buffers: step s at x reads step s-1's values at x' <= x + h (componentwise)
    // and overwrites the buffer step s-1 read there. Since lag >= h, x' + (s-1)*lag <=
    // x + s*lag, so every such x' lies in the same tile (done earlier, at step s-1) or in a
    // tile whose index is smaller or equal along every cut dimension, which any nesting of
    // the tile loops runs earlier: each value is computed from the same inputs as without
    // tiles, so the bits are those of depth 1.
    Ix q0{}, count{}, edge{};
    for (std::size_t k = 0; k < t.dims; ++k) {
      edge[k] = k == 0 ? t.slab : t.edge;
      std::ptrdiff_t lo = slo[0][k], hi = shi[0][k];
      for (std::size_t s = 0; s < S; ++s) {
        lo = std::min(lo, slo[s][k] + static_cast<std::ptrdiff_t>(s) * lag);
        hi = std::max(hi, shi[s][k] + static_cast<std::ptrdiff_t>(s) * lag);
      }
      q0[k] = lo;
      count[k] = (hi - lo + edge[k] - 1) / edge[k];
    }
    auto tile = [&](const Ix& i) {
      for (std::size_t s = 0; s < S; ++s) {
        Ix lo = slo[s], hi = shi[s];
        const std::ptrdiff_t shift = static_cast<std::ptrdiff_t>(s) * lag;
        for (std::size_t k = 0; k < t.dims; ++k) {
          lo[k] = std::max(lo[k], q0[k] + i[k] * edge[k] - shift);
          hi[k] = std::min(hi[k], q0[k] + (i[k] + 1) * edge[k] - shift);
        }
        step(s, lo, hi);
      }
    };
    // Cross-section tiles (dimensions 1 .. dims-1) outside, the slabs of dimension 0 inside.
    Ix clo{}, chi{};
    for (std::size_t k = 1; k < t.dims; ++k) chi[k - 1] = count[k];
    const std::size_t cdims = t.dims - 1;
    auto wavefront = [&](const Ix& c) {
      Ix i{};
      for (std::size_t k = 1; k < t.dims; ++k) i[k] = c[k - 1];
      for (i[0] = 0; i[0] < count[0]; ++i[0]) tile(i);
    };
    if (cdims == 0)
      wavefront(clo);
    else
      for_each_point(cdims, clo, chi, wavefront);
  }
  if (streaming && S == 1) detail_stencil::stream_fence();
  main[0] = static_cast<double>(rot + S);
  contribute();
}

void Stencil::Impl::run_range(std::size_t b, Block& blk, bool stream) const {
  const geometry::Pad& pad = grid.block(b).pad;
  if (!stream) {
    kernel(blk);
    return;
  }
  // Pieces whose output spans at most kScratchDoubles: rows along dimension d-2 (every
  // slower coordinate fixed), cut along the last dimension too when one row is longer.
  double* const scratch = detail_stencil::thread_scratch(0, kScratchDoubles);
  const std::size_t last = dims - 1;
  const Ix lo = blk.lo, hi = blk.hi;
  double* const out = blk.out;
  const std::ptrdiff_t cap = static_cast<std::ptrdiff_t>(kScratchDoubles);
  const std::ptrdiff_t width = hi[last] - lo[last];
  const std::ptrdiff_t cols = std::min(width, cap);
  const std::ptrdiff_t row_stride = dims >= 2 ? pad.stride[last - 1] : 0;
  const std::ptrdiff_t rows_per_piece =
      dims >= 2 && width <= cap ? std::max<std::ptrdiff_t>(1, (cap - cols) / row_stride + 1) : 1;
  Ix olo = lo, ohi = hi;  // the outer odometer: every dimension before d-2 one at a time
  const std::size_t row_dim = dims >= 2 ? last - 1 : last;
  ohi[row_dim] = olo[row_dim] + 1;
  ohi[last] = olo[last] + 1;
  for_each_point(dims, olo, ohi, [&](const Ix& x0) {
    Ix plo = x0, phi = x0;
    for (std::size_t k = 0; k < dims; ++k) phi[k] = x0[k] + 1;
    const std::ptrdiff_t r_end = dims >= 2 ? hi[row_dim] : 1;
    for (std::ptrdiff_t r = dims >= 2 ? lo[row_dim] : 0; r < r_end; r += rows_per_piece) {
      const std::ptrdiff_t nr = std::min(rows_per_piece, r_end - r);
      if (dims >= 2) {
        plo[row_dim] = r;
        phi[row_dim] = r + nr;
      }
      for (std::ptrdiff_t c = lo[last]; c < hi[last]; c += cols) {
        const std::ptrdiff_t nc = std::min(cols, hi[last] - c);
        plo[last] = c;
        phi[last] = c + nc;
        std::ptrdiff_t first = 0;  // element offset of the piece's first output point
        for (std::size_t k = 0; k < dims; ++k) first += plo[k] * pad.stride[k];
        blk.lo = plo;
        blk.hi = phi;
        // safety: out is made to address the scratch with the block's strides: the kernel
        // writes out[first .. first + (nr-1)*row_stride + nc), i.e. scratch[0 .. that size),
        // which is at most kScratchDoubles. Integer arithmetic, so no out-of-range pointer is
        // formed by pointer arithmetic here.
        blk.out = reinterpret_cast<double*>(reinterpret_cast<std::uintptr_t>(scratch) -
                                            static_cast<std::uintptr_t>(first) * sizeof(double));
        kernel(blk);
        for (std::ptrdiff_t i = 0; i < nr; ++i)
          detail_stencil::stream_copy(out + first + i * row_stride, scratch + i * row_stride,
                      static_cast<std::size_t>(nc));
      }
    }
  });
  blk.lo = lo;
  blk.hi = hi;
  blk.out = out;
}

}  // namespace ordo::stencil
