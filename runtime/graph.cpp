#include "runtime/graph.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

namespace ordo::rt {

namespace {
std::uint32_t access_hash(std::uint32_t first, std::uint32_t location) {
  return mix_hash((std::uint64_t{first} << 32) ^ location);
}
constexpr std::size_t kAlign = 64;  // one cache line: no false sharing between locations
constexpr std::size_t kPage = 4096;  // the unit of NUMA binding
constexpr std::size_t kHuge = kHugePageBytes;  // graph.hpp says why
}

Buffer Buffer::allocate(std::size_t bytes) {
  Buffer b;
  b.bytes_ = bytes;
  if (bytes < kPage) {
    // Small: from the heap, several to a page, zeroed here (there is no page of its own to
    // leave untouched).
    const std::size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr) return {};
    std::memset(p, 0, rounded);
    b.ptr_ = {static_cast<std::byte*>(p), BufferFree{BufferFree::Kind::heap, 0}};
    b.reserved_ = rounded;
    return b;
  }
  // Fresh anonymous pages: zero, and not touched here (the header). A huge location maps one
  // huge page more than it needs and trims the ends to align to one. Its length stays a whole
  // number of small pages: its tail past the last whole huge page lives in small pages, where
  // rounding it to a huge page would nearly double a location just over one.
  const bool huge = bytes >= kHuge;
  const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  const std::size_t slack = huge ? kHuge : 0;
  void* p = ::mmap(nullptr, rounded + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (p == MAP_FAILED) return {};
  auto* base = static_cast<std::byte*>(p);
  if (huge) {
    const auto at = reinterpret_cast<std::uintptr_t>(base);
    const std::size_t lead = (kHuge - at % kHuge) % kHuge;
    if (lead != 0) ::munmap(base, lead);
    if (slack - lead != 0) ::munmap(base + lead + rounded, slack - lead);
    base += lead;
    // Advice only: where transparent huge pages are off (or "never"), this changes nothing.
    (void)::madvise(base, rounded, MADV_HUGEPAGE);
  }
  b.ptr_ = {base, BufferFree{BufferFree::Kind::mapped, rounded}};
  b.reserved_ = rounded;
  return b;
}

void BufferFree::operator()(std::byte* p) const noexcept {
  switch (kind) {
    case Kind::heap: std::free(p); break;
    case Kind::mapped: ::munmap(p, mapped); break;
    case Kind::shared: break;
  }
}

Graph::Graph(bool shared_storage) {
  if (shared_storage) arena_.reset(new SharedArena);
}

void Graph::keep_forever(std::span<const std::byte> bytes) {
  const std::byte* p = bytes.data();
  for (std::size_t l = 0; l < buffers_.size(); ++l) {
    const std::byte* b = buffers_[l].data();
    if (b == nullptr || p < b || p >= b + buffers_[l].bytes()) continue;
    if (slots_[l])
      arena_.get_deleter().kept = true;  // the arena unmaps all its chunks at once
    else
      buffers_[l].keep_forever();
    return;
  }
}

std::uint32_t Graph::add_location(std::string name, std::size_t elem_size, std::size_t count,
                                  const std::type_info& type) {
  locations_.push_back({std::move(name), elem_size, count, &type});
  buffers_.emplace_back();
  slots_.emplace_back();
  views_.push_back(nullptr);
  const auto l = static_cast<std::uint32_t>(locations_.size() - 1);
  names_.insert(locations_[l].name, l);
  return l;
}

bool Graph::provide_storage(std::uint32_t location, bool shareable) {
  if (has_storage(location)) return true;
  const std::size_t bytes = bytes_of(location);
  // Huge locations stay private: anonymous memory gets huge pages, shared memory does not.
  // Shared ones keep the private rules (page alignment from a page up).
  if (shareable && arena_ && bytes < kHuge) {
    const bool paged = bytes >= kPage;  // then no neighbour on its pages
    const std::size_t length = paged ? (bytes + kPage - 1) / kPage * kPage : bytes;
    if (auto slot = arena_->allocate(length, paged ? kPage : kAlign)) {
      slots_[location] = slot;
      buffers_[location] = Buffer(arena_->address(*slot), bytes, length);
    }
  }
  if (!has_storage(location)) buffers_[location] = Buffer::allocate(bytes);
  if (!has_storage(location)) return false;
  views_[location] = buffers_[location].data();
  ++held_locations_;
  held_bytes_ += bytes;
  held_reserved_ += buffers_[location].reserved();
  return true;
}

void Graph::release_storage(std::uint32_t location) {
  if (!has_storage(location)) return;
  if (const auto& slot = slots_[location]) arena_->release(*slot, bytes_of(location));
  held_reserved_ -= buffers_[location].reserved();
  slots_[location].reset();
  buffers_[location] = Buffer();
  views_[location] = nullptr;
  --held_locations_;
  held_bytes_ -= bytes_of(location);
}

void Graph::reserve_locations(std::size_t more) {
  const std::size_t n = locations_.size() + more;
  locations_.reserve(n);
  buffers_.reserve(n);
  slots_.reserve(n);
  views_.reserve(n);
}

std::uint32_t Graph::add_task(TaskDesc task) {
  const std::uint32_t t = begin_family(std::move(task.name), std::move(task.body), task.fiber);
  for (const AccessDesc& a : task.accesses) add_access(a);
  end_member();
  end_family();
  return t;
}

std::uint32_t Graph::begin_family(std::string name, Body body, bool fiber) {
  Family f;
  f.name = std::move(name);
  f.body = std::move(body);
  f.fiber = fiber;
  f.first = task_count_;
  f.offsets = static_cast<std::uint32_t>(offsets_.size());
  offsets_.push_back(static_cast<std::uint32_t>(accesses_.size()));
  families_.push_back(std::move(f));
  return task_count_;
}

std::int64_t Graph::end_member() {
  const std::uint32_t first = offsets_.back();
  const auto end = static_cast<std::uint32_t>(accesses_.size());
  offsets_.push_back(end);
  ++families_.back().count;
  ++task_count_;
  if (end - first <= kLinearScan) return -1;
  for (std::uint32_t p = first; p < end; ++p) {
    const std::uint32_t location = accesses_[p].location;
    const std::uint32_t h = access_hash(first, location);
    if (wide_.find(h, [&](std::uint32_t v) {
          return v >= first && v < end && accesses_[v].location == location;
        }) != IndexTable::kNone)
      return location;
    wide_.insert(h, p);
  }
  return -1;
}

std::int64_t Graph::find_access(std::span<const AccessDesc> accesses,
                                std::uint32_t location) const {
  if (accesses.size() <= kLinearScan) {
    for (std::size_t i = 0; i < accesses.size(); ++i)
      if (accesses[i].location == location) return static_cast<std::int64_t>(i);
    return -1;
  }
  const auto first = static_cast<std::uint32_t>(accesses.data() - accesses_.data());
  const std::uint32_t v = wide_.find(access_hash(first, location), [&](std::uint32_t p) {
    return p >= first && p - first < accesses.size() && accesses_[p].location == location;
  });
  return v == IndexTable::kNone ? -1 : static_cast<std::int64_t>(v - first);
}

void Graph::end_family() {
  Family& f = families_.back();
  if (f.offsets == kNoAccesses || offsets_[f.offsets] != accesses_.size()) return;
  offsets_.resize(f.offsets);
  f.offsets = kNoAccesses;
}

void Graph::abandon_family() {
  Family& f = families_.back();
  task_count_ -= f.count;
  if (f.offsets != kNoAccesses) {
    const std::uint32_t kept = offsets_[f.offsets];
    accesses_.resize(kept);
    offsets_.resize(f.offsets);
    if (wide_.size() != 0) wide_.retain([kept](std::uint32_t v) { return v < kept; });
  }
  // Contributions declared by the members undone.
  for (Reduction& r : reductions_)
    for (std::uint32_t i = 0; i < r.contributors; ++i)
      if (r.contributor[i] != Reduction::kNone && r.contributor[i] >= f.first) {
        r.contributor[i] = Reduction::kNone;
        locations_[r.first_partial + i].follows = LocationDesc::kNoLocation;
      }
  while (!contributions_.empty() && contributions_.back().first >= f.first)
    contributions_.pop_back();
  families_.pop_back();
}

std::uint32_t Graph::add_free_family(std::string name, std::uint32_t count, Body body) {
  Family f;
  f.name = std::move(name);
  f.body = std::move(body);
  f.first = task_count_;
  f.count = count;
  f.offsets = kNoAccesses;
  families_.push_back(std::move(f));
  task_count_ += count;
  return families_.back().first;
}

std::uint32_t Graph::family_of(std::uint32_t t) const {
  auto it = std::upper_bound(families_.begin(), families_.end(), t,
                             [](std::uint32_t v, const Family& f) { return v < f.first; });
  return static_cast<std::uint32_t>(it - families_.begin() - 1);
}

std::string Graph::task_name(std::uint32_t t) const {
  const Family& f = families_[family_of(t)];
  if (f.count == 1) return f.name;
  std::string name = f.name;
  name.append("[").append(std::to_string(t - f.first)).append("]");
  return name;
}

void Graph::place(std::uint32_t location, unsigned node) {
  locations_[location].place = static_cast<int>(node);
}

template <class Chosen>
std::vector<std::uint32_t> Graph::place_all(unsigned units, Chosen&& chosen) const {
  const std::size_t n = locations_.size();
  std::size_t users = 0;
  for (const LocationDesc& l : locations_) users += l.internal ? 0 : 1;
  constexpr std::uint32_t kOpen = ~std::uint32_t{0};
  std::vector<std::uint32_t> h(n, kOpen);
  std::size_t user = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const LocationDesc& l = locations_[i];
    const std::int64_t c = chosen(i);
    if (c >= 0) {
      h[i] = static_cast<std::uint32_t>(c);
    } else if (!l.internal) {
      h[i] = static_cast<std::uint32_t>(user * units / users);
    } else if (l.follows == LocationDesc::kNoLocation) {
      h[i] = static_cast<std::uint32_t>(i * units / n);  // a contribution touching no data
    }
    user += l.internal ? 0 : 1;
  }
  // Following, in chains (a node follows a node ... a partial, a partial a user's location):
  // each walked to its end once, then written back along the way.
  std::vector<std::uint32_t> chain;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t at = static_cast<std::uint32_t>(i);
    while (h[at] == kOpen) {
      chain.push_back(at);
      at = locations_[at].follows;
    }
    for (std::uint32_t c : chain) h[c] = h[at];
    chain.clear();
  }
  return h;
}

std::vector<unsigned> Graph::homes(unsigned nodes) const {
  return place_all(nodes, [&](std::size_t i) -> std::int64_t {
    const int p = locations_[i].place;
    return p >= 0 ? static_cast<std::int64_t>(static_cast<unsigned>(p) % nodes) : -1;
  });
}

std::vector<std::uint32_t> Graph::rank_homes(unsigned ranks) const {
  return place_all(ranks, [&](std::size_t i) -> std::int64_t { return locations_[i].home; });
}

std::int64_t Graph::find_location(std::string_view name) const {
  return names_.find(name, [this](std::uint32_t l) { return std::string_view(locations_[l].name); });
}

}  // namespace ordo::rt
