// ordo-omp-pagerank: OpenMP baseline of ordo-pagerank, the PageRank a careful OpenMP programmer
// writes: the same R-MAT graph (the sparse layer's generator), each thread one block of
// vertices (ordo-pagerank's parts with --parts THREADS), reading the shared z of the previous
// iteration directly (two arrays, swapped: no exchange, no copy), the L1 change and the
// dangling rank as per-thread partials combined in ordo's order (ordo::combine_in_order). So
// its delta has ordo-pagerank's bits on --parts THREADS. One parallel region, two barriers per
// iteration.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <ordo/sparse.hpp>
#include "app_cli.hpp"

namespace {

constexpr double kDamping = 0.85;

struct Stats {
  double delta = 0, dangling = 0;
};
struct AddStats {
  Stats operator()(const Stats& a, const Stats& b) const {
    return {a.delta + b.delta, a.dangling + b.dangling};
  }
};

int run(int argc, char** argv) {
  CLI::App cli{"OpenMP baseline of ordo-pagerank (the same R-MAT graph and result fields)",
               "ordo-omp-pagerank"};
  unsigned scale = 14, edge_factor = 8, workers = 0;
  std::uint64_t seed = 1, iters = 100;
  double tol = 1e-9;
  cli.add_option("--scale", scale, "R-MAT graph of 2^SCALE vertices")
      ->check(ordo::cli::Integer(1, 32));
  cli.add_option("--edge-factor", edge_factor, "R-MAT edges per vertex")
      ->check(ordo::cli::Integer(1, 1024));
  cli.add_option("--seed", seed, "R-MAT seed")
      ->check(ordo::cli::Integer(0, ~std::uint64_t{0} >> 1));
  cli.add_option("--iters", iters, "the most iterations")
      ->check(ordo::cli::Integer(1, ordo::app::max_iters));
  cli.add_option("--tol", tol, "stop once the L1 change is at most TOL")
      ->check(ordo::cli::Real(0, 1));
  cli.add_option("--workers", workers, "OpenMP threads (default: OMP_NUM_THREADS, else all cores)")
      ->check(ordo::cli::Integer(1, ordo::app::max_workers));
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  const ordo::sparse::Index n = ordo::sparse::Index{1} << scale;
  const int threads =
      int(std::min<std::uint64_t>(workers ? workers : unsigned(omp_get_max_threads()), n));
  omp_set_dynamic(0);
  const auto part = ordo::sparse::Partition::blocks(n, std::uint32_t(threads));
  const std::uint64_t m = n * edge_factor;
  const ordo::sparse::GraphRows gr =
      ordo::sparse::graph_rows(part, std::vector<bool>(std::size_t(threads), true),
                               [&](const std::function<void(ordo::sparse::Edge)>& f) {
                                 for (std::uint64_t e = 0; e < m; ++e)
                                   f(ordo::sparse::rmat_edge(scale, seed, e));
                               });
  std::vector<double> x(n), za(n), zb(n);
  std::vector<Stats> partial(static_cast<std::size_t>(threads));
  double* z_old = za.data();
  double* z_new = zb.data();
  std::uint64_t done = 0;
  Stats now;
  double start = 0;
#pragma omp parallel num_threads(threads)
  {
    const auto t = std::uint32_t(omp_get_thread_num());
    const ordo::sparse::Index lo = part.begin(t), hi = part.end(t);
    const std::uint32_t* deg = gr.out_degree[t].data();
    Stats s;
    for (ordo::sparse::Index i = lo; i < hi; ++i) {
      x[i] = 1.0 / double(n);
      za[i] = deg[i - lo] == 0 ? 0.0 : x[i] / double(deg[i - lo]);
      if (deg[i - lo] == 0) s.dangling += x[i];
    }
    partial[t] = s;
#pragma omp barrier
#pragma omp single
    {
      now = ordo::combine_in_order<Stats>(partial, AddStats{});
      start = omp_get_wtime();
    }
    const ordo::sparse::Rows& rows = gr.rows[t];
    double* zo = z_old;
    double* zn = z_new;
    Stats mine = now;
    for (std::uint64_t k = 0; k < iters; ++k) {
      const double c0 = (1.0 - kDamping) / double(n) + kDamping * mine.dangling / double(n);
      Stats st;
      for (ordo::sparse::Index i = lo; i < hi; ++i) {
        double y = 0.0;
        const std::size_t r = std::size_t(i - lo);
        for (std::uint64_t e = rows.start[r]; e < rows.start[r + 1]; ++e)
          y += rows.val[e] * zo[rows.col[e]];
        const double v = c0 + kDamping * y;
        st.delta += std::fabs(v - x[i]);
        x[i] = v;
        if (deg[r] == 0) {
          st.dangling += v;
          zn[i] = 0;
        } else {
          zn[i] = v / double(deg[r]);
        }
      }
      partial[t] = st;
#pragma omp barrier
      mine = ordo::combine_in_order<Stats>(partial, AddStats{});
      std::swap(zo, zn);
      if (mine.delta <= tol) {
        if (t == 0) done = k + 1;
        break;
      }
      if (t == 0) done = k + 1;
        // partial[] is written again only after every thread has combined it.
#pragma omp barrier
    }
#pragma omp single
    now = mine;
  }
  const double seconds = omp_get_wtime() - start;
  fmt::print(
      "app=pagerank graph=rmat:{}x{} vertices={} parts={} iters={} workers={} seconds={:.6f} "
      "delta={:.6e} system=openmp\n",
      scale, edge_factor, n, threads, done, threads, seconds, now.delta);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-omp-pagerank", [&] { return run(argc, argv); });
}
