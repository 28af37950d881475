// The stencil layer (see <ordo/stencil.hpp>, docs/stencil.md and stencil_impl.hpp for the
// locations and tasks): the spec, the graph a Stencil declares, loading and reading its grids,
// placement. Built on the public API only.
#include <ordo/stencil.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include <ordo/bench.hpp>

#include "stencil/facade.hpp"
#include "stencil/stencil_impl.hpp"

namespace ordo::stencil {

using core::Ix;
using detail_stencil::kHeader;
using geometry::join;

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
  geometry::for_each_point(dims, lo, hi, [&](const Ix& x) {
    Offset o(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(dims));
    if (std::any_of(o.begin(), o.end(), [](int c) { return c != 0; })) out.push_back(o);
  });
  return out;
}

Spec with_defaults(Spec s) {
  if (s.neighbourhood.empty())
    s.neighbourhood = von_neumann(s.size.size(), std::max<int>(1, static_cast<int>(s.halo)));
  if (s.halo == 0) {
    std::size_t reach = 0;
    for (const Offset& o : s.neighbourhood)
      for (int c : o) reach = std::max<std::size_t>(reach, static_cast<std::size_t>(std::abs(c)));
    s.halo = std::max<std::size_t>(reach, 1);
  }
  return s;
}

void validate(const Spec& s, const core::BlockedGrid& grid) {
  const std::string who = "stencil '" + s.name + "'";
  const std::size_t d = grid.dims();
  std::size_t reach = 0;
  for (const Offset& o : s.neighbourhood) {
    if (o.size() != d)
      throw Error(who + ": an offset of the neighbourhood has " + std::to_string(o.size()) +
                  " components; the grid has " + std::to_string(d));
    for (int c : o) reach = std::max<std::size_t>(reach, static_cast<std::size_t>(std::abs(c)));
  }
  if (s.halo < reach)
    throw Error(who + ": halo " + std::to_string(s.halo) +
                " is smaller than the neighbourhood's reach " + std::to_string(reach) +
                "; give a halo of at least " + std::to_string(reach));
  if (s.time_levels < 1 || s.time_levels > kMaxLevels)
    throw Error(who + ": time_levels must be 1 to " + std::to_string(kMaxLevels));
  if (s.aux_grids > kMaxAux)
    throw Error(who + ": at most " + std::to_string(kMaxAux) + " coefficient grids");
  if (s.tb_depth < 1) throw Error("temporal blocking depth 0: give a depth of at least 1");
  if (s.traversal == Traversal::jacobi_in_place) {
    if (s.schedule.stores == Stores::streaming)
      throw Error(who + ": streaming stores go with the double-buffered Jacobi (in place, a step "
                        "writes back lines it has just read); use Stores::cached or "
                        "Traversal::jacobi");
    if (s.tb_depth > 1 && s.time_levels > 1)
      throw Error(who + ": temporal blocking in place reads one time level (this kernel reads " +
                  std::to_string(s.time_levels) + "); use Traversal::jacobi for it");
  }
  if (s.traversal == Traversal::gauss_seidel) {
    if (s.schedule.stores == Stores::streaming)
      throw Error(who + ": streaming stores need Jacobi traversal (a Gauss-Seidel kernel reads "
                        "its output); use Stores::cached");
    if (s.tb_depth != 1)
      throw Error("temporal blocking (depth " + std::to_string(s.tb_depth) +
                  ") needs Jacobi traversal; Gauss-Seidel runs with depth 1");
    if (s.time_levels != 1) throw Error(who + ": Gauss-Seidel traversal reads one time level");
    if (s.boundary == Boundary::periodic)
      throw Error(who + ": Gauss-Seidel traversal needs fixed boundaries (a periodic wrap has "
                        "no lexicographic order)");
    for (const Offset& o : s.neighbourhood)
      if (std::count_if(o.begin(), o.end(), [](int c) { return c != 0; }) > 1)
        throw Error(who + ": Gauss-Seidel traversal needs axis-aligned offsets (von Neumann); a "
                          "diagonal offset would read a later block's updated value");
  }
  const std::size_t H = s.halo * s.tb_depth;
  const auto [smallest, dim] = grid.smallest_block();
  if (H > smallest)
    throw Error("halo " + std::to_string(H) +
                (s.tb_depth > 1 ? " (halo " + std::to_string(s.halo) + " x depth " +
                                      std::to_string(s.tb_depth) + ")"
                                : std::string()) +
                " is larger than a block (" + std::to_string(smallest) +
                " points in dimension " + std::to_string(dim) + " with blocks " +
                join(s.blocks) + "); use fewer blocks or a smaller temporal-blocking depth");
}

std::set<Ix> read_directions(const Spec& s) {
  std::set<Ix> out;
  geometry::add_directions(s.size.size(), s.neighbourhood, s.tb_depth > 1, out);
  return out;
}

void Stencil::Impl::declare_blocks() {
  Graph& g = *graph;
  for (std::size_t b = 0; b < grid.count(); ++b) {
    const core::BlockGeom& geo = grid.block(b);
    Locations l;
    l.main = g.location<double>(spec.name + "[" + geo.tag + "]",
                                kHeader + buffer_count * (buffer_size(b) + geo.pad.side_count));
    if (spec.aux_grids > 0)
      l.aux = g.location<double>(spec.name + ".aux[" + geo.tag + "]",
                                 spec.aux_grids * geo.pad.count);
    locs.push_back(l);
  }
  // A graph run before Stencil::place (another stencil's run, Runtime::run) places this one
  // first, so that its tasks exist. Like the task bodies, the hook needs the Stencil alive
  // while its graph runs.
  g.on_first_run([this](unsigned rank, unsigned ranks) {
    if (!placement.placed) place(rank, ranks);
  });
}

void Stencil::Impl::declare_exchange() {
  Graph& g = *graph;
  const std::size_t n = grid.count();
  halo.width = spec.halo * spec.tb_depth;
  halo.copies = levels;
  halo.exports.assign(n, {});
  // Each direction a neighbour reads from b: an export location when the neighbour lives on
  // another rank, else a halo task (one per neighbour, gathering its directions). Except the
  // faces a one-step in-place sweep unpacks itself as it goes (the plan's late faces): written into
  // the halo before the sweep, such a face costs a line fetched, written back and fetched
  // again per row, so it keeps its export (a face one point deep: no deep halo without
  // temporal blocking).
  // Block b's halo tasks are pushes[first_push[b] .. first_push[b + 1]): each block looks only
  // at its own, so declaring stays linear in the blocks.
  std::vector<std::size_t> first_push(n + 1);
  // Each block's export stage, which only its compute and export tasks hold (their closures).
  std::vector<std::shared_ptr<ExportStage>> stages;
  stages.resize(n);
  for (std::size_t b = 0; b < n; ++b) {
    const core::BlockGeom& geo = grid.block(b);
    first_push[b] = pushes.size();
    std::set<Ix> remote;
    for (const Ix& r : read_dirs) {
      Ix o{}, c{};
      for (std::size_t k = 0; k < dims; ++k) o[k] = -r[k];
      if (!geometry::block_neighbour(dims, spec.blocks, grid.periodic(), geo.coord, o, c)) continue;
      const std::size_t to = geometry::block_index(dims, spec.blocks, c);
      if (placement.home[to] != placement.home[b] || plan.is_late_face(r, spec.tb_depth)) {
        remote.insert(r);
        continue;
      }
      const auto mine = pushes.begin() + static_cast<std::ptrdiff_t>(first_push[b]);
      auto p = std::find_if(mine, pushes.end(), [&](const Push& q) { return q.to == to; });
      if (p == pushes.end()) p = pushes.insert(pushes.end(), Push{b, to, {}});
      p->dirs.push_back(o);
    }
    halo.exports[b] = grid.declare_exports(g, b, spec.name, halo.width, remote, levels);
    stages[b] = std::make_shared<ExportStage>();
    ExportStage& stage = *stages[b];
    for (const core::Export& e : halo.exports[b]) {
      g.set_home_rank(e.loc, placement.home[b]);
      // Packed from the block every step, and only towards another rank: not the stencil's
      // state, which a checkpoint keeps (stencil_restore.cpp rebuilds it).
      g.set_derived(e.loc);
      if (!plan.is_staged_export(e.dir)) continue;
      Ix lo{}, hi{};
      geometry::send_box(geo.pad, static_cast<std::ptrdiff_t>(halo.width), e.dir, lo, hi);
      stage.parts.push_back({lo[2], stage.count});
      stage.count += e.count;
    }
  }
  first_push[n] = pushes.size();
  // The fixed values the sweeps put back, for the blocks no set() has filled (a restart):
  // built before the first run, so that the tasks only read them.
  for (std::size_t b = 0; b < n; ++b)
    if (holds(b)) build_fixed_halo(b);
  grid.wire_imports(halo, read_dirs);

  auto declare_compute = [&](std::size_t b) {
    std::vector<Access> acc{write(locs[b].main)};
    if (spec.aux_grids > 0) acc.push_back(read(locs[b].aux));
    for (const core::Import& i : halo.imports[b]) acc.push_back(read(i.loc));
    reds.add_accesses(acc, static_cast<std::uint32_t>(b), {});
    g.task(spec.name + ".compute[" + std::to_string(b) + "]", std::move(acc),
           [this, b, stage = stages[b]](Context& ctx) { compute(ctx, b, *stage); });
  };
  auto declare_sends = [&](std::size_t b) {
    if (!halo.exports[b].empty()) {
      std::vector<Access> acc{read(locs[b].main)};
      for (const core::Export& e : halo.exports[b]) acc.push_back(write(e.loc));
      g.set_derived_task(g.task(spec.name + ".export[" + std::to_string(b) + "]", std::move(acc),
                                [this, b, stage = stages[b]](Context& ctx) {
                                  export_block(
                                      b, ctx.read(locs[b].main),
                                      [&](Location<double> l) { return ctx.write(l); }, *stage);
                                }));
    }
    // The bodies find their push by index: a reference into `pushes` would stay valid only as
    // long as the vector never grows again, which nothing would check.
    for (std::size_t i = first_push[b]; i < first_push[b + 1]; ++i) {
      const Push& p = pushes[i];
      const std::string name = spec.name + ".halo[" + std::to_string(b) + ">" +
                               std::to_string(p.to) + "]";
      // Declared by rank count, like the exports, and redone by a restart: derived.
      if (p.to == b) {
        g.set_derived_task(g.task(name, {write(locs[b].main)}, [this, i](Context& ctx) {
          std::span<double> main = ctx.write(locs[pushes[i].to].main);
          push_halo(pushes[i], main, main);
        }));
        continue;
      }
      g.set_derived_task(
          g.task(name, {read(locs[b].main), write(locs[p.to].main)}, [this, i](Context& ctx) {
            const Push& q = pushes[i];
            push_halo(q, ctx.read(locs[q.from].main), ctx.write(locs[q.to].main));
          }));
    }
  };
  if (spec.traversal == Traversal::gauss_seidel) {
    for (std::size_t b = 0; b < n; ++b) {
      declare_compute(b);
      declare_sends(b);
    }
  } else {
    for (std::size_t b = 0; b < n; ++b) declare_compute(b);
    for (std::size_t b = 0; b < n; ++b) declare_sends(b);
  }
  reds.combine(g);
}

void Stencil::Impl::check_level(std::size_t level) const {
  if (level >= levels)
    throw Error("stencil '" + spec.name + "': level " + std::to_string(level) +
                " out of range; the stencil has " + std::to_string(levels) + " time level(s)");
}

const double* Stencil::Impl::held_level(std::size_t b, std::size_t level) const {
  std::span<const double> main = std::as_const(*graph).data(locs[b].main);
  const auto rot = static_cast<std::uint64_t>(main[0]);
  return level_data(b, main, rot, -static_cast<std::ptrdiff_t>(level));
}

void Stencil::Impl::push_halo(const Push& p, std::span<const double> from,
                              std::span<double> to) const {
  const geometry::Pad& src = grid.block(p.from).pad;
  const geometry::Pad& dst = grid.block(p.to).pad;
  const auto w = static_cast<std::ptrdiff_t>(halo.width);
  // Each block's own step count: with Gauss-Seidel a later block has not swept yet (its one
  // buffer is the same whatever the count).
  const auto rot_from = static_cast<std::uint64_t>(from[0]);
  const auto rot_to = static_cast<std::uint64_t>(to[0]);
  for (const Ix& o : p.dirs) {
    Ix slo{}, shi{}, dlo{}, dhi{}, back{};
    geometry::send_box(src, w, o, slo, shi);
    for (std::size_t k = 0; k < dims; ++k) back[k] = -o[k];
    geometry::halo_box(dst, w, back, dlo, dhi);
    for (std::size_t l = 0; l < levels; ++l) {
      const auto delta = -static_cast<std::ptrdiff_t>(l);
      const geometry::Cells c = geometry::cells_of(dst, level_data(p.to, to, rot_to, delta),
                                                   level_side(p.to, to, rot_to, delta), dlo, dhi);
      geometry::copy_box_between(src, level_data(p.from, from, rot_from, delta), slo, shi,
                                 c.pad, c.data, dlo);
    }
  }
}

void Stencil::Impl::pack_exports(
    std::size_t b, std::span<const double> main,
    const std::function<std::span<double>(Location<double>)>& out,
    const ExportStage* staged) const {
  const auto rot = static_cast<std::uint64_t>(main[0]);
  const double* next = staged ? staged->values.data() : nullptr;
  for (const core::Export& e : halo.exports[b]) {
    std::span<double> dst = out(e.loc);
    if (staged && plan.is_staged_export(e.dir)) {
      geometry::copy_row(dst.data(), next, e.count);
      next += e.count;
      continue;
    }
    for (std::size_t l = 0; l < levels; ++l)
      grid.pack(b, halo, e, level_data(b, main, rot, -static_cast<std::ptrdiff_t>(l)),
                dst.data() + l * e.count);
  }
}

void Stencil::Impl::export_block(std::size_t b, std::span<const double> main,
                                 const std::function<std::span<double>(Location<double>)>& out,
                                 ExportStage& stage) const {
  pack_exports(b, main, out, stage.steps == main[0] ? &stage : nullptr);
  stage.steps = -1;
}

Stencil::Stencil(Graph& graph, Spec spec, Kernel kernel) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.grid = core::BlockedGrid("stencil '" + spec.name + "'", spec.size, spec.blocks,
                             spec.boundary == Boundary::periodic);
  spec = with_defaults(std::move(spec));
  validate(spec, m.grid);
  if (!kernel) throw Error("stencil '" + spec.name + "': give a kernel");
  m.graph = &graph;
  m.spec = std::move(spec);
  m.kernel = std::move(kernel);
  m.dims = m.spec.size.size();
  m.levels = m.spec.time_levels;
  m.buffer_count = m.spec.traversal == Traversal::jacobi            ? m.levels + 1
                   : m.spec.traversal == Traversal::jacobi_in_place ? m.levels
                                                                    : 1;
  m.streaming =
      m.spec.traversal == Traversal::jacobi && m.spec.schedule.stores == Stores::streaming;
  // The halo is D*h deep where a neighbour's values land, h beyond a fixed end of the grid.
  // Where the kernel and the sweep allow, the last dimension's halo lies beside the rows.
  // The in-place plan decides that, and pads the blocks.
  const bench::CacheSizes& caches = bench::cache_sizes();
  m.plan = plan_in_place(m.spec, m.kernel.traits, m.grid, m.tile_budget(),
                         caches.l2 ? caches.l2 : std::size_t{1} << 20);
  m.fixed_halo.resize(m.grid.count());
  m.read_dirs = read_directions(m.spec);
  m.declare_blocks();
  m.reds.who = "stencil '" + m.spec.name + "'";
  m.reds.specs = m.spec.reductions;
  m.reds.declare(graph, m.spec.name, static_cast<std::uint32_t>(m.grid.count()));
  // A restart fills the blocks from a checkpoint, headers included: the steps done and where
  // the buffers' blocks lie become pointer offsets (buffer_data), so a checkpoint whose headers
  // no run could have written is refused before any sweep reads them; then the exchange, which
  // the checkpoint leaves out, is rebuilt from the blocks (stencil_restore.cpp).
  graph.on_restore([&m](Restored& restored) { return m.restore(restored); });
}

Stencil::~Stencil() = default;
Stencil::Stencil(Stencil&&) noexcept = default;
Stencil& Stencil::operator=(Stencil&&) noexcept = default;

const Spec& Stencil::spec() const { return impl_->spec; }

std::size_t Stencil::points() const { return impl_->grid.points(); }

namespace {
// The facade core (facade.hpp) over a stencil's blocks. A template, so that it need not name
// the private Stencil::Impl.
template <class Impl>
core::Facade facade(const Impl& m) {
  return core::Facade("stencil", m.spec.name, m.grid, m.placement);
}
}  // namespace

void Stencil::Impl::place(unsigned rank, unsigned ranks) {
  core::place_blocks(
      placement, grid, *graph, rank, ranks,
      [&](std::size_t b, unsigned r) {
        graph->set_home_rank(locs[b].main, r);
        if (spec.aux_grids > 0) graph->set_home_rank(locs[b].aux, r);
      },
      [&](std::size_t b) { return graph->home_rank(locs[b].main); });
  declare_exchange();
  // Blocks set before placement filled their halos; what goes to other ranks is packed now.
  if (filled)
    for (std::size_t b = 0; b < grid.count(); ++b)
      if (holds(b) && !halo.exports[b].empty())
        pack_exports(b, graph->data(locs[b].main),
                     [&](Location<double> l) { return graph->data(l); });
}

void Stencil::place(const Runtime& runtime) {
  Impl& m = *impl_;
  if (!m.placement.placed) m.place(runtime.rank(), runtime.ranks());
}

void Stencil::set(std::span<const double> global, std::size_t level) {
  set(facade(*impl_).from_global(global, impl_->spec.size, "set()"), level);
}

void Stencil::set(const PointValue& value, std::size_t level) {
  facade(*impl_).check_given(bool(value), "set()");
  set(core::from_points(value), level);
}

void Stencil::set(const BoxFill& fill, std::size_t level) {
  Impl& m = *impl_;
  facade(m).check_given(bool(fill), "set()");
  m.check_level(level);
  for (std::size_t b = 0; b < m.grid.count(); ++b) {
    if (!m.holds(b)) continue;
    std::span<double> main = m.graph->data(m.locs[b].main);
    const auto rot = static_cast<std::uint64_t>(main[0]);
    const auto delta = -static_cast<std::ptrdiff_t>(level);
    m.grid.fill(b, m.level_data(b, main, rot, delta), fill, m.spec.fixed_value, true,
                m.level_side(b, main, rot, delta));
    // The spare buffer of Jacobi needs the fixed boundary too; its interior is overwritten.
    if (level == 0 && m.buffer_count > m.levels)
      m.grid.fill(b, m.level_data(b, main, rot, 1), fill, m.spec.fixed_value, true,
                  m.level_side(b, main, rot, 1));
    if (m.placement.placed)
      m.pack_exports(b, main, [&](Location<double> l) { return m.graph->data(l); });
    // Set-up work, which the block's first sweep would otherwise do (a value per cell of the
    // halo beyond fixed ends of the grid, twice).
    m.build_fixed_halo(b);
  }
  m.filled = true;
}

void Stencil::set_aux(std::size_t index, std::span<const double> global) {
  set_aux(index, facade(*impl_).from_global(global, impl_->spec.size, "set_aux()"));
}

void Stencil::set_aux(std::size_t index, const PointValue& value) {
  facade(*impl_).check_given(bool(value), "set_aux()");
  set_aux(index, core::from_points(value));
}

void Stencil::set_aux(std::size_t index, const BoxFill& fill) {
  Impl& m = *impl_;
  facade(m).check_given(bool(fill), "set_aux()");
  if (index >= m.spec.aux_grids)
    throw Error("stencil '" + m.spec.name + "': coefficient grid " + std::to_string(index) +
                " out of range; the spec declares " + std::to_string(m.spec.aux_grids));
  for (std::size_t b = 0; b < m.grid.count(); ++b)
    if (m.holds(b))
      m.grid.fill(b, m.graph->data(m.locs[b].aux).data() + index * m.grid.block(b).pad.count,
                  fill, PointValue(), true);
}

void Stencil::get_blocks(const BoxVisit& visit, std::size_t level) const {
  const Impl& m = *impl_;
  m.check_level(level);
  facade(m).visit_held(visit, [&](std::size_t b) { return m.held_level(b, level); });
}

std::vector<double> Stencil::get(std::size_t level) const {
  const Impl& m = *impl_;
  m.check_level(level);
  return facade(m).get([&](std::size_t b) { return m.held_level(b, level); }, "get()", "");
}

std::vector<double> Stencil::gather(Runtime& runtime, unsigned to, std::size_t level) const {
  const Impl& m = *impl_;
  m.check_level(level);
  const core::Facade f = facade(m);
  return f.gather(
      runtime, to, [&](std::size_t b) { return m.held_level(b, level); },
      f.who() + " level " + std::to_string(level));
}

std::size_t Stencil::block_count() const { return impl_->grid.count(); }

unsigned Stencil::home_rank(std::size_t block) const {
  const Impl& m = *impl_;
  return facade(m).home_rank(block,
                             [&](std::size_t b) { return m.graph->home_rank(m.locs[b].main); });
}

RunStats Stencil::run(Runtime& runtime, std::uint64_t steps) {
  Impl& m = *impl_;
  RunStats total;
  place(runtime);
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

RunStats Stencil::run_until(Runtime& runtime, const StopCondition& done, std::uint64_t max_steps) {
  Impl& m = *impl_;
  m.reds.check_can_stop(done);
  RunStats total;
  place(runtime);
  if (max_steps == 0) return total;
  const std::uint64_t D = m.spec.tb_depth;
  // A graph iteration is a group of D steps whose last contributes (Block::contributes), so
  // the condition is tested every D steps; a last, shorter group tests at the run's end.
  bool met = false;
  if (max_steps >= D) {
    m.shared->steps_per_iteration = D;
    RunStats s = runtime.run_until(*m.graph, m.reds.until(done, max_steps / D, met));
    total.iterations += s.iterations * D;
    total.seconds += s.seconds;
  }
  if (!met && max_steps % D != 0) {
    m.shared->steps_per_iteration = max_steps % D;
    RunStats s = runtime.run_until(*m.graph, m.reds.until(done, 1, met));
    total.iterations += max_steps % D;
    total.seconds += s.seconds;
  }
  return total;
}

Values Stencil::values() const { return Values(impl_->reds); }

std::uint64_t Stencil::steps_done() const {
  const Impl& m = *impl_;
  // A block this rank holds (every rank holds one): its header is current here.
  const std::size_t b = m.placement.placed ? m.placement.first_held() : 0;
  return static_cast<std::uint64_t>(std::as_const(*m.graph).data(m.locs[b].main)[0]);
}

}  // namespace ordo::stencil
