// ordo-bench-sparse: the sparse layer against the systems a user would otherwise reach for, in
// one run, each as a subprocess on the same problem:
//   spcg      ordo-spcg on a 3-D 7-point Laplacian against PETSc's KSPCG (ordo-petsc-cg, no
//             preconditioner, the same iteration count), 1 rank x 2 workers and 2 ranks x 1
//             worker against PETSc on 2 ranks, and 1 x 1 against PETSc on 1 rank;
//   pagerank  ordo-pagerank on an R-MAT graph against ordo-omp-pagerank, both on --workers
//             threads, the same iteration count (--tol 0).
// One result line per run (system=..., seconds=...), then the ratios: ordo_vs_petsc= and
// ordo_vs_openmp= (the other system's seconds over ordo's: above 1, ordo is faster), the
// median of --reps runs of each. A system that is not built is skipped with the reason.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "app_cli.hpp"
#include "bench_process.hpp"
#include "result_fields.hpp"

namespace {

using ordo::bench::find_binary;

struct Run {
  std::string label;
  std::vector<std::string> argv;
  std::string skip;  // why not run, or empty
};

// One run of `r`: its result line (the one with `key_line`) and its seconds=, or nothing.
std::optional<double> once(const Run& r, unsigned timeout_s, const char* key_line) {
  const ordo::bench::CommandOutput out = ordo::bench::run_command(r.argv, timeout_s);
  std::optional<double> s;
  std::string line_seen;
  ordo::bench::for_each_line(out.text, [&](std::string_view line) {
    if (line.find(key_line) == std::string_view::npos) return;
    const auto f = ordo::bench::parse_fields(line);
    if (auto it = f.find("seconds"); it != f.end()) {
      s = ordo::bench::parse_number(it->second);
      line_seen = std::string(line);
    }
  });
  if (out.status != 0 || !s) {
    std::printf("%s failed status=%d\n%s\n", r.label.c_str(), out.status,
                ordo::bench::last_lines(out.text, 5).c_str());
    return std::nullopt;
  }
  std::printf("%s %s\n", r.label.c_str(), line_seen.c_str());
  return s;
}

// The median seconds of `reps` runs of each of `runs`, taken in turns (one run of each, then
// the next round), so that a machine whose load changes slows every system alike; nothing for
// a run that is skipped or failed once.
std::vector<std::optional<double>> measure(const std::vector<Run>& runs, unsigned reps,
                                           unsigned timeout_s, const char* key_line) {
  std::vector<std::vector<double>> seconds(runs.size());
  std::vector<bool> ok(runs.size(), true);
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (!runs[i].skip.empty()) {
      std::printf("%s skipped reason=%s\n", runs[i].label.c_str(), runs[i].skip.c_str());
      ok[i] = false;
    }
  for (unsigned k = 0; k < reps; ++k)
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (!ok[i]) continue;
      const std::optional<double> s = once(runs[i], timeout_s, key_line);
      if (s)
        seconds[i].push_back(*s);
      else
        ok[i] = false;
    }
  std::vector<std::optional<double>> out(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!ok[i]) continue;
    std::sort(seconds[i].begin(), seconds[i].end());
    out[i] = seconds[i][seconds[i].size() / 2];
  }
  return out;
}

void ratio(const char* name, const std::string& what, std::optional<double> other,
           std::optional<double> ordo) {
  if (other && ordo && *ordo > 0)
    std::printf("bench=sparse %s %s=%.3f\n", what.c_str(), name, *other / *ordo);
  else
    std::printf("bench=sparse %s %s=skipped\n", what.c_str(), name);
}

int run(int argc, char** argv) {
  CLI::App cli{"The sparse layer against PETSc (CG) and OpenMP (PageRank), ratios from one run",
               "ordo-bench-sparse"};
  std::string laplace = "100x100x100", bin_dir, mpirun = "mpirun", only;
  std::uint64_t iters = 50, pr_iters = 20;
  unsigned scale = 18, edge_factor = 8, workers = 2, reps = 3, timeout_s = 600, parts = 0;
  cli.add_option("--laplace3d", laplace, "CG's matrix: the 7-point Laplacian of this grid")
      ->capture_default_str();
  cli.add_option("--iters", iters, "CG iterations")
      ->check(ordo::cli::Integer(1, 100000))
      ->capture_default_str();
  cli.add_option("--scale", scale, "PageRank's R-MAT graph: 2^SCALE vertices")
      ->check(ordo::cli::Integer(4, 30))
      ->capture_default_str();
  cli.add_option("--edge-factor", edge_factor, "R-MAT edges per vertex")
      ->check(ordo::cli::Integer(1, 64))
      ->capture_default_str();
  cli.add_option("--pagerank-iters", pr_iters, "PageRank iterations")
      ->check(ordo::cli::Integer(1, 100000))
      ->capture_default_str();
  cli.add_option("--workers", workers, "threads per process of the one-rank runs")
      ->check(ordo::cli::Integer(1, 256))
      ->capture_default_str();
  cli.add_option("--parts", parts, "ordo's parts (0: as many as threads in all)")
      ->check(ordo::cli::Integer(0, 1 << 16));
  cli.add_option("--reps", reps, "runs of each system (the median counts)")
      ->check(ordo::cli::Integer(1, 100))
      ->capture_default_str();
  cli.add_option("--only", only, "spcg or pagerank (default: both)")
      ->check(CLI::IsMember({"spcg", "pagerank"}));
  cli.add_option("--bin-dir", bin_dir, "where the ordo binaries are (default: beside this one)");
  cli.add_option("--mpirun", mpirun, "Open MPI's launcher for PETSc")->capture_default_str();
  cli.add_option("--timeout", timeout_s, "seconds a run may take")
      ->check(ordo::cli::Integer(1, 86400));
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  (void)ordo::app::parse_shape(laplace, 3, "--laplace3d");
  ordo::bench::set_mpi_environment();
  const auto spcg = find_binary("ordo-spcg", bin_dir),
             petsc = find_binary("ordo-petsc-cg", bin_dir),
             pagerank = find_binary("ordo-pagerank", bin_dir),
             omp = find_binary("ordo-omp-pagerank", bin_dir);
  const auto ordorun = ordo::bench::find_ordorun(bin_dir);
  const auto launcher = ordo::bench::find_in_path(mpirun);
  std::printf(
      "# bench=sparse: machine shared with other work unless said otherwise; ratios from one "
      "run\n");

  if (only.empty() || only == "spcg") {
    const std::string w = std::to_string(workers);
    const auto ordo_cg = [&](unsigned ranks, unsigned wk) {
      Run r{
          "system=ordo ranks=" + std::to_string(ranks) + " workers=" + std::to_string(wk), {}, {}};
      if (!spcg)
        r.skip = "ordo-spcg_not_found";
      else if (ranks > 1 && !ordorun)
        r.skip = "ordorun_not_found";
      if (!r.skip.empty()) return r;
      const std::string p = std::to_string(parts ? parts : std::max(2u, ranks * wk));
      std::vector<std::string> args{spcg->string(),        "--laplace3d", laplace, "--iters",
                                    std::to_string(iters), "--parts",     p,       "--workers",
                                    std::to_string(wk)};
      if (ranks > 1) {
        std::vector<std::string> l{ordorun->string(), "--timeout", std::to_string(timeout_s), "-n",
                                   std::to_string(ranks)};
        args.insert(args.begin(), l.begin(), l.end());
      }
      r.argv = args;
      return r;
    };
    const auto petsc_cg = [&](unsigned ranks) {
      Run r{"system=petsc ranks=" + std::to_string(ranks), {}, {}};
      if (!petsc)
        r.skip = "ordo-petsc-cg_not_built";
      else if (!launcher)
        r.skip = mpirun + "_not_found";
      if (!r.skip.empty()) return r;
      r.argv = {launcher->string(),
                "-n",
                std::to_string(ranks),
                petsc->string(),
                "--laplace3d",
                laplace,
                "--iters",
                std::to_string(iters)};
      return r;
    };
    const auto t =
        measure({petsc_cg(1), petsc_cg(2), ordo_cg(1, 1), ordo_cg(1, workers), ordo_cg(2, 1)}, reps,
                timeout_s, "app=spcg");
    const auto &p1 = t[0], &p2 = t[1], &o11 = t[2], &o12 = t[3], &o21 = t[4];
    const std::string what =
        "app=spcg matrix=laplace3d:" + laplace + " iters=" + std::to_string(iters);
    ratio("ordo_vs_petsc", what + " ordo=1x1 petsc=1", p1, o11);
    ratio("ordo_vs_petsc", what + " ordo=1x" + w + " petsc=2", p2, o12);
    ratio("ordo_vs_petsc", what + " ordo=2x1 petsc=2", p2, o21);
  }
  if (only.empty() || only == "pagerank") {
    const std::string w = std::to_string(workers);
    const std::vector<std::string> graph{"--scale",       std::to_string(scale),
                                         "--edge-factor", std::to_string(edge_factor),
                                         "--iters",       std::to_string(pr_iters),
                                         "--tol",         "0",
                                         "--workers",     w};
    Run o{"system=ordo workers=" + w, {}, {}}, m{"system=openmp workers=" + w, {}, {}};
    if (!pagerank)
      o.skip = "ordo-pagerank_not_found";
    else {
      o.argv = {pagerank->string(), "--parts", std::to_string(parts ? parts : workers)};
      o.argv.insert(o.argv.end(), graph.begin(), graph.end());
    }
    if (!omp)
      m.skip = "ordo-omp-pagerank_not_built";
    else {
      m.argv = {omp->string()};
      m.argv.insert(m.argv.end(), graph.begin(), graph.end());
    }
    const auto t = measure({m, o}, reps, timeout_s, "app=pagerank");
    const auto &om = t[0], &oo = t[1];
    ratio("ordo_vs_openmp",
          "app=pagerank graph=rmat:" + std::to_string(scale) + "x" + std::to_string(edge_factor) +
              " iters=" + std::to_string(pr_iters) + " workers=" + w,
          om, oo);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-sparse", [&] { return run(argc, argv); });
}
