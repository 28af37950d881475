// ordo-lbm: D2Q9 Lattice-Boltzmann (BGK) lid-driven cavity on a stencil-layer Pipeline
// (apps/common/lbm.hpp has the model). Each step is one stage over the nine populations: it
// pulls them from the neighbours, bounces them back at the walls and collides them. The
// pipeline's two stages run the steps in pairs, f -> g and g -> f (a stage writes new grids),
// so --iters counts steps and is even. --tol T stops after the first pair of steps whose second
// changes no velocity by more than T (the stage contributes each block's largest change to a
// max reduction); --verify compares the populations and the steps run, bit for bit, with a
// plain sequential loop in this binary. --checkpoint DIR --checkpoint-every N and --restart DIR
// as in the stencil apps (docs/checkpoint.md), on any number of ranks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <ordo/bench.hpp>
#include <ordo/checkpoint.hpp>
#include <ordo/stencil.hpp>

#include "app_cli.hpp"
#include "lbm.hpp"
#include "lbm_cli.hpp"
#include "output_file.hpp"
#include "peak_rss.hpp"
#include "run_flags.hpp"

namespace {

namespace st = ordo::stencil;
namespace lbm = ordo::app::lbm;
using lbm::kQ;
using lbm::Problem;
using lbm::reference;
using lbm::Result;

// One step over a block: the rows and columns beside a wall point by point (lbm::pull), the
// rest through lbm::row. With Track, contributes the block's largest change (reduction 0).
template <bool Track>
st::StageKernel step_kernel(const Problem& p) {
  return [p](const st::StageBlock& b) {
    const std::ptrdiff_t rs = b.stride[0];
    const std::ptrdiff_t r0 = b.origin[0], c0 = b.origin[1];
    const std::ptrdiff_t rows = b.hi[0], cols = b.hi[1];
    auto at = [&](int i, std::ptrdiff_t r, std::ptrdiff_t c) {
      return b.in[static_cast<std::size_t>(i)][(r - r0) * rs + (c - c0)];
    };
    double big = 0;
    auto point = [&](std::ptrdiff_t r, std::ptrdiff_t c) {
      double fs[kQ], out[kQ], ux, uy;
      lbm::pull(at, p.ny, p.nx, r0 + r, c0 + c, p.lid, fs);
      lbm::collide(fs, p.omega, out, ux, uy);
      const std::ptrdiff_t x = r * rs + c;
      for (int i = 0; i < kQ; ++i) b.out[static_cast<std::size_t>(i)][x] = out[i];
      if constexpr (Track) {
        double here[kQ];
        for (int i = 0; i < kQ; ++i) here[i] = b.in[static_cast<std::size_t>(i)][x];
        const double ch = lbm::change(here, ux, uy);
        big = big < ch ? ch : big;
      }
    };
    for (std::ptrdiff_t r = 0; r < rows; ++r) {
      const std::ptrdiff_t gr = r0 + r;
      if (gr == 0 || gr == p.ny - 1) {
        for (std::ptrdiff_t c = 0; c < cols; ++c) point(r, c);
        continue;
      }
      const std::ptrdiff_t lo = c0 == 0 ? 1 : 0;
      const std::ptrdiff_t hi = c0 + cols == p.nx ? cols - 1 : cols;
      if (lo > 0) point(r, 0);
      if (hi > lo) {
        const double* in[kQ];
        double* out[kQ];
        for (int i = 0; i < kQ; ++i) {
          in[i] = b.in[static_cast<std::size_t>(i)] + r * rs + lo;
          out[i] = b.out[static_cast<std::size_t>(i)] + r * rs + lo;
        }
        const double m = lbm::row<Track>(in, out, rs, static_cast<std::size_t>(hi - lo), p.omega);
        big = big < m ? m : big;
      }
      if (hi < cols && hi >= lo) point(r, cols - 1);
    }
    if constexpr (Track) b.contribute(0, big);
  };
}

int run(int argc, char** argv) {
  CLI::App cli{
      "D2Q9 Lattice-Boltzmann lid-driven cavity on a block-decomposed grid (one "
      "pipeline stage per step over the nine populations)",
      "ordo-lbm"};
  std::string size_text = "256x256", blocks_text = "2x2", output, trace_path;
  std::uint64_t iters = 1000;
  unsigned workers = 0;
  bool verify = false;
  Problem pb;
  cli.add_option("--size", size_text, "grid size NxM (rows x columns)")->capture_default_str();
  cli.add_option("--blocks", blocks_text,
                 "block grid BxC; at most --size (blocks differ by at most one point)")
      ->capture_default_str();
  CLI::Option* tol_opt = lbm::add_model_flags(cli, pb, iters);
  // No words for --iters and --tol: they are the model flags above.
  ordo::app::add_run_flags(
      cli, {iters, pb.tol, workers, verify, output, trace_path},
      {.iters = nullptr,
       .tol = nullptr,
       .verify = "compare the populations and the steps run bit for bit with a sequential loop",
       .output = "write the populations after the run (.npy, float64, 9xNxM, direction first)"});
  std::string checkpoint_dir, restart_dir;
  std::uint64_t checkpoint_every = 0;
  const ordo::app::CheckpointFlags checkpoint_flags{checkpoint_dir, checkpoint_every, restart_dir};
  ordo::app::add_checkpoint_flags(
      cli, checkpoint_flags, "iterations of the pipeline (pairs of steps) between two checkpoints");
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  ordo::app::check_checkpoint_flags(checkpoint_flags);
  lbm::finish_model_flags(pb, iters, tol_opt);
  const bool until = pb.tol >= 0;

  std::optional<ordo::app::OutputFile> output_file;
  if (!output.empty()) output_file.emplace(output);
  const std::vector<std::size_t> size = ordo::app::parse_shape(size_text, 2, "--size");
  const std::vector<std::size_t> blocks = ordo::app::parse_shape(blocks_text, 2, "--blocks");
  ordo::app::check_blocks_fit(size, blocks, size_text, blocks_text);
  // 18 grids in the pipeline; --verify's loop holds 18 more.
  ordo::app::check_grid_fits(size, verify ? 36 : 18, "--size " + size_text);
  pb.ny = static_cast<std::ptrdiff_t>(size[0]);
  pb.nx = static_cast<std::ptrdiff_t>(size[1]);

  st::PipelineSpec spec;
  spec.name = "lbm";
  spec.size = size;
  spec.blocks = blocks;
  std::vector<std::string> f, g;
  for (int i = 0; i < kQ; ++i) {
    f.push_back("f" + std::to_string(i));
    g.push_back("g" + std::to_string(i));
  }
  spec.stages.push_back({"f>g", f, g, st::moore(2, 1), step_kernel<false>(pb)});
  spec.stages.push_back(
      {"g>f", g, f, st::moore(2, 1), until ? step_kernel<true>(pb) : step_kernel<false>(pb)});
  if (until) {
    spec.reductions = {{"change", st::Reduce::max}};
    spec.stages[1].contributes = {"change"};
  }
  ordo::Graph graph;
  st::Pipeline pipe(graph, spec);

  ordo::Runtime rt(ordo::RuntimeOptions{.workers = workers,
                                        .trace_path = trace_path,
                                        .checkpoint_dir = checkpoint_dir,
                                        .checkpoint_every = checkpoint_every});
  workers = rt.workers();
  const unsigned rank = rt.rank(), ranks = rt.ranks();
  ordo::app::check_every_rank_has_a_block(ranks, blocks, blocks_text);
  pipe.place(rt);
  for (int i = 0; i < kQ; ++i)
    pipe.set(f[static_cast<std::size_t>(i)], [i](st::Coord) { return lbm::initial(i); });
  // A restart loads every grid's blocks and the reduced change over the initial values just
  // set, on any number of ranks; a relaunch by ordorun --restarts resumes from --checkpoint's
  // directory (ordo::resume).
  std::uint64_t first = 0;
  const std::string resumed_from = !restart_dir.empty() ? restart_dir : checkpoint_dir;
  if (!restart_dir.empty())
    first = rt.restart(graph, restart_dir);
  else if (!checkpoint_dir.empty())
    first = ordo::resume(rt, graph, checkpoint_dir);
  if (first > iters / 2)
    throw ordo::Error("--restart " + resumed_from + ": its newest checkpoint is after step " +
                      std::to_string(2 * first) + ", beyond the " + std::to_string(iters) +
                      " asked; give the --iters of the run that wrote it");
  const auto met = [tol = pb.tol](const st::Values& v) { return v[0] <= tol; };
  // The uninterrupted run tested the change after the checkpoint's iteration too: stopped
  // there, it runs nothing more.
  const bool stopped = first > 0 && until && met(pipe.values());
  const std::uint64_t control_before = ordo::bench::control_messages(rt);
  ordo::RunStats stats{};
  if (first < iters / 2 && !stopped) {
    try {
      stats = until ? pipe.run_until(rt, met, iters / 2 - first) : pipe.run(rt, iters / 2 - first);
    } catch (const ordo::PeerFailure& e) {
      if (checkpoint_dir.empty() || dynamic_cast<const ordo::ProtocolError*>(&e)) throw;
      throw ordo::Error(ordo::app::peer_failure_message(e, checkpoint_dir));
    }
  }
  const std::uint64_t control_messages = ordo::bench::control_messages(rt) - control_before;
  const std::uint64_t steps_run = 2 * stats.iterations;
  const std::uint64_t steps = 2 * (first + stats.iterations);

  int outcome = 0;  // 1: this rank's blocks (or its step count) differ from the loop's
  if (verify) {
    const Result want = reference(pb);
    if (want.steps != steps) outcome = 1;
    for (int i = 0; i < kQ && outcome == 0; ++i)
      pipe.get_blocks(f[static_cast<std::size_t>(i)], [&](const st::ConstBox& b) {
        st::for_each_box_row(b, [&](const double* row, st::Coord c, std::size_t len) {
          const auto at = static_cast<std::size_t>(c[0]) * size[1] + static_cast<std::size_t>(c[1]);
          if (std::memcmp(&want.f[static_cast<std::size_t>(i)][at], row, len * sizeof(double)) != 0)
            outcome = 1;
        });
      });
  }
  struct RankEnd {
    int outcome;
    std::uint64_t peak_rss;
  };
  const std::vector<RankEnd> ends = rt.gather_values(RankEnd{outcome, ordo::app::peak_rss_bytes()});
  if (output_file) {
    std::vector<ordo::app::NpySegment> segments;
    const std::size_t n = size[0] * size[1];
    for (int i = 0; i < kQ; ++i)
      pipe.get_blocks(f[static_cast<std::size_t>(i)], [&](const st::ConstBox& b) {
        st::for_each_box_row(b, [&](const double* row, st::Coord c, std::size_t len) {
          segments.push_back({static_cast<std::size_t>(i) * n +
                                  static_cast<std::size_t>(c[0]) * size[1] +
                                  static_cast<std::size_t>(c[1]),
                              std::span<const double>(row, len)});
        });
      });
    output_file->write(rt, {static_cast<std::size_t>(kQ), size[0], size[1]}, std::move(segments));
  }
  std::string verdict = "skipped";
  std::vector<std::uint64_t> peaks;
  if (verify) verdict = "ok";
  for (const RankEnd& e : ends) {
    if (verify && e.outcome != 0) verdict = "fail";
    peaks.push_back(e.peak_rss);
  }
  const double pts = static_cast<double>(size[0] * size[1]);
  std::string line = fmt::format(
      "app=lbm size={} blocks={} iters={} workers={} seconds={:.6f} gstencils={:.4f} verify={}",
      ordo::app::join_shape(size), ordo::app::join_shape(blocks), steps, workers, stats.seconds,
      // A restart with nothing left ran nothing in no time: a rate of 0, not 0/0.
      steps_run == 0 ? 0.0 : pts * static_cast<double>(steps_run) / stats.seconds / 1e9, verdict);
  if (until) line += fmt::format(" tol={}", pb.tol);
  if (ranks > 1) line += fmt::format(" ranks={} control_messages={}", ranks, control_messages);
  line += " " + ordo::app::peak_rss_field(peaks);
  if (rank == 0) fmt::print("{}\n", line);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-lbm", [&] { return run(argc, argv); });
}
