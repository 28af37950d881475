// ordo::stencil -- the embedded Dido: block-decomposed stencils on the public ordo API.
//
// The user describes a stencil -- dimensions (1 to 5), global size, block grid, halo width,
// neighbourhood, boundary, traversal, time levels, coefficient grids, temporal-blocking depth --
// and writes a kernel for one block. The layer declares the locations and tasks in CompUp form
// with overlapped partitioning (Saied 2018 ch. 7): each block has a *main location* holding its
// padded buffers (block plus halo), and one *export location* per neighbour on another rank
// that reads it. Per block there is one Compute task (fills the halo from the exports of its
// neighbours on other ranks, runs the kernel), one Local Update task (copies the block's edges
// into its exports) and, per neighbour on the same rank, a task that copies the block's edges
// straight into that neighbour's halo. The Global Update of Dido -- bringing a neighbour's
// export to this block -- is the runtime's read grant, so a halo byte is copied once out of
// the sender and once into the receiver's halo, or only once when both are on one rank.
// The user never writes a halo index or a FIFO position. The design is in docs/stencil.md.
//
//   ordo::stencil::Spec s;
//   s.size = {1024, 1024};
//   s.blocks = {4, 4};
//   s.neighbourhood = ordo::stencil::von_neumann(2, 1);
//   ordo::Graph g;
//   ordo::stencil::Stencil st(g, s, [](const ordo::stencil::Block& b) {
//     const auto n = b.stride[0];
//     ordo::stencil::for_each_row(b, [&](std::ptrdiff_t at, std::size_t len) {
//       const double* u = b.in[0] + at;
//       double* v = b.out + at;
//       for (std::size_t j = 0; j < len; ++j)
//         v[j] = 0.25 * (u[j - n] + u[j + n] + u[j - 1] + u[j + 1]);
//     });
//   });
//   ordo::Runtime rt({.workers = 2});
//   st.place(rt);                   // each rank holds, fills and reads only its own blocks
//   st.set([](ordo::stencil::Coord x) { return x[0] == 0 ? 1.0 : 0.0; });  // initial values
//   st.run(rt, 100);
//   st.get_blocks([](const ordo::stencil::ConstBox& b) { ... });  // this rank's results
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <ordo/ordo.hpp>
#include <ordo/stencil_kernel.hpp>

namespace ordo::stencil {

using Offset = std::vector<int>;  // one component per dimension

// Neighbourhoods as lists of offsets (the centre excluded).
// von Neumann of radius r: the 2*dims*r points on the axes within r.
std::vector<Offset> von_neumann(std::size_t dims, int radius = 1);
// Moore of radius r: the (2r+1)^dims - 1 points of the cube.
std::vector<Offset> moore(std::size_t dims, int radius = 1);

enum class Boundary { fixed, periodic };
enum class Traversal {
  jacobi,  // every point from the previous time level (double buffered)
  // The same results, bit for bit, with one buffer per time level instead of one more: the new
  // level overwrites the oldest while the layer keeps each new value in a small ring until no
  // later point reads the old one (docs/stencil.md, "In-place Jacobi"). A point is read and
  // written back once, 16 bytes for a one-level kernel instead of 24 (the double buffer's
  // write-allocate). Any Jacobi kernel works unchanged (it writes Block::out, which is not
  // Block::in[0], and never reads out). Temporal blocking needs one time level here.
  jacobi_in_place,
  gauss_seidel,  // in place, lexicographic order: earlier points already updated
};

// How the output of a step reaches memory (docs/stencil.md, "Memory traffic").
enum class Stores {
  cached,  // the kernel writes Block::out directly (ordinary stores); the default
  // The kernel writes cache-sized pieces of its range into a per-thread scratch that the layer
  // copies out with non-temporal stores: no write-allocate read of the output, so a Jacobi
  // sweep moves 16 bytes per point instead of 24. Jacobi only; the kernel must write every
  // point of its range and must not read Block::out (true of any Jacobi kernel).
  streaming,
};

struct ReductionSpec {
  std::string name;  // unique among the stencil's (or pipeline's) reductions
  Reduce op = Reduce::max;
};

// A global coordinate, slowest dimension first.
using Coord = std::span<const std::int64_t>;

// The points lo <= x < hi of the global grid (inside it), stored at
// data[sum_d (x[d] - lo[d]) * stride[d]]; stride[dims - 1] is 1, so each row along the last
// dimension is contiguous. Box (T = double) is what a fill writes, ConstBox what a read sees.
template <class T>
struct GridBox {
  std::size_t dims = 0;
  std::array<std::int64_t, kMaxDims> lo{}, hi{};
  std::array<std::ptrdiff_t, kMaxDims> stride{};
  T* data = nullptr;
};
using Box = GridBox<double>;
using ConstBox = GridBox<const double>;

// Initial values, given without a global array (docs/stencil.md, "Initial values"):
// PointValue is the value at a global coordinate; BoxFill writes every point of a box (read
// a file's rows into it, say). The layer calls them for the blocks this rank holds, halos
// included, so no rank ever needs the whole grid.
using PointValue = std::function<double(Coord)>;
using BoxFill = std::function<void(const Box&)>;
// Sees the owned points of one block, for results (Stencil::get_blocks).
using BoxVisit = std::function<void(const ConstBox&)>;

namespace detail {
struct ReductionSet;  // a stencil's or pipeline's reductions (stencil/stencil_reductions.hpp)
}  // namespace detail

// The values of a stencil's or pipeline's reductions after the last step run, for a stop
// condition (Stencil::run_until) and after a run: the same bits on every rank.
//   st.run_until(rt, [](const ordo::stencil::Values& v) { return v["change"] <= 1e-6; }, 10000);
class Values {
 public:
  explicit Values(const detail::ReductionSet& set) : set_(&set) {}
  // The value of the reduction of that name; Error for a name the spec does not declare (no
  // kernel contributes to it), naming those it does.
  double operator[](const std::string& name) const;
  // The value of reduction `index`, in the order of the spec's reductions.
  double operator[](std::size_t index) const;
  std::size_t size() const;

 private:
  const detail::ReductionSet* set_;
};
using StopCondition = std::function<bool(const Values&)>;

// Calls f(row, first, len) for every row of box b along its last dimension, in lexicographic
// order: `len` consecutive values at `row` (T* into b.data), the first at global coordinate
// `first`.
template <class T, class F>
void for_each_box_row(const GridBox<T>& b, F&& f) {
  const std::size_t d = b.dims;
  if (d == 0) return;
  for (std::size_t i = 0; i < d; ++i)
    if (b.hi[i] <= b.lo[i]) return;
  std::array<std::int64_t, kMaxDims> x = b.lo;
  const auto len = static_cast<std::size_t>(b.hi[d - 1] - b.lo[d - 1]);
  for (;;) {
    std::ptrdiff_t at = 0;
    for (std::size_t i = 0; i < d; ++i) at += static_cast<std::ptrdiff_t>(x[i] - b.lo[i]) * b.stride[i];
    f(b.data + at, Coord(x.data(), d), len);
    if (!detail::next_row(x, b.lo, b.hi, d)) return;
  }
}

// The first point of block i of n points split into `blocks` balanced blocks (MPI's
// BLOCK_LOW): block extents differ by at most one point, the larger ones last.
inline std::size_t block_low(std::size_t i, std::size_t n, std::size_t blocks) {
  return i * n / blocks;
}

// How the layer runs a stencil, apart from what it computes (Spec) and what its kernel can
// do (KernelTraits): hints that change its speed, never its bits. The defaults suit the
// machine; the fields are there to tune and to measure (docs/stencil.md, "Schedule").
struct Schedule {
  // Temporal blocking tiles each block so that the D steps of a tile run out of the cache:
  // skewed (time-skewed, parallelogram) tiles over the slowest dimensions, whose working set
  // (all time levels, coefficient grids) is at most tile_bytes; the in-place sweeps' slabs
  // and strips fill at most that much. 0: automatic (docs/stencil.md).
  std::size_t tile_bytes = 0;
  // cached is the default: the copy through the scratch can cost more than the write-allocate
  // it saves (docs/stencil.md, "Why cached is the default"); streaming is there to measure.
  Stores stores = Stores::cached;
};

struct Spec {
  std::string name = "u";           // prefix of the location and task names (unique per graph)
  std::vector<std::size_t> size;    // global extents, slowest first (1 to 5 of them)
  // Blocks per dimension, at most size: block i covers [block_low(i), block_low(i + 1)), so any
  // size works on any block grid (extents differ by at most one point).
  std::vector<std::size_t> blocks;
  // Halo width h: how far the kernel reads. 0 means the reach of the neighbourhood.
  std::size_t halo = 0;
  // The offsets the kernel reads. Decides which neighbour blocks exchange data.
  std::vector<Offset> neighbourhood;
  Boundary boundary = Boundary::fixed;
  // For Boundary::fixed: the value of a point outside the grid, held for the whole run.
  // Called with its global coordinate (some component < 0 or >= size). Default 0.
  std::function<double(Coord)> fixed_value;
  Traversal traversal = Traversal::jacobi;
  // Time levels the kernel reads: 1 (u^t) or more (u^t, u^{t-1}, ...: the wave equations).
  std::size_t time_levels = 1;
  // Coefficient grids: global arrays the kernel reads, constant over the run, with the same
  // halo and boundary (fixed: the value 0 outside the grid).
  std::size_t aux_grids = 0;
  // Temporal blocking depth D (Saied 2018 §7.3): halos of D*h, exchanged once every D steps,
  // the overlap recomputed. Results are bit-identical to D = 1. Jacobi only.
  std::size_t tb_depth = 1;
  // How the layer runs it: hints for speed that never change the bits.
  Schedule schedule;
  // Reductions the kernel contributes to, per block and step (Block::contribute), combined in
  // the fixed order over the blocks; run_until stops on a condition on their values. With
  // temporal blocking only each group's last step contributes (Block::contributes() says
  // which), so a condition is tested every tb_depth steps (docs/stencil.md).
  std::vector<ReductionSpec> reductions;
};

// A stencil declared into a Graph. The Graph must outlive it; declare everything before the
// first run. Not thread-safe (like Graph).
class Stencil {
 public:
  // Checks the spec (throws Error saying what is wrong) and declares the locations and tasks.
  Stencil(Graph& graph, Spec spec, Kernel kernel);
  ~Stencil();
  Stencil(Stencil&&) noexcept;
  Stencil& operator=(Stencil&&) noexcept;

  const Spec& spec() const;

  // Puts block b (row-major index over the block grid) and all its locations on rank
  // b * ranks / block_count() of the runtime's job (docs/distributed.md): each rank holds a
  // contiguous run of blocks, a slab when the first dimension has a block per rank. The first
  // run() does it if no call did. Call it before set() across ranks: set() and get_blocks()
  // then touch only this rank's blocks, so no rank needs the whole grid. A job with more ranks
  // than blocks is refused (Error) on every rank. A graph that already ran (another stencil of
  // it ran first) keeps its placement.
  void place(const Runtime& runtime);

  // Loads time level `level` (0 = newest) of the blocks this rank holds (every block before
  // place()), halos included: from a global grid (C order, points() values), from the value
  // at each global coordinate, or through a callback that fills boxes of the grid.
  void set(std::span<const double> global, std::size_t level = 0);
  void set(const PointValue& value, std::size_t level = 0);
  void set(const BoxFill& fill, std::size_t level = 0);
  // Loads coefficient grid `index`, likewise.
  void set_aux(std::size_t index, std::span<const double> global);
  void set_aux(std::size_t index, const PointValue& value);
  void set_aux(std::size_t index, const BoxFill& fill);
  // Calls visit once per block this rank holds (every block before place()), in block order,
  // with the block's owned points of time level `level`.
  void get_blocks(const BoxVisit& visit, std::size_t level = 0) const;
  // Time level `level` as a global grid, from this rank's blocks: every block on one rank (or
  // before place()). Across ranks, once placed, this rank holds only its blocks, so get()
  // refuses with an Error: collect the grid with gather(), or read this rank's blocks with
  // get_blocks().
  std::vector<double> get(std::size_t level = 0) const;
  // Collects time level `level` as a global grid (C order) onto rank `to`, or onto every
  // rank with kAllRanks; empty on the others. Collective (Runtime::gather): every rank calls
  // it with the same arguments, after place() or a run. Throws Error for a rank that does not
  // exist.
  std::vector<double> gather(Runtime& runtime, unsigned to = kAllRanks,
                             std::size_t level = 0) const;
  // Runs `steps` time steps (temporal blocking groups them by tb_depth); places the blocks on
  // the first run if place() was not called.
  RunStats run(Runtime& runtime, std::uint64_t steps);
  // Runs steps until `done` holds for the reductions' values after a step that contributes
  // (every step; every tb_depth-th with temporal blocking, and the last of a run), or until
  // max_steps have run; returns the steps run (RunStats::iterations). The stencil then holds
  // exactly the state after that step, on every rank. Throws Error when the spec declares no
  // reduction, or for a condition that asks for one it does not declare.
  RunStats run_until(Runtime& runtime, const StopCondition& done, std::uint64_t max_steps);
  // The reductions' values after the last step that contributed (Values), between runs.
  Values values() const;
  std::size_t block_count() const;
  // The rank holding block b's results, after placement.
  unsigned home_rank(std::size_t block) const;
  // Steps run so far, as this rank's blocks count them (the same on every rank).
  std::uint64_t steps_done() const;
  std::size_t points() const;  // product of size

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The sequential reference: one padded global array, the boundary rule applied directly
// (periodic: wrapped copy of the faces every step), the same kernel over the whole grid.
// No blocks, no exchange, no temporal blocking. `levels` holds time_levels grids (newest
// first), `aux` the coefficient grids. Returns the time levels after `steps` steps.
std::vector<std::vector<double>> reference(const Spec& spec, const Kernel& kernel,
                                           std::vector<std::vector<double>> levels,
                                           const std::vector<std::vector<double>>& aux,
                                           std::uint64_t steps);

// ---------------------------------------------------------------------------------------------
// Pipelines: multi-stage stencils over several grids (Nicolet 2015 §3, Harris corner detection).
//
// A pipeline is a list of stages over named grids of one size and block grid. Each stage is a
// stencil: it reads one or more grids (the pipeline's inputs, or grids written by other
// stages) at the offsets of its own neighbourhood (empty: pointwise) and writes one or more
// new grids at every point. One run iteration runs every stage once, in list order, and the
// result is that of this sequential program over global arrays, bit for bit, whatever the
// block grid or the number of workers:
//
//   for each iteration:
//     for each stage s, in order:
//       for each point x: s.writes[...](x) = s.kernel(s.reads[...] at x + offsets)
//
// where a read outside the grid gives the fixed value (Boundary::fixed, default 0) or wraps
// (Boundary::periodic). Grids keep their values between iterations: a stage that reads a grid
// written by a later stage sees the previous iteration's value (the value given to set() in
// the first iteration) -- that is how a pipeline feeds back (u -> stencil -> v, then v -> u).
// Inputs never change during a run. A stage may not read a grid it writes (that would be an
// in-place sweep: write a new grid and feed it back).
//
// The layer makes one task per stage per block, writing the block of every grid the stage
// writes. Halos are exchanged only for grids some stage reads with a neighbourhood, only in
// the directions those offsets reach, and only as wide as the farthest offset: the writer
// packs its edges into export locations and one import task per block and grid unpacks the
// neighbours' edges into the grid's padded block. A block of a later stage starts as soon as
// the blocks it reads are done (a dataflow pipeline, no barrier between stages); its
// neighbours' blocks of the previous stage are what it waits for when it reads a
// neighbourhood. The user never writes a halo index. Design: docs/stencil.md, "Pipelines".
//
//   ordo::stencil::PipelineSpec p;
//   p.size = {512, 512};
//   p.blocks = {4, 4};
//   p.inputs = {"img"};
//   p.stages.push_back({"blur", {"img"}, {"b"}, ordo::stencil::moore(2, 1),
//                       [](const ordo::stencil::StageBlock& b) { ... b.in[0], b.out[0] ... }});
//   p.stages.push_back({"square", {"b"}, {"sq"}, {}, [](const StageBlock& b) { ... }});
//   ordo::Graph g;
//   ordo::stencil::Pipeline pipe(g, p);
//   pipe.set("img", image);
//   ordo::Runtime rt({.workers = 2});
//   pipe.run(rt, 1);
//   std::vector<double> sq = pipe.get("sq");

// Grids one stage reads, and writes: a D2Q9 Lattice-Boltzmann collision reads and writes 9
// populations at a point, a D3Q27 one 27.
inline constexpr std::size_t kMaxStageGrids = 32;

// What a stage's kernel sees for one block. Like Block: coordinates are block-local, the
// pointers point at local point 0 of each grid, and every grid of the pipeline has the same
// padded layout, so one `at + sum(o[d] * stride[d])` addresses all of them. Reading offset o
// is valid for the offsets of the stage's neighbourhood (the halo is filled for those only).
struct StageBlock {
  std::size_t dims = 0;
  std::array<std::ptrdiff_t, kMaxDims> stride{};
  std::array<std::ptrdiff_t, kMaxDims> lo{}, hi{};  // the block: 0 <= x[d] < extent[d]
  std::array<std::int64_t, kMaxDims> origin{};      // global coordinate of local point 0
  std::array<const double*, kMaxStageGrids> in{};   // Stage::reads, in that order
  std::array<double*, kMaxStageGrids> out{};        // Stage::writes, in that order
  std::uint64_t iteration = 0;                      // counted over every run
  detail::Partials* partials = nullptr;             // Stage::contributes; null: none
  // Contributes v to the stage's reduction j (the index in Stage::contributes) for this block
  // and iteration, folded as Block::contribute folds. Every call must contribute to each of
  // the stage's reductions at least once, else the run stops with an Error.
  void contribute(std::size_t j, double v) const {
    if (partials != nullptr) partials->add(j, v);
  }
};

using StageKernel = std::function<void(const StageBlock&)>;

struct Stage {
  std::string name;                   // unique in the pipeline (task names)
  std::vector<std::string> reads;     // grids read, in the order of StageBlock::in
  std::vector<std::string> writes;    // grids written (new names), order of StageBlock::out
  std::vector<Offset> neighbourhood;  // offsets read in every grid of `reads`; {}: pointwise
  StageKernel kernel;                 // computes every point of the block (for_each_row)
  // Reductions of PipelineSpec::reductions the kernel contributes to, in the order of
  // StageBlock::contribute's index; each reduction has exactly one contributing stage.
  std::vector<std::string> contributes{};
};

struct PipelineSpec {
  std::string name = "p";           // prefix of location and task names (unique per graph)
  std::vector<std::size_t> size;    // global extents, slowest first (1 to 5 of them)
  std::vector<std::size_t> blocks;  // blocks per dimension, at most size (balanced, as Spec)
  Boundary boundary = Boundary::fixed;
  // For Boundary::fixed: the value of grid `grid` at a point outside the grid (global
  // coordinate, some component < 0 or >= size). Default 0.
  std::function<double(const std::string& grid, Coord)> fixed_value;
  std::vector<std::string> inputs;  // grids no stage writes; load them with set()
  std::vector<Stage> stages;        // run in this order every iteration
  // Reductions the stages contribute to (Stage::contributes), combined over the blocks in the
  // fixed order every iteration; run_until stops on a condition on their values.
  std::vector<ReductionSpec> reductions{};
};

// A pipeline declared into a Graph (the Graph must outlive it; declare everything before the
// first run). Not thread-safe (like Graph).
class Pipeline {
 public:
  // Checks the spec (throws Error saying what is wrong) and declares locations and tasks.
  Pipeline(Graph& graph, PipelineSpec spec);
  ~Pipeline();
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;

  const PipelineSpec& spec() const;
  // The grids: inputs first, then each stage's writes in stage order.
  std::vector<std::string> grids() const;
  // Halo width the layer derived for a grid: the farthest offset any stage reads it at
  // (0: read pointwise only, never exchanged).
  std::size_t halo(const std::string& grid) const;
  // Puts block b of every grid on rank b * ranks / block_count(), as Stencil::place does
  // (the first run() does it otherwise). Call it before set() across ranks.
  void place(const Runtime& runtime);
  // Loads a grid on the blocks this rank holds, halos included: an input, or the initial
  // value of a grid a stage writes (what a feedback read sees in the first iteration). From a
  // global grid (C order, points() values), the value at each global coordinate, or a
  // callback filling boxes. Between runs only.
  void set(const std::string& grid, std::span<const double> global);
  void set(const std::string& grid, const PointValue& value);
  void set(const std::string& grid, const BoxFill& fill);
  // Calls visit with the owned points of every block of `grid` this rank holds, block order.
  void get_blocks(const std::string& grid, const BoxVisit& visit) const;
  // A grid as a global array from this rank's blocks; across ranks, once placed, refused
  // like Stencil::get (use gather or get_blocks).
  std::vector<double> get(const std::string& grid) const;
  // Collects a grid onto rank `to` or every rank (kAllRanks), as Stencil::gather.
  std::vector<double> gather(Runtime& runtime, const std::string& grid,
                             unsigned to = kAllRanks) const;
  // Runs `iterations` iterations of the whole pipeline (placing the blocks on the first).
  RunStats run(Runtime& runtime, std::uint64_t iterations);
  // Runs iterations until `done` holds for the reductions' values after one, or until
  // max_iterations; returns the iterations run. Throws Error when the spec declares no
  // reduction, or for a condition that asks for one it does not declare.
  RunStats run_until(Runtime& runtime, const StopCondition& done, std::uint64_t max_iterations);
  // The reductions' values after the last iteration run, between runs.
  Values values() const;
  std::size_t points() const;
  std::size_t block_count() const;
  // The rank holding block `block` (row-major over the block grid) of `grid`, after placement.
  unsigned home_rank(const std::string& grid, std::size_t block) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ordo::stencil
