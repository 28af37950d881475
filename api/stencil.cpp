// The stencil layer (see <ordo/stencil.hpp> and docs/stencil.md). Built on the public API only.
//
// Locations per block b:
//   main[b]    header (steps done, 8 doubles) + NB padded buffers of prod(B + 2H) doubles:
//              Jacobi NB = time_levels + 1 (rotating; the spare one receives u^{t+1}),
//              Gauss-Seidel NB = 1 (in place).
//   aux[b]     the coefficient grids, padded, written once by set_aux().
//   x[b,o]     for each direction o in {-1,0,1}^d \ 0 that a neighbour n = b+o reads: the
//              time_levels copies of b's edge region facing n, packed.
// Tasks per block b:
//   compute[b] write main[b], read aux[b], read x[n,-o] for every neighbour n = b+o:
//              unpacks each x[n,-o] into the halo of main[b], then runs S kernel steps
//              (S = tb_depth, or fewer for the last group of a run).
//   export[b]  read main[b], write every x[b,o]: packs b's edge regions.
// Order (program order, so the FIFOs need no explicit positions):
//   Jacobi:       every compute, then every export. On x[b,o] the reader compute[b+o] comes
//                 before the writer export[b], so compute of step group k reads the edges of
//                 group k-1: exact Jacobi with no barrier and no global copy.
//   Gauss-Seidel: compute[b], export[b] for each b in lexicographic block order. A neighbour
//                 declared earlier (the low side, for axis-aligned offsets) has already
//                 exported this sweep's values; one declared later still holds the previous
//                 sweep's: exactly the global lexicographic in-place sweep.
// Temporal blocking (papers/004 §7.3): H = h*D. After the halo is filled, step s of the
// group computes the block extended by h*(S-1-s) on every side (clipped to the grid for
// fixed boundaries), so the last step computes exactly the block and every value it reads
// was computed from data of the same group: bit-identical to D = 1.
#include <ordo/stencil.hpp>

#include "api/stencil_geometry.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>
#include <string>
#include <thread>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace ordo::stencil {

namespace {

constexpr std::size_t kHeader = 8;  // doubles before the first buffer (keeps 64-byte strides)

using namespace geometry;

// Validates the spec and fills in defaults. Throws Error.
void check(Spec& s) {
  const std::size_t d = s.size.size();
  if (d < 1 || d > kMaxDims)
    throw Error("stencil '" + s.name + "': " + std::to_string(d) +
                " dimensions; the stencil layer supports 1 to 5");
  if (s.blocks.size() != d)
    throw Error("stencil '" + s.name + "': the block grid has " + std::to_string(s.blocks.size()) +
                " extents but the grid has " + std::to_string(d) + "; give one per dimension");
  for (std::size_t i = 0; i < d; ++i) {
    if (s.size[i] == 0 || s.blocks[i] == 0)
      throw Error("stencil '" + s.name + "': sizes and block counts must be positive");
    if (s.size[i] % s.blocks[i] != 0)
      throw Error("size " + join(s.size) + " is not divisible by blocks " + join(s.blocks) +
                  ": each extent of the size must be a multiple of the block count in that "
                  "dimension");
  }
  if (s.neighbourhood.empty()) s.neighbourhood = von_neumann(d, std::max<int>(1, int(s.halo)));
  std::size_t reach = 0;
  for (const Offset& o : s.neighbourhood) {
    if (o.size() != d)
      throw Error("stencil '" + s.name + "': an offset of the neighbourhood has " +
                  std::to_string(o.size()) + " components; the grid has " + std::to_string(d));
    for (int c : o) reach = std::max<std::size_t>(reach, static_cast<std::size_t>(std::abs(c)));
  }
  if (s.halo == 0) s.halo = std::max<std::size_t>(reach, 1);
  if (s.halo < reach)
    throw Error("stencil '" + s.name + "': halo " + std::to_string(s.halo) +
                " is smaller than the neighbourhood's reach " + std::to_string(reach) +
                "; give a halo of at least " + std::to_string(reach));
  if (s.time_levels < 1 || s.time_levels > kMaxLevels)
    throw Error("stencil '" + s.name + "': time_levels must be 1 to " +
                std::to_string(kMaxLevels));
  if (s.aux_grids > kMaxAux)
    throw Error("stencil '" + s.name + "': at most " + std::to_string(kMaxAux) +
                " coefficient grids");
  if (s.tb_depth < 1) throw Error("temporal blocking depth 0: give a depth of at least 1");
  if (s.traversal == Traversal::gauss_seidel) {
    if (s.stores == Stores::streaming)
      throw Error("stencil '" + s.name +
                  "': streaming stores need Jacobi traversal (a Gauss-Seidel kernel reads its "
                  "output); use Stores::cached");
    if (s.tb_depth != 1)
      throw Error("temporal blocking (depth " + std::to_string(s.tb_depth) +
                  ") needs Jacobi traversal; Gauss-Seidel runs with depth 1");
    if (s.time_levels != 1)
      throw Error("stencil '" + s.name + "': Gauss-Seidel traversal reads one time level");
    if (s.boundary == Boundary::periodic)
      throw Error("stencil '" + s.name +
                  "': Gauss-Seidel traversal needs fixed boundaries (a periodic wrap has no "
                  "lexicographic order)");
    for (const Offset& o : s.neighbourhood) {
      int nz = 0;
      for (int c : o) nz += c != 0;
      if (nz > 1)
        throw Error("stencil '" + s.name +
                    "': Gauss-Seidel traversal needs axis-aligned offsets (von Neumann); a "
                    "diagonal offset would read a later block's updated value");
    }
  }
  const std::size_t H = s.halo * s.tb_depth;
  for (std::size_t i = 0; i < d; ++i) {
    const std::size_t b = s.size[i] / s.blocks[i];
    if (H > b)
      throw Error("halo " + std::to_string(H) +
                  (s.tb_depth > 1 ? " (halo " + std::to_string(s.halo) + " x depth " +
                                        std::to_string(s.tb_depth) + ")"
                                  : std::string()) +
                  " is larger than a block (" + std::to_string(b) + " points in dimension " +
                  std::to_string(i) + "); use fewer blocks or a smaller temporal-blocking depth");
  }
}

// Directions in {-1,0,1}^d \ 0 whose neighbour region the kernel can read (with temporal
// blocking the extended range reads every corner).
std::vector<Ix> directions(const Spec& s) {
  std::set<Ix> out;
  add_directions(s.size.size(), s.neighbourhood, s.tb_depth > 1, out);
  return {out.begin(), out.end()};
}

struct Shared {
  std::size_t steps_per_iteration = 1;  // set between runs only
};

// Size of cpu0's data or unified cache of `level` as the kernel reports it in sysfs (the C
// library's sysconf reads cpuid, which under a hypervisor may describe the host: 320 MiB of
// "L3" on the 2-core VM this was tuned on, whose sysfs says 32 MiB); sysconf when sysfs says
// nothing, `fallback` when neither does.
std::size_t cache_bytes(int level, int sysconf_name, std::size_t fallback) {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(dir + "level"), tf(dir + "type"), sf(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lf >> l) || !(tf >> type) || !(sf >> size) || l != level || type == "Instruction")
      continue;
    std::size_t mult = 1;
    if (!size.empty() && size.back() == 'K') mult = std::size_t{1} << 10;
    if (!size.empty() && size.back() == 'M') mult = std::size_t{1} << 20;
    if (mult != 1) size.pop_back();
    if (size.empty() || size.find_first_not_of("0123456789") != std::string::npos) continue;
    return static_cast<std::size_t>(std::stoull(size)) * mult;
  }
  const long v = sysconf(sysconf_name);
  return v > 0 ? static_cast<std::size_t>(v) : fallback;
}
std::size_t l2_bytes() {
  static const std::size_t v = cache_bytes(2, _SC_LEVEL2_CACHE_SIZE, std::size_t{1} << 20);
  return v;
}
std::size_t llc_bytes() {
  static const std::size_t v = cache_bytes(3, _SC_LEVEL3_CACHE_SIZE, l2_bytes());
  return v;
}
// Default working-set budget of a cache tile: half of a core's share of the last-level cache,
// at least the L2. Measured on the 2-core EPYC (1 MiB L2, 32 MiB L3 victim cache): heat3d
// 384^3 at depth 8 ran 1.1-1.3x faster with 8 MiB tiles than with 1 MiB ones (the L2 forces
// narrow cross-sections whose re-read rim costs more than L3 hits). heat2d cuts no
// cross-section at either budget.
std::size_t default_tile_bytes() {
  static const std::size_t v = [] {
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    return std::max(l2_bytes(), llc_bytes() / (2 * cores));
  }();
  return v;
}

// Streaming pieces: the kernel writes at most this much into the per-thread scratch before
// the layer copies it out (in L2; big enough that a kernel's per-call overhead, e.g. harris'
// recomputed rim, stays small).
constexpr std::size_t kScratchDoubles = std::size_t{128} << 10 >> 3;

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

std::vector<Offset> von_neumann(std::size_t dims, int radius) {
  std::vector<Offset> out;
  for (std::size_t i = 0; i < dims; ++i)
    for (int r = 1; r <= radius; ++r)
      for (int sign : {-1, 1}) {
        Offset o(dims, 0);
        o[i] = sign * r;
        out.push_back(o);
      }
  return out;
}

std::vector<Offset> moore(std::size_t dims, int radius) {
  std::vector<Offset> out;
  Ix lo{}, hi{};
  for (std::size_t i = 0; i < dims; ++i) {
    lo[i] = -radius;
    hi[i] = radius + 1;
  }
  for_each_point(dims, lo, hi, [&](const Ix& x) {
    Offset o(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(dims));
    if (std::any_of(o.begin(), o.end(), [](int c) { return c != 0; })) out.push_back(o);
  });
  return out;
}

struct Stencil::Impl {
  Graph* graph = nullptr;
  Spec spec;
  Kernel kernel;
  std::size_t d = 0, nb = 0, levels = 0;
  Pad pad{1, 0, {1}};
  std::vector<std::size_t> bgrid;  // block counts
  std::vector<std::size_t> bext;   // block extents
  std::vector<Ix> dirs;
  struct Export {
    Ix dir;
    Location<double> loc;
    std::size_t count = 0;  // per level
  };
  struct BlockState {
    Ix coord{};
    std::array<std::int64_t, kMaxDims> origin{};
    Location<double> main, aux;
    std::vector<Export> exports;                      // what this block sends
    std::vector<std::pair<Ix, Location<double>>> in;  // (direction to sender, its export)
  };
  std::vector<BlockState> blocks;
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  bool placed = false;  // blocks put on ranks (first run)

  // Block b and all its locations on rank b * ranks / blocks: contiguous runs of blocks in
  // row-major order, so compute and export of a block run on one rank and only halos travel.
  void place(unsigned ranks);

  std::size_t buffer(std::uint64_t rot, std::ptrdiff_t delta) const {
    const auto n = static_cast<std::int64_t>(nb);
    std::int64_t i = (static_cast<std::int64_t>(rot % nb) + delta) % n;
    return static_cast<std::size_t>(i < 0 ? i + n : i);
  }
  double* buf(std::span<double> main, std::size_t index) const {
    return main.data() + kHeader + index * pad.count;
  }
  const double* buf(std::span<const double> main, std::size_t index) const {
    return main.data() + kHeader + index * pad.count;
  }
  std::size_t block_index(const Ix& c) const { return geometry::block_index(d, bgrid, c); }
  bool neighbour(const Ix& c, const Ix& o, Ix& n) const {
    return block_neighbour(d, bgrid, spec.boundary == Boundary::periodic, c, o, n);
  }

  bool streaming = false;  // Stores resolved at construction
  void declare();
  void compute(Context& ctx, const BlockState& b) const;
  // Runs the kernel over blk's range; with `stream`, piece by piece through the scratch.
  void run_range(Block& blk, bool stream) const;
  void export_edges(Context& ctx, const BlockState& b) const;
  void pack_exports(std::span<const double> main, const BlockState& b,
                    const std::function<std::span<double>(Location<double>)>& out) const;
  // Fills the whole padded buffer from a global array (boundary rule for outside points).
  void fill(double* dst, const BlockState& b, std::span<const double> global, bool is_aux) const;
};

void Stencil::Impl::declare() {
  Graph& g = *graph;
  const std::size_t H = spec.halo * spec.tb_depth;
  pad = Pad(d, H, bext);
  dirs = directions(spec);
  Ix lo{}, hi{};
  for (std::size_t k = 0; k < d; ++k) hi[k] = static_cast<std::ptrdiff_t>(bgrid[k]);
  for_each_point(d, lo, hi, [&](const Ix& c) {
    BlockState b;
    b.coord = c;
    std::string tag;
    for (std::size_t k = 0; k < d; ++k) {
      b.origin[k] = c[k] * static_cast<std::int64_t>(bext[k]);
      tag += (k ? "," : "") + std::to_string(c[k]);
    }
    b.main = g.location<double>(spec.name + "[" + tag + "]", kHeader + nb * pad.count);
    if (spec.aux_grids > 0)
      b.aux = g.location<double>(spec.name + ".aux[" + tag + "]", spec.aux_grids * pad.count);
    for_each_export(pad, static_cast<std::ptrdiff_t>(pad.h), dirs, bgrid,
                    spec.boundary == Boundary::periodic, c,
                    [&](const Ix& o, std::size_t count, const std::string& otag) {
                      Export e;
                      e.dir = o;
                      e.count = count;
                      e.loc = g.location<double>(spec.name + ".x[" + tag + "][" + otag + "]",
                                                 levels * count);
                      b.exports.push_back(e);
                    });
    blocks.push_back(std::move(b));
  });
  // Each block reads, for every direction o with a neighbour n, n's export towards -o.
  for (BlockState& b : blocks)
    for (const Ix& o : dirs) {
      Ix n{};
      if (!neighbour(b.coord, o, n)) continue;
      Ix back{};
      for (std::size_t k = 0; k < d; ++k) back[k] = -o[k];
      for (const Export& e : blocks[block_index(n)].exports)
        if (e.dir == back) b.in.emplace_back(o, e.loc);
    }

  auto declare_compute = [&](std::size_t i) {
    const BlockState& b = blocks[i];
    std::vector<Access> acc{write(b.main)};
    if (spec.aux_grids > 0) acc.push_back(read(b.aux));
    for (const auto& [o, loc] : b.in) acc.push_back(read(loc));
    g.task(spec.name + ".compute[" + std::to_string(i) + "]", std::move(acc),
           [this, i](Context& ctx) { compute(ctx, blocks[i]); });
  };
  auto declare_export = [&](std::size_t i) {
    const BlockState& b = blocks[i];
    if (b.exports.empty()) return;
    std::vector<Access> acc{read(b.main)};
    for (const Export& e : b.exports) acc.push_back(write(e.loc));
    g.task(spec.name + ".export[" + std::to_string(i) + "]", std::move(acc),
           [this, i](Context& ctx) { export_edges(ctx, blocks[i]); });
  };
  if (spec.traversal == Traversal::jacobi) {
    for (std::size_t i = 0; i < blocks.size(); ++i) declare_compute(i);
    for (std::size_t i = 0; i < blocks.size(); ++i) declare_export(i);
  } else {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      declare_compute(i);
      declare_export(i);
    }
  }
}

void Stencil::Impl::compute(Context& ctx, const BlockState& b) const {
  std::span<double> main = ctx.write(b.main);
  auto rot = static_cast<std::uint64_t>(main[0]);
  // Halo fill (Dido's Global Update lands here): every level from the neighbours' exports.
  for (const auto& [o, loc] : b.in) {
    std::span<const double> src = ctx.read(loc);
    Ix lo{}, hi{};
    halo_box(pad, static_cast<std::ptrdiff_t>(pad.h), o, lo, hi);
    const std::size_t n = box_count(d, lo, hi);
    for (std::size_t l = 0; l < levels; ++l)
      unpack_box(pad, buf(main, buffer(rot, -static_cast<std::ptrdiff_t>(l))), lo, hi,
                 src.data() + l * n);
  }
  Block blk;
  blk.dims = d;
  blk.stride = pad.stride;
  blk.origin = b.origin;
  if (spec.aux_grids > 0) {
    std::span<const double> aux = ctx.read(b.aux);
    for (std::size_t a = 0; a < spec.aux_grids; ++a)
      blk.aux[a] = aux.data() + a * pad.count + pad.base;
  }
  const std::size_t S = shared->steps_per_iteration;
  // Step s's range: the block extended by h*(S-1-s), clipped to the grid (fixed boundary).
  std::vector<Ix> slo(S), shi(S);
  for (std::size_t s = 0; s < S; ++s) {
    const auto e = static_cast<std::ptrdiff_t>(spec.halo * (S - 1 - s));
    for (std::size_t k = 0; k < d; ++k) {
      slo[s][k] = -e;
      shi[s][k] = pad.ext[k] + e;
      if (spec.boundary == Boundary::fixed) {  // never compute outside the grid
        slo[s][k] = std::max<std::ptrdiff_t>(slo[s][k], -b.origin[k]);
        shi[s][k] = std::min<std::ptrdiff_t>(
            shi[s][k], static_cast<std::ptrdiff_t>(spec.size[k]) - b.origin[k]);
      }
    }
  }
  auto step = [&](std::size_t s, const Ix& lo, const Ix& hi) {
    for (std::size_t k = 0; k < d; ++k)
      if (hi[k] <= lo[k]) return;
    const std::uint64_t r = rot + s;
    for (std::size_t l = 0; l < levels; ++l)
      blk.in[l] = buf(main, buffer(r, -static_cast<std::ptrdiff_t>(l))) + pad.base;
    blk.out = buf(main, buffer(r, 1)) + pad.base;
    blk.step = r;
    blk.lo = lo;
    blk.hi = hi;
    // Only a one-step group's output leaves the cache before it is read again; with S > 1
    // the last step writes lines the group has already brought into the cache.
    run_range(blk, streaming && S == 1);
  };
  Ix padded{};
  for (std::size_t k = 0; k < d; ++k)
    padded[k] = pad.ext[k] + 2 * static_cast<std::ptrdiff_t>(pad.h);
  const double point_bytes = 8.0 * static_cast<double>(nb + spec.aux_grids);
  const double budget = static_cast<double>(spec.tile_bytes ? spec.tile_bytes : default_tile_bytes());
  const auto lag = static_cast<std::ptrdiff_t>(spec.halo);
  const Tiling t = choose_tiling(d, padded, S, lag, lag, point_bytes, budget);
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
  if (streaming && S == 1) stream_fence();
  main[0] = static_cast<double>(rot + S);
}

void Stencil::Impl::run_range(Block& blk, bool stream) const {
  if (!stream) {
    kernel(blk);
    return;
  }
  // Pieces whose output spans at most kScratchDoubles: rows along dimension d-2 (every
  // slower coordinate fixed), cut along the last dimension too when one row is longer.
  thread_local std::vector<double> scratch;
  if (scratch.size() < kScratchDoubles) scratch.resize(kScratchDoubles);
  const std::size_t last = d - 1;
  const Ix lo = blk.lo, hi = blk.hi;
  double* const out = blk.out;
  const std::ptrdiff_t cap = static_cast<std::ptrdiff_t>(kScratchDoubles);
  const std::ptrdiff_t width = hi[last] - lo[last];
  const std::ptrdiff_t cols = std::min(width, cap);
  const std::ptrdiff_t row_stride = d >= 2 ? pad.stride[last - 1] : 0;
  const std::ptrdiff_t rows_per_piece =
      d >= 2 && width <= cap ? std::max<std::ptrdiff_t>(1, (cap - cols) / row_stride + 1) : 1;
  Ix olo = lo, ohi = hi;  // the outer odometer: every dimension before d-2 one at a time
  const std::size_t row_dim = d >= 2 ? last - 1 : last;
  ohi[row_dim] = olo[row_dim] + 1;
  ohi[last] = olo[last] + 1;
  for_each_point(d, olo, ohi, [&](const Ix& x0) {
    Ix plo = x0, phi = x0;
    for (std::size_t k = 0; k < d; ++k) phi[k] = x0[k] + 1;
    const std::ptrdiff_t r_end = d >= 2 ? hi[row_dim] : 1;
    for (std::ptrdiff_t r = d >= 2 ? lo[row_dim] : 0; r < r_end; r += rows_per_piece) {
      const std::ptrdiff_t nr = std::min(rows_per_piece, r_end - r);
      if (d >= 2) {
        plo[row_dim] = r;
        phi[row_dim] = r + nr;
      }
      for (std::ptrdiff_t c = lo[last]; c < hi[last]; c += cols) {
        const std::ptrdiff_t nc = std::min(cols, hi[last] - c);
        plo[last] = c;
        phi[last] = c + nc;
        std::ptrdiff_t first = 0;  // element offset of the piece's first output point
        for (std::size_t k = 0; k < d; ++k) first += plo[k] * pad.stride[k];
        blk.lo = plo;
        blk.hi = phi;
        // safety: out is made to address the scratch with the block's strides: the kernel
        // writes out[first .. first + (nr-1)*row_stride + nc), i.e. scratch[0 .. that size),
        // which is at most kScratchDoubles. Integer arithmetic, so no out-of-range pointer is
        // formed by pointer arithmetic here.
        blk.out = reinterpret_cast<double*>(reinterpret_cast<std::uintptr_t>(scratch.data()) -
                                            static_cast<std::uintptr_t>(first) * sizeof(double));
        kernel(blk);
        for (std::ptrdiff_t i = 0; i < nr; ++i)
          stream_copy(out + first + i * row_stride, scratch.data() + i * row_stride,
                      static_cast<std::size_t>(nc));
      }
    }
  });
  blk.lo = lo;
  blk.hi = hi;
  blk.out = out;
}

void Stencil::Impl::pack_exports(
    std::span<const double> main, const BlockState& b,
    const std::function<std::span<double>(Location<double>)>& out) const {
  const auto rot = static_cast<std::uint64_t>(main[0]);
  for (const Export& e : b.exports) {
    std::span<double> dst = out(e.loc);
    Ix lo{}, hi{};
    send_box(pad, static_cast<std::ptrdiff_t>(pad.h), e.dir, lo, hi);
    for (std::size_t l = 0; l < levels; ++l)
      pack_box(pad, buf(main, buffer(rot, -static_cast<std::ptrdiff_t>(l))), lo, hi,
               dst.data() + l * e.count);
  }
}

void Stencil::Impl::export_edges(Context& ctx, const BlockState& b) const {
  pack_exports(ctx.read(b.main), b, [&](Location<double> l) { return ctx.write(l); });
}

void Stencil::Impl::fill(double* dst, const BlockState& b, std::span<const double> global,
                         bool is_aux) const {
  Ix lo{}, hi{};
  const auto H = static_cast<std::ptrdiff_t>(pad.h);
  for (std::size_t k = 0; k < d; ++k) {
    lo[k] = -H;
    hi[k] = pad.ext[k] + H;
  }
  std::array<std::int64_t, kMaxDims> gc{};
  for_each_point(d, lo, hi, [&](const Ix& x) {
    bool inside = true;
    std::size_t gi = 0;
    for (std::size_t k = 0; k < d; ++k) {
      std::int64_t v = b.origin[k] + x[k];
      const auto n = static_cast<std::int64_t>(spec.size[k]);
      gc[k] = v;
      if (v < 0 || v >= n) {
        if (spec.boundary == Boundary::periodic)
          v = ((v % n) + n) % n;
        else
          inside = false;
      }
      gi = gi * spec.size[k] + static_cast<std::size_t>(v < 0 ? 0 : v >= n ? 0 : v);
    }
    double value;
    if (inside)
      value = global[gi];
    else if (is_aux || !spec.fixed_value)
      value = 0.0;
    else
      value = spec.fixed_value(Coord(gc.data(), d));
    dst[pad.at(x)] = value;
  });
}

Stencil::Stencil(Graph& graph, Spec spec, Kernel kernel) : impl_(std::make_unique<Impl>()) {
  check(spec);
  if (!kernel) throw Error("stencil '" + spec.name + "': give a kernel");
  Impl& m = *impl_;
  m.graph = &graph;
  m.spec = std::move(spec);
  m.kernel = std::move(kernel);
  m.d = m.spec.size.size();
  m.levels = m.spec.time_levels;
  m.nb = m.spec.traversal == Traversal::jacobi ? m.levels + 1 : 1;
  m.bgrid = m.spec.blocks;
  for (std::size_t k = 0; k < m.d; ++k) m.bext.push_back(m.spec.size[k] / m.spec.blocks[k]);
  m.declare();
  m.streaming = m.spec.traversal == Traversal::jacobi && m.spec.stores == Stores::streaming;
}

Stencil::~Stencil() = default;
Stencil::Stencil(Stencil&&) noexcept = default;
Stencil& Stencil::operator=(Stencil&&) noexcept = default;

const Spec& Stencil::spec() const { return impl_->spec; }

std::size_t Stencil::points() const {
  std::size_t n = 1;
  for (std::size_t s : impl_->spec.size) n *= s;
  return n;
}

void Stencil::set(std::span<const double> global, std::size_t level) {
  Impl& m = *impl_;
  if (global.size() != points())
    throw Error("stencil '" + m.spec.name + "': set() got " + std::to_string(global.size()) +
                " values for a grid of " + join(m.spec.size) + " = " + std::to_string(points()));
  if (level >= m.levels)
    throw Error("stencil '" + m.spec.name + "': level " + std::to_string(level) +
                " out of range; the stencil has " + std::to_string(m.levels) + " time level(s)");
  for (const auto& b : m.blocks) {
    std::span<double> main = m.graph->data(b.main);
    const auto rot = static_cast<std::uint64_t>(main[0]);
    m.fill(m.buf(main, m.buffer(rot, -static_cast<std::ptrdiff_t>(level))), b, global, false);
    // The spare buffer of Jacobi needs the fixed boundary too; its interior is overwritten.
    if (level == 0 && m.nb > m.levels) m.fill(m.buf(main, m.buffer(rot, 1)), b, global, false);
  }
  for (const auto& b : m.blocks)
    m.pack_exports(m.graph->data(b.main), b, [&](Location<double> l) { return m.graph->data(l); });
}

void Stencil::set_aux(std::size_t index, std::span<const double> global) {
  Impl& m = *impl_;
  if (index >= m.spec.aux_grids)
    throw Error("stencil '" + m.spec.name + "': coefficient grid " + std::to_string(index) +
                " out of range; the spec declares " + std::to_string(m.spec.aux_grids));
  if (global.size() != points())
    throw Error("stencil '" + m.spec.name + "': set_aux() got " + std::to_string(global.size()) +
                " values for a grid of " + std::to_string(points()));
  for (const auto& b : m.blocks)
    m.fill(m.graph->data(b.aux).data() + index * m.pad.count, b, global, true);
}

std::vector<double> Stencil::get(std::size_t level) const {
  const Impl& m = *impl_;
  if (level >= m.levels)
    throw Error("stencil '" + m.spec.name + "': level " + std::to_string(level) +
                " out of range; the stencil has " + std::to_string(m.levels) + " time level(s)");
  std::vector<double> out(points());
  for (const auto& b : m.blocks) {
    std::span<const double> cmain = std::as_const(*m.graph).data(b.main);
    std::span<double> main(const_cast<double*>(cmain.data()), cmain.size());  // safety: read
    const auto rot = static_cast<std::uint64_t>(main[0]);
    const double* src = m.buf(main, m.buffer(rot, -static_cast<std::ptrdiff_t>(level)));
    Ix lo{}, hi = m.pad.ext;
    hi[m.d - 1] = 1;
    const std::size_t len = static_cast<std::size_t>(m.pad.ext[m.d - 1]);
    for_each_point(m.d, lo, hi, [&](const Ix& x) {
      std::size_t gi = 0;
      for (std::size_t k = 0; k < m.d; ++k)
        gi = gi * m.spec.size[k] + static_cast<std::size_t>(b.origin[k] + x[k]);
      std::memcpy(&out[gi], src + m.pad.at(x), len * sizeof(double));
    });
  }
  return out;
}

void Stencil::Impl::place(unsigned ranks) {
  // A graph already run (another stencil of it ran first) keeps its placement: home_rank()
  // still tells where each block is.
  if (ranks == 1 || graph->iterations_done() > 0) {
    placed = true;
    return;
  }
  if (ranks > blocks.size())
    throw Error("stencil '" + spec.name + "': " + std::to_string(blocks.size()) +
                " block(s) (" + join(spec.blocks) + ") cannot give each of the " +
                std::to_string(ranks) + " ranks a block; use at least " + std::to_string(ranks) +
                " blocks or fewer ranks");
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const unsigned r = block_home(i, blocks.size(), ranks);
    BlockState& b = blocks[i];
    graph->set_home_rank(b.main, r);
    if (spec.aux_grids > 0) graph->set_home_rank(b.aux, r);
    for (const Export& e : b.exports) graph->set_home_rank(e.loc, r);
  }
  placed = true;
}

std::size_t Stencil::block_count() const { return impl_->blocks.size(); }

unsigned Stencil::home_rank(std::size_t block) const {
  const Impl& m = *impl_;
  if (block >= m.blocks.size())
    throw Error("stencil '" + m.spec.name + "': block " + std::to_string(block) +
                " out of range; the stencil has " + std::to_string(m.blocks.size()));
  return m.graph->home_rank(m.blocks[block].main);
}

RunStats Stencil::run(Runtime& runtime, std::uint64_t steps) {
  Impl& m = *impl_;
  RunStats total;
  if (!m.placed) m.place(runtime.ranks());
  if (steps == 0) return total;
  const std::uint64_t D = m.spec.tb_depth;
  // Written only here, between runs; Runtime::run publishes it to the workers.
  if (steps >= D) {
    m.shared->steps_per_iteration = D;
    RunStats s = runtime.run(*m.graph, steps / D);
    total.iterations += s.iterations * D;
    total.seconds += s.seconds;
  }
  if (steps % D != 0) {
    m.shared->steps_per_iteration = steps % D;
    RunStats s = runtime.run(*m.graph, 1);
    total.iterations += steps % D;
    total.seconds += s.seconds;
  }
  return total;
}

std::uint64_t Stencil::steps_done() const {
  const Impl& m = *impl_;
  return static_cast<std::uint64_t>(std::as_const(*m.graph).data(m.blocks[0].main)[0]);
}

std::vector<std::vector<double>> reference(const Spec& spec_in, const Kernel& kernel,
                                           std::vector<std::vector<double>> levels,
                                           const std::vector<std::vector<double>>& aux,
                                           std::uint64_t steps) {
  Spec spec = spec_in;
  spec.blocks.assign(spec.size.size(), 1);
  spec.tb_depth = 1;
  check(spec);
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
      p[pad.at(x)] = inside ? g[gi]
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
    for_each_point(d, lo, pad.ext, [&](const Ix& x) { g[k++] = p[pad.at(x)]; });
    return g;
  };
  const bool jacobi = spec.traversal == Traversal::jacobi;
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
