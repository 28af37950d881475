// The in-place wavefront's windows (stencil_windows.cpp): rings of planes in memory mapped
// twice back to back, one set per worker thread, kept from task to task. Internal to the layer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace ordo::stencil::detail_stencil {

// Memory mapped twice, back to back: `bytes` (whole pages) at data() and the same pages again
// at data() + bytes. A window kept in it as a ring of planes has any run of planes shorter
// than the ring in one piece, wherever the run starts, so the kernel reads the planes around
// the one it computes with the buffer's strides and no plane is ever copied to keep them
// together. Pages take memory when first touched.
class MirroredRing {
 public:
  // A ring of `bytes`, or null with `why` saying which call failed and why (memfd_create,
  // ftruncate or mmap: the process's open files or mappings, or memory, ran out).
  static std::unique_ptr<MirroredRing> map(std::size_t bytes, std::string& why);
  ~MirroredRing();
  MirroredRing(const MirroredRing&) = delete;
  MirroredRing& operator=(const MirroredRing&) = delete;
  double* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  MirroredRing(double* data, std::size_t bytes) : bytes_(bytes), data_(data) {}
  std::size_t bytes_;
  double* data_;
};

// Rings a thread keeps per slot, one per size, the least recently used dropped beyond this:
// blocks of one stencil differ in padding (a fixed end or a neighbour on each side) and by a
// point in extent, so a worker running them in turn asks for a few sizes, and a ring mapped
// afresh costs system calls and page faults on every task.
inline constexpr std::size_t kRingsPerSlot = 4;

// This thread's ring `slot` of exactly `bytes` (whole pages), kept from task to task, or null
// when none can be mapped (the slot's rings of other sizes are then kept); the first failure in
// the process is reported once on stderr with its cause (the caller then runs without windows,
// which gives the same results).
double* thread_ring(std::size_t slot, std::size_t bytes);

// For tests: how many ring mappings failed (injected or refused by the system); and the errno
// that the next `count` ring mappings fail with, as if the system had refused them.
std::size_t ring_mappings_refused();
void fail_ring_mappings(std::size_t count, int error);

}  // namespace ordo::stencil::detail_stencil
