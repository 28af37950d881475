// The only file of ordo that touches hwloc (ORDO_HAVE_HWLOC is set by meson when found).
#include "scheduler/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <thread>

#ifdef ORDO_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace ordo::sched {

std::vector<unsigned> parse_unit_list(const std::string& s) {
  std::vector<unsigned> out;
  auto bad = [&] {
    return std::invalid_argument("'" + s + "' is not a list of processing units; write OS "
                                 "indices and ranges separated by commas, e.g. 0,2,4-7");
  };
  std::size_t i = 0;
  auto number = [&] {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') throw bad();
    unsigned long x = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      x = x * 10 + static_cast<unsigned long>(s[i++] - '0');
      if (x > 1u << 20) throw bad();
    }
    return static_cast<unsigned>(x);
  };
  for (;;) {
    unsigned a = number(), b = a;
    if (i < s.size() && s[i] == '-') {
      ++i;
      b = number();
      if (b < a) throw bad();
    }
    for (unsigned x = a; x <= b; ++x) out.push_back(x);
    if (i == s.size()) return out;
    if (s[i++] != ',') throw bad();
  }
}

#ifdef ORDO_HAVE_HWLOC

struct Topology::Hw {
  hwloc_topology_t topo = nullptr;
  std::vector<hwloc_obj_t> pu_objs;    // parallel to pus_
  std::vector<hwloc_obj_t> node_objs;  // by logical index
  ~Hw() {
    if (topo) hwloc_topology_destroy(topo);
  }
};

namespace {

std::string load_error(const std::string& source, const std::string& what) {
  return "cannot load topology '" + source + "': " + what +
         "; give \"synthetic:<hwloc synthetic description>\" (see lstopo -i) or "
         "\"xml:<file written by lstopo>\", or leave it empty for this machine";
}

}  // namespace

// "one-node": this machine (as for an empty source, and bound alike) with every unit counted on
// one NUMA node, so that the pool runs flat: ORDO_NUMA_PLACEMENT=off, for measuring what the
// placement on several nodes gives (docs/scheduler.md).
Topology::Topology(const std::string& given) : source_(given) {
  const bool one_node = given == "one-node";
  const std::string& source = one_node ? std::string() : given;
  auto hw = std::make_unique<Hw>();
  if (hwloc_topology_init(&hw->topo) != 0) {
    hw->topo = nullptr;
    if (!source.empty()) throw std::invalid_argument(load_error(source, "hwloc init failed"));
    fallback_reason_ = "hwloc could not be initialised";
    load_flat(std::max(1u, std::thread::hardware_concurrency()));
    return;
  }
  if (source.rfind("synthetic:", 0) == 0) {
    if (hwloc_topology_set_synthetic(hw->topo, source.c_str() + 10) != 0)
      throw std::invalid_argument(load_error(source, "hwloc rejects the synthetic description"));
  } else if (source.rfind("xml:", 0) == 0) {
    if (hwloc_topology_set_xml(hw->topo, source.c_str() + 4) != 0)
      throw std::invalid_argument(load_error(source, "hwloc cannot read that XML file"));
  } else if (!source.empty()) {
    throw std::invalid_argument(load_error(source, "unknown kind"));
  }
  if (hwloc_topology_load(hw->topo) != 0) {
    if (!source.empty()) throw std::invalid_argument(load_error(source, "hwloc_topology_load failed"));
    fallback_reason_ = "hwloc could not read this machine's topology";
    load_flat(std::max(1u, std::thread::hardware_concurrency()));
    return;
  }
  // Also false for this machine when HWLOC_XMLFILE or HWLOC_SYNTHETIC redirect hwloc.
  this_system_ = hwloc_topology_is_thissystem(hw->topo) != 0;

  const int nnodes = one_node ? std::min(1, hwloc_get_nbobjs_by_type(hw->topo, HWLOC_OBJ_NUMANODE))
                              : hwloc_get_nbobjs_by_type(hw->topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnodes; ++i)
    hw->node_objs.push_back(hwloc_get_obj_by_type(hw->topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i)));
  nodes_ = std::max(1, nnodes);
  cores_ = static_cast<unsigned>(std::max(0, hwloc_get_nbobjs_by_type(hw->topo, HWLOC_OBJ_CORE)));

  const int npus = hwloc_get_nbobjs_by_type(hw->topo, HWLOC_OBJ_PU);
  for (int i = 0; i < npus; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(hw->topo, HWLOC_OBJ_PU, static_cast<unsigned>(i));
    ProcessingUnit u;
    u.os_index = pu->os_index;
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(hw->topo, HWLOC_OBJ_CORE, pu);
    // A machine hwloc reports without cores: each unit is its own core.
    u.core = core ? core->logical_index : static_cast<unsigned>(i);
    for (std::size_t n = 0; n < hw->node_objs.size() && !one_node; ++n)
      if (hwloc_bitmap_intersects(hw->node_objs[n]->cpuset, pu->cpuset)) {
        u.node = static_cast<unsigned>(n);
        break;
      }
    pus_.push_back(u);
    hw->pu_objs.push_back(pu);
  }
  if (cores_ == 0) cores_ = static_cast<unsigned>(pus_.size());
  if (pus_.empty()) {
    if (!source.empty()) throw std::invalid_argument(load_error(source, "it has no processing unit"));
    fallback_reason_ = "hwloc found no processing unit";
    load_flat(std::max(1u, std::thread::hardware_concurrency()));
    return;
  }
  hw_ = std::move(hw);
}

Topology::~Topology() = default;

bool Topology::hwloc_available() { return true; }

int Topology::affinity(std::size_t a, std::size_t b) const {
  if (!hw_) return 0;
  if (a == b) return hw_->pu_objs[a]->depth;
  hwloc_obj_t common = hwloc_get_common_ancestor_obj(hw_->topo, hw_->pu_objs[a], hw_->pu_objs[b]);
  return common ? common->depth : 0;
}

bool Topology::bind_thread(std::size_t pu) const {
  if (!hw_ || !this_system_) return false;
  return hwloc_set_cpubind(hw_->topo, hw_->pu_objs[pu]->cpuset, HWLOC_CPUBIND_THREAD) == 0;
}

bool Topology::bind_thread(const std::vector<std::size_t>& pus) const {
  if (!hw_ || !this_system_ || pus.empty()) return false;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (std::size_t pu : pus) hwloc_bitmap_or(set, set, hw_->pu_objs[pu]->cpuset);
  const bool ok = hwloc_set_cpubind(hw_->topo, set, HWLOC_CPUBIND_THREAD) == 0;
  hwloc_bitmap_free(set);
  return ok;
}

namespace {

// The whole pages inside [data, data + bytes): binding a partial page would move a neighbour.
bool whole_pages(const void* data, std::size_t bytes, std::uintptr_t& begin, std::size_t& len) {
  const std::uintptr_t page = 4096;
  auto p = reinterpret_cast<std::uintptr_t>(data);  // safety: address arithmetic only
  begin = (p + page - 1) / page * page;
  std::uintptr_t end = (p + bytes) / page * page;
  if (end <= begin) return false;
  len = end - begin;
  return true;
}

}  // namespace

Binding Topology::bind_memory(void* data, std::size_t bytes, unsigned node) const {
  if (!hw_) return Binding::no_hwloc;
  if (!this_system_) return Binding::not_this_system;
  std::uintptr_t begin = 0;
  std::size_t len = 0;
  if (!whole_pages(data, bytes, begin, len)) return Binding::too_small;
  if (node >= hw_->node_objs.size()) return Binding::failed;
  // safety: begin lies inside the caller's area (page-rounded inwards).
  int rc = hwloc_set_area_membind(hw_->topo, reinterpret_cast<void*>(begin), len,
                                  hw_->node_objs[node]->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_MIGRATE | HWLOC_MEMBIND_BYNODESET);
  return rc == 0 ? Binding::bound : Binding::failed;
}

int Topology::memory_node(const void* data, std::size_t bytes) const {
  if (!hw_ || !this_system_) return -1;
  std::uintptr_t begin = 0;
  std::size_t len = 0;
  if (!whole_pages(data, bytes, begin, len)) return -1;
  hwloc_nodeset_t set = hwloc_bitmap_alloc();
  int found = -1;
  // safety: begin lies inside the caller's area (page-rounded inwards).
  if (hwloc_get_area_memlocation(hw_->topo, reinterpret_cast<const void*>(begin), 4096, set,
                                 HWLOC_MEMBIND_BYNODESET) == 0) {
    for (std::size_t n = 0; n < hw_->node_objs.size(); ++n)
      if (hwloc_bitmap_isset(set, hw_->node_objs[n]->os_index)) {
        found = static_cast<int>(n);
        break;
      }
  }
  hwloc_bitmap_free(set);
  return found;
}

#else  // no hwloc: a flat machine

struct Topology::Hw {};

Topology::Topology(const std::string& source) : source_(source) {
  if (!source.empty() && source != "one-node")
    throw std::invalid_argument("topology '" + source +
                                "' needs hwloc, and this build of ordo has none; install "
                                "libhwloc-dev and rebuild, or leave the topology empty");
  fallback_reason_ = "built without hwloc";
  load_flat(std::max(1u, std::thread::hardware_concurrency()));
}

Topology::~Topology() = default;
bool Topology::hwloc_available() { return false; }
int Topology::affinity(std::size_t, std::size_t) const { return 0; }
bool Topology::bind_thread(std::size_t) const { return false; }
bool Topology::bind_thread(const std::vector<std::size_t>&) const { return false; }
Binding Topology::bind_memory(void*, std::size_t, unsigned) const { return Binding::no_hwloc; }
int Topology::memory_node(const void*, std::size_t) const { return -1; }

#endif

void Topology::load_flat(unsigned units) {
  pus_.clear();
  for (unsigned i = 0; i < units; ++i) pus_.push_back({i, i, 0});
  cores_ = units;
  nodes_ = 1;
  this_system_ = true;
}

std::string Topology::describe() const {
  std::string s = !source_.empty() ? source_
                  : this_system_   ? std::string("this machine")
                                   : std::string("from the environment (HWLOC_SYNTHETIC or HWLOC_XMLFILE)");
  s += hw_ ? " (hwloc)" : " (flat: " + fallback_reason_ + ")";
  s += ": " + std::to_string(nodes_) + " NUMA node(s), " + std::to_string(cores_) + " core(s), " +
       std::to_string(pus_.size()) + " processing unit(s)";
  if (!this_system_) s += ", not this system: nothing is bound";
  return s;
}

}  // namespace ordo::sched
