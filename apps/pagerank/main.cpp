// ordo-pagerank: PageRank on a directed graph (an edge-list file, or an R-MAT graph when none
// is given) split by vertices over parts (the sparse layer: <ordo/sparse.hpp>), until the L1
// change of an iteration is at most --tol. The same bits for any number of workers or ranks,
// and as the sequential PageRank in this binary (--verify), for a given graph and --parts.
//
// Row v of the matrix lists the vertices u with an edge to v (value: how many such edges), so
// one iteration is a product with z = x / outdegree, whose ghosts the exchange brings:
//   z.exchange()   z's ghosts: last iteration's values
//   rank[q]        x = (1 - d) / n + d (A z + dangling / n); z = x / outdegree (0 where none);
//                  contributes the L1 change and the rank of the vertices without out-edges
//   combine(stats)
// rank reads stats before its combine: the previous iteration's dangling rank (iteration 0:
// the initial x's, reduced by a small graph before the run).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "app_cli.hpp"
#include "output_file.hpp"
#include "run_flags.hpp"
#include "sparse_app.hpp"

namespace {

using ordo::sparse::Index;

struct Stats {
  double delta = 0, dangling = 0;
};
struct AddStats {
  Stats operator()(const Stats& a, const Stats& b) const {
    return {a.delta + b.delta, a.dangling + b.dangling};
  }
};

constexpr double kDamping = 0.85;

struct GraphSource {
  std::string path;
  unsigned scale = 14;
  unsigned edge_factor = 8;
  std::uint64_t seed = 1;
  bool metis = false;  // --partition metis
  std::string describe() const {
    return path.empty() ? fmt::format("rmat:{}x{}", scale, edge_factor) : "file:" + path;
  }
};

Index vertices_of(const GraphSource& src, ordo::sparse::EdgeListHeader* header) {
  if (src.path.empty()) return Index{1} << src.scale;
  auto [f, bytes] = ordo::sparse::open_input(src.path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  *header = ordo::sparse::read_edge_list_header(f, bytes, src.path);
  return header->vertices;
}

ordo::sparse::GraphRows rows_of(const GraphSource& src, const ordo::sparse::Partition& part,
                                const std::vector<bool>& held) {
  if (src.path.empty()) {
    const std::uint64_t m = (std::uint64_t{1} << src.scale) * src.edge_factor;
    return ordo::sparse::graph_rows(part, held,
                                    [&](const std::function<void(ordo::sparse::Edge)>& f) {
                                      for (std::uint64_t e = 0; e < m; ++e)
                                        f(ordo::sparse::rmat_edge(src.scale, src.seed, e));
                                    });
  }
  auto [f, bytes] = ordo::sparse::open_input(src.path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  const ordo::sparse::EdgeListHeader h = ordo::sparse::read_edge_list_header(f, bytes, src.path);
  return ordo::sparse::graph_rows(part, held,
                                  [&](const std::function<void(ordo::sparse::Edge)>& each) {
                                    ordo::sparse::read_edge_list(f, bytes, src.path, h, each);
                                  });
}

// The graph split over parts, with the rows and out-degrees of the parts `rank` holds
// (kAllRanks: every part): blocks of vertices, or METIS's parts of the pattern renumbered so
// that each is contiguous (every rank then reads every edge, to partition alike).
struct PartedGraph {
  ordo::app::PartedRows pr;
  std::vector<std::vector<std::uint32_t>> out_degree;  // per part (empty where not held)
};

PartedGraph parted_graph(const GraphSource& src, Index n, std::uint32_t parts, unsigned ranks,
                         unsigned rank) {
  PartedGraph out;
  if (!src.metis) {
    out.pr.partition = ordo::sparse::Partition::blocks(n, parts);
    ordo::sparse::GraphRows gr =
        rows_of(src, out.pr.partition, ordo::app::held_parts(out.pr.partition, ranks, rank));
    out.pr.rows = std::move(gr.rows);
    out.out_degree = std::move(gr.out_degree);
    return out;
  }
  ordo::sparse::GraphRows all = rows_of(src, ordo::sparse::Partition::blocks(n, 1), {true});
  out.pr = ordo::app::metis_rows(all.rows[0], parts, ranks, rank);
  const ordo::sparse::Partition& part = out.pr.partition;
  const std::vector<bool> held = ordo::app::held_parts(part, ranks, rank);
  out.out_degree.resize(parts);
  for (std::uint32_t p = 0; p < parts; ++p) {
    if (!held[p]) continue;
    out.out_degree[p].resize(part.count(p));
    for (std::size_t i = 0; i < part.count(p); ++i)
      out.out_degree[p][i] = all.out_degree[0][out.pr.old_of_new[part.begin(p) + i]];
  }
  return out;
}

// Refuses, on every rank alike, a graph whose vertex and edge counts (a file's header, or
// --scale) need more memory than the ranks have, before anything is sized by them: what
// graph_rows keeps for a rank's parts, then per vertex x, y, z and a row start, per edge a
// column and a value; the whole graph on every rank for --verify's sequential PageRank and
// for METIS. Collective.
void check_graph_fits(ordo::Runtime& rt, const GraphSource& src,
                      const ordo::sparse::Partition& part, std::uint64_t edges, bool verify) {
  const auto sat_add = [](std::uint64_t a, std::uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
  };
  const auto sat_mul = [](std::uint64_t a, std::uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
  };
  const std::vector<bool> held =
      ordo::app::held_parts(part, rt.ranks(), rt.ranks() == 1 ? ordo::kAllRanks : rt.rank());
  std::uint64_t vertices = 0;
  for (std::uint32_t p = 0; p < part.parts(); ++p)
    if (held[p]) vertices += part.count(p);
  std::uint64_t bytes = sat_add(ordo::sparse::graph_rows_bytes(part, held, edges),
                                sat_add(sat_mul(vertices, 4 * 8), sat_mul(edges, 4 + 8)));
  const bool whole = verify || src.metis;
  if (whole)
    bytes = sat_add(bytes, sat_add(ordo::sparse::graph_rows_bytes(
                                       part, std::vector<bool>(part.parts(), true), edges),
                                   sat_mul(part.size(), 3 * 8)));
  const std::string counts =
      std::to_string(part.size()) + " vertices and " + std::to_string(edges) + " edges";
  const std::string held_what = std::string("; their ranks and rows") +
                                (whole ? ", and the whole graph for --verify or METIS)" : ")");
  rt.check_memory_on_all_ranks(
      bytes, src.path.empty() ? "--scale " + std::to_string(src.scale) + "'s " + counts + " (" +
                                    held_what.substr(2)
                              : "the " + counts + " the header of '" + src.path +
                                    "' states (give the true counts if it is wrong" + held_what);
}

// One part's iteration, the graph's and the reference's: x_new from y = A z, z from x_new.
Stats rank_part(const double* y, double* x, double* z, const std::uint32_t* outdeg, double c0,
                std::size_t n) {
  Stats s;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = c0 + kDamping * y[i];
    s.delta += std::fabs(v - x[i]);
    x[i] = v;
    if (outdeg[i] == 0) {
      s.dangling += v;
      z[i] = 0;
    } else {
      z[i] = v / double(outdeg[i]);
    }
  }
  return s;
}
double teleport(double dangling, Index n) {
  return (1.0 - kDamping) / double(n) + kDamping * dangling / double(n);
}
Stats initial_part(double* x, double* z, const std::uint32_t* outdeg, Index n, std::size_t count) {
  Stats s;
  for (std::size_t i = 0; i < count; ++i) {
    x[i] = 1.0 / double(n);
    z[i] = outdeg[i] == 0 ? 0.0 : x[i] / double(outdeg[i]);
    if (outdeg[i] == 0) s.dangling += x[i];
  }
  return s;
}

struct Result {
  std::vector<double> x;
  std::uint64_t iterations = 0;
  Stats stats;
};

// The sequential PageRank, in the partition's numbering (METIS renumbers).
Result reference(const GraphSource& src, Index n, std::uint32_t parts, double tol,
                 std::uint64_t iters) {
  const PartedGraph gr = parted_graph(src, n, parts, 1, ordo::kAllRanks);
  const ordo::sparse::Partition& part = gr.pr.partition;
  std::vector<double> x(n), z(n), y(n);
  std::vector<Stats> partial(parts);
  for (std::uint32_t b = 0; b < parts; ++b)
    partial[b] = initial_part(&x[part.begin(b)], &z[part.begin(b)], gr.out_degree[b].data(), n,
                              part.count(b));
  Stats now = ordo::combine_in_order<Stats>(partial, AddStats{});
  Result res;
  for (std::uint64_t k = 0; k < iters; ++k) {
    const double c0 = teleport(now.dangling, n);
    const std::vector<double> zo = z;
    for (std::uint32_t b = 0; b < parts; ++b) {
      const ordo::sparse::Rows& r = gr.pr.rows[b];
      const Index o = part.begin(b);
      for (std::size_t i = 0; i < r.rows(); ++i) {
        double s = 0.0;
        for (std::uint64_t e = r.start[i]; e < r.start[i + 1]; ++e) s += r.val[e] * zo[r.col[e]];
        y[o + i] = s;
      }
      partial[b] = rank_part(&y[o], &x[o], &z[o], gr.out_degree[b].data(), c0, part.count(b));
    }
    now = ordo::combine_in_order<Stats>(partial, AddStats{});
    res.iterations = k + 1;
    if (now.delta <= tol) break;
  }
  res.x = std::move(x);
  res.stats = now;
  return res;
}

int run(int argc, char** argv) {
  CLI::App cli{
      "PageRank (damping 0.85) on a directed graph split by vertices over parts (the "
      "sparse layer), until the L1 change is at most --tol; the same bits for any number "
      "of workers or ranks",
      "ordo-pagerank"};
  GraphSource src;
  std::string output, trace_path, partition = "block";
  std::uint64_t iters = 100;
  std::uint32_t parts = 8;
  double tol = 1e-9;
  unsigned workers = 0;
  bool verify = false;
  cli.add_option("--graph", src.path,
                 "an edge list: a line 'vertices edges', then 'from to' per "
                 "edge (0-based; '#' or '%' comments); default: an R-MAT graph")
      ->type_name("FILE");
  cli.add_option("--scale", src.scale, "R-MAT graph of 2^SCALE vertices")
      ->check(ordo::cli::Integer(1, 32))
      ->capture_default_str();
  cli.add_option("--edge-factor", src.edge_factor, "R-MAT edges per vertex")
      ->check(ordo::cli::Integer(1, 1024))
      ->capture_default_str();
  cli.add_option("--seed", src.seed, "R-MAT seed")
      ->check(ordo::cli::Integer(0, ~std::uint64_t{0} >> 1));
  cli.add_option("--parts", parts,
                 "parts the vertices are split into (results depend on it, not "
                 "on workers or ranks)")
      ->check(ordo::cli::Integer(1, 1 << 20))
      ->capture_default_str();
  cli.add_option("--partition", partition,
                 "block (vertices in contiguous blocks) or metis (METIS k-way parts of the "
                 "pattern made symmetric, renumbered contiguous; every rank reads every edge)")
      ->check(CLI::IsMember({"block", "metis"}))
      ->capture_default_str();
  ordo::app::add_run_flags(
      cli, {iters, tol, workers, verify, output, trace_path},
      {.iters = "the most iterations",
       .tol = "stop once an iteration changes the ranks by at most TOL (L1)",
       .verify = "compare the ranks and the iteration count bit for bit with a sequential PageRank",
       .output = "write the ranks (.npy, float64, N)"});
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  src.metis = partition == "metis";

  std::optional<ordo::app::OutputFile> output_file;
  if (!output.empty()) output_file.emplace(output);
  ordo::Runtime rt(ordo::RuntimeOptions{.workers = workers, .trace_path = trace_path});
  workers = rt.workers();
  const unsigned ranks = rt.ranks();
  if (ranks > parts)
    throw ordo::Error("--parts " + std::to_string(parts) + " for " + std::to_string(ranks) +
                      " ranks: every rank needs a part; give at least " + std::to_string(ranks));
  // Every rank reads the whole edge list and keeps the edges into its parts.
  Index n = 0;
  std::string problem;
  ordo::sparse::EdgeListHeader header;
  std::uint64_t edges = 0;
  ordo::sparse::Partition blocks;
  try {
    n = vertices_of(src, &header);
    edges = src.path.empty() ? (std::uint64_t{1} << src.scale) * src.edge_factor : header.edges;
    if (parts > n)
      throw ordo::Error("--parts " + std::to_string(parts) + " for " + std::to_string(n) +
                        " vertices: give at most " + std::to_string(n));
    blocks = ordo::sparse::Partition::blocks(n, parts);
  } catch (const ordo::Error& e) {
    problem = e.what();
  }
  ordo::sparse::agree(rt, problem);
  check_graph_fits(rt, src, blocks, edges, verify);
  PartedGraph pg;
  try {
    pg = parted_graph(src, n, parts, ranks, ranks == 1 ? ordo::kAllRanks : rt.rank());
  } catch (const ordo::Error& e) {
    problem = e.what();
  }
  ordo::sparse::agree(rt, problem);
  const std::uint64_t edge_cut = ordo::app::edge_cut(rt, pg.pr.partition, pg.pr.rows, false);
  const std::vector<std::vector<std::uint32_t>> outdeg = std::move(pg.out_degree);
  const std::vector<Index> old_of_new = std::move(pg.pr.old_of_new);
  ordo::sparse::IndexMap map(pg.pr.partition, ranks);
  auto a = std::make_shared<const ordo::sparse::Matrix>(rt, std::move(map), std::move(pg.pr.rows));
  const ordo::sparse::IndexMap& m = *a->map();

  ordo::Graph g;
  ordo::sparse::Vector<double> z(g, "pr.z", a->map());
  const auto count = [&](std::uint32_t b) { return std::size_t(m.partition().count(b)); };
  const auto x = g.location_family<double>("pr.x", parts, count);
  const auto y = g.location_family<double>("pr.y", parts, count);
  for (std::uint32_t b = 0; b < parts; ++b) {
    g.set_home_rank(x[b], m.home(b));
    g.set_home_rank(y[b], m.home(b));
  }
  auto stats_r = g.reduction<Stats>("pr.stats", parts, AddStats{});
  // Iteration 0's dangling rank: the initial x's, per part, reduced as the graph reduces.
  Stats first;
  {
    ordo::Graph g0;
    auto red = g0.reduction<Stats>("pr.stats0", parts, AddStats{});
    const auto at = g0.location_family<double>("pr.at0", parts, 1);
    for (std::uint32_t b = 0; b < parts; ++b) g0.set_home_rank(at[b], m.home(b));
    g0.task_family(
        "pr.initial", parts,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(at[b]));
          acc.add(ordo::contribute(red, b));
        },
        [&](ordo::Context& ctx, std::uint32_t b) {
          std::vector<double> xb(count(b)), zb(count(b));
          ctx.contribute(red, b, initial_part(xb.data(), zb.data(), outdeg[b].data(), n, count(b)));
        });
    g0.combine(red);
    rt.run(g0, 1);
    first = g0.value(red);
  }
  z.exchange();
  g.task_family(
      "pr.rank", parts,
      [&](std::uint32_t b, ordo::AccessList& acc) {
        acc.add(ordo::write(x[b]));
        acc.add(ordo::write(z.owned(b)));
        acc.add(ordo::write(y[b]));
        if (z.has_ghosts(b)) acc.add(ordo::read(z.ghosts(b)));
        acc.add(ordo::read(stats_r));  // before the combine: the previous iteration's
        acc.add(ordo::contribute(stats_r, b));
      },
      [&, a, z, x, y, stats_r, first, n](ordo::Context& ctx, std::uint32_t b) {
        const double dangling = ctx.iteration() == 0 ? first.dangling : ctx.value(stats_r).dangling;
        const auto zz = ctx.write(z.owned(b));
        const auto yy = ctx.write(y[b]);
        a->part(b).multiply(zz.data(), z.has_ghosts(b) ? ctx.read(z.ghosts(b)).data() : nullptr,
                            yy.data());
        ctx.contribute(stats_r, b,
                       rank_part(yy.data(), ctx.write(x[b]).data(), zz.data(), outdeg[b].data(),
                                 teleport(dangling, n), yy.size()));
      });
  g.combine(stats_r);
  for (std::uint32_t b = 0; b < parts; ++b)
    if (a->holds(b))
      initial_part(g.data(x[b]).data(), g.data(z.owned(b)).data(), outdeg[b].data(), n, count(b));

  ordo::Until until;
  until.done = [&](const ordo::Graph& gg) { return gg.value(stats_r).delta <= tol; };
  until.max_iterations = iters;
  const ordo::RunStats stats = rt.run_until(g, until);
  // Before the run nothing was sent: the counter starts at the graph's first run.
  const std::uint64_t wire = ordo::bench::bytes_sent(g).program;
  const Stats now = g.value(stats_r);

  int outcome = 0;
  if (verify) {
    const Result want = reference(src, n, parts, tol, iters);
    if (want.iterations != stats.iterations || std::memcmp(&want.stats, &now, sizeof now) != 0)
      outcome = 1;
    for (std::uint32_t b = 0; b < parts && outcome == 0; ++b) {
      if (!a->holds(b)) continue;
      const auto xb = g.data(x[b]);
      if (std::memcmp(xb.data(), &want.x[m.partition().begin(b)], xb.size() * sizeof(double)) != 0)
        outcome = 1;
    }
  }
  const std::vector<int> outcomes = rt.gather_values(outcome);
  if (output_file) {
    std::vector<ordo::app::NpySegment> segments;
    for (std::uint32_t b = 0; b < parts; ++b)  // in the graph's own numbering (METIS renumbers)
      if (a->holds(b))
        ordo::app::add_original_segments(segments, m.partition().begin(b), g.data(x[b]),
                                         old_of_new);
    output_file->write(rt, {std::size_t(n)}, std::move(segments));
  }
  const auto nnz = rt.gather_values(a->nonzeros_here());
  std::uint64_t nonzeros = 0;
  for (auto v : nnz) nonzeros += v;
  std::string verdict = "skipped";
  if (verify) {
    verdict = "ok";
    for (int o : outcomes)
      if (o != 0) verdict = "fail";
  }
  std::string line = fmt::format(
      "app=pagerank graph={} vertices={} nonzeros={} parts={} partition={} edge_cut={} iters={} "
      "workers={} seconds={:.6f} delta={:.6e} {} verify={}",
      src.describe(), n, nonzeros, parts, partition, edge_cut, stats.iterations, workers,
      stats.seconds, now.delta, ordo::app::bytes_fields(rt, z, stats.iterations, wire), verdict);
  if (ranks > 1) line += fmt::format(" ranks={}", ranks);
  if (rt.rank() == 0) fmt::print("{}\n", line);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-pagerank", [&] { return run(argc, argv); });
}
