#include "scheduler/core_share.hpp"

#include <algorithm>

namespace ordo::sched {

namespace {

// Logical core numbers of `pus`, each once, in order.
std::vector<unsigned> cores_of(const std::vector<ProcessingUnit>& pus) {
  std::vector<unsigned> cores;
  for (const ProcessingUnit& u : pus)
    if (std::find(cores.begin(), cores.end(), u.core) == cores.end()) cores.push_back(u.core);
  return cores;
}

CoreShare everything(const std::vector<ProcessingUnit>& pus) {
  CoreShare s;
  for (std::size_t i = 0; i < pus.size(); ++i) s.pus.push_back(i);
  s.cores = cores_of(pus).size();
  return s;
}

std::string ranges(std::vector<unsigned> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

CoreShare share_of_cores(const std::vector<ProcessingUnit>& pus, unsigned nodes,
                         unsigned local_rank, unsigned local_size) {
  if (local_size <= 1 || local_rank >= local_size || pus.empty()) return everything(pus);
  const std::vector<unsigned> cores = cores_of(pus);
  if (local_size > cores.size()) {
    CoreShare s = everything(pus);
    s.oversubscribed = true;
    return s;
  }
  // Whole nodes when the processes divide them and every node has a unit to run on.
  bool every_node_has_units = nodes > 1;
  for (unsigned n = 0; every_node_has_units && n < nodes; ++n)
    every_node_has_units = std::any_of(pus.begin(), pus.end(),
                                       [&](const ProcessingUnit& u) { return u.node == n; });
  CoreShare s;
  if (every_node_has_units && nodes % local_size == 0) {
    const unsigned per = nodes / local_size, first = local_rank * per;
    for (std::size_t i = 0; i < pus.size(); ++i)
      if (pus[i].node >= first && pus[i].node < first + per) s.pus.push_back(i);
    s.whole_nodes = true;
  } else {
    const std::size_t c = cores.size(), k = local_size, j = local_rank;
    const std::vector<unsigned> mine(cores.begin() + static_cast<std::ptrdiff_t>(j * c / k),
                                     cores.begin() + static_cast<std::ptrdiff_t>((j + 1) * c / k));
    for (std::size_t i = 0; i < pus.size(); ++i)
      if (std::find(mine.begin(), mine.end(), pus[i].core) != mine.end()) s.pus.push_back(i);
  }
  std::vector<ProcessingUnit> units;
  for (std::size_t i : s.pus) units.push_back(pus[i]);
  s.cores = cores_of(units).size();
  return s;
}

std::string describe_share(const CoreShare& share, const std::vector<ProcessingUnit>& pus) {
  std::vector<unsigned> cores, nodes, os;
  for (std::size_t i : share.pus) {
    cores.push_back(pus[i].core);
    nodes.push_back(pus[i].node);
    os.push_back(pus[i].os_index);
  }
  return "cores " + ranges(cores) + " (pu " + ranges(os) + ", node " + ranges(nodes) +
         (share.whole_nodes ? ", whole nodes" : "") + ")";
}

}  // namespace ordo::sched
