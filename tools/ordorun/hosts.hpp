// Hosts: the --hosts list ("h1:n1,h2:n2") as (host, count) entries, and what is left of it
// once some hosts are found down, for the relaunches of --restarts (main.cpp).
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ordorun {

// Thrown for command-line options that cannot work: ordorun says why and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The most ranks a job may ask for (-n or the sum of --hosts) before the host check
// (host_limits.hpp) looks at what they need: bounds the plan ordorun builds to tell.
inline constexpr int max_ranks = 1 << 20;

struct HostEntry {
  std::string host;
  int count = 1;  // ranks on it
  bool operator==(const HostEntry&) const = default;
};

// Reads "h1:n1,h2:n2" ("h" alone: one rank), in order; a host may appear more than once.
// Throws UsageError for an empty list or entry, a count that is not a number >= 1, and more
// than max_ranks ranks in all.
std::vector<HostEntry> parse_hosts(const std::string& list);

// The inverse of parse_hosts: "h1:n1,h2:n2".
std::string format_hosts(const std::vector<HostEntry>& hosts);

// The sum of the counts.
int total_ranks(const std::vector<HostEntry>& hosts);

// `hosts` without the entries of every host in `down`, in their order. When none remains,
// `hosts` is empty and `why_none` says which hosts were down.
struct Remaining {
  std::vector<HostEntry> hosts;
  std::string why_none;
};
Remaining leave_out(const std::vector<HostEntry>& hosts, const std::set<std::string>& down);

// "host b" or "hosts a, b", for messages.
std::string name_hosts(const std::set<std::string>& hosts);

}  // namespace ordorun
