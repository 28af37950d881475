// Pipelines of the stencil layer (see <ordo/stencil.hpp>, "Pipelines", and docs/stencil.md).
// Built on the public API only, like stencil.cpp.
//
// Sequential meaning (the oracle): every iteration runs the stages in list order over global
// arrays; a read outside the grid gives the fixed value or wraps; grids keep their values
// between iterations. The graph below computes exactly that.
//
// Locations, for every grid g and block b:
//   g[b]        the padded block of g: prod(B + 2H) doubles, H the largest halo of any grid,
//               so every grid has the same layout and one offset addresses all of them.
//   g.x[b][o]   only for a grid some stage reads with a neighbourhood (halo h_g > 0) and that
//               a stage writes (inputs never change: their halos are filled by set()): b's
//               edge region of width h_g facing the neighbour n = b+o, for every direction o
//               the readers' offsets reach (faces only for von Neumann, corners for Moore).
// Tasks, per iteration, in this (program) order:
//   stage s, block b:  write g[b] and every g.x[b][o] for each g that s writes, read g'[b]
//                      for each g' that s reads: runs the kernel over the block, then packs
//                      the edges of the grids it wrote into their exports.
//   import g, block b: write g[b], read g.x[n][-o] for every neighbour n = b+o: unpacks the
//                      neighbours' edges into the halo of g[b]. Declared just before the
//                      first stage after g's writer that reads g with a neighbourhood, or after
//                      the last stage when only earlier stages do (a feedback read, seen in the
//                      next iteration).
// Why program order gives the sequential result (FIFO of each location = declaration order):
//   * g[b]: readers declared after the writer stage see this iteration's values; readers
//     declared before it (feedback) see the previous iteration's, and the writer waits for
//     them (write after read). A neighbourhood reader declared after the import sees the halo
//     of this iteration; pointwise readers between the writer and the import do not wait for
//     the neighbours at all.
//   * g.x[b][o]: written by the writer stage of b, read by the import of n, then written again
//     by the writer in the next iteration: the import always reads the edges of the same
//     iteration as the writer it follows.
//   * A halo point outside a fixed boundary has no neighbour: it keeps the fixed value that
//     construction and set() put there, and no task writes it.
// Each block task depends only on the blocks it reads (its own block of every grid, plus the
// neighbours' edges through the import), so blocks of later stages start as soon as those are
// done: no barrier between stages.
#include <ordo/stencil.hpp>

#include "api/stencil_geometry.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace ordo::stencil {

namespace {

using namespace geometry;

}  // namespace

struct Pipeline::Impl {
  Graph* graph = nullptr;
  PipelineSpec spec;
  std::size_t d = 0;
  Pad pad;
  std::vector<std::size_t> bgrid, bext;

  struct Export {
    Ix dir{};
    Location<double> loc;
    std::size_t count = 0;
  };
  struct Grid {
    std::string name;
    std::ptrdiff_t writer = -1;  // stage index; -1 for an input
    std::size_t halo = 0;
    std::set<Ix> dirs;                    // directions its neighbourhood readers reach
    std::vector<Location<double>> block;  // per block: the padded block
    std::vector<std::vector<Export>> exports;  // per block: what it sends
    std::vector<std::vector<std::pair<Ix, Location<double>>>> imports;  // per block
  };
  std::vector<Grid> grids;
  std::map<std::string, std::size_t> index;  // grid name -> grids[]
  struct StageIx {
    std::vector<std::size_t> reads, writes;
  };
  std::vector<StageIx> stages;
  struct BlockAt {
    Ix coord{};
    std::array<std::int64_t, kMaxDims> origin{};
    std::string tag;
  };
  std::vector<BlockAt> blocks;

  std::size_t block_index(const Ix& c) const { return geometry::block_index(d, bgrid, c); }
  bool neighbour(const Ix& c, const Ix& o, Ix& n) const {
    return block_neighbour(d, bgrid, spec.boundary == Boundary::periodic, c, o, n);
  }
  const Grid& grid(const std::string& name) const {
    auto it = index.find(name);
    if (it == index.end())
      throw Error("pipeline '" + spec.name + "': no grid '" + name +
                  "'; the grids are the inputs and the stages' writes");
    return grids[it->second];
  }

  void check();
  void declare();
  void run_stage(Context& ctx, std::size_t s, std::size_t b) const;
  void import_halo(Context& ctx, std::size_t g, std::size_t b) const;
  // Fills the whole padded block b of grid g from a global array (nullptr: zeros), the
  // boundary rule for points outside the grid.
  void fill(double* dst, const Grid& g, std::size_t b, const double* global) const;
};

void Pipeline::Impl::check() {
  const std::string who = "pipeline '" + spec.name + "'";
  d = spec.size.size();
  if (d < 1 || d > kMaxDims)
    throw Error(who + ": " + std::to_string(d) +
                " dimensions; the stencil layer supports 1 to 5");
  if (spec.blocks.size() != d)
    throw Error(who + ": the block grid has " + std::to_string(spec.blocks.size()) +
                " extents but the grid has " + std::to_string(d) + "; give one per dimension");
  for (std::size_t i = 0; i < d; ++i) {
    if (spec.size[i] == 0 || spec.blocks[i] == 0)
      throw Error(who + ": sizes and block counts must be positive");
    if (spec.size[i] % spec.blocks[i] != 0)
      throw Error("size " + join(spec.size) + " is not divisible by blocks " + join(spec.blocks) +
                  ": each extent of the size must be a multiple of the block count in that "
                  "dimension");
  }
  if (spec.stages.empty()) throw Error(who + ": give at least one stage");
  auto add_grid = [&](const std::string& name, std::ptrdiff_t writer) {
    if (name.empty()) throw Error(who + ": a grid needs a name");
    if (index.count(name))
      throw Error(who + ": grid '" + name + "' is " +
                  (grids[index[name]].writer < 0 ? std::string("an input")
                                                 : "written by stage '" +
                                                       spec.stages[static_cast<std::size_t>(
                                                           grids[index[name]].writer)].name + "'") +
                  " already; each grid is an input or written by exactly one stage");
    index[name] = grids.size();
    Grid g;
    g.name = name;
    g.writer = writer;
    grids.push_back(std::move(g));
  };
  for (const std::string& in : spec.inputs) add_grid(in, -1);
  std::set<std::string> names;
  for (std::size_t s = 0; s < spec.stages.size(); ++s) {
    const Stage& st = spec.stages[s];
    if (st.name.empty() || !names.insert(st.name).second)
      throw Error(who + ": stage " + std::to_string(s) + " needs a name of its own (got '" +
                  st.name + "')");
    if (!st.kernel) throw Error(who + ": stage '" + st.name + "' has no kernel");
    if (st.writes.empty()) throw Error(who + ": stage '" + st.name + "' writes no grid");
    if (st.writes.size() > kMaxStageGrids || st.reads.size() > kMaxStageGrids)
      throw Error(who + ": stage '" + st.name + "' reads or writes more than " +
                  std::to_string(kMaxStageGrids) + " grids; split it into several stages");
    for (const std::string& w : st.writes) add_grid(w, static_cast<std::ptrdiff_t>(s));
    for (const Offset& o : st.neighbourhood)
      if (o.size() != d)
        throw Error(who + ": an offset of stage '" + st.name + "' has " +
                    std::to_string(o.size()) + " components; the grid has " + std::to_string(d));
  }
  for (std::size_t s = 0; s < spec.stages.size(); ++s) {
    const Stage& st = spec.stages[s];
    StageIx ix;
    std::size_t reach = 0;
    for (const Offset& o : st.neighbourhood)
      for (int c : o) reach = std::max<std::size_t>(reach, static_cast<std::size_t>(std::abs(c)));
    for (const std::string& r : st.reads) {
      auto it = index.find(r);
      if (it == index.end())
        throw Error(who + ": stage '" + st.name + "' reads grid '" + r +
                    "', which is neither an input nor written by a stage; add it to inputs or "
                    "to a stage's writes");
      if (grids[it->second].writer == static_cast<std::ptrdiff_t>(s))
        throw Error(who + ": stage '" + st.name + "' reads grid '" + r +
                    "', which it writes; write a new grid (a later stage may copy it back)");
      if (std::find(ix.reads.begin(), ix.reads.end(), it->second) != ix.reads.end())
        throw Error(who + ": stage '" + st.name + "' reads grid '" + r + "' twice");
      ix.reads.push_back(it->second);
      Grid& g = grids[it->second];
      g.halo = std::max(g.halo, reach);
      if (reach > 0) add_directions(d, st.neighbourhood, false, g.dirs);
    }
    for (const std::string& w : st.writes) ix.writes.push_back(index[w]);
    stages.push_back(std::move(ix));
  }
  for (const Grid& g : grids)
    for (std::size_t i = 0; i < d; ++i) {
      const std::size_t b = spec.size[i] / spec.blocks[i];
      if (g.halo > b)
        throw Error(who + ": grid '" + g.name + "' is read at offsets up to " +
                    std::to_string(g.halo) + " away, a halo larger than a block (" +
                    std::to_string(b) + " points in dimension " + std::to_string(i) +
                    "); use fewer blocks");
    }
}

void Pipeline::Impl::declare() {
  Graph& gr = *graph;
  std::size_t H = 0;
  for (const Grid& g : grids) H = std::max(H, g.halo);
  for (std::size_t k = 0; k < d; ++k) {
    bgrid.push_back(spec.blocks[k]);
    bext.push_back(spec.size[k] / spec.blocks[k]);
  }
  pad = Pad(d, H, bext);
  Ix lo{}, hi{};
  for (std::size_t k = 0; k < d; ++k) hi[k] = static_cast<std::ptrdiff_t>(bgrid[k]);
  for_each_point(d, lo, hi, [&](const Ix& c) {
    BlockAt b;
    b.coord = c;
    for (std::size_t k = 0; k < d; ++k) {
      b.origin[k] = c[k] * static_cast<std::int64_t>(bext[k]);
      b.tag += (k ? "," : "") + std::to_string(c[k]);
    }
    blocks.push_back(std::move(b));
  });
  const std::size_t nb = blocks.size();
  for (Grid& g : grids) {
    g.block.resize(nb);
    g.exports.resize(nb);
    g.imports.resize(nb);
  }
  // Block-major declaration: the default placement gives NUMA nodes and ranks contiguous
  // chunks of declaration order, so each gets runs of whole blocks of every grid (their
  // tasks then find their grids local), not whole grids.
  for (std::size_t i = 0; i < nb; ++i)
    for (Grid& g : grids) {
      g.block[i] = gr.location<double>(spec.name + "." + g.name + "[" + blocks[i].tag + "]",
                                       pad.count);
      if (g.writer < 0 || g.halo == 0) continue;
      for_each_export(pad, static_cast<std::ptrdiff_t>(g.halo), g.dirs, bgrid,
                      spec.boundary == Boundary::periodic, blocks[i].coord,
                      [&](const Ix& o, std::size_t count, const std::string& otag) {
                        Export e;
                        e.dir = o;
                        e.count = count;
                        e.loc = gr.location<double>(spec.name + "." + g.name + ".x[" +
                                                        blocks[i].tag + "][" + otag + "]",
                                                    count);
                        g.exports[i].push_back(e);
                      });
    }
  for (Grid& g : grids) {
    if (g.writer < 0 || g.halo == 0) continue;
    for (std::size_t i = 0; i < nb; ++i)
      for (const Ix& o : g.dirs) {
        Ix n{}, back{};
        if (!neighbour(blocks[i].coord, o, n)) continue;
        for (std::size_t k = 0; k < d; ++k) back[k] = -o[k];
        for (const Export& e : g.exports[block_index(n)])
          if (e.dir == back) g.imports[i].emplace_back(o, e.loc);
      }
  }
  // Where each exchanged grid's import goes: before the first stage after its writer that
  // reads it with a neighbourhood; at the end of the iteration when there is none.
  const std::size_t ns = spec.stages.size();
  std::vector<std::vector<std::size_t>> imports_before(ns + 1);
  for (std::size_t gi = 0; gi < grids.size(); ++gi) {
    const Grid& g = grids[gi];
    if (g.writer < 0 || g.halo == 0) continue;
    std::size_t at = ns;
    for (std::size_t s = static_cast<std::size_t>(g.writer) + 1; s < ns && at == ns; ++s)
      if (!spec.stages[s].neighbourhood.empty() &&
          std::find(stages[s].reads.begin(), stages[s].reads.end(), gi) != stages[s].reads.end())
        at = s;
    imports_before[at].push_back(gi);
  }
  auto declare_imports = [&](std::size_t at) {
    for (std::size_t gi : imports_before[at])
      for (std::size_t i = 0; i < nb; ++i) {
        const Grid& g = grids[gi];
        std::vector<Access> acc{write(g.block[i])};
        for (const auto& [o, loc] : g.imports[i]) acc.push_back(read(loc));
        gr.task(spec.name + "." + g.name + ".import[" + blocks[i].tag + "]", std::move(acc),
                [this, gi, i](Context& ctx) { import_halo(ctx, gi, i); });
      }
  };
  for (std::size_t s = 0; s < ns; ++s) {
    declare_imports(s);
    for (std::size_t i = 0; i < nb; ++i) {
      std::vector<Access> acc;
      for (std::size_t w : stages[s].writes) {
        acc.push_back(write(grids[w].block[i]));
        for (const Export& e : grids[w].exports[i]) acc.push_back(write(e.loc));
      }
      for (std::size_t r : stages[s].reads) acc.push_back(read(grids[r].block[i]));
      gr.task(spec.name + "." + spec.stages[s].name + "[" + blocks[i].tag + "]", std::move(acc),
              [this, s, i](Context& ctx) { run_stage(ctx, s, i); });
    }
  }
  declare_imports(ns);
}

void Pipeline::Impl::run_stage(Context& ctx, std::size_t s, std::size_t b) const {
  const StageIx& ix = stages[s];
  StageBlock blk;
  blk.dims = d;
  blk.stride = pad.stride;
  blk.origin = blocks[b].origin;
  for (std::size_t k = 0; k < d; ++k) blk.hi[k] = pad.ext[k];
  for (std::size_t j = 0; j < ix.reads.size(); ++j)
    blk.in[j] = ctx.read(grids[ix.reads[j]].block[b]).data() + pad.base;
  for (std::size_t j = 0; j < ix.writes.size(); ++j)
    blk.out[j] = ctx.write(grids[ix.writes[j]].block[b]).data() + pad.base;
  blk.iteration = ctx.iteration();
  spec.stages[s].kernel(blk);
  // Local Update: the edges of what this stage wrote, for the neighbours' imports.
  for (std::size_t j = 0; j < ix.writes.size(); ++j) {
    const Grid& g = grids[ix.writes[j]];
    for (const Export& e : g.exports[b]) {
      Ix lo{}, hi{};
      send_box(pad, static_cast<std::ptrdiff_t>(g.halo), e.dir, lo, hi);
      pack_box(pad, blk.out[j] - pad.base, lo, hi, ctx.write(e.loc).data());
    }
  }
}

void Pipeline::Impl::import_halo(Context& ctx, std::size_t gi, std::size_t b) const {
  const Grid& g = grids[gi];
  double* dst = ctx.write(g.block[b]).data();
  for (const auto& [o, loc] : g.imports[b]) {
    Ix lo{}, hi{};
    halo_box(pad, static_cast<std::ptrdiff_t>(g.halo), o, lo, hi);
    unpack_box(pad, dst, lo, hi, ctx.read(loc).data());
  }
}

void Pipeline::Impl::fill(double* dst, const Grid& g, std::size_t b, const double* global) const {
  Ix lo{}, hi{};
  for (std::size_t k = 0; k < d; ++k) {
    lo[k] = -static_cast<std::ptrdiff_t>(pad.h);
    hi[k] = pad.ext[k] + static_cast<std::ptrdiff_t>(pad.h);
  }
  std::array<std::int64_t, kMaxDims> gc{};
  for_each_point(d, lo, hi, [&](const Ix& x) {
    bool inside = true;
    std::size_t gi = 0;
    for (std::size_t k = 0; k < d; ++k) {
      std::int64_t v = blocks[b].origin[k] + x[k];
      const auto n = static_cast<std::int64_t>(spec.size[k]);
      gc[k] = v;
      if (v < 0 || v >= n) {
        if (spec.boundary == Boundary::periodic)
          v = ((v % n) + n) % n;
        else
          inside = false;
      }
      gi = gi * spec.size[k] + static_cast<std::size_t>(v < 0 || v >= n ? 0 : v);
    }
    double value = 0.0;
    if (inside)
      value = global ? global[gi] : 0.0;
    else if (spec.fixed_value)
      value = spec.fixed_value(g.name, Coord(gc.data(), d));
    dst[pad.at(x)] = value;
  });
}

Pipeline::Pipeline(Graph& graph, PipelineSpec spec) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.graph = &graph;
  m.spec = std::move(spec);
  m.check();
  m.declare();
  // Every grid starts at 0 inside and the fixed value outside (locations start zeroed).
  if (m.spec.fixed_value && m.spec.boundary == Boundary::fixed)
    for (const auto& g : m.grids)
      for (std::size_t b = 0; b < m.blocks.size(); ++b)
        m.fill(graph.data(g.block[b]).data(), g, b, nullptr);
}

Pipeline::~Pipeline() = default;
Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&&) noexcept = default;

const PipelineSpec& Pipeline::spec() const { return impl_->spec; }

std::vector<std::string> Pipeline::grids() const {
  std::vector<std::string> out;
  for (const auto& g : impl_->grids) out.push_back(g.name);
  return out;
}

std::size_t Pipeline::halo(const std::string& grid) const { return impl_->grid(grid).halo; }

std::size_t Pipeline::points() const {
  std::size_t n = 1;
  for (std::size_t s : impl_->spec.size) n *= s;
  return n;
}

void Pipeline::set(const std::string& grid, std::span<const double> global) {
  Impl& m = *impl_;
  const auto& g = m.grid(grid);
  if (global.size() != points())
    throw Error("pipeline '" + m.spec.name + "': set(\"" + grid + "\") got " +
                std::to_string(global.size()) + " values for a grid of " + join(m.spec.size) +
                " = " + std::to_string(points()));
  // The whole padded block, halo included: a stage reading g with a neighbourhood before its
  // writer (a feedback read) sees these values in the first iteration.
  for (std::size_t b = 0; b < m.blocks.size(); ++b)
    m.fill(m.graph->data(g.block[b]).data(), g, b, global.data());
}

std::size_t Pipeline::block_count() const { return impl_->blocks.size(); }

unsigned Pipeline::home_rank(const std::string& grid, std::size_t block) const {
  const Impl& m = *impl_;
  const auto& g = m.grid(grid);
  if (block >= m.blocks.size())
    throw Error("pipeline '" + m.spec.name + "': block " + std::to_string(block) +
                " out of range; the pipeline has " + std::to_string(m.blocks.size()));
  return m.graph->home_rank(g.block[block]);
}

std::vector<double> Pipeline::get(const std::string& grid) const {
  const Impl& m = *impl_;
  const auto& g = m.grid(grid);
  std::vector<double> out(points());
  const Graph& cg = *m.graph;
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    const double* src = cg.data(g.block[b]).data();
    Ix lo{}, hi = m.pad.ext;
    hi[m.d - 1] = 1;
    const auto len = static_cast<std::size_t>(m.pad.ext[m.d - 1]);
    for_each_point(m.d, lo, hi, [&](const Ix& x) {
      std::size_t gi = 0;
      for (std::size_t k = 0; k < m.d; ++k)
        gi = gi * m.spec.size[k] + static_cast<std::size_t>(m.blocks[b].origin[k] + x[k]);
      std::memcpy(&out[gi], src + m.pad.at(x), len * sizeof(double));
    });
  }
  return out;
}

RunStats Pipeline::run(Runtime& runtime, std::uint64_t iterations) {
  if (iterations == 0) return {};
  return runtime.run(*impl_->graph, iterations);
}

}  // namespace ordo::stencil
