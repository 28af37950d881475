// ordo sparse layer: a partitioned index space with a ghost exchange ordo builds from index
// sets, distributed CSR matrices on it, and their inputs (docs/sparse.md).
//
// A global index space of n entries is split into parts, each a contiguous range with a home
// rank (Partition, IndexMap). Each part declares the global indices it reads that other parts
// own (its *ghosts*). From those sets alone a Vector<T> declares, on the public Graph API:
//   - per part, a location of its owned values and one of its ghost values;
//   - per pair of parts on different ranks, one message location holding exactly the values
//     the reader needs, packed on the owner ("name.msg[k]", homed with the owner);
//   - pack tasks (owner side) and gather tasks (reader side: from the message, or straight
//     from the owner's location when both parts live on one rank: one copy, no message).
// Where in program order the exchange is declared says which values the ghosts hold: those
// the owned locations held at that point (Vector::exchange). A sweep that reads the newest
// values (Gauss-Seidel-like) packs each part right after updating it and fetches in its own
// task (Vector::pack, add_ghost_sources, fetch_ghosts).
//
//   ordo::sparse::IndexMap map(ordo::sparse::Partition::blocks(n, parts), rt.ranks());
//   map.set_ghosts(q, {3, 17, 99});   // part q reads these; owned ones are dropped
//   auto x = ordo::sparse::Vector<double>(g, "x", std::make_shared<IndexMap>(map));
//   x.exchange();                     // here in program order: ghosts <- owned values
//   g.task_family("use", parts, [&](std::uint32_t q, ordo::AccessList& acc) {
//     acc.add(ordo::read(x.owned(q)));
//     if (x.has_ghosts(q)) acc.add(ordo::read(x.ghosts(q)));
//   }, ...);
//
// Public API only: this layer builds everything from <ordo/ordo.hpp>, as a program could.
#pragma once

#include <ordo/ordo.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ordo::sparse {

using Index = std::uint64_t;

// Contiguous parts of [0, n): part p owns [begin(p), end(p)). Every part owns at least one
// index, and at most 2^32 - 1 (a part's own numbering is 32-bit).
class Partition {
 public:
  Partition() = default;
  // `starts` has parts + 1 entries: 0, then each part's end. Throws Error when a part is empty
  // or too large, or `starts` does not begin at 0.
  explicit Partition(std::vector<Index> starts);
  // Block rows: `parts` ranges whose sizes differ by at most one. Throws Error for no parts
  // or more parts than indices.
  static Partition blocks(Index n, std::uint32_t parts);

  Index size() const { return starts_.empty() ? 0 : starts_.back(); }
  std::uint32_t parts() const { return starts_.empty() ? 0 : std::uint32_t(starts_.size() - 1); }
  Index begin(std::uint32_t p) const { return starts_[p]; }
  Index end(std::uint32_t p) const { return starts_[p + 1]; }
  std::uint32_t count(std::uint32_t p) const { return std::uint32_t(starts_[p + 1] - starts_[p]); }
  // The part owning global index `i`; throws Error when i >= size().
  std::uint32_t owner(Index i) const;
  const std::vector<Index>& starts() const { return starts_; }

 private:
  std::vector<Index> starts_;
};

// What part `to` reads of part `from`: its ghost slots [ghost_begin, ghost_begin + count),
// which hold from's values at global indices ghosts(to)[ghost_begin..] (sorted, so from's
// share of to's ghosts is one run of slots).
struct Transfer {
  std::uint32_t from = 0, to = 0;
  std::uint32_t ghost_begin = 0, count = 0;
  bool remote = false;  // homed on different ranks: one message per exchange
};

// A partitioned index space with each part's ghost set and home rank, and the exchange plan
// derived from them (transfers into and out of each part). Plain data: no graph.
class IndexMap {
 public:
  IndexMap() = default;
  // Homes spread over `ranks`: part p on rank p * ranks / parts (contiguous parts per rank).
  // Throws Error for 0 ranks or more ranks than parts (a rank without a part).
  IndexMap(Partition partition, unsigned ranks);

  const Partition& partition() const { return partition_; }
  std::uint32_t parts() const { return partition_.parts(); }
  Index size() const { return partition_.size(); }
  unsigned ranks() const { return ranks_; }
  unsigned home(std::uint32_t part) const { return home_[part]; }
  // Moves a part to another rank; throws Error for a rank >= ranks().
  void set_home(std::uint32_t part, unsigned rank);

  // Declares the global indices part `part` reads: any order, duplicates and indices it owns
  // ignored. Replaces an earlier set. Throws Error naming the part and the index when an
  // index lies past size() (no part owns it); nothing is changed then.
  void set_ghosts(std::uint32_t part, std::vector<Index> reads);
  // Sorted global indices of part's ghost slots.
  std::span<const Index> ghosts(std::uint32_t part) const { return ghosts_[part]; }
  // The slot of global index `g` among part's ghosts; throws Error when it is not one.
  std::uint32_t ghost_slot(std::uint32_t part, Index g) const;
  // Transfers into `part` (ordered by source part), and out of it (ordered by reader).
  std::span<const Transfer> into(std::uint32_t part) const { return into_[part]; }
  std::vector<Transfer> out_of(std::uint32_t part) const;

  // Across ranks each rank knows the ghosts of its own parts only (it read their rows). This
  // collective call (every rank, same map apart from the ghosts) gives every rank every
  // part's ghost set, as each part's home declared it. One rank: nothing to do.
  void share_ghosts(Runtime& rt);

  // Entries one exchange sends from `rank` to other ranks (the values the index sets say the
  // other ranks' parts read of this rank's), and receives. Multiply by sizeof(T) for bytes.
  std::uint64_t entries_sent(unsigned rank) const;
  std::uint64_t entries_received(unsigned rank) const;

 private:
  void plan(std::uint32_t part);
  Partition partition_;
  unsigned ranks_ = 1;
  std::vector<unsigned> home_;
  std::vector<std::vector<Index>> ghosts_;
  std::vector<std::vector<Transfer>> into_;
};

// A vector of T (trivially copyable) over an IndexMap, declared in a graph: each part's owned
// values and ghost values are locations, and the exchange is tasks (see the top of the file).
// Several vectors may share one map. The handle is cheap to copy (its plan is shared);
// capture it by value in bodies.
template <class T>
class Vector {
 public:
  Vector() = default;
  // Declares "name.own[p]" (owned values) and "name.ghost[i]" (the parts with ghosts, in
  // order) for every part, and "name.msg[k]" for every remote transfer, each homed on the
  // rank of the part that writes it.
  Vector(Graph& g, const std::string& name, std::shared_ptr<const IndexMap> map) {
    static_assert(std::is_trivially_copyable_v<T>, "vector values must be trivially copyable");
    auto s = std::make_shared<State>();
    s->graph = &g;
    s->name = name;
    s->map = std::move(map);
    const IndexMap& m = *s->map;
    const std::uint32_t parts = m.parts();
    s->own = g.location_family<T>(
        name + ".own", parts, [&](std::uint32_t p) { return std::size_t(m.partition().count(p)); });
    std::vector<std::uint32_t> with_ghosts;
    for (std::uint32_t q = 0; q < parts; ++q)
      if (!m.ghosts(q).empty()) with_ghosts.push_back(q);
    const auto ghost_family =
        g.location_family<T>(name + ".ghost", std::uint32_t(with_ghosts.size()),
                             [&](std::uint32_t i) { return m.ghosts(with_ghosts[i]).size(); });
    s->ghost.resize(parts);
    s->has_ghost.assign(parts, false);
    for (std::size_t i = 0; i < with_ghosts.size(); ++i) {
      s->ghost[with_ghosts[i]] = ghost_family[i];
      s->has_ghost[with_ghosts[i]] = true;
    }
    // One message location per remote transfer, numbered by reader then source.
    std::vector<std::size_t> sizes;
    s->into_msg.resize(parts);
    for (std::uint32_t q = 0; q < parts; ++q)
      for (const Transfer& t : m.into(q)) {
        s->into_msg[q].push_back(t.remote ? std::int64_t(sizes.size()) : -1);
        if (t.remote) sizes.push_back(t.count);
      }
    s->msg = g.location_family<T>(name + ".msg", std::uint32_t(sizes.size()),
                                  [&](std::uint32_t k) { return sizes[k]; });
    for (std::uint32_t p = 0; p < parts; ++p) {
      g.set_home_rank(s->own[p], m.home(p));
      if (s->has_ghost[p]) g.set_home_rank(s->ghost[p], m.home(p));
    }
    for (std::uint32_t q = 0; q < parts; ++q) {
      const auto into = m.into(q);
      for (std::size_t j = 0; j < into.size(); ++j)
        if (into[j].remote)
          g.set_home_rank(s->msg[std::size_t(s->into_msg[q][j])], m.home(into[j].from));
    }
    s_ = std::move(s);
  }

  const IndexMap& map() const { return *s_->map; }
  const std::string& name() const { return s_->name; }
  Location<T> owned(std::uint32_t part) const { return s_->own.at(part); }
  bool has_ghosts(std::uint32_t part) const { return s_->has_ghost.at(part); }
  // Throws Error for a part without ghosts (it has no ghost location).
  Location<T> ghosts(std::uint32_t part) const {
    if (!has_ghosts(part))
      throw Error("vector '" + s_->name + "': part " + std::to_string(part) +
                  " reads no ghosts, so it has no ghost location; check has_ghosts() first");
    return s_->ghost[part];
  }

  // Declares, at this point of program order, the packing of `part`'s values into the message
  // of every part on another rank that reads it: one task ("name.pack[part]"), on its home.
  // Declare it after the task that last writes owned(part) before the readers should see it.
  // A part no other rank reads gets no task.
  void pack(std::uint32_t part) {
    const State& s = *s_;
    std::vector<std::pair<Transfer, Location<T>>> out;
    for (const Transfer& t : s.map->out_of(part))
      if (t.remote) out.emplace_back(t, message(t));
    if (out.empty()) return;
    std::vector<Access> acc;
    for (const auto& [t, loc] : out) acc.push_back(write(loc));
    acc.push_back(read(s.own[part]));
    s.graph->task(s.name + ".pack[" + std::to_string(part) + "]", std::move(acc),
                  [st = s_, out = std::move(out), part](Context& ctx) {
                    const std::span<const T> own = ctx.read(st->own[part]);
                    const Index base = st->map->partition().begin(part);
                    for (const auto& [t, loc] : out) {
                      const std::span<T> msg = ctx.write(loc);
                      const Index* g = st->map->ghosts(t.to).data() + t.ghost_begin;
                      for (std::uint32_t k = 0; k < t.count; ++k) msg[k] = own[g[k] - base];
                    }
                  });
  }

  // The accesses a task of part `part` needs to fetch its ghosts (fetch_ghosts): a write of
  // its ghost location first (so the task runs on the part's home), then a read of each
  // source: the message from a part on another rank, the owned location of a part on this
  // one. A part without ghosts adds nothing.
  void add_ghost_sources(std::uint32_t part, AccessList& acc) const {
    const State& s = *s_;
    if (!s.has_ghost.at(part)) return;
    acc.add(write(s.ghost[part]));
    const auto into = s.map->into(part);
    for (std::size_t j = 0; j < into.size(); ++j)
      acc.add(into[j].remote ? read(s.msg[std::size_t(s.into_msg[part][j])])
                             : read(s.own[into[j].from]));
  }

  // Copies part's ghost values from its sources into its ghost location (in a task that
  // declared add_ghost_sources) and returns them; empty for a part without ghosts.
  std::span<T> fetch_ghosts(Context& ctx, std::uint32_t part) const {
    const State& s = *s_;
    if (!s.has_ghost.at(part)) return {};
    const std::span<T> ghost = ctx.write(s.ghost[part]);
    const std::span<const Index> globals = s.map->ghosts(part);
    const auto into = s.map->into(part);
    for (std::size_t j = 0; j < into.size(); ++j) {
      const Transfer& t = into[j];
      T* to = ghost.data() + t.ghost_begin;
      if (t.remote) {
        const std::span<const T> m = ctx.read(s.msg[std::size_t(s.into_msg[part][j])]);
        std::memcpy(static_cast<void*>(to), m.data(), sizeof(T) * t.count);
      } else {
        const std::span<const T> src = ctx.read(s.own[t.from]);
        const Index base = s.map->partition().begin(t.from);
        const Index* g = globals.data() + t.ghost_begin;
        for (std::uint32_t k = 0; k < t.count; ++k) to[k] = src[g[k] - base];
      }
    }
    return ghost;
  }

  // Declares the whole exchange here in program order: every part's pack task, then one
  // gather task per part with ghosts ("name.gather", a family). Tasks declared after it that
  // read ghosts(q) see the values owned() held at this point: the previous iteration's when
  // it comes before this iteration's updates, the current ones after them.
  void exchange() {
    const State& s = *s_;
    for (std::uint32_t p = 0; p < s.map->parts(); ++p) pack(p);
    std::vector<std::uint32_t> readers;
    for (std::uint32_t q = 0; q < s.map->parts(); ++q)
      if (s.has_ghost[q]) readers.push_back(q);
    Vector self = *this;
    s.graph->task_family(
        s.name + ".gather", std::uint32_t(readers.size()),
        [&](std::uint32_t i, AccessList& acc) { add_ghost_sources(readers[i], acc); },
        [self, readers](Context& ctx, std::uint32_t i) { self.fetch_ghosts(ctx, readers[i]); });
  }

  // Before the graph's first run, after the program set the owned values of the parts it
  // holds: fills the messages those parts send with them. Only a sweep needs it: its readers
  // of a later part take the message from before that part's pack, which in iteration 0 is
  // this one (an exchange() packs before its readers). On several ranks each rank fills its
  // own parts' messages.
  void prime_messages(Graph& g, const Runtime& rt) const {
    const State& s = *s_;
    for (std::uint32_t q = 0; q < s.map->parts(); ++q) {
      const auto into = s.map->into(q);
      for (std::size_t j = 0; j < into.size(); ++j) {
        const Transfer& t = into[j];
        if (!t.remote || (rt.ranks() > 1 && s.map->home(t.from) != rt.rank())) continue;
        const std::span<const T> own = g.data(s.own[t.from]);
        const std::span<T> msg = g.data(s.msg[std::size_t(s.into_msg[q][j])]);
        const Index base = s.map->partition().begin(t.from);
        const Index* gl = s.map->ghosts(q).data() + t.ghost_begin;
        for (std::uint32_t k = 0; k < t.count; ++k) msg[k] = own[gl[k] - base];
      }
    }
  }

  // Bytes one exchange sends from `rank` to parts on other ranks: the sizes of the message
  // locations homed there, which the protocol moves once per exchange to their reader's rank.
  std::uint64_t bytes_sent(unsigned rank) const {
    std::uint64_t b = 0;
    for (std::uint32_t q = 0; q < s_->map->parts(); ++q)
      for (const Transfer& t : s_->map->into(q))
        if (t.remote && s_->map->home(t.from) == rank) b += message(t).size() * sizeof(T);
    return b;
  }

 private:
  struct State {
    Graph* graph = nullptr;
    std::string name;
    std::shared_ptr<const IndexMap> map;
    std::vector<Location<T>> own, ghost, msg;
    std::vector<bool> has_ghost;
    std::vector<std::vector<std::int64_t>> into_msg;  // per reader, per transfer: message or -1
  };
  Location<T> message(const Transfer& t) const {
    const auto into = s_->map->into(t.to);
    for (std::size_t j = 0; j < into.size(); ++j)
      if (into[j].from == t.from && into[j].remote)
        return s_->msg[std::size_t(s_->into_msg[t.to][j])];
    throw Error("vector '" + s_->name + "': no message from part " + std::to_string(t.from) +
                " to part " + std::to_string(t.to));
  }
  std::shared_ptr<const State> s_;
};

// ---------------------------------------------------------------------------------------------
// Distributed CSR matrices (sparse/matrix.cpp).

// Rows [first, first + rows()) of a matrix, each row's entries in increasing global column
// order with no column twice.
struct Rows {
  Index first = 0;
  std::vector<std::uint64_t> start{0};  // row i's entries: [start[i], start[i + 1])
  std::vector<Index> col;
  std::vector<double> val;
  std::size_t rows() const { return start.size() - 1; }
  std::uint64_t nonzeros() const { return start.back(); }
  // Appends the next row; its columns must be increasing (throws Error naming the row when two
  // are equal or out of order).
  void add_row(std::span<const Index> cols, std::span<const double> vals);
};

// One part's rows in the part's own numbering, for y = A x from the part's owned values and
// ghost slots. A row's columns are owned entries (col: the local index) or ghosts (col: the
// ghost slot). Most rows of a well-partitioned matrix read no ghost; the rows that do are
// listed in ghost_rows, and for the k-th of them, entries [start[i], own_begin[k]) read ghost
// slots of columns below the part, [own_begin[k], own_end[k]) owned entries, and
// [own_end[k], start[i + 1]) ghost slots of columns above it. So each row is summed in its
// global column order whatever the partition or the placement: the bits of a sequential CSR
// product, with no per-row bookkeeping on the rows that read no ghost.
struct LocalRows {
  Index first = 0;
  std::vector<std::uint64_t> start{0};
  std::vector<std::uint32_t> ghost_rows;
  std::vector<std::uint64_t> own_begin, own_end;  // per ghost row
  std::vector<std::uint32_t> col;
  std::vector<double> val;
  std::vector<double> diagonal;  // a_ii (0 when absent), for Jacobi preconditioning
  std::size_t rows() const { return start.size() - 1; }
  std::uint64_t nonzeros() const { return start.back(); }
  // y[i] = sum_j a_ij x_j, each row from 0.0 adding a_ij * x_j left to right.
  void multiply(const double* own, const double* ghost, double* y) const;
  // The same, returning own . y summed over the rows in order (CG's p . Ap) while y is in the
  // registers: the bits of multiply() then a loop adding own[i] * y[i] from 0.0.
  double multiply_dot(const double* own, const double* ghost, double* y) const;
};

// A square matrix split by rows over an index map's parts. Each rank holds the rows of its own
// parts only; every rank knows every part's ghosts (the columns outside it), so that a Vector
// over map() exchanges exactly what the products read.
class Matrix {
 public:
  // Collective across ranks (every rank calls it with its own parts' rows): `rows[p]` holds
  // part p's rows where map.home(p) is this rank (ignored elsewhere). The ghost sets are the
  // columns outside each part; a column past the map's size is refused with an Error. Ranks
  // whose rows were refused make every rank throw.
  Matrix(Runtime& rt, IndexMap map, std::vector<Rows> rows);
  std::shared_ptr<const IndexMap> map() const { return map_; }
  bool holds(std::uint32_t part) const { return held_.at(part); }
  // Part p's rows in its numbering; throws Error on a rank that does not hold it.
  const LocalRows& part(std::uint32_t p) const;
  std::uint64_t nonzeros_here() const;

 private:
  std::shared_ptr<IndexMap> map_;
  std::vector<LocalRows> local_;
  std::vector<bool> held_;
};

// Each rank's verdict on its input, made one for the job: every rank throws Error when one has
// `problem` non-empty (that rank with its own message, the others naming it), so that none
// runs on while another gave up. Collective.
void agree(Runtime& rt, const std::string& problem);

// Generators: the rows [first, end) of a matrix of n rows, each row from a formula (no rank
// needs another's rows).
// The 5-point Laplacian of an nx x ny grid (row y * nx + x; 4 on the diagonal, -1 beside).
Rows laplacian_2d(Index nx, Index ny, Index first, Index end);
// The 7-point Laplacian of an nx x ny x nz grid (row (z * ny + y) * nx + x; 6 and -1).
Rows laplacian_3d(Index nx, Index ny, Index nz, Index first, Index end);
// A random symmetric positive definite matrix of n rows: entry (i, i + d) for a few offsets d
// chosen by `seed`, present or not by a hash of (seed, i, d), with a value in (-1, -0.1]; the
// diagonal is one more than the row's off-diagonal magnitudes (strictly dominant, so SPD).
Rows random_spd(Index n, std::uint64_t seed, Index first, Index end);

// Directed graphs for PageRank: edge e of an R-MAT graph of 2^scale vertices (probabilities
// 0.57, 0.19, 0.19, 0.05 per quadrant), from a hash of (seed, e): any rank makes any edge.
struct Edge {
  Index from = 0, to = 0;
};
Edge rmat_edge(unsigned scale, std::uint64_t seed, std::uint64_t e);

// The rows of a graph's PageRank matrix for parts `held` of `partition`: row v lists the
// vertices with an edge to v (column u, value the number of such edges), and `out_degree`
// the edges leaving each vertex of those parts (indexed as the partition's global index minus
// the part's begin, per part). `each_edge(f)` calls f(Edge) once per edge, in any order; a
// vertex id past the partition's size is refused with an Error naming it.
struct GraphRows {
  std::vector<Rows> rows;                              // per part (empty where not held)
  std::vector<std::vector<std::uint32_t>> out_degree;  // per part (empty where not held)
};
GraphRows graph_rows(const Partition& partition, const std::vector<bool>& held,
                     const std::function<void(const std::function<void(Edge)>&)>& each_edge);
// What graph_rows needs at most for the parts `held` of `partition` and a graph of `edges`
// edges: per vertex of those parts its out-degree and row start, per edge its sorting pair,
// column and value. For a check before reading a graph whose counts come from outside (a
// file's header): ordo::check_memory_available, Runtime::check_memory_on_all_ranks.
std::uint64_t graph_rows_bytes(const Partition& partition, const std::vector<bool>& held,
                               std::uint64_t edges);

// ---------------------------------------------------------------------------------------------
// Partitions other than block rows (sparse/metis.cpp).

// Whether this build has METIS (Debian's libmetis-dev).
bool metis_available();
// METIS k-way parts of the symmetric pattern of `all` (every row, from row 0; the pattern is
// made symmetric and the diagonal dropped): each row's part, and METIS's edge cut. The same on
// every rank (a fixed seed). Throws Error without METIS, or when METIS leaves a part empty.
struct MetisParts {
  std::vector<std::uint32_t> part;
  std::uint64_t edge_cut = 0;
};
MetisParts metis_partition(const Rows& all, std::uint32_t parts);
// A numbering in which each part's rows are contiguous (parts in order, each part's rows in
// their old order), so that a partition of any shape becomes a Partition.
struct Renumbering {
  Partition partition;
  std::vector<Index> old_of_new, new_of_old;
};
Renumbering renumber(const std::vector<std::uint32_t>& part, std::uint32_t parts);
// Rows [first, end) of P A P^T in the new numbering: the matrix renumbered, columns sorted.
Rows permute_rows(const Rows& all, const Renumbering& rn, Index first, Index end);

// ---------------------------------------------------------------------------------------------
// Inputs from files (sparse/matrix_market.cpp, sparse/edge_list.cpp). Each reads from a FILE*
// holding `file_bytes` bytes, named `name` in messages, and refuses what is malformed with an
// Error saying where and what, before allocating more than the file's contents hold.

// A Matrix Market header: "%%MatrixMarket matrix coordinate real|integer|pattern
// general|symmetric", then "rows cols entries".
struct MatrixMarketHeader {
  Index rows = 0, cols = 0;
  std::uint64_t entries = 0;
  bool symmetric = false;  // only the lower triangle is stored; the reader mirrors it
  bool pattern = false;    // no values: every entry is 1
};
MatrixMarketHeader read_matrix_market_header(std::FILE* f, std::uint64_t file_bytes,
                                             const std::string& name);
// The rows of the parts `held` of `partition` (of header.rows indices), reading the whole
// file but keeping only those rows. Refuses an index past the header's size, a duplicate
// entry, an upper-triangle entry in a symmetric file, entries more or fewer than the header
// says, an empty row, and, with `require_symmetric`, a general matrix whose held rows are
// not the transpose of its held columns (each rank checks its own; agree() makes one verdict).
std::vector<Rows> read_matrix_market_rows(std::FILE* f, std::uint64_t file_bytes,
                                          const std::string& name, const MatrixMarketHeader& header,
                                          const Partition& partition, const std::vector<bool>& held,
                                          bool require_symmetric);
// Opens `path` (a regular file) and returns it with its size; throws Error otherwise.
std::pair<std::FILE*, std::uint64_t> open_input(const std::string& path);

// An edge list: comment lines start with '#' or '%'; the first other line is "vertices edges",
// then one "from to" line per edge (0-based ids).
struct EdgeListHeader {
  Index vertices = 0;
  std::uint64_t edges = 0;
};
EdgeListHeader read_edge_list_header(std::FILE* f, std::uint64_t file_bytes,
                                     const std::string& name);
// Calls f(Edge) for each edge, refusing an id past header.vertices and more or fewer edges
// than the header says.
void read_edge_list(std::FILE* f, std::uint64_t file_bytes, const std::string& name,
                    const EdgeListHeader& header, const std::function<void(Edge)>& each);

}  // namespace ordo::sparse
