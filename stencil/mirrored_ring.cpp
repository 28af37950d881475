#include "stencil/mirrored_ring.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace ordo::stencil::detail_stencil {

namespace {

std::atomic<std::size_t> refused{0};
std::atomic<std::size_t> failures_to_inject{0};
std::atomic<int> injected_error{0};

// Whether the next mapping is to fail (fail_ring_mappings), taking one from the count.
bool is_failure_injected() {
  std::size_t n = failures_to_inject.load(std::memory_order_relaxed);
  while (n > 0)
    if (failures_to_inject.compare_exchange_weak(n, n - 1, std::memory_order_relaxed))
      return true;
  return false;
}

}  // namespace

std::unique_ptr<MirroredRing> MirroredRing::map(std::size_t bytes, std::string& why) {
  auto failed = [&](const char* call, int error) {
    refused.fetch_add(1, std::memory_order_relaxed);
    why = std::string(call) + ": " + std::strerror(error);
    return nullptr;
  };
  if (is_failure_injected())
    return failed("memfd_create", injected_error.load(std::memory_order_relaxed));
  const int fd = memfd_create("ordo-window", MFD_CLOEXEC);
  if (fd < 0) return failed("memfd_create", errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return failed("ftruncate", error);
  }
  void* at = mmap(nullptr, 2 * bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int error = at == MAP_FAILED ? errno : 0;
  for (std::size_t i = 0; error == 0 && i < 2; ++i)
    if (mmap(static_cast<char*>(at) + i * bytes, bytes, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
      error = errno;
  close(fd);  // the mappings keep the pages
  if (error != 0) {
    if (at != MAP_FAILED) munmap(at, 2 * bytes);
    return failed("mmap", error);
  }
  return std::unique_ptr<MirroredRing>(new MirroredRing(static_cast<double*>(at), bytes));
}

MirroredRing::~MirroredRing() { munmap(data_, 2 * bytes_); }

double* thread_ring(std::size_t slot, std::size_t bytes) {
  // Per slot, the rings most recently used first.
  thread_local std::vector<std::vector<std::unique_ptr<MirroredRing>>> rings;
  if (rings.size() <= slot) rings.resize(slot + 1);
  std::vector<std::unique_ptr<MirroredRing>>& held = rings[slot];
  for (std::size_t i = 0; i < held.size(); ++i)
    if (held[i]->bytes() == bytes) {
      std::rotate(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(i),
                  held.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return held.front()->data();
    }
  // The least recently used ring goes only once the new one is mapped: where the mapping
  // fails, the sizes this thread holds keep their windows.
  std::string why;
  std::unique_ptr<MirroredRing> ring = MirroredRing::map(bytes, why);
  if (!ring) {
    static std::once_flag reported;
    std::call_once(reported, [&] {
      std::fprintf(stderr,
                   "ordo: in-place temporal blocking: cannot map a window of %zu bytes (%s); "
                   "such groups run as one sweep per step, with the same results\n",
                   bytes, why.c_str());
    });
    return nullptr;
  }
  if (held.size() == kRingsPerSlot) held.pop_back();
  held.insert(held.begin(), std::move(ring));
  return held.front()->data();
}

std::size_t ring_mappings_refused() { return refused.load(std::memory_order_relaxed); }

void fail_ring_mappings(std::size_t count, int error) {
  injected_error.store(error, std::memory_order_relaxed);
  failures_to_inject.store(count, std::memory_order_relaxed);
}

}  // namespace ordo::stencil::detail_stencil
