// Memory-bandwidth reference for the apps and benchmarks: a short STREAM-triad measurement
// (a[i] = b[i] + s * c[i], 24 bytes per element counted as STREAM counts them) and the size
// of the last-level cache. An app whose grid exceeds the cache reports
//   bandwidth_fraction = (bytes its kernel must move per iteration * iterations / seconds)
//                        / triad bandwidth,
// measured in the same run on the same threads count.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace ordo::app {

// Bytes of the largest data cache the OS reports (0 when it reports none).
inline std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(f >> s) || s.empty()) continue;
    std::size_t mult = 1;
    if (s.back() == 'K') mult = 1024;
    if (s.back() == 'M') mult = 1024 * 1024;
    if (mult != 1) s.pop_back();
    try {
      best = std::max(best, static_cast<std::size_t>(std::stoull(s)) * mult);
    } catch (...) {
    }
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (best == 0) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) best = static_cast<std::size_t>(l3);
  }
#endif
  return best;
}

// Triad bandwidth in bytes per second with `threads` threads, best of a few repetitions over
// arrays four times the last-level cache (at least 8 Mi elements each).
inline double stream_triad_bytes_per_second(unsigned threads) {
  threads = std::max(1u, threads);
  const std::size_t n = std::max<std::size_t>(8u << 20, 4 * last_level_cache_bytes() / 8);
  std::vector<double> a(n), b(n), c(n);
  auto slice = [&](unsigned t, auto&& f) {
    const std::size_t lo = n * t / threads, hi = n * (t + 1) / threads;
    f(lo, hi);
  };
  auto parallel = [&](auto&& f) {
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back([&, t] { slice(t, f); });
    slice(0, f);
    for (auto& th : pool) th.join();
  };
  parallel([&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      b[i] = 1.0;
      c[i] = 2.0;
      a[i] = 0.0;
    }
  });
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    parallel([&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  volatile double sink = a[n / 2];  // keep the stores
  (void)sink;
  return 3.0 * sizeof(double) * static_cast<double>(n) / best;
}

}  // namespace ordo::app
