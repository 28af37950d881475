// Location memory that the ranks of one host share (docs/distributed.md, "Shared memory
// between local ranks").
//
// A graph built in a process that is one rank of several keeps its small locations (below
// kHugePageBytes, which anonymous memory backs with huge pages) in a SharedArena: chunks of memfd memory,
// each kept open so that a rank on the same host (same kernel and PID namespace) can map it
// through /proc/<pid>/fd/<fd> (PeerMapping). A proxy then reads and writes the home's buffer in
// place and GRANTs and RELEASEs between the two carry no bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ordo::rt {

class SharedArena {
 public:
  struct Chunk {
    int fd = -1;
    std::byte* base = nullptr;
    std::size_t size = 0;
    std::size_t used = 0;
    std::uint64_t inode = 0;  // lets a peer check it mapped this chunk and not a reused fd
  };
  struct Slot {
    std::uint32_t chunk;
    std::uint64_t offset;
  };

  SharedArena() = default;
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // Zeroed memory of `bytes` aligned to `align` (a power of two up to a page), or nullopt when
  // no shared memory can be had (memfd_create or mmap failed): the caller allocates privately.
  std::optional<Slot> allocate(std::size_t bytes, std::size_t align);
  std::byte* address(const Slot& s) const { return chunks_[s.chunk].base + s.offset; }
  // Gives the whole pages of a slot of `bytes` back to the system (they read as zero again).
  // The slot is not reused.
  void release(const Slot& s, std::size_t bytes);
  const std::vector<Chunk>& chunks() const { return chunks_; }

 private:
  std::vector<Chunk> chunks_;
};

// A peer's chunk mapped into this process. Empty when default-constructed or moved from.
class PeerMapping {
 public:
  PeerMapping() = default;
  ~PeerMapping();
  PeerMapping(PeerMapping&& o) noexcept;
  PeerMapping& operator=(PeerMapping&& o) noexcept;

  // Maps chunk `fd` of process `pid` (`size` bytes, inode `inode`), or says why it cannot.
  static PeerMapping map(std::int64_t pid, int fd, std::size_t size, std::uint64_t inode,
                         std::string& error);
  std::byte* base() const { return base_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ordo::rt
