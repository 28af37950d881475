// Partitions by METIS (k-way) and the renumbering that makes each part's rows contiguous. The
// one file that includes METIS (tests/layering.py).
#include <algorithm>
#include <limits>

#include <ordo/sparse.hpp>

#ifdef ORDO_HAVE_METIS
#include <metis.h>
#endif

namespace ordo::sparse {

bool metis_available() {
#ifdef ORDO_HAVE_METIS
  return true;
#else
  return false;
#endif
}

MetisParts metis_partition(const Rows& all, std::uint32_t parts) {
  const Index n = all.rows();
  if (all.first != 0) throw Error("metis_partition needs every row of the matrix, from row 0");
  if (parts == 0 || parts > n)
    throw Error("metis_partition: " + std::to_string(parts) + " parts for " + std::to_string(n) +
                " rows; give 1 to " + std::to_string(n));
  MetisParts out;
  out.part.assign(n, 0);
  if (parts == 1) return out;
#ifdef ORDO_HAVE_METIS
  if (n > Index(std::numeric_limits<idx_t>::max()) ||
      all.nonzeros() > std::uint64_t(std::numeric_limits<idx_t>::max()))
    throw Error("the matrix is too large for METIS's 32-bit indices; use --partition block");
  // The pattern without the diagonal, made symmetric (METIS wants an undirected graph).
  std::vector<std::vector<idx_t>> adj(n);
  for (Index i = 0; i < n; ++i)
    for (std::uint64_t k = all.start[i]; k < all.start[i + 1]; ++k) {
      const Index j = all.col[k];
      if (j == i) continue;
      adj[i].push_back(idx_t(j));
      adj[j].push_back(idx_t(i));
    }
  std::vector<idx_t> xadj(n + 1, 0), adjncy;
  for (Index i = 0; i < n; ++i) {
    std::sort(adj[i].begin(), adj[i].end());
    adj[i].erase(std::unique(adj[i].begin(), adj[i].end()), adj[i].end());
    adjncy.insert(adjncy.end(), adj[i].begin(), adj[i].end());
    xadj[i + 1] = idx_t(adjncy.size());
    adj[i] = {};
  }
  idx_t nv = idx_t(n), ncon = 1, np = idx_t(parts), objval = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  // A fixed seed: every rank computes the same parts.
  options[METIS_OPTION_SEED] = 1;
  std::vector<idx_t> part(n);
  const int rc = METIS_PartGraphKway(&nv, &ncon, xadj.data(), adjncy.data(), nullptr, nullptr,
                                     nullptr, &np, nullptr, nullptr, options, &objval, part.data());
  if (rc != METIS_OK)
    throw Error("METIS failed to partition the matrix (status " + std::to_string(rc) + ")");
  for (Index i = 0; i < n; ++i) out.part[i] = std::uint32_t(part[i]);
  out.edge_cut = std::uint64_t(objval);
  // METIS may leave a part empty on a small graph; ordo's parts own at least one row each.
  std::vector<std::uint64_t> size(parts, 0);
  for (std::uint32_t p : out.part) ++size[p];
  for (std::uint32_t p = 0; p < parts; ++p)
    if (size[p] == 0)
      throw Error("METIS left part " + std::to_string(p) + " of " + std::to_string(parts) +
                  " empty; use fewer parts or --partition block");
  return out;
#else
  throw Error("this ordo was built without METIS (Debian's libmetis-dev); use --partition block");
#endif
}

Renumbering renumber(const std::vector<std::uint32_t>& part, std::uint32_t parts) {
  Renumbering r;
  std::vector<Index> starts(std::size_t(parts) + 1, 0);
  for (std::uint32_t p : part) {
    if (p >= parts)
      throw Error("renumber: part " + std::to_string(p) + " of " + std::to_string(parts));
    ++starts[p + 1];
  }
  for (std::uint32_t p = 0; p < parts; ++p) starts[p + 1] += starts[p];
  r.partition = Partition(starts);
  r.old_of_new.resize(part.size());
  r.new_of_old.resize(part.size());
  for (Index i = 0; i < part.size(); ++i) {
    const Index k = starts[part[i]]++;
    r.old_of_new[k] = i;
    r.new_of_old[i] = k;
  }
  return r;
}

Rows permute_rows(const Rows& all, const Renumbering& rn, Index first, Index end) {
  Rows out;
  out.first = first;
  std::vector<std::pair<Index, double>> row;
  std::vector<Index> c;
  std::vector<double> v;
  for (Index i = first; i < end; ++i) {
    const Index old = rn.old_of_new[i];
    row.clear();
    for (std::uint64_t k = all.start[old]; k < all.start[old + 1]; ++k)
      row.emplace_back(rn.new_of_old[all.col[k]], all.val[k]);
    std::sort(row.begin(), row.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    c.clear();
    v.clear();
    for (const auto& [j, a] : row) {
      c.push_back(j);
      v.push_back(a);
    }
    out.add_row(c, v);
  }
  return out;
}

}  // namespace ordo::sparse
