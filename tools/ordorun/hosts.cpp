#include "hosts.hpp"

#include <cstddef>
#include <sstream>

namespace ordorun {

std::vector<HostEntry> parse_hosts(const std::string& list) {
  if (list.empty()) throw UsageError("--hosts is empty; write h1:n1,h2:n2");
  std::vector<HostEntry> out;
  std::size_t total = 0;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw UsageError("--hosts has an empty entry; write h1:n1,h2:n2");
    HostEntry e{item, 1};
    if (const auto colon = item.rfind(':'); colon != std::string::npos) {
      e.host = item.substr(0, colon);
      const std::string digits = item.substr(colon + 1);
      const bool numeric = !digits.empty() && digits.size() <= 6 &&
                           digits.find_first_not_of("0123456789") == std::string::npos;
      if (!numeric)
        throw UsageError("--hosts entry '" + item +
                         "': the count after ':' is not a number of ranks");
      e.count = std::stoi(digits);
    }
    if (e.host.empty() || e.count < 1)
      throw UsageError("--hosts entry '" + item + "' needs a host name and a count >= 1");
    total += std::size_t(e.count);
    if (total > std::size_t(max_ranks))
      throw UsageError("--hosts asks for more than " + std::to_string(max_ranks) + " ranks");
    out.push_back(std::move(e));
  }
  return out;
}

std::string format_hosts(const std::vector<HostEntry>& hosts) {
  std::string out;
  for (const HostEntry& e : hosts)
    out += (out.empty() ? "" : ",") + e.host + ":" + std::to_string(e.count);
  return out;
}

int total_ranks(const std::vector<HostEntry>& hosts) {
  int n = 0;
  for (const HostEntry& e : hosts) n += e.count;
  return n;
}

std::string name_hosts(const std::set<std::string>& hosts) {
  std::string out = hosts.size() == 1 ? "host " : "hosts ";
  bool first = true;
  for (const std::string& h : hosts) {
    out += (first ? "" : ", ") + h;
    first = false;
  }
  return out;
}

Remaining leave_out(const std::vector<HostEntry>& hosts, const std::set<std::string>& down) {
  Remaining r;
  for (const HostEntry& e : hosts)
    if (down.count(e.host) == 0) r.hosts.push_back(e);
  if (!r.hosts.empty()) return r;
  std::set<std::string> given;
  for (const HostEntry& e : hosts) given.insert(e.host);
  r.why_none = given.empty() ? "no host was given"
                             : "every host of the job was found down (" + name_hosts(given) + ")";
  return r;
}

}  // namespace ordorun
