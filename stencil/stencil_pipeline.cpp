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
//               Derived (Graph::set_derived): spent by the iteration's end, not checkpointed.
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

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "stencil/blocked_grid.hpp"
#include "stencil/facade.hpp"
#include "stencil/stencil_reductions.hpp"

namespace ordo::stencil {

using core::Ix;
using geometry::join;

struct Pipeline::Impl {
  Graph* graph = nullptr;
  PipelineSpec spec;
  core::BlockedGrid grid;

  struct Grid {
    std::string name;
    std::ptrdiff_t writer = -1;  // stage index; -1 for an input
    std::size_t halo = 0;
    std::set<Ix> dirs;                    // directions its neighbourhood readers reach
    std::vector<Location<double>> block;  // per block: the padded block
    core::Exchange exchange;              // only for a written grid with a halo
  };
  std::vector<Grid> grids;
  std::map<std::string, std::size_t> index;  // grid name -> grids[]
  struct StageIx {
    std::vector<std::size_t> reads, writes;
  };
  std::vector<StageIx> stages;
  core::Placement placement;
  // PipelineSpec::reductions; stage s's task of block b contributes contribution b of each of
  // stage_reds[s] (indices into reds, in the order of Stage::contributes).
  detail::ReductionSet reds;
  std::vector<std::vector<std::size_t>> stage_reds;

  const Grid& grid_named(const std::string& name) const {
    auto it = index.find(name);
    if (it == index.end())
      throw Error("pipeline '" + spec.name + "': no grid '" + name +
                  "'; the grids are the inputs and the stages' writes");
    return grids[it->second];
  }
  bool is_exchanged(const Grid& g) const { return g.writer >= 0 && g.halo > 0; }
  bool holds(std::size_t b) const { return placement.holds(b); }
  core::Facade facade() const { return core::Facade("pipeline", spec.name, grid, placement); }
  // Grid g's padded buffer of block b, as this rank holds it.
  core::Padded padded(const Grid& g) const {
    return [this, &g](std::size_t b) { return std::as_const(*graph).data(g.block[b]).data(); };
  }

  // Checks the spec and builds what it describes: the blocked grid, the grids (inputs and the
  // stages' writes) and each stage's reads. Throws Error for a spec that is wrong.
  void build_from_spec();
  void declare();
  void run_stage(Context& ctx, std::size_t s, std::size_t b) const;
  void import_halo(Context& ctx, std::size_t g, std::size_t b) const;
  void place(unsigned rank, unsigned ranks);
};

void Pipeline::Impl::build_from_spec() {
  const std::string who = "pipeline '" + spec.name + "'";
  grid = core::BlockedGrid(who, spec.size, spec.blocks, spec.boundary == Boundary::periodic);
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
      if (o.size() != grid.dims())
        throw Error(who + ": an offset of stage '" + st.name + "' has " + std::to_string(o.size()) +
                    " components; the grid has " + std::to_string(grid.dims()));
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
      if (reach > 0) geometry::add_directions(grid.dims(), st.neighbourhood, false, g.dirs);
    }
    for (const std::string& w : st.writes) ix.writes.push_back(index[w]);
    stages.push_back(std::move(ix));
  }
  // Each reduction has one contributing stage: one task per block and contribution.
  reds.who = who;
  reds.specs = spec.reductions;
  std::vector<std::ptrdiff_t> contributor(spec.reductions.size(), -1);
  stage_reds.assign(spec.stages.size(), {});
  for (std::size_t s = 0; s < spec.stages.size(); ++s)
    for (const std::string& name : spec.stages[s].contributes) {
      std::size_t r = spec.reductions.size();
      for (std::size_t i = 0; i < spec.reductions.size(); ++i)
        if (spec.reductions[i].name == name) r = i;
      if (r == spec.reductions.size())
        throw Error(who + ": stage '" + spec.stages[s].name + "' contributes to reduction '" +
                    name + "', which the pipeline does not declare; add it to reductions");
      if (contributor[r] >= 0)
        throw Error(who + ": reduction '" + name + "' has two contributing stages, '" +
                    spec.stages[static_cast<std::size_t>(contributor[r])].name + "' and '" +
                    spec.stages[s].name + "'; give each reduction one (declare two reductions)");
      contributor[r] = static_cast<std::ptrdiff_t>(s);
      stage_reds[s].push_back(r);
    }
  for (std::size_t r = 0; r < contributor.size(); ++r)
    if (contributor[r] < 0 && !spec.reductions[r].name.empty())
      throw Error(who + ": no stage contributes to reduction '" + spec.reductions[r].name +
                  "'; name it in the contributes of the stage whose kernel computes it");
  const auto [smallest, dim] = grid.smallest_block();
  for (const Grid& g : grids)
    if (g.halo > smallest)
      throw Error(who + ": grid '" + g.name + "' is read at offsets up to " +
                  std::to_string(g.halo) + " away, a halo larger than a block (" +
                  std::to_string(smallest) + " points in dimension " + std::to_string(dim) +
                  " with blocks " + join(spec.blocks) + "); use fewer blocks");
}

void Pipeline::Impl::declare() {
  Graph& gr = *graph;
  std::size_t H = 0;
  for (const Grid& g : grids) H = std::max(H, g.halo);
  grid.set_padding(H);
  const std::size_t nb = grid.count();
  // Block-major declaration: the locations of a block are declared together, so that a
  // block's grids and exports are neighbours in declaration order as on their rank.
  for (std::size_t b = 0; b < nb; ++b)
    for (Grid& g : grids) {
      g.block.push_back(gr.location<double>(spec.name + "." + g.name + "[" + grid.block(b).tag +
                                                "]",
                                            grid.block(b).pad.count));
      if (!is_exchanged(g)) continue;
      g.exchange.width = g.halo;
      g.exchange.exports.push_back(
          grid.declare_exports(gr, b, spec.name + "." + g.name, g.halo, g.dirs, 1));
      // Spent at an iteration's end (every import follows its grid's writer in the iteration),
      // so a checkpoint need not keep it, nor a restart rebuild it.
      for (const core::Export& e : g.exchange.exports.back()) gr.set_derived(e.loc);
    }
  for (Grid& g : grids)
    if (is_exchanged(g)) grid.wire_imports(g.exchange, g.dirs);
  // Where each exchanged grid's import goes: before the first stage after its writer that
  // reads it with a neighbourhood; at the end of the iteration when there is none.
  const std::size_t ns = spec.stages.size();
  std::vector<std::vector<std::size_t>> imports_before(ns + 1);
  for (std::size_t gi = 0; gi < grids.size(); ++gi) {
    const Grid& g = grids[gi];
    if (!is_exchanged(g)) continue;
    std::size_t at = ns;
    for (std::size_t s = static_cast<std::size_t>(g.writer) + 1; s < ns && at == ns; ++s)
      if (!spec.stages[s].neighbourhood.empty() &&
          std::find(stages[s].reads.begin(), stages[s].reads.end(), gi) != stages[s].reads.end())
        at = s;
    imports_before[at].push_back(gi);
  }
  auto declare_imports = [&](std::size_t at) {
    for (std::size_t gi : imports_before[at])
      for (std::size_t b = 0; b < nb; ++b) {
        const Grid& g = grids[gi];
        std::vector<Access> acc{write(g.block[b])};
        for (const core::Import& i : g.exchange.imports[b]) acc.push_back(read(i.loc));
        gr.task(spec.name + "." + g.name + ".import[" + grid.block(b).tag + "]", std::move(acc),
                [this, gi, b](Context& ctx) { import_halo(ctx, gi, b); });
      }
  };
  for (std::size_t s = 0; s < ns; ++s) {
    declare_imports(s);
    for (std::size_t b = 0; b < nb; ++b) {
      std::vector<Access> acc;
      for (std::size_t w : stages[s].writes) {
        acc.push_back(write(grids[w].block[b]));
        if (is_exchanged(grids[w]))
          for (const core::Export& e : grids[w].exchange.exports[b]) acc.push_back(write(e.loc));
      }
      for (std::size_t r : stages[s].reads) acc.push_back(read(grids[r].block[b]));
      if (!stage_reds[s].empty())
        reds.add_accesses(acc, static_cast<std::uint32_t>(b), stage_reds[s]);
      gr.task(spec.name + "." + spec.stages[s].name + "[" + grid.block(b).tag + "]",
              std::move(acc), [this, s, b](Context& ctx) { run_stage(ctx, s, b); });
    }
  }
  declare_imports(ns);
  reds.combine(gr);
}

void Pipeline::Impl::run_stage(Context& ctx, std::size_t s, std::size_t b) const {
  const StageIx& ix = stages[s];
  const core::BlockGeom& geo = grid.block(b);
  const geometry::Pad& pad = geo.pad;
  StageBlock blk;
  blk.dims = grid.dims();
  blk.stride = pad.stride;
  blk.origin = geo.origin;
  for (std::size_t k = 0; k < grid.dims(); ++k) blk.hi[k] = pad.ext[k];
  for (std::size_t j = 0; j < ix.reads.size(); ++j)
    blk.in[j] = ctx.read(grids[ix.reads[j]].block[b]).data() + pad.base;
  for (std::size_t j = 0; j < ix.writes.size(); ++j)
    blk.out[j] = ctx.write(grids[ix.writes[j]].block[b]).data() + pad.base;
  blk.iteration = ctx.iteration();
  const std::vector<std::size_t>& which = stage_reds[s];
  detail::Partials part;
  if (!which.empty()) {
    part = reds.partials(which, 0);
    blk.partials = &part;
  }
  spec.stages[s].kernel(blk);
  if (!which.empty())
    reds.contribute(ctx, static_cast<std::uint32_t>(b), part, which, b, "iteration", blk.iteration,
                    "the stage's kernel must call StageBlock::contribute(j, value) for each "
                    "reduction j of its contributes in every call");
  // Local Update: the edges of what this stage wrote, for the neighbours' imports.
  for (std::size_t j = 0; j < ix.writes.size(); ++j) {
    const Grid& g = grids[ix.writes[j]];
    if (!is_exchanged(g)) continue;
    for (const core::Export& e : g.exchange.exports[b])
      grid.pack(b, g.exchange, e, blk.out[j] - pad.base, ctx.write(e.loc).data());
  }
}

void Pipeline::Impl::import_halo(Context& ctx, std::size_t gi, std::size_t b) const {
  const Grid& g = grids[gi];
  double* dst = ctx.write(g.block[b]).data();
  for (const core::Import& i : g.exchange.imports[b])
    grid.unpack(b, g.exchange, i, ctx.read(i.loc).data(), dst);
}

void Pipeline::Impl::place(unsigned rank, unsigned ranks) {
  core::place_blocks(
      placement, grid, *graph, rank, ranks,
      [&](std::size_t b, unsigned r) {
        for (const Grid& g : grids) {
          graph->set_home_rank(g.block[b], r);
          if (is_exchanged(g))
            for (const core::Export& e : g.exchange.exports[b]) graph->set_home_rank(e.loc, r);
        }
      },
      [&](std::size_t b) { return graph->home_rank(grids[0].block[b]); });
}

Pipeline::Pipeline(Graph& graph, PipelineSpec spec) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.graph = &graph;
  m.spec = std::move(spec);
  m.build_from_spec();
  m.reds.declare(graph, m.spec.name, static_cast<std::uint32_t>(m.grid.count()));
  m.declare();
  // Every grid starts at 0 inside and the fixed value outside (locations start zeroed).
  if (m.spec.fixed_value && m.spec.boundary == Boundary::fixed)
    for (const auto& g : m.grids)
      for (std::size_t b = 0; b < m.grid.count(); ++b)
        m.grid.fill(b, graph.data(g.block[b]).data(), [](const Box&) {},
                    [&](Coord x) { return m.spec.fixed_value(g.name, x); }, true);
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

std::size_t Pipeline::halo(const std::string& grid) const { return impl_->grid_named(grid).halo; }

std::size_t Pipeline::points() const { return impl_->grid.points(); }

void Pipeline::place(const Runtime& runtime) {
  Impl& m = *impl_;
  if (!m.placement.placed) m.place(runtime.rank(), runtime.ranks());
}

void Pipeline::set(const std::string& grid, std::span<const double> global) {
  const Impl& m = *impl_;
  m.grid_named(grid);
  set(grid, m.facade().from_global(global, m.spec.size, "set(\"" + grid + "\")"));
}

void Pipeline::set(const std::string& grid, const PointValue& value) {
  impl_->facade().check_given(bool(value), "set()");
  set(grid, core::from_points(value));
}

void Pipeline::set(const std::string& grid, const BoxFill& fill) {
  Impl& m = *impl_;
  const auto& g = m.grid_named(grid);
  m.facade().check_given(bool(fill), "set()");
  PointValue outside;
  if (m.spec.fixed_value)
    outside = [&](Coord x) { return m.spec.fixed_value(g.name, x); };
  // The whole padded block, halo included: a stage reading g with a neighbourhood before its
  // writer (a feedback read) sees these values in the first iteration, and an input's halo
  // is never exchanged.
  for (std::size_t b = 0; b < m.grid.count(); ++b)
    if (m.holds(b)) m.grid.fill(b, m.graph->data(g.block[b]).data(), fill, outside, true);
}

std::size_t Pipeline::block_count() const { return impl_->grid.count(); }

unsigned Pipeline::home_rank(const std::string& grid, std::size_t block) const {
  const Impl& m = *impl_;
  const auto& g = m.grid_named(grid);
  return m.facade().home_rank(block, [&](std::size_t b) { return m.graph->home_rank(g.block[b]); });
}

void Pipeline::get_blocks(const std::string& grid, const BoxVisit& visit) const {
  const Impl& m = *impl_;
  m.facade().visit_held(visit, m.padded(m.grid_named(grid)));
}

std::vector<double> Pipeline::get(const std::string& grid) const {
  const Impl& m = *impl_;
  return m.facade().get(m.padded(m.grid_named(grid)), "get('" + grid + "')", "grid, ");
}

std::vector<double> Pipeline::gather(Runtime& runtime, const std::string& grid,
                                     unsigned to) const {
  const Impl& m = *impl_;
  const core::Facade f = m.facade();
  return f.gather(runtime, to, m.padded(m.grid_named(grid)), f.who() + " grid '" + grid + "'");
}

RunStats Pipeline::run(Runtime& runtime, std::uint64_t iterations) {
  place(runtime);
  if (iterations == 0) return {};
  return runtime.run(*impl_->graph, iterations);
}

RunStats Pipeline::run_until(Runtime& runtime, const StopCondition& done,
                             std::uint64_t max_iterations) {
  Impl& m = *impl_;
  m.reds.check_can_stop(done);
  place(runtime);
  if (max_iterations == 0) return {};
  bool met = false;
  return runtime.run_until(*m.graph, m.reds.until(done, max_iterations, met));
}

Values Pipeline::values() const { return Values(impl_->reds); }

}  // namespace ordo::stencil
