#include "graph_impl.hpp"

namespace ordo {

std::uint64_t Context::iteration() const { return impl_.instance.iteration; }
unsigned Context::worker() const { return impl_.instance.worker; }

void* Context::bytes(std::uint32_t location, Mode mode, const std::type_info& type) const {
  const rt::Instance& inst = impl_.instance;
  const rt::TaskDesc& task = inst.graph->tasks()[inst.task];
  for (const rt::AccessDesc& a : task.accesses) {
    if (a.location != location) continue;
    const rt::LocationDesc& loc = inst.graph->locations()[location];
    if (mode == Mode::write && a.mode != rt::Mode::write)
      throw Error("task '" + task.name + "' writes location '" + loc.name +
                  "' but declared it with read(); declare it with write()");
    if (*loc.type != type)
      throw Error("task '" + task.name + "' accesses location '" + loc.name +
                  "' with another element type than it was declared with");
    return inst.graph->data(location);
  }
  const auto& locs = inst.graph->locations();
  std::string what;  // built with append: GCC 12 warns falsely on "'" + std::string
  if (location < locs.size())
    what.append("'").append(locs[location].name).append("'");
  else
    what.append("#").append(std::to_string(location));
  throw Error("task '" + task.name + "' accesses location " + what +
              ", which it did not declare; add ordo::read() or ordo::write() of it to the task's "
              "accesses");
}

}  // namespace ordo
