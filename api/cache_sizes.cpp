// bench::cache_sizes: the one place ordo asks the machine for its cache sizes (the layer's
// tiles and in-place slabs, the apps' bandwidth bound). Built on the standard library only.
#include <ordo/bench.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace ordo::bench {

namespace {

// Size of cpu0's data or unified cache of `level` (0: the largest of any level) as the
// kernel reports it in sysfs; 0 when it reports none. The C library's sysconf reads cpuid,
// which under a hypervisor may describe the host rather than the guest, so sysfs comes first.
std::size_t sysfs_cache_bytes(int level) {
  std::size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(dir + "level"), tf(dir + "type"), sf(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lf >> l) || !(tf >> type) || !(sf >> size) || type == "Instruction") continue;
    if (level != 0 && l != level) continue;
    std::size_t mult = 1;
    if (!size.empty() && size.back() == 'K') mult = std::size_t{1} << 10;
    if (!size.empty() && size.back() == 'M') mult = std::size_t{1} << 20;
    if (mult != 1) size.pop_back();
    if (size.empty() || size.size() > 12 || size.find_first_not_of("0123456789") != std::string::npos)
      continue;
    best = std::max(best, static_cast<std::size_t>(std::stoull(size)) * mult);
  }
  return best;
}

std::size_t sysconf_bytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? static_cast<std::size_t>(v) : 0;
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = [] {
    CacheSizes c;
    c.l2 = sysfs_cache_bytes(2);
    c.last_level = sysfs_cache_bytes(0);
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
    if (c.l2 == 0) c.l2 = sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
    if (c.last_level == 0)
      c.last_level = std::max(sysconf_bytes(_SC_LEVEL3_CACHE_SIZE), c.l2);
#endif
    return c;
  }();
  return sizes;
}

}  // namespace ordo::bench
