// ordorun's --hosts list (tools/ordorun/hosts.hpp): parsed into (host, count) entries in
// order, refused with a message naming the entry when it cannot be one, and what a relaunch
// of --restarts runs on once some hosts are found down.
#include <catch2/catch.hpp>

#include "hosts.hpp"

using namespace ordorun;

namespace {

using Hosts = std::vector<HostEntry>;

}  // namespace

TEST_CASE("--hosts: entries in order, a host alone is one rank") {
  CHECK(parse_hosts("a:2,b:3") == Hosts{{"a", 2}, {"b", 3}});
  CHECK(parse_hosts("node7") == Hosts{{"node7", 1}});
  CHECK(parse_hosts("a,b:4,a:1") == Hosts{{"a", 1}, {"b", 4}, {"a", 1}});
  // The count is after the last ':', so an IPv6-ish name keeps its colons.
  CHECK(parse_hosts("fe80::1:2") == Hosts{{"fe80::1", 2}});
  CHECK(total_ranks(parse_hosts("a:2,b:3")) == 5);
  CHECK(format_hosts(parse_hosts("a:2,b,c:7")) == "a:2,b:1,c:7");
}

TEST_CASE("--hosts: what cannot be an entry is refused, naming it") {
  auto refused = [](const std::string& list, const std::string& said) {
    INFO("--hosts " << list);
    CHECK_THROWS_WITH(parse_hosts(list), Catch::Contains(said));
  };
  refused("", "--hosts is empty");
  refused("a:1,,b:1", "empty entry");
  refused(",a:1", "empty entry");
  refused("a:x", "entry 'a:x': the count after ':' is not a number");
  refused("a:", "entry 'a:'");
  refused("a:-1", "entry 'a:-1'");
  refused("a:1234567", "entry 'a:1234567'");
  refused("a:0", "entry 'a:0' needs a host name and a count >= 1");
  refused(":3", "entry ':3' needs a host name");
  refused("a:999999,b:999999", "more than " + std::to_string(max_ranks) + " ranks");
  CHECK_THROWS_AS(parse_hosts("a:0"), UsageError);
}

TEST_CASE("a relaunch leaves out the hosts found down, in order, with their ranks") {
  const Hosts hosts = parse_hosts("a:2,b:2,c:1");
  auto rest = leave_out(hosts, {"b"});
  CHECK(rest.hosts == Hosts{{"a", 2}, {"c", 1}});
  CHECK(rest.why_none.empty());
  CHECK(total_ranks(rest.hosts) == 3);
  // Nothing down, or only hosts the list does not hold: the list as it was.
  CHECK(leave_out(hosts, {}).hosts == hosts);
  CHECK(leave_out(hosts, {"z"}).hosts == hosts);
  // A host named twice goes with every entry of it.
  CHECK(leave_out(parse_hosts("a:1,b:1,a:3"), {"a"}).hosts == Hosts{{"b", 1}});
  CHECK(leave_out(hosts, {"a", "c"}).hosts == Hosts{{"b", 2}});
}

TEST_CASE("when every host is down, none remains and the reason names them") {
  auto rest = leave_out(parse_hosts("a:2,b:2"), {"a", "b"});
  CHECK(rest.hosts.empty());
  CHECK_THAT(rest.why_none, Catch::Contains("every host of the job was found down") &&
                                Catch::Contains("hosts a, b"));
  rest = leave_out(parse_hosts("solo:4"), {"solo", "other"});
  CHECK(rest.hosts.empty());
  CHECK_THAT(rest.why_none, Catch::Contains("(host solo)"));
  CHECK_FALSE(leave_out({}, {"a"}).why_none.empty());
}

TEST_CASE("hosts are named for messages") {
  CHECK(name_hosts({"b"}) == "host b");
  CHECK(name_hosts({"b", "a"}) == "hosts a, b");
}
