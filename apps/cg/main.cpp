// ordo-cg: conjugate gradient on the 2-D Poisson problem (apps/common/cg_kernels.hpp), any
// size on any block grid, with its two dot products per iteration as deterministic reductions
// (docs/api.md, "Reductions") and --tol as run_until on a reduced value in the dataflow
// (docs/convergence.md), stopping at an exact solution too: the same bits and the
// same iteration count for any number of workers or ranks, and as the sequential CG.
//
// Per block b (rows x cols of the grid, on rank b * ranks / blocks):
//   p[b]     the search direction with a ring of halo (cg::Padded)
//   x[b], r[b]  the solution, the residual
//   edge[b]  p's and r's first row, last row, first column, last column (what the neighbours
//            read; Edges)
//   last[b]  the rr the iteration started from (beta's denominator)
// Tasks of one iteration, in program order:
//   matvec[b]  the previous iteration's p = r + beta p (beta = rr / last), on the block and on
//              its halo from the neighbours' edges; contributes p.(A p)
//   combine(pq)
//   update[b]  alpha = rr / pq; x += alpha p; r -= alpha A p; contributes r.r; edge[b] from
//              p, r (the parts some neighbour reads)
//   combine(rr)
// Both read rr before its combine: the previous iteration's value (iteration 0 takes b.b,
// reduced by a small graph before the run, and starts from p = r = b). So p = r + beta p is
// the next iteration's first sweep rather than a third task per block: it needs no wave of
// its own after combine(rr), and the matvec reads the p it has just written while it is in
// the cache. q = A p is not kept: update recomputes it from p's rows, which moves fewer bytes
// than writing it and reading it back (cg_kernels.hpp, direction_pq_row). A block computes its
// halo's new p itself, from the neighbours' old p and new r, with the arithmetic of the
// neighbour's own sweep (the same bits); after the last iteration p is one step behind, which
// nothing reads.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include <ordo/checkpoint.hpp>

#include "app_cli.hpp"
#include "cg_kernels.hpp"
#include "output_file.hpp"
#include "run_flags.hpp"
#include "stencil_app.hpp"

namespace {

using ordo::cg::BlockRange;
using ordo::cg::Padded;

constexpr std::size_t kMaxBlocks = std::size_t{1} << 18;

struct Problem {
  std::size_t n = 0, m = 0, bi = 0, bj = 0;
  std::size_t blocks() const { return bi * bj; }
  BlockRange range(std::size_t b) const { return ordo::cg::block_range(b, n, m, bi, bj); }
};

// b.b summed per block from the formula (no rank needs another's data), reduced like every dot
// product: the rr of iteration 0, on every rank.
double initial_rr(ordo::Runtime& rt, const Problem& pb) {
  ordo::Graph g;
  const auto nb = static_cast<std::uint32_t>(pb.blocks());
  auto rr0 = g.reduction<double>("cg.rr0", nb);
  g.task_family("cg.rhs_dot", nb, [&](std::uint32_t b, ordo::AccessList& acc) {
    acc.add(ordo::contribute(rr0, b));
  }, [rr0, pb](ordo::Context& ctx, std::uint32_t b) {
    const BlockRange br = pb.range(b);
    std::vector<double> row(br.cols());
    double s = 0.0;
    for (std::size_t i = br.r0; i < br.r1; ++i) {
      for (std::size_t j = 0; j < br.cols(); ++j) row[j] = ordo::cg::rhs(i, br.c0 + j, pb.m);
      s += ordo::cg::dot_row(row.data(), row.data(), row.size());
    }
    ctx.contribute(rr0, b, s);
  });
  g.combine(rr0);
  rt.run(g, 1);
  return g.value(rr0);
}

// Where p's and r's edges sit in a block's edge location: for each of the two, its first row,
// last row, first column, last column (the halo the north, south, west and east neighbours
// read).
struct Edges {
  std::size_t h, w;
  std::size_t size() const { return 4 * (h + w); }
  std::size_t north(bool of_r) const { return of_r ? 2 * (h + w) : 0; }
  std::size_t south(bool of_r) const { return north(of_r) + w; }
  std::size_t west(bool of_r) const { return north(of_r) + 2 * w; }
  std::size_t east(bool of_r) const { return north(of_r) + 2 * w + h; }
};

struct Solver {
  Problem pb;
  double rr0;
  ordo::Graph g;
  std::vector<ordo::Location<double>> p, x, r, edge, last;
  ordo::Reduction<double> pq, rr;
  std::vector<unsigned> home;

  Solver(const Problem& problem, unsigned ranks, double initial_rr) : pb(problem), rr0(initial_rr) {
    const std::size_t nb = pb.blocks();
    // Block by block, so that the default NUMA chunks keep a block's locations together.
    for (std::size_t b = 0; b < nb; ++b) {
      const BlockRange br = pb.range(b);
      const std::string i = "[" + std::to_string(b) + "]";
      p.push_back(g.location<double>("cg.p" + i, padded(b).size()));
      x.push_back(g.location<double>("cg.x" + i, br.rows() * br.cols()));
      r.push_back(g.location<double>("cg.r" + i, br.rows() * br.cols()));
      edge.push_back(g.location<double>("cg.edge" + i, edges(b).size()));
      last.push_back(g.location<double>("cg.last" + i, 1));
      home.push_back(static_cast<unsigned>(b * ranks / nb));
      if (ranks > 1)
        for (auto loc : {p[b], x[b], r[b], edge[b], last[b]}) g.set_home_rank(loc, home[b]);
    }
    const auto count = static_cast<std::uint32_t>(nb);
    pq = g.reduction<double>("cg.pq", count);
    rr = g.reduction<double>("cg.rr", count);
    declare_matvec();
    g.combine(pq);
    declare_update();
    g.combine(rr);
  }

  Edges edges(std::size_t b) const {
    const BlockRange br = pb.range(b);
    return {br.rows(), br.cols()};
  }
  Padded padded(std::size_t b) const {
    const BlockRange br = pb.range(b);
    return {br.rows(), br.cols()};
  }

  // The neighbours of block b: north, south, west, east (-1 past the grid).
  std::array<std::int64_t, 4> neighbours(std::size_t b) const {
    const std::size_t i = b / pb.bj, j = b % pb.bj;
    const auto at = [&](std::size_t ii, std::size_t jj) { return std::int64_t(ii * pb.bj + jj); };
    return {i > 0 ? at(i - 1, j) : -1, i + 1 < pb.bi ? at(i + 1, j) : -1,
            j > 0 ? at(i, j - 1) : -1, j + 1 < pb.bj ? at(i, j + 1) : -1};
  }

  // The previous iteration's beta, or nothing in iteration 0 (which searches along p = b).
  std::optional<double> beta(ordo::Context& ctx, std::uint32_t b) const {
    if (ctx.iteration() == 0) return std::nullopt;
    return ctx.value(rr) / ctx.read(last[b])[0];
  }

  void declare_matvec() {
    g.task_family("cg.matvec", static_cast<std::uint32_t>(pb.blocks()),
                  [&](std::uint32_t b, ordo::AccessList& acc) {
      acc.add(ordo::write(p[b]));  // first written: the task runs where p[b] lives
      for (std::int64_t nbr : neighbours(b))
        if (nbr >= 0) acc.add(ordo::read(edge[static_cast<std::size_t>(nbr)]));
      acc.add(ordo::read(r[b]));
      acc.add(ordo::read(last[b]));
      acc.add(ordo::read(rr));  // before combine(rr): the previous iteration's
      acc.add(ordo::contribute(pq, b));
    }, [this](ordo::Context& ctx, std::uint32_t b) {
      const BlockRange br = pb.range(b);
      const std::size_t h = br.rows(), w = br.cols();
      const Padded pad = padded(b);
      const std::optional<double> beta_prev = beta(ctx, b);
      const std::span<double> pp = ctx.write(p[b]);
      const std::array<std::int64_t, 4> nbr = neighbours(b);
      // The halo: the north neighbour's last row, the south one's first, the west one's last
      // column, the east one's first; each the neighbour's new p, from its old p and new r.
      const auto halo = [&](std::size_t n, std::size_t (Edges::*at)(bool) const, std::size_t len,
                            double* to, std::size_t stride) {
        const auto e = ctx.read(edge[n]);
        const Edges en = edges(n);
        const double* old_p = &e[(en.*at)(false)];
        const double* new_r = &e[(en.*at)(true)];
        for (std::size_t k = 0; k < len; ++k)
          to[k * stride] =
              beta_prev ? ordo::cg::direction_point(new_r[k], *beta_prev, old_p[k]) : old_p[k];
      };
      const auto at = [&](std::size_t k) { return static_cast<std::size_t>(nbr[k]); };
      if (nbr[0] >= 0) halo(at(0), &Edges::south, w, &pp[pad.at(-1, 0)], 1);
      if (nbr[1] >= 0) halo(at(1), &Edges::north, w, &pp[pad.at(h, 0)], 1);
      if (nbr[2] >= 0) halo(at(2), &Edges::east, h, &pp[pad.at(0, -1)], pad.stride());
      if (nbr[3] >= 0) halo(at(3), &Edges::west, h, &pp[pad.at(0, w)], pad.stride());
      // p = r + beta p on the first row, then on each next row in the sweep of p.(A p) on the
      // row above it, which reads it (the last row's below is the halo, already new).
      const auto rr_ = ctx.read(r[b]);
      const auto stride = static_cast<std::ptrdiff_t>(pad.stride());
      if (beta_prev) ordo::cg::direction_row(&pp[pad.at(0, 0)], &rr_[0], *beta_prev, w);
      double sum = 0.0;
      for (std::size_t i = 0; i < h; ++i) {
        double* const row = &pp[pad.at(i, 0)];
        sum += beta_prev && i + 1 < h
                   ? ordo::cg::direction_pq_row(row, stride, &rr_[(i + 1) * w], *beta_prev, w)
                   : ordo::cg::pq_row(row, stride, w);
      }
      ctx.contribute(pq, b, sum);
    });
  }

  void declare_update() {
    g.task_family("cg.update", static_cast<std::uint32_t>(pb.blocks()),
                  [&](std::uint32_t b, ordo::AccessList& acc) {
      acc.add(ordo::write(x[b]));
      acc.add(ordo::write(r[b]));
      acc.add(ordo::write(last[b]));
      acc.add(ordo::write(edge[b]));
      acc.add(ordo::read(p[b]));
      acc.add(ordo::read(pq));
      acc.add(ordo::read(rr));  // before combine(rr): the previous iteration's
      acc.add(ordo::contribute(rr, b));
    }, [this](ordo::Context& ctx, std::uint32_t b) {
      const BlockRange br = pb.range(b);
      const std::size_t h = br.rows(), w = br.cols();
      const Padded pad = padded(b);
      const double rr_now = ctx.iteration() == 0 ? rr0 : ctx.value(rr);
      ctx.write(last[b])[0] = rr_now;
      const double alpha = rr_now / ctx.value(pq);
      const auto xx = ctx.write(x[b]);
      const auto rr_ = ctx.write(r[b]);
      const auto pp = ctx.read(p[b]);
      const std::span<double> e = ctx.write(edge[b]);
      const Edges at = edges(b);
      const std::array<std::int64_t, 4> nbr = neighbours(b);
      double sum = 0.0;
      for (std::size_t i = 0; i < h; ++i) {
        sum += ordo::cg::update_ap_row(&xx[i * w], &rr_[i * w], &pp[pad.at(i, 0)],
                                       static_cast<std::ptrdiff_t>(pad.stride()), alpha, w);
        pack_columns(pp, rr_, e, at, i, nbr[2] >= 0, nbr[3] >= 0);
      }
      ctx.contribute(rr, b, sum);
      pack_rows(pp, rr_, e, at, nbr[0] >= 0, nbr[1] >= 0);
    });
  }

  // p's and r's edges (p with its halo ring, r without), only those a neighbour reads: the
  // first and last rows, and row i's ends while the row is in the cache (a column taken
  // after the sweep costs a cache line per point).
  static void pack_rows(std::span<const double> pp, std::span<const double> rr_,
                        std::span<double> e, const Edges& at, bool north, bool south) {
    const std::size_t h = at.h, w = at.w;
    const Padded pad{h, w};
    if (north) {
      std::memcpy(&e[at.north(false)], &pp[pad.at(0, 0)], w * sizeof(double));
      std::memcpy(&e[at.north(true)], &rr_[0], w * sizeof(double));
    }
    if (south) {
      std::memcpy(&e[at.south(false)], &pp[pad.at(h - 1, 0)], w * sizeof(double));
      std::memcpy(&e[at.south(true)], &rr_[(h - 1) * w], w * sizeof(double));
    }
  }
  static void pack_columns(std::span<const double> pp, std::span<const double> rr_,
                           std::span<double> e, const Edges& at, std::size_t i, bool west,
                           bool east) {
    const std::size_t w = at.w;
    const Padded pad{at.h, w};
    if (west) {
      e[at.west(false) + i] = pp[pad.at(i, 0)];
      e[at.west(true) + i] = rr_[i * w];
    }
    if (east) {
      e[at.east(false) + i] = pp[pad.at(i, w - 1)];
      e[at.east(true) + i] = rr_[i * w + w - 1];
    }
  }

  // x = 0, r = p = b on the blocks this rank holds (the others are never touched here): a
  // location's pages are mapped when first touched, which would otherwise happen in the first
  // iteration's sweeps (as in any program, the set-up's cost, not an iteration's).
  void set_initial(unsigned rank) {
    for (std::size_t b = 0; b < pb.blocks(); ++b) {
      if (home[b] != rank) continue;
      const BlockRange br = pb.range(b);
      const std::size_t h = br.rows(), w = br.cols();
      const Padded pad = padded(b);
      const auto pp = g.data(p[b]);
      const auto rr_ = g.data(r[b]);
      for (std::size_t i = 0; i < h; ++i)
        for (std::size_t j = 0; j < w; ++j)
          rr_[i * w + j] = pp[pad.at(i, j)] = ordo::cg::rhs(br.r0 + i, br.c0 + j, pb.m);
      std::ranges::fill(g.data(x[b]), 0.0);
      // The edges update packs, as it packs them.
      const std::span<double> e = g.data(edge[b]);
      const Edges at = edges(b);
      const std::array<std::int64_t, 4> nbr = neighbours(b);
      for (std::size_t i = 0; i < h; ++i) pack_columns(pp, rr_, e, at, i, nbr[2] >= 0, nbr[3] >= 0);
      pack_rows(pp, rr_, e, at, nbr[0] >= 0, nbr[1] >= 0);
    }
  }
};

int run(int argc, char** argv) {
  CLI::App cli{"Conjugate gradient on the 2-D Poisson problem (5-point Laplacian, zero "
               "boundary, pseudo-random right-hand side), two deterministic dot products per "
               "iteration",
               "ordo-cg"};
  std::string size_text = "1024x1024", blocks_text = "4x4", output, trace_path;
  std::uint64_t iters = 100;
  double tol = 0;
  unsigned workers = 0;
  bool verify = false;
  cli.add_option("--size", size_text, "grid size NxM (unknowns)")->capture_default_str();
  cli.add_option("--blocks", blocks_text,
                 "block grid BxC; at most --size (blocks differ by at most one point)")
      ->capture_default_str();
  ordo::app::add_run_flags(
      cli, {iters, tol, workers, verify, output, trace_path},
      {.iters = "iterations (with --tol: the most)",
       .tol = "stop after the first iteration whose residual norm is at most TOL times the "
              "initial one (0: run --iters iterations)",
       .verify = "compare x, the iteration count and r.r bit for bit with a sequential CG",
       .output = "write the solution x (.npy, float64, NxM)"});
  std::string checkpoint_dir, restart_dir;
  std::uint64_t checkpoint_every = 0;
  const ordo::app::CheckpointFlags checkpoint_flags{checkpoint_dir, checkpoint_every, restart_dir};
  ordo::app::add_checkpoint_flags(cli, checkpoint_flags, "iterations between two checkpoints", 2);
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  ordo::app::check_checkpoint_flags(checkpoint_flags);

  std::optional<ordo::app::OutputFile> output_file;
  if (!output.empty()) output_file.emplace(output);
  ordo::app::AppParams ap;
  ap.size = ordo::app::parse_shape(size_text, 2, "--size");
  ap.blocks = ordo::app::parse_shape(blocks_text, 2, "--blocks");
  ordo::app::check_blocks_fit(ap.size, ap.blocks, size_text, blocks_text);
  // x, r and p (with halos) in the graph; --verify's reference holds x, r, q and p.
  ordo::app::check_grid_fits(ap.size, verify ? 7 : 3, "--size " + size_text);
  const Problem pb{ap.size[0], ap.size[1], ap.blocks[0], ap.blocks[1]};
  // A block costs five locations and three tasks (about 5 KiB of graph): 2^18 of them take a
  // gigabyte and most of a minute to declare before anything runs.
  if (pb.blocks() > kMaxBlocks)
    throw ordo::Error("--blocks " + blocks_text + " makes " + std::to_string(pb.blocks()) +
                      " blocks; give at most " + std::to_string(kMaxBlocks) +
                      " (blocks of a few thousand points or more keep the tasks worth scheduling)");

  // --checkpoint-every is at least 2: b.b is reduced by a graph of one iteration, which a
  // checkpoint after every iteration would save too, in the solver's directory.
  ordo::Runtime rt(ordo::RuntimeOptions{.workers = workers,
                                        .trace_path = trace_path,
                                        .checkpoint_dir = checkpoint_dir,
                                        .checkpoint_every = checkpoint_every});
  workers = rt.workers();
  const unsigned rank = rt.rank(), ranks = rt.ranks();
  ordo::app::check_every_rank_has_a_block(ranks, ap.blocks, blocks_text);

  const double rr0 = initial_rr(rt, pb);
  Solver s(pb, ranks, rr0);
  s.set_initial(rank);
  // Every iteration is checked, with --tol or without (an exact solution stops CG either way),
  // in the dataflow: the next iteration waits for r.r anyway (docs/convergence.md).
  ordo::Until until;
  until.done = [&](const ordo::Graph& g) { return ordo::cg::stops(g.value(s.rr), rr0, tol); };
  until.reads = {ordo::read(s.rr)};
  // A restart loads x, r, p, the edges and both reductions' values after the checkpoint's
  // iteration, on any number of ranks (the graph declares no rank-dependent locations); a
  // relaunch by ordorun --restarts resumes from --checkpoint's directory (ordo::resume).
  std::uint64_t first = 0;
  const std::string resumed_from = !restart_dir.empty() ? restart_dir : checkpoint_dir;
  if (!restart_dir.empty())
    first = rt.restart(s.g, restart_dir);
  else if (!checkpoint_dir.empty())
    first = ordo::resume(rt, s.g, checkpoint_dir);
  if (first > iters)
    throw ordo::Error("--restart " + resumed_from + ": its newest checkpoint is after iteration " +
                      std::to_string(first) + ", beyond the " + std::to_string(iters) +
                      " asked; give the --iters of the run that wrote it");
  // The uninterrupted run checked r.r after the checkpoint's iteration too: stopped there, it
  // runs nothing more.
  const bool stopped = first > 0 && until.done(s.g);
  ordo::RunStats stats{};
  if (first < iters && !stopped) {
    until.max_iterations = iters - first;
    try {
      stats = rt.run_until(s.g, until);
    } catch (const ordo::PeerFailure& e) {
      if (checkpoint_dir.empty() || dynamic_cast<const ordo::ProtocolError*>(&e)) throw;
      throw ordo::Error(ordo::app::peer_failure_message(e, checkpoint_dir));
    }
  }
  stats.iterations += first;
  const std::uint64_t iterations_run = stats.iterations - first;
  const double rr = s.g.value(s.rr);

  // Each rank checks its own blocks, its iteration count and the reduced r.r.
  int outcome = 0;
  if (verify) {
    const ordo::cg::Result want = ordo::cg::reference(pb.n, pb.m, pb.bi, pb.bj, tol, iters);
    if (want.iterations != stats.iterations || std::memcmp(&want.rr, &rr, sizeof rr) != 0 ||
        std::memcmp(&want.rr0, &rr0, sizeof rr0) != 0)
      outcome = 1;
    for (std::size_t b = 0; b < pb.blocks() && outcome == 0; ++b) {
      if (s.home[b] != rank) continue;
      const BlockRange br = pb.range(b);
      const auto xb = s.g.data(s.x[b]);
      for (std::size_t i = 0; i < br.rows(); ++i)
        if (std::memcmp(&xb[i * br.cols()], &want.x[(br.r0 + i) * pb.m + br.c0],
                        br.cols() * sizeof(double)) != 0)
          outcome = 1;
    }
    for (std::size_t b = 0; b < pb.blocks(); ++b)
      if (s.home[b] == rank && !ordo::app::is_finite_result(s.g.data(s.x[b]))) outcome |= 2;
    if (!std::isfinite(rr)) outcome |= 2;
  }
  // One verdict for the job, and every rank's iteration count (which must agree).
  const std::vector<int> outcomes = rt.gather_values(outcome);
  const std::vector<std::uint64_t> counts = rt.gather_values(stats.iterations);
  for (unsigned k = 0; k < ranks; ++k)
    if (counts[k] != stats.iterations)
      throw std::runtime_error("rank " + std::to_string(k) + " ran " + std::to_string(counts[k]) +
                               " iterations, rank " + std::to_string(rank) + " " +
                               std::to_string(stats.iterations));
  if (output_file) {
    std::vector<ordo::app::NpySegment> segments;
    for (std::size_t b = 0; b < pb.blocks(); ++b) {
      if (s.home[b] != rank) continue;
      const BlockRange br = pb.range(b);
      const auto xb = s.g.data(s.x[b]);
      for (std::size_t i = 0; i < br.rows(); ++i)
        segments.push_back({(br.r0 + i) * pb.m + br.c0,
                            std::span<const double>(&xb[i * br.cols()], br.cols())});
    }
    output_file->write(rt, ap.size, std::move(segments));
  }
  std::string verdict = "skipped";
  if (verify) {
    verdict = "ok";
    for (int o : outcomes)
      if (o != 0) verdict = "fail";
    if (const std::string why = ordo::app::non_finite_message(outcomes); !why.empty() && rank == 0)
      std::fprintf(stderr, "ordo-cg: %s\n", why.c_str());
  }
  const double pts = static_cast<double>(pb.n * pb.m);
  std::string line = fmt::format(
      "app=cg size={} blocks={} iters={} workers={} seconds={:.6f} gstencils={:.4f} "
      "residual={:.6e} verify={}",
      ordo::app::join_shape(ap.size), ordo::app::join_shape(ap.blocks), stats.iterations, workers,
      stats.seconds,
      // A restart with nothing left ran nothing in no time: a rate of 0, not 0/0.
      iterations_run == 0 ? 0.0 : pts * static_cast<double>(iterations_run) / stats.seconds / 1e9,
      std::sqrt(rr / rr0), verdict);
  if (ranks > 1) line += fmt::format(" ranks={}", ranks);
  if (rank == 0) fmt::print("{}\n", line);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-cg", [&] { return run(argc, argv); });
}
