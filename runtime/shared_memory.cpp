#include "runtime/shared_memory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ordo::rt {

namespace {

// Chunks are sparse (memfd pages exist once touched), so a generous size costs address space
// only, and one chunk holds every small location of most graphs: one descriptor per graph.
constexpr std::size_t kChunkBytes = std::size_t{64} << 20;
constexpr std::size_t kPage = 4096;

}  // namespace

SharedArena::~SharedArena() {
  for (Chunk& c : chunks_) {
    ::munmap(c.base, c.size);
    ::close(c.fd);
  }
}

std::optional<SharedArena::Slot> SharedArena::allocate(std::size_t bytes, std::size_t align) {
  if (bytes == 0) bytes = 1;
  for (std::uint32_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    const std::size_t at = (c.used + align - 1) / align * align;
    if (at + bytes <= c.size) {
      c.used = at + bytes;
      return Slot{i, at};
    }
  }
  Chunk c;
  c.size = std::max(kChunkBytes, (bytes + kPage - 1) / kPage * kPage);
  c.fd = ::memfd_create("ordo-locations", MFD_CLOEXEC);
  if (c.fd < 0) return std::nullopt;
  struct stat st {};
  void* p = MAP_FAILED;
  if (::ftruncate(c.fd, static_cast<off_t>(c.size)) == 0 && ::fstat(c.fd, &st) == 0)
    p = ::mmap(nullptr, c.size, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
  if (p == MAP_FAILED) {
    ::close(c.fd);
    return std::nullopt;
  }
  c.base = static_cast<std::byte*>(p);
  c.inode = st.st_ino;
  c.used = bytes;
  chunks_.push_back(c);
  return Slot{static_cast<std::uint32_t>(chunks_.size() - 1), 0};
}

void SharedArena::release(const Slot& s, std::size_t bytes) {
  const std::uint64_t begin = (s.offset + kPage - 1) / kPage * kPage;
  const std::uint64_t end = (s.offset + bytes) / kPage * kPage;
  if (end <= begin) return;
  // Best effort: a kernel that cannot punch holes in memfd memory keeps the pages.
  (void)::fallocate(chunks_[s.chunk].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(begin), static_cast<off_t>(end - begin));
}

PeerMapping::~PeerMapping() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

PeerMapping::PeerMapping(PeerMapping&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

PeerMapping& PeerMapping::operator=(PeerMapping&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

PeerMapping PeerMapping::map(std::int64_t pid, int fd, std::size_t size, std::uint64_t inode,
                             std::string& error) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int f = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (f < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return {};
  }
  struct stat st {};
  PeerMapping m;
  if (::fstat(f, &st) != 0 || st.st_ino != inode || static_cast<std::size_t>(st.st_size) != size) {
    error = path + " is not the peer's location memory (inode or size differs)";
  } else if (void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
             p == MAP_FAILED) {
    error = "cannot map " + path + ": " + std::strerror(errno);
  } else {
    m.base_ = static_cast<std::byte*>(p);
    m.size_ = size;
  }
  ::close(f);
  return m;
}

}  // namespace ordo::rt
