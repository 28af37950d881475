// The blocked-grid core of the stencil layer, shared by single-stage stencils (stencil.cpp)
// and pipelines (stencil_pipeline.cpp): the block decomposition of a global grid, its checks,
// the padded buffer of each block, the halo exchange's export and import locations, filling a
// block from the user's initial values and reading it back, and the placement of blocks on
// ranks. Everything that depends on how blocks are cut lives here, once.
//
// Blocks are balanced (MPI's BLOCK_LOW): block i of n points in b blocks covers
// [i*n/b, (i+1)*n/b), so extents differ by at most one point per dimension and any size works
// on any block grid with at most one block per point. Why the exchange needs nothing more for
// uneven blocks: a block and its neighbour in direction o share their coordinate in every
// dimension where o is 0, hence their extent there; where o is not 0 the halo is `width`
// points, and width <= the smallest block (checked) means a halo comes from one neighbour.
// So the sender's edge box and the receiver's halo box always have the same shape.
// Internal to the layer; not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <ordo/stencil.hpp>

#include "stencil/stencil_geometry.hpp"

namespace ordo::stencil::core {

using geometry::Ix;
using geometry::Pad;
using Origin = std::array<std::int64_t, kMaxDims>;

struct BlockGeom {
  Ix coord{};       // position in the block grid
  Origin origin{};  // global coordinate of its first owned point
  Pad pad;          // its padded buffer: owned extents, padding, strides
  std::string tag;  // "i,j,..." for location and task names
};

// A halo a block sends: its edge region of the exchange's width towards the neighbour in
// direction `dir`, `copies` times (time levels) one after another, `count` points each.
struct Export {
  Ix dir{};
  Location<double> loc;
  std::size_t count = 0;
};
// A halo a block receives: the export of its neighbour in direction `dir` (the export's dir
// is -dir).
struct Import {
  Ix dir{};
  Location<double> loc;
  std::size_t count = 0;
};

// The export and import locations of one exchanged grid.
struct Exchange {
  std::size_t width = 0;
  std::size_t copies = 1;
  std::vector<std::vector<Export>> exports;  // per block
  std::vector<std::vector<Import>> imports;  // per block
};

class BlockedGrid {
 public:
  BlockedGrid() = default;
  // Checks the shape (1 to 5 dimensions, one positive block count per dimension, at most one
  // block per point) and cuts the blocks. `who` opens error messages ("stencil 'u'"). Throws
  // Error saying what to change.
  BlockedGrid(std::string who, const std::vector<std::size_t>& size,
              const std::vector<std::size_t>& blocks, bool periodic);

  // The smallest block extent over every dimension, and that dimension: a halo wider than it
  // would need a neighbour's neighbour.
  std::pair<std::size_t, std::size_t> smallest_block() const;
  // Gives every block a padded buffer with `padding` points on every side; or with
  // `at_fixed_end` points on the sides where the grid has a fixed end (no neighbour).
  // `row_halo`: where the last dimension's halo lies, in the rows or beside them in a side
  // array per buffer (geometry::Pad), at both ends or at the grid's fixed ends.
  void set_padding(std::size_t padding);
  void set_padding(std::size_t padding, std::size_t at_fixed_end,
                   geometry::RowHalo row_halo = geometry::RowHalo::in_rows);

  std::size_t dims() const { return dims_; }
  std::size_t count() const { return blocks_.size(); }
  const BlockGeom& block(std::size_t b) const { return blocks_[b]; }
  const std::vector<std::size_t>& size() const { return size_; }
  bool periodic() const { return periodic_; }
  std::size_t points() const;
  const std::string& who() const { return who_; }

  // Declares, for every block, one export location per direction t of `dirs` (directions a
  // reader reads from) for which a block lies at -t, named prefix.x[tag][o], holding `copies`
  // edge regions of `width` points; and wires every block's imports to its neighbours'
  // exports. Location order: block by block, as the caller's other locations of that block.
  Exchange declare_exchange(Graph& graph, const std::string& prefix, std::size_t width,
                            const std::set<Ix>& dirs, std::size_t copies) const;
  // Declares block b's exports only (declare_exchange calls it per block; a caller that
  // interleaves its own locations block by block calls it, then wire_imports).
  std::vector<Export> declare_exports(Graph& graph, std::size_t b, const std::string& prefix,
                                      std::size_t width, const std::set<Ix>& dirs,
                                      std::size_t copies) const;
  void wire_imports(Exchange& x, const std::set<Ix>& dirs) const;
  // Packs block b's edge region for export e out of its padded buffer `buf` into `dst`.
  void pack(std::size_t b, const Exchange& x, const Export& e, const double* buf,
            double* dst) const;
  // Unpacks import i of block b from `src` into the halo of its padded buffer `buf` (and its
  // side array `side`, where the halo lies beside the rows).
  void unpack(std::size_t b, const Exchange& x, const Import& i, const double* src,
              double* buf, double* side = nullptr) const;

  // Fills block b's padded buffer `buf` (and side array `side`): its owned points, and with
  // `halo` its halo too (a neighbour's points, or wrapped ones for periodic boundaries)
  // through `inside`, called with boxes of the global grid; points beyond a fixed boundary get
  // outside(coordinate) (0 when outside is empty).
  void fill(std::size_t b, double* buf, const BoxFill& inside, const PointValue& outside,
            bool halo, double* side = nullptr) const;
  // The regions of block b's padding (width: its padding) that lie beyond a fixed end of
  // the grid, as boxes in block-local coordinates: what a fill gives outside(coordinate).
  std::vector<std::pair<Ix, Ix>> fixed_regions(std::size_t b) const;
  // Calls visit with the owned points of block b's padded buffer `buf`.
  void visit(std::size_t b, const double* buf, const BoxVisit& visit) const;
  // Copies the owned points of block b's padded buffer `buf` into a global grid (C order).
  void gather(std::size_t b, const double* buf, std::span<double> global) const;

  // Puts every block on rank b * ranks / count() through set_home(b, rank), unless the graph
  // already ran: it keeps its placement then, which home_of(b) reports. Refuses (Error) more
  // ranks than blocks. Returns each block's rank.
  std::vector<unsigned> place(const Graph& graph, unsigned ranks,
                              const std::function<void(std::size_t, unsigned)>& set_home,
                              const std::function<unsigned(std::size_t)>& home_of) const;

 private:
  std::string who_;
  std::size_t dims_ = 0;
  std::vector<std::size_t> size_, grid_;
  bool periodic_ = false;
  std::vector<BlockGeom> blocks_;
};

// A BoxFill that copies from a global grid (C order over `size`).
BoxFill from_global(std::span<const double> global, const std::vector<std::size_t>& size);
// A BoxFill that asks `value` for every point.
BoxFill from_points(PointValue value);

// Which blocks this rank holds: every block until the stencil is placed, then those whose
// home is this rank.
struct Placement {
  bool placed = false;
  unsigned rank = 0;
  std::vector<unsigned> home;  // per block, once placed
  bool holds(std::size_t b) const { return !placed || home[b] == rank; }
  // The first block this rank holds (every rank holds one).
  std::size_t first_held() const {
    std::size_t b = 0;
    while (b + 1 < home.size() && !holds(b)) ++b;
    return b;
  }
};

}  // namespace ordo::stencil::core
