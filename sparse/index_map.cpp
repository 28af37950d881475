// Partition and IndexMap: the index sets and the exchange plan derived from them.
#include <algorithm>
#include <array>
#include <limits>

#include <ordo/sparse.hpp>

namespace ordo::sparse {

Partition::Partition(std::vector<Index> starts) : starts_(std::move(starts)) {
  if (starts_.size() < 2 || starts_[0] != 0)
    throw Error(
        "a partition needs its parts' starts beginning at 0 and the total size last "
        "(parts + 1 numbers)");
  for (std::size_t p = 0; p + 1 < starts_.size(); ++p) {
    if (starts_[p + 1] <= starts_[p])
      throw Error("part " + std::to_string(p) + " of the partition is empty (starts " +
                  std::to_string(starts_[p]) + ", ends " + std::to_string(starts_[p + 1]) +
                  "); every part must own at least one index: use fewer parts");
    if (starts_[p + 1] - starts_[p] >= std::numeric_limits<std::uint32_t>::max())
      throw Error("part " + std::to_string(p) + " of the partition owns " +
                  std::to_string(starts_[p + 1] - starts_[p]) +
                  " indices, more than a part's 32-bit numbering holds; use more parts");
  }
  if (starts_.size() - 1 > std::numeric_limits<std::uint32_t>::max())
    throw Error("a partition has at most 2^32 - 1 parts");
}

Partition Partition::blocks(Index n, std::uint32_t parts) {
  if (parts == 0) throw Error("a partition needs at least one part");
  if (parts > n)
    throw Error(std::to_string(parts) + " parts for " + std::to_string(n) +
                " indices: every part must own at least one; give at most " + std::to_string(n) +
                " parts");
  std::vector<Index> starts(std::size_t(parts) + 1);
  const Index base = n / parts, extra = n % parts;
  for (std::uint32_t p = 0; p < parts; ++p) starts[p + 1] = starts[p] + base + (p < extra ? 1 : 0);
  return Partition(std::move(starts));
}

std::uint32_t Partition::owner(Index i) const {
  if (i >= size())
    throw Error("index " + std::to_string(i) + " is past the index space of " +
                std::to_string(size()) + " entries: no part owns it");
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), i);
  return std::uint32_t(it - starts_.begin() - 1);
}

IndexMap::IndexMap(Partition partition, unsigned ranks)
    : partition_(std::move(partition)), ranks_(ranks) {
  const std::uint32_t parts = partition_.parts();
  if (parts == 0) throw Error("an index map needs a partition with at least one part");
  if (ranks == 0) throw Error("an index map needs at least one rank");
  if (ranks > parts)
    throw Error(std::to_string(parts) + " part(s) for " + std::to_string(ranks) +
                " ranks: every rank needs at least one part; give at least " +
                std::to_string(ranks) + " parts or start fewer ranks");
  home_.resize(parts);
  for (std::uint32_t p = 0; p < parts; ++p) home_[p] = unsigned(std::uint64_t(p) * ranks / parts);
  ghosts_.resize(parts);
  into_.resize(parts);
}

void IndexMap::set_home(std::uint32_t part, unsigned rank) {
  if (part >= parts()) throw Error("part " + std::to_string(part) + " does not exist");
  if (rank >= ranks_)
    throw Error("part " + std::to_string(part) + " cannot live on rank " + std::to_string(rank) +
                ": the map spans " + std::to_string(ranks_) + " rank(s)");
  home_[part] = rank;
  // Which transfers are remote changes with the homes.
  for (std::uint32_t q = 0; q < parts(); ++q) plan(q);
}

void IndexMap::set_ghosts(std::uint32_t part, std::vector<Index> reads) {
  if (part >= parts())
    throw Error("set_ghosts: part " + std::to_string(part) + " does not exist (the map has " +
                std::to_string(parts()) + ")");
  const Index n = size();
  for (Index g : reads)
    if (g >= n)
      throw Error("part " + std::to_string(part) + " reads index " + std::to_string(g) +
                  ", which no part owns (the index space has " + std::to_string(n) +
                  " entries, 0 to " + std::to_string(n - 1) +
                  "); check the matrix's column indices or the graph's vertex ids");
  std::sort(reads.begin(), reads.end());
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  const Index b = partition_.begin(part), e = partition_.end(part);
  std::erase_if(reads, [&](Index g) { return g >= b && g < e; });
  if (reads.size() >= std::numeric_limits<std::uint32_t>::max())
    throw Error("part " + std::to_string(part) + " reads too many ghosts for its 32-bit numbering");
  ghosts_[part] = std::move(reads);
  plan(part);
}

void IndexMap::plan(std::uint32_t part) {
  std::vector<Transfer>& into = into_[part];
  into.clear();
  const std::vector<Index>& g = ghosts_[part];
  std::size_t k = 0;
  while (k < g.size()) {
    const std::uint32_t from = partition_.owner(g[k]);
    const Index end = partition_.end(from);
    std::size_t j = k;
    while (j < g.size() && g[j] < end) ++j;
    into.push_back(
        Transfer{from, part, std::uint32_t(k), std::uint32_t(j - k), home_[from] != home_[part]});
    k = j;
  }
}

std::uint32_t IndexMap::ghost_slot(std::uint32_t part, Index g) const {
  const std::vector<Index>& v = ghosts_.at(part);
  const auto it = std::lower_bound(v.begin(), v.end(), g);
  if (it == v.end() || *it != g)
    throw Error("index " + std::to_string(g) + " is not a ghost of part " + std::to_string(part));
  return std::uint32_t(it - v.begin());
}

std::vector<Transfer> IndexMap::out_of(std::uint32_t part) const {
  std::vector<Transfer> out;
  for (std::uint32_t q = 0; q < parts(); ++q)
    for (const Transfer& t : into_[q])
      if (t.from == part) out.push_back(t);
  return out;
}

std::uint64_t IndexMap::entries_sent(unsigned rank) const {
  std::uint64_t n = 0;
  for (const auto& into : into_)
    for (const Transfer& t : into)
      if (t.remote && home_[t.from] == rank) n += t.count;
  return n;
}

std::uint64_t IndexMap::entries_received(unsigned rank) const {
  std::uint64_t n = 0;
  for (const auto& into : into_)
    for (const Transfer& t : into)
      if (t.remote && home_[t.to] == rank) n += t.count;
  return n;
}

namespace {

// Every rank's `mine`, concatenated in rank order on every rank, through Runtime::gather_values
// in chunks of fixed size (it moves one trivially copyable value per rank and call).
std::vector<Index> all_gather(Runtime& rt, const std::vector<Index>& mine) {
  constexpr std::size_t kChunk = 1024;
  const std::vector<std::uint64_t> sizes = rt.gather_values(std::uint64_t(mine.size()));
  std::uint64_t most = 0, total = 0;
  for (std::uint64_t s : sizes) {
    most = std::max(most, s);
    total += s;
  }
  std::vector<std::vector<Index>> per_rank(sizes.size());
  for (std::size_t r = 0; r < sizes.size(); ++r) per_rank[r].reserve(sizes[r]);
  for (std::uint64_t off = 0; off < most; off += kChunk) {
    std::array<Index, kChunk> chunk{};
    for (std::size_t i = 0; i < kChunk && off + i < mine.size(); ++i) chunk[i] = mine[off + i];
    const auto got = rt.gather_values(chunk);
    for (std::size_t r = 0; r < sizes.size(); ++r)
      for (std::size_t i = 0; i < kChunk && off + i < sizes[r]; ++i)
        per_rank[r].push_back(got[r][i]);
  }
  std::vector<Index> all;
  all.reserve(total);
  for (const auto& v : per_rank) all.insert(all.end(), v.begin(), v.end());
  return all;
}

}  // namespace

void IndexMap::share_ghosts(Runtime& rt) {
  if (rt.ranks() != ranks_)
    throw Error("share_ghosts: the map spans " + std::to_string(ranks_) + " rank(s), the job " +
                std::to_string(rt.ranks()) + "; build the map with Runtime::ranks()");
  if (ranks_ == 1) return;
  // Each rank sends (part, count, indices...) for its own parts.
  std::vector<Index> mine;
  for (std::uint32_t p = 0; p < parts(); ++p) {
    if (home_[p] != rt.rank()) continue;
    mine.push_back(p);
    mine.push_back(ghosts_[p].size());
    mine.insert(mine.end(), ghosts_[p].begin(), ghosts_[p].end());
  }
  const std::vector<Index> all = all_gather(rt, mine);
  std::size_t k = 0;
  while (k + 2 <= all.size()) {
    const auto p = std::uint32_t(all[k]);
    const std::size_t count = all[k + 1];
    ghosts_[p].assign(all.begin() + std::ptrdiff_t(k + 2),
                      all.begin() + std::ptrdiff_t(k + 2 + count));
    k += 2 + count;
  }
  for (std::uint32_t q = 0; q < parts(); ++q) plan(q);
}

}  // namespace ordo::sparse
