// The blocked-grid core (see blocked_grid.hpp). Built on the public API only.
#include "stencil/blocked_grid.hpp"

#include <algorithm>
#include <utility>

namespace ordo::stencil::core {

using namespace geometry;

BlockedGrid::BlockedGrid(std::string who, const std::vector<std::size_t>& size,
                         const std::vector<std::size_t>& blocks, bool periodic)
    : who_(std::move(who)), dims_(size.size()), size_(size), grid_(blocks), periodic_(periodic) {
  if (dims_ < 1 || dims_ > kMaxDims)
    throw Error(who_ + ": " + std::to_string(dims_) +
                " dimensions; the stencil layer supports 1 to 5");
  if (blocks.size() != dims_)
    throw Error(who_ + ": the block grid has " + std::to_string(blocks.size()) +
                " extents but the grid has " + std::to_string(dims_) + "; give one per dimension");
  for (std::size_t i = 0; i < dims_; ++i) {
    if (size[i] == 0 || blocks[i] == 0)
      throw Error(who_ + ": sizes and block counts must be positive (size " + join(size) +
                  ", blocks " + join(blocks) + ")");
    if (blocks[i] > size[i])
      throw Error(who_ + ": blocks " + join(blocks) + " has more blocks than points in dimension " +
                  std::to_string(i) + " (" + std::to_string(blocks[i]) + " blocks for " +
                  std::to_string(size[i]) + " points of size " + join(size) +
                  "); every block needs a point: give at most " + std::to_string(size[i]) +
                  " blocks in that dimension");
  }
  std::size_t total = 1;
  for (std::size_t b : blocks) {
    if (total > (std::size_t{1} << 31) / b)
      throw Error(who_ + ": blocks " + join(blocks) + " are more than 2^31 blocks; use fewer");
    total *= b;
  }
  Ix lo{}, hi{};
  for (std::size_t k = 0; k < dims_; ++k) hi[k] = static_cast<std::ptrdiff_t>(grid_[k]);
  blocks_.reserve(total);
  for_each_point(dims_, lo, hi, [&](const Ix& c) {
    BlockGeom b;
    b.coord = c;
    std::vector<std::size_t> ext(dims_);
    for (std::size_t k = 0; k < dims_; ++k) {
      const auto i = static_cast<std::size_t>(c[k]);
      const std::size_t first = block_low(i, size_[k], grid_[k]);
      b.origin[k] = static_cast<std::int64_t>(first);
      ext[k] = block_low(i + 1, size_[k], grid_[k]) - first;
      b.tag += (k ? "," : "") + std::to_string(c[k]);
    }
    b.pad = Pad(dims_, 0, ext);
    blocks_.push_back(std::move(b));
  });
}

std::pair<std::size_t, std::size_t> BlockedGrid::smallest_block() const {
  std::pair<std::size_t, std::size_t> best{size_[0] / grid_[0], 0};
  for (std::size_t k = 1; k < dims_; ++k)  // the first block of a dimension is a smallest one
    if (size_[k] / grid_[k] < best.first) best = {size_[k] / grid_[k], k};
  return best;
}

void BlockedGrid::set_padding(std::size_t padding) { set_padding(padding, padding); }

void BlockedGrid::set_padding(std::size_t padding, std::size_t at_fixed_end,
                              geometry::RowHalo row_halo) {
  const auto deep = static_cast<std::ptrdiff_t>(padding);
  const auto shallow = static_cast<std::ptrdiff_t>(at_fixed_end);
  for (BlockGeom& b : blocks_) {
    std::vector<std::size_t> ext(dims_);
    Ix low{}, high{};
    geometry::BesideEnds fixed;  // the ends of b that are fixed ends of the grid
    for (std::size_t k = 0; k < dims_; ++k) {
      ext[k] = static_cast<std::size_t>(b.pad.ext[k]);
      const bool fixed_low = !periodic_ && b.origin[k] == 0;
      const bool fixed_high =
          !periodic_ && b.origin[k] + b.pad.ext[k] == static_cast<std::int64_t>(size_[k]);
      low[k] = fixed_low ? shallow : deep;
      high[k] = fixed_high ? shallow : deep;
      if (k + 1 == dims_) fixed = {fixed_low, fixed_high};
    }
    const geometry::BesideEnds ends = row_halo == geometry::RowHalo::beside ? geometry::BesideEnds{true, true}
                                      : row_halo == geometry::RowHalo::beside_at_fixed_ends
                                          ? fixed
                                          : geometry::BesideEnds{};
    b.pad = Pad(dims_, low, high, ext, ends);
  }
}

std::size_t BlockedGrid::points() const {
  std::size_t n = 1;
  for (std::size_t s : size_) n *= s;
  return n;
}

std::vector<Export> BlockedGrid::declare_exports(Graph& graph, std::size_t b,
                                                 const std::string& prefix, std::size_t width,
                                                 const std::set<Ix>& dirs,
                                                 std::size_t copies) const {
  std::vector<Export> out;
  const BlockGeom& g = blocks_[b];
  for_each_export(g.pad, static_cast<std::ptrdiff_t>(width), dirs, grid_, periodic_, g.coord,
                  [&](const Ix& o, std::size_t count, const std::string& otag) {
                    Export e;
                    e.dir = o;
                    e.count = count;
                    e.loc = graph.location<double>(prefix + ".x[" + g.tag + "][" + otag + "]",
                                                   copies * count);
                    out.push_back(e);
                  });
  return out;
}

void BlockedGrid::wire_imports(Exchange& x, const std::set<Ix>& dirs) const {
  x.imports.assign(blocks_.size(), {});
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    for (const Ix& o : dirs) {
      Ix n{}, back{};
      if (!block_neighbour(dims_, grid_, periodic_, blocks_[b].coord, o, n)) continue;
      for (std::size_t k = 0; k < dims_; ++k) back[k] = -o[k];
      for (const Export& e : x.exports[block_index(dims_, grid_, n)])
        if (e.dir == back) x.imports[b].push_back(Import{o, e.loc, e.count});
    }
}

Exchange BlockedGrid::declare_exchange(Graph& graph, const std::string& prefix,
                                       std::size_t width, const std::set<Ix>& dirs,
                                       std::size_t copies) const {
  Exchange x;
  x.width = width;
  x.copies = copies;
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    x.exports.push_back(declare_exports(graph, b, prefix, width, dirs, copies));
  wire_imports(x, dirs);
  return x;
}

void BlockedGrid::pack(std::size_t b, const Exchange& x, const Export& e, const double* buf,
                       double* dst) const {
  const Pad& p = blocks_[b].pad;
  Ix lo{}, hi{};
  send_box(p, static_cast<std::ptrdiff_t>(x.width), e.dir, lo, hi);
  pack_box(p, buf, lo, hi, dst);
}

void BlockedGrid::unpack(std::size_t b, const Exchange& x, const Import& i, const double* src,
                         double* buf, double* side) const {
  const Pad& p = blocks_[b].pad;
  Ix lo{}, hi{};
  halo_box(p, static_cast<std::ptrdiff_t>(x.width), i.dir, lo, hi);
  const geometry::Cells c = geometry::cells_of(p, buf, side, lo, hi);
  unpack_box(c.pad, c.data, lo, hi, src);
}

namespace {

// Calls f(lo, hi, beyond_fixed, box) for each of the 3^d regions t in {-1,0,1}^d of block g's
// padded buffer (with `halo`; else only t = 0, the owned points) that is not empty: the region
// [lo, hi) in block-local coordinates, whether it lies beyond a fixed end of the grid, and
// otherwise its box of the global grid (wrapped across a periodic end). Along each dimension a
// region lies wholly inside the grid or wholly beyond one of its ends, since the padding is at
// most a block's extent.
template <class F>
void for_each_region(const BlockGeom& g, bool halo, const std::vector<std::size_t>& size,
                     bool periodic, F&& f) {
  const std::size_t d = size.size();
  const Pad& p = g.pad;
  Ix tlo{}, thi{};
  for (std::size_t k = 0; k < d; ++k) {
    tlo[k] = halo && p.low[k] > 0 ? -1 : 0;
    thi[k] = halo && p.high[k] > 0 ? 2 : 1;
  }
  for_each_point(d, tlo, thi, [&](const Ix& t) {
    Ix lo{}, hi{};
    Box box;
    box.dims = d;
    bool beyond_fixed = false;
    for (std::size_t k = 0; k < d; ++k) {
      lo[k] = t[k] < 0 ? -p.low[k] : t[k] > 0 ? p.ext[k] : 0;
      hi[k] = t[k] < 0 ? 0 : t[k] > 0 ? p.ext[k] + p.high[k] : p.ext[k];
      const auto n = static_cast<std::int64_t>(size[k]);
      std::int64_t shift = 0;
      if (g.origin[k] + lo[k] < 0) shift = n;
      if (g.origin[k] + hi[k] > n) shift = -n;
      if (shift != 0 && !periodic) beyond_fixed = true;
      box.lo[k] = g.origin[k] + lo[k] + shift;
      box.hi[k] = g.origin[k] + hi[k] + shift;
      box.stride[k] = p.stride[k];
    }
    f(lo, hi, beyond_fixed, box);
  });
}

}  // namespace

void BlockedGrid::fill(std::size_t b, double* buf, const BoxFill& inside,
                       const PointValue& outside, bool halo, double* side) const {
  const BlockGeom& g = blocks_[b];
  for_each_region(g, halo, size_, periodic_,
                  [&](const Ix& lo, const Ix& hi, bool beyond_fixed, Box& box) {
                    // A region lies wholly in the rows or wholly beside them.
                    const geometry::Cells c = geometry::cells_of(g.pad, buf, side, lo, hi);
                    if (beyond_fixed) {
                      Origin x{};
                      for_each_point(dims_, lo, hi, [&](const Ix& l) {
                        for (std::size_t k = 0; k < dims_; ++k) x[k] = g.origin[k] + l[k];
                        c.data[c.pad.index_of(l)] = outside ? outside(Coord(x.data(), dims_)) : 0.0;
                      });
                      return;
                    }
                    for (std::size_t k = 0; k < dims_; ++k) box.stride[k] = c.pad.stride[k];
                    box.data = c.data + c.pad.index_of(lo);
                    inside(box);
                  });
}

std::vector<std::pair<Ix, Ix>> BlockedGrid::fixed_regions(std::size_t b) const {
  std::vector<std::pair<Ix, Ix>> out;
  const BlockGeom& g = blocks_[b];
  for_each_region(g, true, size_, periodic_,
                  [&](const Ix& lo, const Ix& hi, bool beyond_fixed, const Box&) {
                    if (beyond_fixed) out.emplace_back(lo, hi);
                  });
  return out;
}

void BlockedGrid::visit(std::size_t b, const double* buf, const BoxVisit& visit) const {
  const BlockGeom& g = blocks_[b];
  ConstBox box;
  box.dims = dims_;
  for (std::size_t k = 0; k < dims_; ++k) {
    box.lo[k] = g.origin[k];
    box.hi[k] = g.origin[k] + g.pad.ext[k];
    box.stride[k] = g.pad.stride[k];
  }
  box.data = buf + g.pad.base;
  visit(box);
}

void BlockedGrid::gather(std::size_t b, const double* buf, std::span<double> global) const {
  visit(b, buf, [&](const ConstBox& box) {
    for_each_box_row(box, [&](const double* row, Coord first, std::size_t len) {
      std::size_t gi = 0;
      for (std::size_t k = 0; k < dims_; ++k)
        gi = gi * size_[k] + static_cast<std::size_t>(first[k]);
      std::copy_n(row, len, global.data() + gi);
    });
  });
}

std::vector<unsigned> BlockedGrid::place(
    const Graph& graph, unsigned ranks, const std::function<void(std::size_t, unsigned)>& set_home,
    const std::function<unsigned(std::size_t)>& home_of) const {
  std::vector<unsigned> home(blocks_.size(), 0);
  if (graph.iterations_done() > 0) {
    for (std::size_t b = 0; b < blocks_.size(); ++b) home[b] = home_of(b);
    return home;
  }
  if (ranks > blocks_.size())
    throw Error(who_ + ": " + std::to_string(blocks_.size()) + " block(s) (" + join(grid_) +
                ") cannot give each of the " + std::to_string(ranks) + " ranks a block; use at "
                "least " + std::to_string(ranks) + " blocks or fewer ranks");
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    home[b] = static_cast<unsigned>(b * ranks / blocks_.size());
    if (ranks > 1) set_home(b, home[b]);
  }
  return home;
}

BoxFill from_global(std::span<const double> global, const std::vector<std::size_t>& size) {
  return [global, size](const Box& box) {
    for_each_box_row(box, [&](double* row, Coord first, std::size_t len) {
      std::size_t gi = 0;
      for (std::size_t k = 0; k < size.size(); ++k)
        gi = gi * size[k] + static_cast<std::size_t>(first[k]);
      std::copy_n(global.data() + gi, len, row);
    });
  };
}

BoxFill from_points(PointValue value) {
  return [value = std::move(value)](const Box& box) {
    Origin x{};
    for_each_box_row(box, [&](double* row, Coord first, std::size_t len) {
      std::copy(first.begin(), first.end(), x.begin());
      const std::size_t last = box.dims - 1;
      for (std::size_t j = 0; j < len; ++j, ++x[last]) row[j] = value(Coord(x.data(), box.dims));
    });
  };
}

}  // namespace ordo::stencil::core
