// STREAM-triad bandwidth measurement (a[i] = b[i] + s * c[i], McCalpin's STREAM "Triad"),
// used by the stencil benchmark as the memory-bandwidth bound of memory-bound kernels.
//
// Threads: plain std::thread, one contiguous chunk per thread. Each thread first-touches its own
// chunk (so pages land on its NUMA node, as a statically scheduled loop would place them) and
// then runs the kernel on that chunk only, between two std::barrier phases; thread 0 times the
// interval between them. The best (shortest) repetition counts, as in STREAM.
//
// Bytes: STREAM's convention, 3 * 8 bytes per element (read b, read c, write a). The
// write-allocate read of `a` that a cache without streaming stores also performs is not
// counted, so the figure is what a kernel "must move" by the same convention: stencil traffic
// is counted the same way (one read and one write per grid point, 16 bytes).
//
// Size: the arrays must be far larger than the last-level cache, otherwise this measures the
// cache: stream_triad_bytes_per_second() takes four times the last-level cache per array (at
// least 8 Mi elements); stream_triad() lets the caller choose.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <ordo/bench.hpp>
#include <ordo/stencil.hpp>

namespace ordo::app {

// Bytes of the largest data cache the OS reports for cpu0 (0 when it reports none).
inline std::size_t last_level_cache_bytes() { return bench::cache_sizes().last_level; }

// Elements per array that keep the triad out of the cache: 4 x the last-level cache, and at
// least 8 Mi (64 MiB) when the OS reports no cache size.
inline std::size_t triad_default_elements() {
  return std::max<std::size_t>(std::size_t{8} << 20, 4 * last_level_cache_bytes() / sizeof(double));
}

struct TriadResult {
  double bytes_per_second = 0;  // best repetition, STREAM byte count
  double best_seconds = 0;
  std::size_t elements = 0;  // per array
  unsigned threads = 0;
  int repetitions = 0;
};

namespace detail {
// Not inlined, so the compiler cannot see that `a` is never read and drop the stores; the
// restrict pointers let it vectorise the loop.
[[gnu::noinline]] inline void triad_chunk(double* __restrict a, const double* __restrict b,
                                          const double* __restrict c, double s,
                                          std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

struct FreeDeleter {
  void operator()(double* p) const noexcept { std::free(p); }
};
// `n` doubles, uninitialised, aligned to a huge page and advised onto transparent huge pages,
// as ordo's large locations are.
inline std::unique_ptr<double[], FreeDeleter> huge_array(std::size_t n) {
  constexpr std::size_t kHuge = ordo::bench::kHugePageBytes;
  const std::size_t bytes = (n * sizeof(double) + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, bytes);
  if (p == nullptr) throw std::bad_alloc();
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  return std::unique_ptr<double[], FreeDeleter>(static_cast<double*>(p));
}
}  // namespace detail

// Measures triad bandwidth with `threads` threads over three arrays of `elements` doubles,
// `repetitions` times (the first one is a warm-up and is not counted when there are more).
inline TriadResult stream_triad(std::size_t elements, unsigned threads, int repetitions = 5) {
  threads = std::max(1u, threads);
  repetitions = std::max(1, repetitions);
  elements = std::max<std::size_t>(elements, threads);
  // Untouched memory: the first touch happens in the owning thread. On huge pages where the
  // system allows, as ordo's own large locations are (runtime/graph.cpp): the bound is then
  // the machine's, not that of its 4 KiB page walks.
  auto a = detail::huge_array(elements), b = detail::huge_array(elements),
       c = detail::huge_array(elements);
  std::vector<double> seconds(static_cast<std::size_t>(repetitions), 0.0);
  std::barrier sync(static_cast<std::ptrdiff_t>(threads));

  auto body = [&](unsigned t) {
    const std::size_t lo = elements * t / threads, hi = elements * (t + 1) / threads;
    std::fill(a.get() + lo, a.get() + hi, 0.0);
    std::fill(b.get() + lo, b.get() + hi, 1.0);
    std::fill(c.get() + lo, c.get() + hi, 2.0);
    for (int r = 0; r < repetitions; ++r) {
      sync.arrive_and_wait();
      const auto start = std::chrono::steady_clock::now();
      detail::triad_chunk(a.get() + lo, b.get() + lo, c.get() + lo, 3.0, hi - lo);
      sync.arrive_and_wait();
      if (t == 0)
        seconds[static_cast<std::size_t>(r)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(body, t);
    body(0);
  }
  auto first = seconds.begin() + (repetitions > 1 ? 1 : 0);
  const double best = *std::min_element(first, seconds.end());
  TriadResult out;
  out.best_seconds = best;
  out.bytes_per_second = 3.0 * sizeof(double) * static_cast<double>(elements) / best;
  out.elements = elements;
  out.threads = threads;
  out.repetitions = repetitions;
  return out;
}

// Triad bandwidth in bytes per second with `threads` threads, best of 5, arrays of
// triad_default_elements() (the form the stencil apps call for their bandwidth_fraction).
inline double stream_triad_bytes_per_second(unsigned threads) {
  return stream_triad(triad_default_elements(), threads, 5).bytes_per_second;
}

}  // namespace ordo::app
