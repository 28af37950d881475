// The driver every stencil app shares: flags, .npy input/output, progress on a terminal,
// verification against the sequential reference, and the one result line
//   app=<name> size=<NxM..> blocks=<BxC..> iters=I workers=W seconds=S gstencils=G
//   verify=ok|fail|skipped [bandwidth_fraction=F] [tb=D when D > 1]
//   [tol=T when --tol T: iters is then the steps run]
//   [ranks=R control_messages=M when R > 1: M is rank 0's control messages in the run]
//   peak_rss=B0,B1,.. (each rank's peak resident bytes, VmHWM, at the end)
// (bandwidth_fraction only with --bandwidth and a grid larger than the last-level cache: the
// STREAM triad it takes costs time and memory beyond the run's, so an app measures only
// itself unless asked).
// Across ranks every rank runs the app unchanged: each fills (from the app's values or its rows
// of the --input .npy), verifies and writes (its slab of the one .npy) only the blocks it
// holds, so no rank holds a global grid but --verify's reference; the ranks agree on one
// verdict, and rank 0 alone prints the result line (docs/distributed.md, "Apps across ranks").
// An app describes itself with an AppDesc (spec, kernel, initial grids) and calls
// run_stencil_app from main.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ordo/bench.hpp>
#include <ordo/checkpoint.hpp>
#include <ordo/stencil.hpp>

#include "app_cli.hpp"
#include "npy.hpp"
#include "output_file.hpp"
#include "peak_rss.hpp"
#include "run_flags.hpp"
#include "stop_test.hpp"
#include "stream.hpp"

namespace ordo::app {

struct AppParams {
  std::vector<std::size_t> size, blocks;
  std::size_t tb = 1;
  int order = 2;  // wave3d only
  std::size_t points() const {
    std::size_t n = 1;
    for (auto s : size) n *= s;
    return n;
  }
};

// Runs `steps` iterations through run(n) (runs n more, returns their seconds). On a terminal,
// in pieces of about 2% of them (whole groups of `group`: temporal blocking's depth) with
// show(done) after each, so the progress line moves; else in one piece. Returns the seconds.
template <class Run>
double run_in_pieces(std::uint64_t steps, std::uint64_t group, Run&& run,
                     const std::function<void(std::uint64_t done)>& show) {
  if (isatty(STDERR_FILENO) == 0 || steps < 2 * group) return run(steps);
  const std::uint64_t piece = std::max<std::uint64_t>(group, steps / 50 / group * group);
  double seconds = 0;
  for (std::uint64_t done = 0; done < steps;) {
    const std::uint64_t n = std::min(piece, steps - done);
    seconds += run(n);
    done += n;
    show(done);
  }
  return seconds;
}

struct AppDesc {
  std::string name;  // "heat2d": binary ordo-heat2d
  std::string summary;
  std::size_t dims = 2;
  std::string default_size, default_blocks;
  std::uint64_t default_iters = 100;
  // Named problems (--dataset NAME sets --size and --iters; PolyBench's sizes): none by default.
  struct Dataset {
    std::string name, size;
    std::uint64_t iters;
  };
  std::vector<Dataset> datasets;
  bool has_order = false;    // --order k (wave3d)
  bool supports_tb = true;   // Jacobi apps; Gauss-Seidel ones refuse --tb > 1
  // Completes "--tb D: <name> ..." when supports_tb is false.
  std::string no_tb_reason =
      "is a Gauss-Seidel sweep; temporal blocking applies to Jacobi apps only";
  // Whether the app runs on the single-stage layer, whose stores and cache tiles --stores and
  // --tile-bytes tune; an app that does not (harris: a pipeline) does not offer them.
  bool layer_tuning = true;
  std::function<stencil::Spec(const AppParams&)> spec;
  std::function<stencil::Kernel(const AppParams&)> kernel;
  // The initial value at a global coordinate when no --input is given, for every time level
  // (no rank builds a global grid: each fills the blocks it holds).
  std::function<stencil::PointValue(const AppParams&)> initial;
  // Coefficient grid i at a global coordinate; needed when the spec declares aux_grids.
  std::function<stencil::PointValue(const AppParams&, std::size_t i)> aux;
  // Optional hand-written sequential reference (newest level after iters steps); default:
  // stencil::reference with the app's kernel over one global array.
  std::function<std::vector<double>(const AppParams&, const std::vector<double>& u0,
                                    std::uint64_t iters)> reference;
  // For --tol T (an app without it refuses the flag): the same loop stopping as stop says
  // (stop_test.hpp). The app's kernel contributes the largest change of a step to the
  // stencil's reduction 0 ("change", a max) wherever Block::contributes().
  std::function<std::vector<double>(const AppParams&, const std::vector<double>& u0,
                                    std::uint64_t iters, StopTest& stop)>
      reference_until;
  // For an app that is not a single-stage stencil (harris: a pipeline): builds and runs its
  // own graph instead of the layer's. It fills its blocks from u0, runs `steps` steps on
  // `runtime` (calling progress(done) between pieces), and returns the seconds and a visitor
  // of the result's blocks this rank holds (which keeps the graph alive). Across ranks it
  // places block b on rank b * ranks / blocks like the layer (the driver has refused more
  // ranks than blocks).
  struct FastResult {
    double seconds = 0;
    std::function<void(const stencil::BoxVisit&)> visit_blocks;
  };
  std::function<FastResult(const AppParams&, const stencil::BoxFill& u0, ordo::Runtime& runtime,
                           std::uint64_t steps,
                           const std::function<void(std::uint64_t done)>& progress)>
      fast_path;
  // Bytes the kernel must move per point per iteration (reads of every grid + the write).
  double bytes_per_point = 16;
  // Layer steps per app iteration (gsrb3d: a red and a black half-sweep).
  std::uint64_t steps_per_iter = 1;
};

// Points of the blocks rank `rank` of `ranks` holds: block b (C order over the block grid) on
// rank b * ranks / count, as the layer places them, each of its balanced extents.
inline std::uint64_t points_on_rank(const AppParams& p, unsigned ranks, unsigned rank) {
  std::uint64_t count = 1;
  for (std::size_t b : p.blocks) count *= b;
  // b * ranks / count == rank exactly for b in [first(rank), first(rank + 1)).
  auto first = [&](std::uint64_t r) { return (r * count + ranks - 1) / ranks; };
  std::uint64_t points = 0;
  for (std::uint64_t b = first(rank); b < first(rank + 1); ++b) {
    std::uint64_t rest = b, n = 1;
    for (std::size_t k = p.size.size(); k-- > 0;) {
      const std::size_t i = rest % p.blocks[k];
      rest /= p.blocks[k];
      n *= stencil::block_low(i + 1, p.size[k], p.blocks[k]) -
           stencil::block_low(i, p.size[k], p.blocks[k]);
    }
    points += n;
  }
  return points;
}

// The index of global coordinate c in a C-order array of p's size.
inline std::size_t global_index(const AppParams& p, stencil::Coord c) {
  std::size_t at = 0;
  for (std::size_t k = 0; k < p.size.size(); ++k)
    at = at * p.size[k] + static_cast<std::size_t>(c[k]);
  return at;
}

// A fill from the value at each coordinate.
inline stencil::BoxFill point_fill(stencil::PointValue value) {
  return [value = std::move(value)](const stencil::Box& b) {
    stencil::for_each_box_row(b, [&](double* row, stencil::Coord first, std::size_t len) {
      std::array<std::int64_t, stencil::kMaxDims> x{};
      std::copy(first.begin(), first.end(), x.begin());
      for (std::size_t j = 0; j < len; ++j, ++x[b.dims - 1])
        row[j] = value(stencil::Coord(x.data(), b.dims));
    });
  };
}

// A fill that reads the rows of each box from elements [first, first + points) of an .npy file
// (one time level of it): a seek and a read per row, nothing else of the file.
inline stencil::BoxFill npy_fill(const AppParams& p, const NpyFile& file, std::size_t first) {
  return [&p, &file, first](const stencil::Box& b) {
    stencil::for_each_box_row(b, [&](double* row, stencil::Coord c, std::size_t len) {
      file.read(first + global_index(p, c), std::span<double>(row, len));
    });
  };
}

// The whole grid from a fill: for --verify's sequential reference only.
inline std::vector<double> global_grid(const AppParams& p, const stencil::BoxFill& fill) {
  std::vector<double> grid(p.points());
  stencil::Box box;
  box.dims = p.size.size();
  std::ptrdiff_t stride = 1;
  for (std::size_t k = box.dims; k-- > 0;) {
    box.hi[k] = static_cast<std::int64_t>(p.size[k]);
    box.stride[k] = stride;
    stride *= static_cast<std::ptrdiff_t>(p.size[k]);
  }
  box.data = grid.data();
  fill(box);
  return grid;
}

// A deterministic pseudo-random value in [0, 1) for grid index i (splitmix64).
inline double hash01(std::uint64_t i) {
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// hash01 of each point's index in the grid: the apps' pseudo-random initial values.
inline stencil::PointValue hashed_values(const AppParams& p, std::uint64_t scale = 1,
                                         std::uint64_t offset = 0) {
  return [p, scale, offset](stencil::Coord c) { return hash01(global_index(p, c) * scale + offset); };
}

// What --verify says when a rank's result is not finite (bit 1 of its outcome), or "".
inline std::string non_finite_message(const std::vector<int>& outcomes) {
  for (std::size_t r = 0; r < outcomes.size(); ++r)
    if (outcomes[r] & 2)
      return "the result on rank " + std::to_string(r) +
             " holds a NaN or an infinity: --verify "
             "fails it whatever the reference says";
  return "";
}

inline int run_stencil_app(const AppDesc& app, int argc, char** argv) {
  CLI::App cli{app.summary, "ordo-" + app.name};
  std::string size_text = app.default_size, blocks_text = app.default_blocks;
  std::uint64_t iters = app.default_iters;
  unsigned workers = 0;  // 0: the runtime's default, one per core of this rank's share
  bool verify = false, bandwidth = false;
  std::size_t tb = 1;
  int order = 2;
  std::string input, output, trace_path, dataset;
  double tol = -1;
  auto* size_opt =
      cli.add_option("--size", size_text,
                     app.dims == 1 ? "grid size N" : "grid size NxM.. (slowest first)")
          ->capture_default_str();
  cli.add_option("--blocks", blocks_text,
                 "block grid BxC..; at most --size (blocks differ by at most one point)")
      ->capture_default_str();
  auto* iters_opt = cli.add_option("--iters", iters, "time steps")
                        ->check(ordo::cli::Integer(1, max_iters))
                        ->capture_default_str();
  CLI::Option* tol_opt = nullptr;
  if (app.reference_until)
    tol_opt = cli.add_option("--tol", tol,
                             "stop after the first step whose largest change |new - old| is at "
                             "most T (--iters is then the most steps; with --tb D the test "
                             "comes every D steps)")
                  ->check(ordo::cli::Real(0, 1e300));
  if (!app.datasets.empty()) {
    std::vector<std::string> names;
    std::string sizes;
    for (const auto& d : app.datasets) {
      names.push_back(d.name);
      sizes += (sizes.empty() ? "" : ", ") + d.name + " " + d.size + " x " + std::to_string(d.iters);
    }
    cli.add_option("--dataset", dataset,
                   "a named problem: --size and --iters (" + sizes + "); --iters overrides")
        ->check(CLI::IsMember(names))
        ->excludes(size_opt);
  }
  cli.add_option("--workers", workers,
                 "worker threads (default: one per core of this process's share of the host, "
                 "docs/scheduler.md)")
      ->check(ordo::cli::Integer(1, max_workers));
  cli.add_flag("--verify", verify,
               "compare bit for bit with a sequential reference; that reference holds the whole "
               "grid on every rank (a test mode: without it no rank holds more than its blocks)");
  cli.add_flag("--bandwidth", bandwidth,
               "after the run, measure the memory bandwidth (STREAM triad with the workers, "
               "arrays beyond the cache) and print bandwidth_fraction: the run's bytes per "
               "second against it (grids larger than the last-level cache only)");
  cli.add_option("--tb", tb, "temporal blocking depth (halos of depth*h, exchanged every depth "
                             "steps)")
      ->check(ordo::cli::Integer(1, 1u << 20))
      ->capture_default_str();
  cli.add_option("--input", input,
                 "initial grid (.npy, float64, C order; each rank reads its own blocks only); "
                 "apps with several time levels also take them stacked along a first axis, "
                 "newest first")
      ->check(ordo::cli::Path());
  cli.add_option("--output", output,
                 "write the final grid (.npy; each rank writes its own blocks); apps with "
                 "several time levels write them all, stacked along a first axis, newest first")
      ->check(ordo::cli::Path());
  cli.add_option("--trace", trace_path,
                 "record a trace of the run to FILE (read it with ordo-trace; docs/tracing.md)")
      ->check(ordo::cli::Path())
      ->type_name("FILE");
  std::string checkpoint_dir, restart_dir;
  std::uint64_t checkpoint_every = 0;
  const ordo::app::CheckpointFlags checkpoint_flags{checkpoint_dir, checkpoint_every, restart_dir};
  ordo::app::add_checkpoint_flags(
      cli, checkpoint_flags,
      "iterations of the graph between two checkpoints (with --tb D: D steps each)");
  std::string stores = "cached";
  std::size_t tile_bytes = 0;
  if (app.layer_tuning) {
    cli.add_option("--stores", stores,
                   "output stores: cached, or streaming (non-temporal, through a per-thread "
                   "scratch; Jacobi apps, which then run double-buffered instead of in place)")
        ->check(CLI::IsMember({"cached", "streaming"}))
        ->capture_default_str();
    cli.add_option("--tile-bytes", tile_bytes,
                   "working set of one cache tile of temporal blocking, or of one slab of an "
                   "in-place sweep (0: automatic)")
        ->check(ordo::cli::Integer(0, std::uint64_t{1} << 40))
        ->capture_default_str();
  }
  if (app.has_order)
    cli.add_option("--order", order, "order k of the spatial stencil: 2, 4, 6, 8, 10 or 12")
        ->check(ordo::cli::Integer(0, 1000))
        ->capture_default_str();
  if (int rc = cli::parse(cli, argc, argv); rc >= 0) return rc;

  ordo::app::check_checkpoint_flags(checkpoint_flags);
  if ((!checkpoint_dir.empty() || !restart_dir.empty()) && app.fast_path)
    throw Error(app.name + " runs its own pipeline, which takes no checkpoints; leave out "
                "--checkpoint and --restart");
  if (tb > 1 && !app.supports_tb)
    throw Error("--tb " + std::to_string(tb) + ": " + app.name + " " + app.no_tb_reason);
  if (app.has_order && (order < 2 || order > 12 || order % 2 != 0))
    throw Error("--order " + std::to_string(order) + " is out of range: give 2, 4, 6, 8, 10 or 12");
  bool size_given = size_opt->count() > 0;
  for (const auto& d : app.datasets)
    if (d.name == dataset) {
      size_text = d.size;
      size_given = true;
      if (iters_opt->count() == 0) iters = d.iters;
    }
  // "Cannot write here" is found now, not after the run (output_file.hpp).
  std::optional<OutputFile> output_file;
  if (!output.empty()) output_file.emplace(output);

  AppParams p;
  // --input: only its header is read here, and checked against --size before any data is; each
  // rank then reads the rows of its own blocks (npy_fill).
  std::optional<NpyFile> in;
  std::vector<std::size_t> in_shape;
  std::size_t in_levels = 1;  // time levels in the input file: (L, size...) holds L of them
  if (!input.empty()) {
    in.emplace(input);
    in_shape = in->header().shape;
    if (in_shape.size() == app.dims + 1) {
      in_levels = in_shape[0];
      in_shape.erase(in_shape.begin());
    }
    if (in_shape.size() != app.dims)
      throw Error("--input '" + input + "' has " + std::to_string(in_shape.size()) +
                  " dimension(s) (" + join_shape(in_shape) + "); " + app.name + " needs " +
                  std::to_string(app.dims) + " (or one more for several time levels)");
    for (std::size_t e : in_shape)
      if (e == 0)
        throw Error("--input '" + input + "' has shape " + join_shape(in_shape) +
                    ", an empty grid; give a grid of at least one point along each dimension");
    if (!size_given) size_text = join_shape(in_shape);
  }
  p.size = parse_shape(size_text, app.dims, "--size");
  p.blocks = parse_shape(blocks_text, app.dims, "--blocks");
  p.tb = tb;
  p.order = order;
  if (in && in_shape != p.size)
    throw Error("--input '" + input + "' has shape " + join_shape(in_shape) + " but --size is " +
                size_text + (dataset.empty() ? "" : " (--dataset " + dataset + ")") +
                "; give matching sizes or leave --size out");
  check_blocks_fit(p.size, p.blocks, size_text, blocks_text);

  stencil::Spec spec = app.spec(p);
  const bool until = tol_opt != nullptr && tol_opt->count() > 0;
  if (until) spec.reductions = {{"change", stencil::Reduce::max}};
  // Every time level and coefficient grid, and --verify's result: their sizes in bytes at all.
  // Whether a rank's share fits is judged once the ranks are known (below).
  const std::uint64_t grids = spec.time_levels + spec.aux_grids;
  const std::uint64_t whole_bytes = grid_bytes(p.size, grids + 1, "--size " + size_text);
  spec.size = p.size;
  spec.blocks = p.blocks;
  spec.tb_depth = tb;
  spec.schedule.tile_bytes = tile_bytes;
  if (stores == "streaming" && !app.supports_tb)
    throw Error("--stores streaming: " + app.name + " is a Gauss-Seidel sweep, whose kernel "
                "reads its output; use --stores cached");
  spec.schedule.stores =
      stores == "streaming" ? stencil::Stores::streaming : stencil::Stores::cached;
  stencil::Kernel kernel = app.kernel(p);
  // The in-place Jacobi runs in the double-buffered form where it cannot: with streaming
  // stores, and with temporal blocking of a kernel that reads several time levels.
  if (spec.traversal == stencil::Traversal::jacobi_in_place &&
      (spec.schedule.stores == stencil::Stores::streaming || (tb > 1 && spec.time_levels > 1)))
    spec.traversal = stencil::Traversal::jacobi;
  const bool fast = static_cast<bool>(app.fast_path);
  ordo::Graph g;
  std::optional<stencil::Stencil> st;
  if (!fast) st.emplace(g, spec, kernel);  // checks the spec (halo vs block, ...)

  // Where the initial time levels (newest first) and coefficient grids come from: the file (one
  // grid per level, or only the newest: then the older ones start equal to it, "at rest") or
  // the app's values at each coordinate.
  if (in_levels != 1 && in_levels != spec.time_levels)
    throw Error("--input '" + input + "' holds " + std::to_string(in_levels) +
                " time levels; " + app.name + " reads " + std::to_string(spec.time_levels) +
                " (give one grid, or all of them stacked along a new first axis)");
  std::vector<stencil::BoxFill> levels;
  for (std::size_t l = 0; l < spec.time_levels; ++l)
    levels.push_back(in ? npy_fill(p, *in, (l < in_levels ? l : 0) * p.points())
                        : point_fill(app.initial(p)));
  std::vector<stencil::BoxFill> aux;
  for (std::size_t i = 0; i < spec.aux_grids; ++i) aux.push_back(point_fill(app.aux(p, i)));

  const std::uint64_t steps = iters * app.steps_per_iter;
  const bool progress = isatty(STDERR_FILENO) != 0;
  auto show = [&](std::uint64_t done) {
    if (!progress) return;
    std::fprintf(stderr, "\rordo-%s: step %llu/%llu (%3.0f%%)", app.name.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(steps),
                 100.0 * static_cast<double>(done) / static_cast<double>(steps));
    if (done == steps) std::fprintf(stderr, "\r\033[K");
  };
  // Across ranks (ordorun, mpirun, srun) every rank runs this same code (SPMD): it places the
  // blocks (block b on rank b * ranks / blocks), fills, runs and reads only its own.
  ordo::Runtime rt(ordo::RuntimeOptions{.workers = workers,
                                        .trace_path = trace_path,
                                        .checkpoint_dir = checkpoint_dir,
                                        .checkpoint_every = checkpoint_every});
  workers = rt.workers();
  const unsigned rank = rt.rank(), ranks = rt.ranks();
  check_every_rank_has_a_block(ranks, p.blocks, blocks_text);
  // Before any block is filled, what this rank will hold: its blocks of every grid, and with
  // --verify the reference's whole grids (each rank builds them). With the ranks of its host
  // together, so that a problem spread over one host's ranks is refused like one process's.
  // (The first run judges the graph's locations exactly, but after the blocks are filled.)
  const std::uint64_t own_bytes = sizeof(double) * grids * points_on_rank(p, ranks, rank);
  const std::uint64_t extra = verify ? whole_bytes : 0;
  rt.check_memory_on_all_ranks(own_bytes > UINT64_MAX - extra ? UINT64_MAX : own_bytes + extra,
                               "--size " + size_text + " is too large: its blocks on each rank (" +
                                   std::to_string(grids) + " grid(s) of 8-byte values" +
                                   (verify ? ", and --verify's whole grids" : "") + ")");
  double seconds = 0;
  // Visits the blocks of a result time level this rank holds.
  std::function<void(const stencil::BoxVisit&, std::size_t level)> visit_blocks;
  const std::uint64_t control_before = bench::control_messages(rt);
  if (fast) {
    auto r = app.fast_path(p, levels[0], rt, steps, show);
    seconds = r.seconds;
    visit_blocks = [v = std::move(r.visit_blocks)](const stencil::BoxVisit& f, std::size_t) { v(f); };
  } else {
    st->place(rt);
    for (std::size_t l = 0; l < levels.size(); ++l) st->set(levels[l], l);
    for (std::size_t i = 0; i < aux.size(); ++i) st->set_aux(i, aux[i]);
    // A restart loads the checkpoint's blocks (their headers count the steps done) over the
    // initial ones just set, and the run does the remaining steps.
    // Relaunched by ordorun --restarts, the job resumes from its own checkpoints as --restart
    // would (ordo::resume: nothing before the first is complete).
    std::uint64_t steps_left = steps;
    const std::string resumed_from = !restart_dir.empty() ? restart_dir : checkpoint_dir;
    if (!restart_dir.empty() ? (rt.restart(g, restart_dir), true)
                             : ordo::resume(rt, g, checkpoint_dir) > 0) {
      const std::uint64_t done = st->steps_done();
      if (done > steps)
        throw Error("--restart " + resumed_from + ": its newest checkpoint is after step " +
                    std::to_string(done) + ", beyond the " + std::to_string(steps) +
                    " steps asked; give the --iters of the run that wrote it");
      steps_left = steps - done;
      if (rt.rank() == 0)
        std::fprintf(stderr, "ordo-%s: resumed after step %llu of %llu from '%s'%s\n",
                     app.name.c_str(), static_cast<unsigned long long>(done),
                     static_cast<unsigned long long>(steps), resumed_from.c_str(),
                     done == steps ? "; nothing left to run" : "");
    }
    if (steps_left > 0) {
      try {
        if (until)
          seconds = st->run_until(
                          rt, [tol](const stencil::Values& v) { return v[0] <= tol; }, steps_left)
                        .seconds;
        else
          seconds = run_in_pieces(
              steps_left, tb, [&](std::uint64_t n) { return st->run(rt, n).seconds; }, show);
      } catch (const PeerFailure& e) {
        if (checkpoint_dir.empty() || dynamic_cast<const ProtocolError*>(&e)) throw;
        // What was computed is not lost: say how to go on from it.
        throw Error(peer_failure_message(e, checkpoint_dir));
      }
    }
    visit_blocks = [&](const stencil::BoxVisit& f, std::size_t level) { st->get_blocks(f, level); };
  }
  const std::uint64_t control_messages = bench::control_messages(rt) - control_before;
  // With --tol the steps run, which the result line's iters reports.
  const std::uint64_t steps_run = fast ? steps : st->steps_done();
  if (until) iters = steps_run / app.steps_per_iter;

  // Each rank checks its own blocks against the whole sequential reference (small grids).
  int outcome = 0;  // 1: this rank's blocks differ from the reference
  if (verify) {  // bytes, not operator==: bit-identical means signed zeros and NaNs too
    std::vector<double> want;
    if (until) {
      StopTest stop{tol, tb, 0};
      want = app.reference_until(p, global_grid(p, levels[0]), steps, stop);
      if (stop.steps != steps_run) outcome |= 1;
    } else if (app.reference) {
      want = app.reference(p, global_grid(p, levels[0]), iters);
    } else {
      std::vector<std::vector<double>> level_grids, aux_grids;
      for (const auto& f : levels) level_grids.push_back(global_grid(p, f));
      for (const auto& f : aux) aux_grids.push_back(global_grid(p, f));
      want = stencil::reference(spec, kernel, level_grids, aux_grids, steps)[0];
    }
    if (want.size() != p.points()) outcome |= 1;
    if (outcome == 0)
      visit_blocks([&](const stencil::ConstBox& b) {
        stencil::for_each_box_row(b, [&](const double* row, stencil::Coord c, std::size_t len) {
          if (std::memcmp(&want[global_index(p, c)], row, len * sizeof(double)) != 0) outcome |= 1;
          if (!is_finite_result(std::span<const double>(row, len))) outcome |= 2;
        });
      }, 0);
  }
  // One verdict for the job: every rank learns every rank's outcome (bit 0: this rank's blocks
  // differ from the reference; bit 1: they hold a value that is not finite).
  const std::vector<int> outcomes = rt.gather_values(outcome);
  // Each rank writes the rows of its own blocks, every time level (newest first, so that
  // --input restarts the run exactly), straight from the blocks; the file appears whole or not
  // at all (output_file.hpp).
  if (output_file) {
    std::vector<std::size_t> shape = p.size;
    if (spec.time_levels > 1) shape.insert(shape.begin(), spec.time_levels);
    std::vector<NpySegment> segments;
    const std::size_t n = p.points();
    for (std::size_t l = 0; l < spec.time_levels; ++l)
      visit_blocks([&](const stencil::ConstBox& b) {
        stencil::for_each_box_row(b, [&](const double* row, stencil::Coord c, std::size_t len) {
          segments.push_back({l * n + global_index(p, c), std::span<const double>(row, len)});
        });
      }, l);
    output_file->write(rt, shape, std::move(segments));
  }
  std::string verdict = "skipped";
  if (verify) {
    verdict = "ok";
    for (int o : outcomes)
      if (o != 0) verdict = "fail";
    if (const std::string why = non_finite_message(outcomes); !why.empty() && rank == 0)
      std::fprintf(stderr, "ordo-%s: %s\n", app.name.c_str(), why.c_str());
  }

  const double pts = static_cast<double>(p.points());
  // A restart with no step left ran nothing in no time: a rate of 0, not 0/0 or infinity.
  const double gst = seconds > 0 ? pts * static_cast<double>(iters) / seconds / 1e9 : 0.0;
  std::string line = fmt::format(
      "app={} size={} blocks={} iters={} workers={} seconds={:.6f} gstencils={:.4f} verify={}",
      app.name, join_shape(p.size), join_shape(p.blocks), iters, workers, seconds, gst, verdict);
  const double grid_bytes = pts * 8.0 * static_cast<double>(spec.time_levels + 1 + spec.aux_grids);
  const std::size_t llc = last_level_cache_bytes();
  const bool beyond_cache = llc > 0 && grid_bytes > static_cast<double>(llc);
  // The bound is the triad bandwidth of every rank's workers streaming at once: each rank
  // measures with its own workers right after the barrier above, and the job's bound is their
  // sum (on one host they share its memory; across hosts they add up). -1: a rank whose cache
  // holds the grid (another kind of host) measured nothing, and no fraction is printed.
  const bool measure = bandwidth && beyond_cache;
  double triad = measure ? stream_triad_bytes_per_second(workers) : -1;
  if (ranks > 1 && bandwidth) {
    const std::vector<double> all = rt.gather_values(triad);
    for (unsigned r = 0; r < ranks; ++r)
      triad = r == 0 ? all[0] : (triad < 0 || all[r] < 0 ? -1 : triad + all[r]);
  }
  if (measure && triad > 0 && seconds > 0) {
    const double moved = app.bytes_per_point * pts * static_cast<double>(steps_run) / seconds;
    line += fmt::format(" bandwidth_fraction={:.3f}", moved / triad);
  }
  if (tb > 1) line += fmt::format(" tb={}", tb);
  if (until) line += fmt::format(" tol={}", tol);
  if (ranks > 1) line += fmt::format(" ranks={} control_messages={}", ranks, control_messages);
  // Each rank's peak resident memory, read last (after the output and any triad), so that it
  // is the process's whole peak, the figure /usr/bin/time and the batch system report.
  line += " " + peak_rss_field(rt.gather_values(peak_rss_bytes()));
  // Across ranks only rank 0 prints it: the verdict is the job's, the seconds rank 0's run.
  if (rank == 0) fmt::print("{}\n", line);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace ordo::app
