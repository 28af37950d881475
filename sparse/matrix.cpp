// Distributed CSR: rows per part, their local numbering, generators.
#include <algorithm>
#include <cmath>
#include <limits>

#include <ordo/sparse.hpp>

namespace ordo::sparse {

void Rows::add_row(std::span<const Index> cols, std::span<const double> vals) {
  for (std::size_t k = 1; k < cols.size(); ++k)
    if (cols[k] <= cols[k - 1])
      throw Error(
          "row " + std::to_string(first + rows()) + " has column " + std::to_string(cols[k]) +
          (cols[k] == cols[k - 1] ? " twice" : " after column " + std::to_string(cols[k - 1])) +
          "; give each row's columns once, in increasing order");
  col.insert(col.end(), cols.begin(), cols.end());
  val.insert(val.end(), vals.begin(), vals.end());
  start.push_back(col.size());
}

namespace {

// One kernel for multiply and multiply_dot, so that both sum each row alike.
template <bool kDot>
double product(const LocalRows& m, const double* own, const double* ghost, double* y) {
  const std::uint32_t* c = m.col.data();
  const double* v = m.val.data();
  const std::uint64_t* st = m.start.data();
  std::size_t i = 0;
  const std::size_t n = m.rows();
  double dot = 0.0;
  for (std::size_t g = 0; g <= m.ghost_rows.size(); ++g) {
    // The rows up to the next ghost row read owned entries only.
    const std::size_t until = g < m.ghost_rows.size() ? m.ghost_rows[g] : n;
    for (; i < until; ++i) {
      double s = 0.0;
      for (std::uint64_t k = st[i], e = st[i + 1]; k < e; ++k) s += v[k] * own[c[k]];
      y[i] = s;
      if constexpr (kDot) dot += own[i] * s;
    }
    if (g == m.ghost_rows.size()) break;
    double s = 0.0;
    std::uint64_t k = st[i];
    for (const std::uint64_t e = m.own_begin[g]; k < e; ++k) s += v[k] * ghost[c[k]];
    for (const std::uint64_t e = m.own_end[g]; k < e; ++k) s += v[k] * own[c[k]];
    for (const std::uint64_t e = st[i + 1]; k < e; ++k) s += v[k] * ghost[c[k]];
    y[i] = s;
    if constexpr (kDot) dot += own[i] * s;
    ++i;
  }
  return dot;
}

}  // namespace

void LocalRows::multiply(const double* own, const double* ghost, double* y) const {
  product<false>(*this, own, ghost, y);
}

double LocalRows::multiply_dot(const double* own, const double* ghost, double* y) const {
  return product<true>(*this, own, ghost, y);
}

void agree(Runtime& rt, const std::string& problem) {
  const std::vector<int> bad = rt.gather_values(problem.empty() ? 0 : 1);
  if (!problem.empty()) throw Error(problem);
  for (unsigned r = 0; r < bad.size(); ++r)
    if (bad[r] != 0)
      throw Error("rank " + std::to_string(r) +
                  " refused its part of the input (its message says why); every rank stops");
}

Matrix::Matrix(Runtime& rt, IndexMap map, std::vector<Rows> rows)
    : map_(std::make_shared<IndexMap>(std::move(map))) {
  IndexMap& m = *map_;
  const Partition& part = m.partition();
  const std::uint32_t parts = m.parts();
  held_.assign(parts, false);
  local_.resize(parts);
  if (rows.size() != parts)
    throw Error("a matrix over " + std::to_string(parts) + " parts was given rows for " +
                std::to_string(rows.size()));
  std::string problem;
  try {
    for (std::uint32_t p = 0; p < parts; ++p) {
      if (rt.ranks() > 1 && m.home(p) != rt.rank()) continue;
      held_[p] = true;
      const Rows& r = rows[p];
      if (r.first != part.begin(p) || r.rows() != part.count(p))
        throw Error("part " + std::to_string(p) + " was given rows " + std::to_string(r.first) +
                    " to " + std::to_string(r.first + r.rows()) + ", it owns " +
                    std::to_string(part.begin(p)) + " to " + std::to_string(part.end(p)));
      std::vector<Index> reads;
      const Index b = part.begin(p), e = part.end(p);
      for (Index c : r.col)
        if (c < b || c >= e) reads.push_back(c);
      m.set_ghosts(p, std::move(reads));
    }
  } catch (const Error& e) {
    problem = e.what();
  }
  agree(rt, problem);
  m.share_ghosts(rt);
  for (std::uint32_t p = 0; p < parts; ++p) {
    if (!held_[p]) continue;
    Rows& r = rows[p];
    LocalRows& l = local_[p];
    const Index b = part.begin(p), e = part.end(p);
    l.first = b;
    const std::size_t n = r.rows();
    l.start = std::move(r.start);
    l.diagonal.assign(n, 0.0);
    l.col.resize(r.col.size());
    l.val = std::move(r.val);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t k = l.start[i];
      const std::uint64_t end = l.start[i + 1];
      for (; k < end && r.col[k] < b; ++k) l.col[k] = m.ghost_slot(p, r.col[k]);
      const std::uint64_t own_begin = k;
      for (; k < end && r.col[k] < e; ++k) {
        l.col[k] = std::uint32_t(r.col[k] - b);
        if (r.col[k] == b + i) l.diagonal[i] = l.val[k];
      }
      const std::uint64_t own_end = k;
      for (; k < end; ++k) l.col[k] = m.ghost_slot(p, r.col[k]);
      if (own_begin != l.start[i] || own_end != end) {
        l.ghost_rows.push_back(std::uint32_t(i));
        l.own_begin.push_back(own_begin);
        l.own_end.push_back(own_end);
      }
    }
    r = Rows{};
  }
}

const LocalRows& Matrix::part(std::uint32_t p) const {
  if (!held_.at(p))
    throw Error("part " + std::to_string(p) + "'s rows live on rank " +
                std::to_string(map_->home(p)) + ", not here");
  return local_[p];
}

std::uint64_t Matrix::nonzeros_here() const {
  std::uint64_t n = 0;
  for (std::size_t p = 0; p < local_.size(); ++p)
    if (held_[p]) n += local_[p].nonzeros();
  return n;
}

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double unit(std::uint64_t h) { return double(h >> 11) * 0x1.0p-53; }

void check_range(Index n, Index first, Index end, const char* what) {
  if (first > end || end > n)
    throw Error(std::string(what) + ": rows " + std::to_string(first) + " to " +
                std::to_string(end) + " of a matrix of " + std::to_string(n));
}

}  // namespace

Rows laplacian_2d(Index nx, Index ny, Index first, Index end) {
  check_range(nx * ny, first, end, "laplacian_2d");
  Rows r;
  r.first = first;
  std::vector<Index> c;
  std::vector<double> v;
  for (Index i = first; i < end; ++i) {
    const Index x = i % nx, y = i / nx;
    c.clear();
    v.clear();
    const auto add = [&](Index j, double a) {
      c.push_back(j);
      v.push_back(a);
    };
    if (y > 0) add(i - nx, -1.0);
    if (x > 0) add(i - 1, -1.0);
    add(i, 4.0);
    if (x + 1 < nx) add(i + 1, -1.0);
    if (y + 1 < ny) add(i + nx, -1.0);
    r.add_row(c, v);
  }
  return r;
}

Rows laplacian_3d(Index nx, Index ny, Index nz, Index first, Index end) {
  check_range(nx * ny * nz, first, end, "laplacian_3d");
  Rows r;
  r.first = first;
  const Index plane = nx * ny;
  r.start.reserve(end - first + 1);
  r.col.reserve((end - first) * 7);
  r.val.reserve((end - first) * 7);
  for (Index i = first; i < end; ++i) {
    const Index x = i % nx, y = (i / nx) % ny, z = i / plane;
    const auto add = [&](Index j, double a) {
      r.col.push_back(j);
      r.val.push_back(a);
    };
    if (z > 0) add(i - plane, -1.0);
    if (y > 0) add(i - nx, -1.0);
    if (x > 0) add(i - 1, -1.0);
    add(i, 6.0);
    if (x + 1 < nx) add(i + 1, -1.0);
    if (y + 1 < ny) add(i + nx, -1.0);
    if (z + 1 < nz) add(i + plane, -1.0);
    r.start.push_back(r.col.size());
  }
  return r;
}

Rows random_spd(Index n, std::uint64_t seed, Index first, Index end) {
  check_range(n, first, end, "random_spd");
  // A few offsets, the same for every row, so that row i finds its entries below the diagonal
  // (those rows i - d chose) without looking at other rows.
  std::vector<Index> offsets;
  for (int k = 0; k < 6 && n > 1; ++k) {
    const Index d = 1 + splitmix(seed * 31 + std::uint64_t(k)) %
                            std::max<Index>(1, std::min<Index>(n - 1, 64 << (2 * k)));
    if (std::find(offsets.begin(), offsets.end(), d) == offsets.end()) offsets.push_back(d);
  }
  std::sort(offsets.begin(), offsets.end());
  const auto present = [&](Index i, Index d) {
    return (splitmix(seed ^ (i * 0x100000001b3ull) ^ (d << 40)) & 3) != 0;
  };
  const auto value = [&](Index i, Index d) {
    return -(0.1 + 0.9 * unit(splitmix(seed + i * 977 + d)));
  };
  Rows r;
  r.first = first;
  std::vector<Index> c;
  std::vector<double> v;
  for (Index i = first; i < end; ++i) {
    c.clear();
    v.clear();
    for (auto it = offsets.rbegin(); it != offsets.rend(); ++it)
      if (*it <= i && present(i - *it, *it)) {
        c.push_back(i - *it);
        v.push_back(value(i - *it, *it));
      }
    const std::size_t below = c.size();
    c.push_back(i);
    v.push_back(0.0);
    for (Index d : offsets)
      if (i + d < n && present(i, d)) {
        c.push_back(i + d);
        v.push_back(value(i, d));
      }
    double sum = 1.0;
    for (std::size_t k = 0; k < v.size(); ++k) sum += std::fabs(v[k]);
    v[below] = sum;
    r.add_row(c, v);
  }
  return r;
}

Edge rmat_edge(unsigned scale, std::uint64_t seed, std::uint64_t e) {
  Index u = 0, v = 0;
  std::uint64_t h = splitmix(seed ^ splitmix(e));
  for (unsigned level = 0; level < scale; ++level) {
    if (level % 4 == 0) h = splitmix(h + level);
    const double x = double((h >> (16 * (level % 4))) & 0xFFFF) / 65536.0;
    const unsigned q = x < 0.57 ? 0 : x < 0.76 ? 1 : x < 0.95 ? 2 : 3;
    u = 2 * u + (q >> 1);
    v = 2 * v + (q & 1);
  }
  // Spread the heavy low ids over the vertices (a fixed permutation: an odd multiplier).
  const Index mask = (Index{1} << scale) - 1;
  return Edge{(u * 0x9E3779B97F4A7C15ull) & mask, (v * 0x9E3779B97F4A7C15ull) & mask};
}

std::uint64_t graph_rows_bytes(const Partition& partition, const std::vector<bool>& held,
                               std::uint64_t edges) {
  constexpr std::uint64_t per_vertex = sizeof(std::uint32_t) + sizeof(std::uint64_t);
  constexpr std::uint64_t per_edge = 2 * sizeof(Index) + sizeof(Index) + sizeof(double);
  std::uint64_t vertices = 0;
  for (std::uint32_t p = 0; p < partition.parts(); ++p)
    if (held[p]) vertices += partition.count(p);
  // Saturating: a count from outside may be anything up to 2^64 - 1.
  const auto times = [](std::uint64_t a, std::uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
  };
  const std::uint64_t v = times(vertices, per_vertex), e = times(edges, per_edge);
  return v > UINT64_MAX - e ? UINT64_MAX : v + e;
}

GraphRows graph_rows(const Partition& partition, const std::vector<bool>& held,
                     const std::function<void(const std::function<void(Edge)>&)>& each_edge) {
  const std::uint32_t parts = partition.parts();
  const Index n = partition.size();
  GraphRows out;
  out.rows.resize(parts);
  out.out_degree.resize(parts);
  // Edges kept: those into a held part, as (to, from); then sorted into rows.
  std::vector<std::vector<std::pair<Index, Index>>> kept(parts);
  for (std::uint32_t p = 0; p < parts; ++p)
    if (held[p]) out.out_degree[p].assign(partition.count(p), 0);
  each_edge([&](Edge e) {
    if (e.from >= n || e.to >= n)
      throw Error("edge " + std::to_string(e.from) + " -> " + std::to_string(e.to) +
                  " names a vertex past the graph's " + std::to_string(n) + " vertices");
    const std::uint32_t pf = partition.owner(e.from), pt = partition.owner(e.to);
    if (held[pf]) ++out.out_degree[pf][e.from - partition.begin(pf)];
    if (held[pt]) kept[pt].emplace_back(e.to, e.from);
  });
  for (std::uint32_t p = 0; p < parts; ++p) {
    if (!held[p]) continue;
    auto& k = kept[p];
    std::sort(k.begin(), k.end());
    Rows& r = out.rows[p];
    r.first = partition.begin(p);
    r.start.reserve(partition.count(p) + 1);
    std::size_t j = 0;
    for (Index v = partition.begin(p); v < partition.end(p); ++v) {
      while (j < k.size() && k[j].first == v) {
        const Index u = k[j].second;
        double mult = 0;
        while (j < k.size() && k[j].first == v && k[j].second == u) {
          mult += 1;
          ++j;
        }
        r.col.push_back(u);
        r.val.push_back(mult);
      }
      r.start.push_back(r.col.size());
    }
    k = {};
  }
  return out;
}

}  // namespace ordo::sparse
