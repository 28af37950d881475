// ordo-spcg: conjugate gradient (plain, or Jacobi-preconditioned) on a sparse matrix split by
// rows over parts (the sparse layer: <ordo/sparse.hpp>), from a Matrix Market file or a
// generator; the right-hand side is b_i = hash01(i). The same bits for any number of workers
// or ranks, and as the sequential CG in this binary (--verify), for a given matrix and --parts.
//
// Per part q: x, r, p (with ghosts: the exchange), Ap, z = r / diag (preconditioned only), and
// last (the r.z the iteration started from, beta's denominator). One iteration, in program
// order:
//   dir[q]     p = z + beta p (beta = rz / last; iteration 0: p = z)
//   p.exchange()   p's ghosts from the parts that own them (this iteration's p)
//   matvec[q]  Ap = A p; contributes p.Ap
//   combine(pAp)
//   update[q]  alpha = rz / pAp; x += alpha p; r -= alpha Ap; z = r / diag; contributes r.z, r.r
//   combine(dots)
// dir and update read the dots before their combine: the previous iteration's (iteration 0
// takes b's, reduced by a small graph before the run).
#include <cmath>
#include <cstring>

#include "app_cli.hpp"
#include "output_file.hpp"
#include "run_flags.hpp"
#include "sparse_app.hpp"
#include "stencil_app.hpp"

namespace {

using ordo::sparse::Index;
using ordo::sparse::LocalRows;

// r.z and r.r of one iteration, reduced together (the same order for both).
struct Dots {
  double rz = 0, rr = 0;
};
struct AddDots {
  Dots operator()(const Dots& a, const Dots& b) const { return {a.rz + b.rz, a.rr + b.rr}; }
};

double rhs(Index i) { return ordo::app::hash01(i); }

// The kernels both the graph and the sequential reference run, row by row in one order.
double dot(const double* a, const double* b, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
// p = z + beta p, or p = z in the first iteration (`first`).
void direction(double* p, const double* z, bool first, double beta, std::size_t n) {
  if (first) {
    std::memcpy(p, z, n * sizeof(double));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) p[i] = z[i] + beta * p[i];
}
// x += alpha p; r -= alpha q; z = r / d (when preconditioned); returns r.z, r.r.
Dots update(double* x, double* r, double* z, const double* p, const double* q, const double* d,
            double alpha, std::size_t n) {
  Dots s;
  if (z == nullptr) {
    for (std::size_t i = 0; i < n; ++i) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
      s.rr += r[i] * r[i];
    }
    s.rz = s.rr;
    return s;
  }
  for (std::size_t i = 0; i < n; ++i) {
    x[i] += alpha * p[i];
    r[i] -= alpha * q[i];
    s.rr += r[i] * r[i];
    z[i] = r[i] / d[i];
    s.rz += r[i] * z[i];
  }
  return s;
}
Dots initial_dots(const double* b, const double* d, std::size_t n) {
  Dots s;
  for (std::size_t i = 0; i < n; ++i) {
    s.rr += b[i] * b[i];
    if (d != nullptr) s.rz += b[i] * (b[i] / d[i]);
  }
  if (d == nullptr) s.rz = s.rr;
  return s;
}

bool converged(const Dots& now, const Dots& first, double tol) {
  return tol > 0 && std::sqrt(now.rr / first.rr) <= tol;
}

struct Result {
  std::vector<double> x;
  std::uint64_t iterations = 0;
  Dots dots, first;
};

double diagonal_of(const ordo::sparse::Rows& rows, std::size_t i) {
  for (std::uint64_t k = rows.start[i]; k < rows.start[i + 1]; ++k)
    if (rows.col[k] == rows.first + i) return rows.val[k];
  return 0;
}

// The sequential CG: every part's rows in this process, the parts' dot products combined as
// the graph's reductions combine them (ordo::combine_in_order), each part's rows in order.
Result reference(const ordo::app::MatrixSource& src, std::uint32_t parts, bool metis, bool jacobi,
                 double tol, std::uint64_t iters) {
  const Index n = ordo::app::source_size(src);
  const ordo::app::PartedRows pr =
      ordo::app::parted_rows(src, n, parts, metis, 1, ordo::kAllRanks, true);
  const ordo::sparse::Partition& part = pr.partition;
  const std::vector<ordo::sparse::Rows>& rows = pr.rows;
  std::vector<double> x(n, 0.0), r(n), z(jacobi ? n : 0), p(n), q(n), d(jacobi ? n : 0);
  for (Index i = 0; i < n; ++i) r[i] = rhs(pr.old_of_new.empty() ? i : pr.old_of_new[i]);
  std::vector<Dots> partial(parts);
  std::vector<double> pq_partial(parts);
  for (std::uint32_t b = 0; b < parts; ++b) {
    const Index o = part.begin(b);
    if (jacobi)
      for (std::size_t i = 0; i < part.count(b); ++i) d[o + i] = diagonal_of(rows[b], i);
    partial[b] = initial_dots(&r[o], jacobi ? &d[o] : nullptr, part.count(b));
    if (jacobi)
      for (std::size_t i = 0; i < part.count(b); ++i) z[o + i] = r[o + i] / d[o + i];
  }
  Result res;
  res.first = ordo::combine_in_order<Dots>(partial, AddDots{});
  Dots now = res.first;
  double last = 0;
  const double* zz = jacobi ? z.data() : r.data();
  for (std::uint64_t k = 0; k < iters; ++k) {
    for (std::uint32_t b = 0; b < parts; ++b) {
      const Index o = part.begin(b);
      direction(&p[o], &zz[o], k == 0, k == 0 ? 0.0 : now.rz / last, part.count(b));
    }
    for (std::uint32_t b = 0; b < parts; ++b) {
      const ordo::sparse::Rows& rb = rows[b];
      const Index o = part.begin(b);
      for (std::size_t i = 0; i < rb.rows(); ++i) {
        double s = 0.0;
        for (std::uint64_t e = rb.start[i]; e < rb.start[i + 1]; ++e) s += rb.val[e] * p[rb.col[e]];
        q[o + i] = s;
      }
      pq_partial[b] = dot(&p[o], &q[o], part.count(b));
    }
    const double pq = ordo::combine_in_order<double>(pq_partial);
    const double alpha = now.rz / pq;
    for (std::uint32_t b = 0; b < parts; ++b) {
      const Index o = part.begin(b);
      partial[b] = update(&x[o], &r[o], jacobi ? &z[o] : nullptr, &p[o], &q[o],
                          jacobi ? &d[o] : nullptr, alpha, part.count(b));
    }
    last = now.rz;
    now = ordo::combine_in_order<Dots>(partial, AddDots{});
    res.iterations = k + 1;
    if (converged(now, res.first, tol)) break;
  }
  res.x = std::move(x);
  res.dots = now;
  return res;
}

struct Solver {
  std::shared_ptr<const ordo::sparse::Matrix> a;
  bool jacobi;
  ordo::Graph g;
  ordo::sparse::Vector<double> p;
  std::vector<ordo::Location<double>> x, r, z, q, last, diag;
  ordo::Reduction<double> pq;
  ordo::Reduction<Dots> dots;
  Dots first;

  const ordo::app::LoadedMatrix* lm;

  Solver(const ordo::app::LoadedMatrix& loaded, bool precondition, Dots first_dots)
      : a(loaded.matrix), jacobi(precondition), first(first_dots), lm(&loaded) {
    const ordo::sparse::IndexMap& m = *a->map();
    const std::uint32_t parts = m.parts();
    const auto count = [&](std::uint32_t b) { return std::size_t(m.partition().count(b)); };
    p = ordo::sparse::Vector<double>(g, "cg.p", a->map());
    x = g.location_family<double>("cg.x", parts, count);
    r = g.location_family<double>("cg.r", parts, count);
    q = g.location_family<double>("cg.q", parts, count);
    last = g.location_family<double>("cg.last", parts, 1);
    if (jacobi) {
      z = g.location_family<double>("cg.z", parts, count);
      diag = g.location_family<double>("cg.diag", parts, count);
    }
    for (std::uint32_t b = 0; b < parts; ++b) {
      for (auto loc : {x[b], r[b], q[b], last[b]}) g.set_home_rank(loc, m.home(b));
      if (jacobi)
        for (auto loc : {z[b], diag[b]}) g.set_home_rank(loc, m.home(b));
    }
    pq = g.reduction<double>("cg.pq", parts);
    dots = g.reduction<Dots>("cg.dots", parts, AddDots{});
    declare();
  }

  ordo::Location<double> zz(std::uint32_t b) const { return jacobi ? z[b] : r[b]; }

  void declare() {
    const std::uint32_t parts = a->map()->parts();
    g.task_family(
        "cg.dir", parts,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(p.owned(b)));
          acc.add(ordo::read(zz(b)));
          acc.add(ordo::read(last[b]));
          acc.add(ordo::read(dots));  // before combine(dots): the previous iteration's
        },
        [this](ordo::Context& ctx, std::uint32_t b) {
          const auto pp = ctx.write(p.owned(b));
          const bool first_iteration = ctx.iteration() == 0;
          const double beta = first_iteration ? 0.0 : ctx.value(dots).rz / ctx.read(last[b])[0];
          direction(pp.data(), ctx.read(zz(b)).data(), first_iteration, beta, pp.size());
        });
    p.exchange();
    g.task_family(
        "cg.matvec", parts,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(q[b]));
          acc.add(ordo::read(p.owned(b)));
          if (p.has_ghosts(b)) acc.add(ordo::read(p.ghosts(b)));
          acc.add(ordo::contribute(pq, b));
        },
        [this](ordo::Context& ctx, std::uint32_t b) {
          const auto qq = ctx.write(q[b]);
          const auto pp = ctx.read(p.owned(b));
          const double* ghost = p.has_ghosts(b) ? ctx.read(p.ghosts(b)).data() : nullptr;
          a->part(b).multiply(pp.data(), ghost, qq.data());
          ctx.contribute(pq, b, dot(pp.data(), qq.data(), pp.size()));
        });
    g.combine(pq);
    g.task_family(
        "cg.update", parts,
        [&](std::uint32_t b, ordo::AccessList& acc) {
          acc.add(ordo::write(x[b]));
          acc.add(ordo::write(r[b]));
          if (jacobi) {
            acc.add(ordo::write(z[b]));
            acc.add(ordo::read(diag[b]));
          }
          acc.add(ordo::write(last[b]));
          acc.add(ordo::read(p.owned(b)));
          acc.add(ordo::read(q[b]));
          acc.add(ordo::read(pq));
          acc.add(ordo::read(dots));  // before combine(dots): the previous iteration's
          acc.add(ordo::contribute(dots, b));
        },
        [this](ordo::Context& ctx, std::uint32_t b) {
          const double rz = ctx.iteration() == 0 ? first.rz : ctx.value(dots).rz;
          ctx.write(last[b])[0] = rz;
          const auto xx = ctx.write(x[b]);
          ctx.contribute(
              dots, b,
              update(xx.data(), ctx.write(r[b]).data(), jacobi ? ctx.write(z[b]).data() : nullptr,
                     ctx.read(p.owned(b)).data(), ctx.read(q[b]).data(),
                     jacobi ? ctx.read(diag[b]).data() : nullptr, rz / ctx.value(pq), xx.size()));
        });
    g.combine(dots);
  }

  // r = b (and z = b / diag), x = q = 0 on the parts this rank holds.
  void set_initial() {
    const ordo::sparse::IndexMap& m = *a->map();
    for (std::uint32_t b = 0; b < m.parts(); ++b) {
      if (!a->holds(b)) continue;
      const auto rr = g.data(r[b]);
      for (std::size_t i = 0; i < rr.size(); ++i)
        rr[i] = rhs(lm->original(m.partition().begin(b) + i));
      if (jacobi) {
        const auto dd = g.data(diag[b]);
        const auto zb = g.data(z[b]);
        for (std::size_t i = 0; i < dd.size(); ++i) {
          dd[i] = a->part(b).diagonal[i];
          zb[i] = rr[i] / dd[i];
        }
      }
      for (auto loc : {x[b], q[b]}) std::ranges::fill(g.data(loc), 0.0);
    }
  }
};

// b's dots per part, reduced as the graph reduces them: iteration 0's r.z and r.r.
Dots initial(ordo::Runtime& rt, const ordo::app::LoadedMatrix& lm, bool jacobi) {
  const ordo::sparse::Matrix& a = *lm.matrix;
  ordo::Graph g;
  const std::uint32_t parts = a.map()->parts();
  auto red = g.reduction<Dots>("cg.dots0", parts, AddDots{});
  std::vector<ordo::Location<double>> keep = g.location_family<double>("cg.dots0.at", parts, 1);
  for (std::uint32_t b = 0; b < parts; ++b) g.set_home_rank(keep[b], a.map()->home(b));
  g.task_family(
      "cg.rhs_dots", parts,
      [&](std::uint32_t b, ordo::AccessList& acc) {
        acc.add(ordo::write(keep[b]));
        acc.add(ordo::contribute(red, b));
      },
      [&a, &lm, red, jacobi](ordo::Context& ctx, std::uint32_t b) {
        const ordo::sparse::LocalRows& rows = a.part(b);
        std::vector<double> rb(rows.rows());
        for (std::size_t i = 0; i < rb.size(); ++i) rb[i] = rhs(lm.original(rows.first + i));
        ctx.contribute(red, b,
                       initial_dots(rb.data(), jacobi ? rows.diagonal.data() : nullptr, rb.size()));
      });
  g.combine(red);
  rt.run(g, 1);
  return g.value(red);
}

int run(int argc, char** argv) {
  CLI::App cli{
      "Conjugate gradient on a sparse matrix split by rows over parts (the sparse layer), "
      "right-hand side b_i = hash01(i), x0 = 0; the same bits for any number of workers "
      "or ranks",
      "ordo-spcg"};
  ordo::app::MatrixSource src;
  std::string l2, l3, output, precond = "none", partition = "block", trace_path;
  std::uint64_t iters = 100;
  std::uint32_t parts = 8;
  double tol = 0;
  unsigned workers = 0;
  bool verify = false;
  ordo::app::add_matrix_flags(cli, src, l2, l3);
  cli.add_option("--parts", parts,
                 "parts the rows are split into (results depend on it, not on "
                 "workers or ranks)")
      ->check(ordo::cli::Integer(1, 1 << 20))
      ->capture_default_str();
  cli.add_option("--partition", partition,
                 "block (rows in contiguous blocks) or metis (METIS "
                 "k-way parts of the pattern, renumbered contiguous; every rank reads every row)")
      ->check(CLI::IsMember({"block", "metis"}))
      ->capture_default_str();
  cli.add_option("--precond", precond, "none or jacobi")
      ->check(CLI::IsMember({"none", "jacobi"}))
      ->capture_default_str();
  ordo::app::add_run_flags(
      cli, {iters, tol, workers, verify, output, trace_path},
      {.iters = "iterations (with --tol: the most)",
       .tol = "stop once |r| / |b| <= TOL (0: run --iters iterations)",
       .verify = "compare x, the iteration count and the dots bit for bit with a sequential CG",
       .output = "write the solution x (.npy, float64, N)"});
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
  ordo::app::finish_matrix_flags(src, l2, l3);
  const bool jacobi = precond == "jacobi";

  std::optional<ordo::app::OutputFile> output_file;
  if (!output.empty()) output_file.emplace(output);
  ordo::Runtime rt(ordo::RuntimeOptions{.workers = workers, .trace_path = trace_path});
  workers = rt.workers();
  const unsigned rank = rt.rank(), ranks = rt.ranks();
  if (ranks > parts)
    throw ordo::Error("--parts " + std::to_string(parts) + " for " + std::to_string(ranks) +
                      " ranks: every rank needs a part; give at least " + std::to_string(ranks));
  const ordo::app::LoadedMatrix lm =
      ordo::app::load_matrix(rt, src, parts, partition == "metis", true);
  std::string problem;
  for (std::uint32_t b = 0; b < parts && jacobi; ++b)
    if (lm.matrix->holds(b))
      for (std::size_t i = 0; i < lm.matrix->part(b).rows() && problem.empty(); ++i)
        if (!(lm.matrix->part(b).diagonal[i] > 0))
          problem = "row " + std::to_string(lm.matrix->part(b).first + i + 1) +
                    " has no positive diagonal entry: the matrix is not positive definite, and "
                    "--precond jacobi divides by it";
  ordo::sparse::agree(rt, problem);
  const Dots first = initial(rt, lm, jacobi);
  Solver s(lm, jacobi, first);
  s.set_initial();
  ordo::RunStats stats;
  const std::uint64_t wire_before = ordo::bench::bytes_sent(s.g).program;
  if (tol > 0) {
    ordo::Until until;
    until.done = [&](const ordo::Graph& g) { return converged(g.value(s.dots), first, tol); };
    until.max_iterations = iters;
    stats = rt.run_until(s.g, until);
  } else {
    stats = rt.run(s.g, iters);
  }
  const std::uint64_t wire = ordo::bench::bytes_sent(s.g).program - wire_before;
  const Dots now = s.g.value(s.dots);
  const ordo::sparse::IndexMap& m = *lm.matrix->map();

  int outcome = 0;
  if (verify) {
    const Result want = reference(src, parts, partition == "metis", jacobi, tol, iters);
    if (want.iterations != stats.iterations || std::memcmp(&want.dots, &now, sizeof now) != 0 ||
        std::memcmp(&want.first, &first, sizeof first) != 0)
      outcome = 1;
    for (std::uint32_t b = 0; b < parts && outcome == 0; ++b) {
      if (!lm.matrix->holds(b)) continue;
      const auto xb = s.g.data(s.x[b]);
      if (std::memcmp(xb.data(), &want.x[m.partition().begin(b)], xb.size() * sizeof(double)) != 0)
        outcome = 1;
    }
  }
  const std::vector<int> outcomes = rt.gather_values(outcome);
  if (output_file) {
    std::vector<ordo::app::NpySegment> segments;
    // In the matrix's own numbering (METIS renumbers).
    for (std::uint32_t b = 0; b < parts; ++b)
      if (lm.matrix->holds(b))
        ordo::app::add_original_segments(segments, m.partition().begin(b), s.g.data(s.x[b]),
                                         lm.old_of_new);
    output_file->write(rt, {std::size_t(m.size())}, std::move(segments));
  }
  const auto nnz = rt.gather_values(lm.matrix->nonzeros_here());
  std::uint64_t nonzeros = 0;
  for (auto v : nnz) nonzeros += v;
  std::string verdict = "skipped";
  if (verify) {
    verdict = "ok";
    for (int o : outcomes)
      if (o != 0) verdict = "fail";
  }
  const std::string bytes = ordo::app::bytes_fields(rt, s.p, stats.iterations, wire);
  std::string line = fmt::format(
      "app=spcg matrix={} rows={} nonzeros={} parts={} partition={} edge_cut={} precond={} "
      "iters={} "
      "workers={} seconds={:.6f} gflops={:.4f} residual={:.6e} {} verify={}",
      src.describe(), m.size(), nonzeros, parts, lm.partitioner, lm.edge_cut, precond,
      stats.iterations, workers, stats.seconds,
      2.0 * double(nonzeros) * double(stats.iterations) / stats.seconds / 1e9,
      std::sqrt(now.rr / first.rr), bytes, verdict);
  if (ranks > 1) line += fmt::format(" ranks={}", ranks);
  if (rank == 0) fmt::print("{}\n", line);
  return verdict == "fail" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-spcg", [&] { return run(argc, argv); });
}
