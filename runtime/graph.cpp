#include "graph.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace ordo::rt {

namespace {
constexpr std::size_t kAlign = 64;  // one cache line: no false sharing between locations
constexpr std::size_t kPage = 4096;  // the unit of NUMA binding
}

Buffer::Buffer(std::size_t bytes) : bytes_(bytes) {
  const std::size_t align = bytes >= kPage ? kPage : kAlign;
  std::size_t rounded = (bytes + align - 1) / align * align;
  if (rounded == 0) rounded = align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  ptr_.reset(static_cast<std::byte*>(p));
}

void Buffer::Free::operator()(std::byte* p) const noexcept { std::free(p); }

std::uint32_t Graph::add_location(std::string name, std::size_t elem_size, std::size_t count,
                                  const std::type_info& type) {
  locations_.push_back({std::move(name), elem_size, count, &type});
  buffers_.emplace_back(elem_size * count);
  return static_cast<std::uint32_t>(locations_.size() - 1);
}

std::uint32_t Graph::add_task(TaskDesc task) {
  tasks_.push_back(std::move(task));
  return static_cast<std::uint32_t>(tasks_.size() - 1);
}

void Graph::place(std::uint32_t location, unsigned node) {
  locations_[location].place = static_cast<int>(node);
}

std::vector<unsigned> Graph::homes(unsigned nodes) const {
  std::vector<unsigned> h(locations_.size());
  const std::size_t n = locations_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const int p = locations_[i].place;
    h[i] = p >= 0 ? static_cast<unsigned>(p) % nodes : static_cast<unsigned>(i * nodes / n);
  }
  return h;
}

std::int64_t Graph::find_location(const std::string& name) const {
  for (std::size_t i = 0; i < locations_.size(); ++i)
    if (locations_[i].name == name) return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace ordo::rt
