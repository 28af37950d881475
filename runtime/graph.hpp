// The declared graph: locations (named, typed, contiguous buffers) and iterative tasks with
// their accesses. This is pure description plus storage; the lock plans are compiled from it
// by plan.hpp and executed by engine.hpp.
//
// The runtime reports bad input as diagnostics (strings); the api layer turns them into
// exceptions at the public boundary.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "runtime/index_table.hpp"
#include "runtime/name_index.hpp"
#include "runtime/reduction.hpp"
#include "runtime/shared_memory.hpp"

namespace ordo::rt {

enum class Mode : std::uint8_t { read, write };

// Locations of a huge page or more are aligned to it and asked to live on huge pages (THP,
// madvise mode by default on Debian): a stencil block streamed row by row then takes one TLB
// entry per 2 MiB instead of per 4 KiB, and first-touch zeroing faults 512x less often
// (docs/benchmarks.md, "Figures behind defaults"). The public API names it too
// (ordo::bench::kHugePageBytes, checked equal in api/graph.cpp).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

struct Instance;  // engine.hpp

// A body: a plain function pointer plus an opaque closure owned by the task.
using Body = std::function<void(const Instance&)>;

struct LocationDesc {
  std::string name;
  std::size_t elem_size = 0;
  std::size_t count = 0;
  const std::type_info* type = nullptr;
  std::int32_t home = -1;  // rank holding the master copy; -1: the default placement
  int place = -1;  // home NUMA node asked for (Graph::set_home_node); -1: the default policy
  // Declared by a construct of the runtime (a reduction's partials, nodes, result and copies)
  // rather than by the user: left out of the default chunks, so that the user's locations are
  // placed as if it were not there.
  bool internal = false;
  // An internal location lives where this one does (reduction.hpp says which), unless `home`
  // or `place` says otherwise; kNoLocation: the default placement.
  std::uint32_t follows = kNoLocation;
  static constexpr std::uint32_t kNoLocation = ~std::uint32_t{0};
  // Derived from other locations by a layer whose exchange depends on the rank count
  // (ordo::Graph::set_derived): a checkpoint neither saves it nor counts it in the fingerprint.
  bool derived = false;
};

struct AccessDesc {
  std::uint32_t location = 0;
  Mode mode = Mode::read;
  bool has_position = false;  // explicit ORWL priority for this location's initial FIFO
  std::int64_t position = 0;
};

// One task, as the runtime's tests and small callers declare it (Graph::add_task).
struct TaskDesc {
  std::string name;
  std::vector<AccessDesc> accesses;
  Body body;
  // A fiber task's body runs on a fiber and acquires and releases its accesses itself
  // (Engine::fiber_acquire / fiber_release); a dataflow task's body runs once everything is
  // granted.
  bool fiber = false;
};

// Tasks are stored as *families*: `count` consecutive tasks [first, first + count) that share
// a name and a body (the body learns its member index from Instance::index). A single task is
// a family of one. Why: a graph of 10^6 tasks declared in a loop paid a std::string, a
// std::function and a std::vector per task; a family pays them once, and its members' accesses
// sit in one flat array (CSR), with no per-member storage at all when they have no accesses.
struct Family {
  std::string name;
  Body body;
  bool fiber = false;
  // A level of a reduction's combining tree (reduction.cpp): each member folds at most
  // kReductionFanIn values, a task next to nothing beside the program's own.
  bool combining = false;
  std::uint32_t first = 0;  // task index of member 0
  std::uint32_t count = 0;
  // Members' accesses: member i's are Graph::accesses_[offsets_[offsets + i], offsets_[offsets
  // + i + 1]); kNoAccesses when no member has any.
  std::uint32_t offsets = 0;
};

// Storage of one location on this rank: 64-byte aligned, page aligned (and padded to whole
// pages) from one page up, so that a buffer can be bound to a NUMA node without moving another.
// Its contents start at zero. From a page up it is fresh anonymous memory that nothing has
// touched: the kernel gives each page, zeroed, to the first thread that touches it (on that
// thread's NUMA node, or on the node the engine bound it to), so an untouched location costs
// address space only and the task that writes it first decides where it lives.
// How a Buffer gives its memory back (outside Buffer: a nested type with member initialisers
// is not default-constructible where unique_ptr needs it to be).
struct BufferFree {
  enum class Kind : std::uint8_t { heap, mapped, shared } kind = Kind::heap;
  std::size_t mapped = 0;  // Kind::mapped: the length to unmap
  void operator()(std::byte* p) const noexcept;
};

class Buffer {
 public:
  Buffer() = default;  // no storage
  // `bytes` of private memory, or an empty Buffer when the system has none to give.
  static Buffer allocate(std::size_t bytes);
  // Memory of a SharedArena (zeroed already), not owned; `reserved`: the slot's length.
  Buffer(std::byte* shared, std::size_t bytes, std::size_t reserved)
      : ptr_(shared, BufferFree{BufferFree::Kind::shared, 0}), bytes_(bytes), reserved_(reserved) {}
  std::byte* data() const { return ptr_.get(); }
  std::size_t bytes() const { return bytes_; }
  // The memory it takes as allocated: bytes rounded up to cache lines below a page, to pages
  // from a page up (never to a huge page: the tail of a huge location is in small pages).
  std::size_t reserved() const { return reserved_; }
  // Gives the memory up without freeing it: it stays allocated until the process ends.
  void keep_forever() { ptr_.get_deleter().kind = BufferFree::Kind::shared; }

 private:
  std::unique_ptr<std::byte, BufferFree> ptr_;
  std::size_t bytes_ = 0, reserved_ = 0;
};

class Graph {
 public:
  // `shared_storage`: keep locations below 2 MiB in a SharedArena, which ranks on this host
  // can map (shared_memory.hpp). The api decides it (RuntimeOptions::shared_memory's default).
  explicit Graph(bool shared_storage = false);

  // Returns the new location's index. `name` must be unique (checked by the caller with
  // find_location).
  std::uint32_t add_location(std::string name, std::size_t elem_size, std::size_t count,
                             const std::type_info& type);
  // Room for `more` locations beyond those declared (a location family declares them at once).
  void reserve_locations(std::size_t more);
  std::uint32_t add_task(TaskDesc task);

  // Declaring a family: begin_family(), then per member its accesses (add_access) and
  // end_member(), `count` times; or add_free_family() for members without accesses.
  // Returns the index of member 0. The caller checks the accesses (api/graph.cpp).
  std::uint32_t begin_family(std::string name, Body body, bool fiber = false);
  void add_access(const AccessDesc& access) { accesses_.push_back(access); }
  // Ends the current member. A member of more than kLinearScan accesses is indexed for
  // find_access, which also finds a location it lists twice: returned then (the caller refuses
  // the member and abandons the family), else -1. Narrower members are not checked here: the
  // caller scans them as it adds each access.
  std::int64_t end_member();
  // Ends the family being declared: one whose members have no access at all then stores no
  // offsets (so the engine sees at once that it has no lock to take).
  void end_family();
  // The accesses added since the current member began.
  std::span<const AccessDesc> current_member() const {
    return {accesses_.data() + offsets_.back(), accesses_.data() + accesses_.size()};
  }
  // The accesses of the member end_member() ended last.
  std::span<const AccessDesc> last_member() const {
    return {accesses_.data() + offsets_[offsets_.size() - 2], accesses_.data() + offsets_.back()};
  }
  std::uint32_t add_free_family(std::string name, std::uint32_t count, Body body);
  // Undoes the family being declared (after a refused access).
  void abandon_family();

  static constexpr std::uint32_t kNoAccesses = ~std::uint32_t{0};

  // Asks for `location`'s memory and writers to live on NUMA node `node` (wrapped modulo the
  // node count of the pool that runs the graph).
  void place(std::uint32_t location, unsigned node);
  // The home node of every location on a pool of `nodes` NUMA nodes (docs/scheduler.md): the
  // node given to place(), else contiguous chunks in declaration order -- the user's location
  // i of n goes to node i * nodes / n -- so that neighbouring blocks share a node; internal
  // locations go where they follow.
  std::vector<unsigned> homes(unsigned nodes) const;
  // The home rank of every location on `ranks` ranks (docs/distributed.md): set_home's, else
  // the same chunks and following as homes().
  std::vector<std::uint32_t> rank_homes(unsigned ranks) const;

  // Index of the location called `name`, or -1. O(1) (name_index.hpp).
  std::int64_t find_location(std::string_view name) const;

  // Members with at most this many accesses are searched by a scan, wider ones through a hash
  // table (a task reading 256 blocks would otherwise pay a scan per read).
  static constexpr std::size_t kLinearScan = 16;
  // Where `location` is among `accesses` (one task's, as member_accesses returns them), or -1.
  // O(1) for any width.
  std::int64_t find_access(std::span<const AccessDesc> accesses, std::uint32_t location) const;

  void set_home(std::uint32_t location, std::int32_t rank) { locations_[location].home = rank; }
  void set_derived(std::uint32_t location) { locations_[location].derived = true; }
  // Tasks a layer declares by rank count (ordo::Graph::set_derived_task): left out of a
  // checkpoint's fingerprint.
  void set_derived_task(std::uint32_t task) {
    if (derived_tasks_.size() <= task) derived_tasks_.resize(task + 1, false);
    derived_tasks_[task] = true;
  }
  bool derived_task(std::uint32_t task) const {
    return task < derived_tasks_.size() && derived_tasks_[task];
  }

  // The iteration the graph's first run starts at: 0, or the checkpoint's a restart resumed
  // from. Bodies see it added to the engine's own count (Context::iteration()), so a resumed
  // run computes what the uninterrupted one did; the engine's counts start at 0 either way.
  std::uint64_t first_iteration() const { return first_iteration_; }
  void set_first_iteration(std::uint64_t k) { first_iteration_ = k; }

  const std::vector<LocationDesc>& locations() const { return locations_; }
  // A location's memory as this process's tasks see it: its own buffer, or during a run of a
  // rank that shares the home's memory, the home's (set_view). Null while this rank holds no
  // storage for it (has_storage).
  std::byte* data(std::uint32_t location) const { return views_[location]; }

  // Storage (docs/distributed.md, "Memory"). Declaring a location allocates nothing: a rank
  // gives a location storage only when it uses it (the engine's first run: its home locations
  // and the replicas its tasks access; before that, the program's first Graph::data of it).
  // Between runs only, on the caller's thread.
  bool has_storage(std::uint32_t location) const { return buffers_[location].data() != nullptr; }
  // Gives `location` zeroed storage unless it has some. `shareable`: in the SharedArena when the
  // graph keeps one and the location is small (so that the ranks of this host can map it; a
  // home location), else private. Returns false when the system has no memory to give.
  bool provide_storage(std::uint32_t location, bool shareable);
  // Frees the location's storage (its contents are lost). A location in the SharedArena gives
  // its whole pages back to the system; its bytes within a partly used page stay in the chunk.
  void release_storage(std::uint32_t location);
  // Locations with storage on this rank and their bytes (elements x element size): what the
  // program's locations cost this rank.
  std::size_t locations_held() const { return held_locations_; }
  std::size_t bytes_held() const { return held_bytes_; }
  // Their memory as allocated (Buffer::reserved): what the statistic of allocated size tests.
  std::size_t bytes_reserved() const { return held_reserved_; }
  // Bytes of `location` (elements x element size).
  std::size_t bytes_of(std::uint32_t location) const {
    return locations_[location].elem_size * locations_[location].count;
  }
  // Where the location's own buffer lies in the SharedArena, or nullopt when it is private.
  const std::optional<SharedArena::Slot>& shared_slot(std::uint32_t location) const {
    return slots_[location];
  }
  const SharedArena* arena() const { return arena_.get(); }
  // The engine points data(location) at a peer's mapping for a run, then back (reset_view).
  // Not synchronised: only for locations no other thread reads meanwhile.
  void set_view(std::uint32_t location, std::byte* p) { views_[location] = p; }
  void reset_view(std::uint32_t location) { views_[location] = buffers_[location].data(); }
  // The storage holding `bytes` (a location's own buffer, or the SharedArena it lies in) is
  // never freed, not even with the graph: a transport may still write there (Net::detach).
  void keep_forever(std::span<const std::byte> bytes);

  std::uint32_t task_count() const { return task_count_; }
  // A deque: growing it never moves a family (no copies of names and bodies, no doubled
  // memory), and a family's address is stable, so the engine keeps pointers to them.
  const std::deque<Family>& families() const { return families_; }
  // The family task `t` belongs to (binary search: for cold paths; hot paths walk families).
  std::uint32_t family_of(std::uint32_t t) const;
  // Member `i`'s accesses of family `f`.
  std::span<const AccessDesc> member_accesses(const Family& f, std::uint32_t i) const {
    if (f.offsets == kNoAccesses) return {};
    return {accesses_.data() + offsets_[f.offsets + i],
            accesses_.data() + offsets_[f.offsets + i + 1]};
  }
  std::span<const AccessDesc> accesses(std::uint32_t t) const {
    const Family& f = families_[family_of(t)];
    return member_accesses(f, t - f.first);
  }
  // A task's name: its family's, with "[i]" appended for members of families of more than one.
  // Built on demand (error messages, traces), never stored per task.
  std::string task_name(std::uint32_t t) const;
  // Every access of every task, in task order.
  const std::vector<AccessDesc>& all_accesses() const { return accesses_; }

  // --- Reductions (reduction.hpp; defined in reduction.cpp). Names are checked by the caller.
  // Declares a reduction: partials "name.part[i]" and the result "name". Returns its index.
  std::uint32_t add_reduction(const std::string& name, std::uint32_t contributors,
                              std::size_t elem_size, const std::type_info& type, Combine op);
  // The names add_combine(r) gives the tree's nodes.
  std::vector<std::string> combine_names(std::uint32_t r) const;
  // Declares r's combining tree here, in program order. Every partial has its contributor.
  void add_combine(std::uint32_t r);
  // Records `task` as the contributor of r's partial `index`, which then lives with location
  // `follows` (LocationDesc::kNoLocation: the default placement).
  void set_contributor(std::uint32_t r, std::uint32_t index, std::uint32_t task,
                       std::uint32_t follows);
  // The names add_reduction_copies(ranks) gives reduction r's copies.
  std::vector<std::string> copy_names(std::uint32_t r, unsigned ranks) const;
  // Declares every reduction's copy per rank and the tasks writing them, at the end of program
  // order. Once, before the graph first runs on `ranks` > 1 ranks; every reduction combined.
  void add_reduction_copies(unsigned ranks);
  // What `location` is to a reduction, or nullopt for any other location. O(log reductions).
  std::optional<ReductionPart> reduction_part(std::uint32_t location) const;
  const std::vector<Reduction>& reductions() const { return reductions_; }
  // The contributions task `task` declared (0 for most tasks: one lookup in a short list).
  std::uint32_t contributions_of(std::uint32_t task) const {
    if (contributions_.empty()) return 0;
    auto it = std::lower_bound(contributions_.begin(), contributions_.end(),
                               std::pair<std::uint32_t, std::uint32_t>{task, 0});
    return it != contributions_.end() && it->first == task ? it->second : 0;
  }

 private:
  std::vector<LocationDesc> locations_;
  std::vector<Buffer> buffers_;
  // Deletes the arena unless keep_forever() kept memory of it.
  struct ArenaFree {
    bool kept;  // value-initialised false
    void operator()(SharedArena* arena) const noexcept {
      if (!kept) delete arena;
    }
  };
  std::unique_ptr<SharedArena, ArenaFree> arena_;  // null: every buffer private
  std::vector<std::optional<SharedArena::Slot>> slots_;
  std::vector<std::byte*> views_;
  std::size_t held_locations_ = 0, held_bytes_ = 0, held_reserved_ = 0;
  std::deque<Family> families_;
  std::vector<AccessDesc> accesses_;
  std::vector<std::uint32_t> offsets_;
  std::uint32_t task_count_ = 0;
  std::uint64_t first_iteration_ = 0;
  std::vector<bool> derived_tasks_;  // by task; shorter where the rest are not
  NameIndex names_;
  // Positions in accesses_ of the accesses of members wider than kLinearScan, hashed by
  // (member's first position, location).
  IndexTable wide_;
  std::vector<Reduction> reductions_;
  // The locations of reductions, as ranges in declaration order (so sorted).
  struct ReductionRange {
    std::uint32_t begin, end;  // [begin, end)
    std::uint32_t reduction;
    ReductionRole role;
  };
  std::vector<ReductionRange> reduction_ranges_;
  // (task, contributions it declared), by task: set_contributor is called for the member just
  // declared, so tasks come in order.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> contributions_;
  // The home (rank or node, out of `units`) of every location, given the explicit ones
  // (`chosen(l)`: -1 for none): chunks for the user's locations, following for internal ones.
  template <class Chosen>
  std::vector<std::uint32_t> place_all(unsigned units, Chosen&& chosen) const;
};

}  // namespace ordo::rt
