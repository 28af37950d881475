// ordorun's check of what the host can start (tools/ordorun/host_limits.hpp), on made-up
// limits: each resource refuses with its own message and the largest count that fits, and a
// count that fits is let through.
#include <catch2/catch.hpp>

#include "host_limits.hpp"

using namespace ordorun;

namespace {

HostLimits roomy() {
  HostLimits h;
  h.open_files = 1 << 20;
  h.tasks_free = 1 << 20;
  h.memory_available = std::uint64_t{1} << 40;
  h.known_tasks = h.known_memory = true;
  return h;
}

}  // namespace

TEST_CASE("ranks that fit every limit are let through") {
  CHECK_FALSE(refuse_ranks(1, 1, roomy()));
  CHECK_FALSE(refuse_ranks(64, 64, roomy()));
  HostLimits unknown = roomy();
  unknown.known_tasks = unknown.known_memory = false;
  unknown.tasks_free = unknown.memory_available = 0;  // not read: not held against the job
  CHECK_FALSE(refuse_ranks(8, 8, unknown));
}

TEST_CASE("too few open files: refused with the hard limit and the most that fit") {
  HostLimits h = roomy();
  h.open_files = 1024;
  h.files_open = 20;  // inherited descriptors count against the limit too
  const std::uint64_t most = (1024 - 20 - kFilesBase) / kFilesPerRank;
  CHECK_FALSE(refuse_ranks(most, most, h));
  auto why = refuse_ranks(most + 1, most + 1, h);
  REQUIRE(why);
  CHECK_THAT(*why, Catch::Contains("open files") && Catch::Contains("ulimit -Hn") &&
                       Catch::Contains("at most " + std::to_string(most) + " ranks"));
  // Remote ranks cost ordorun descriptors too.
  CHECK(refuse_ranks(most + 1, 0, h));
}

TEST_CASE("too few threads or too little memory on this host: refused, remote ranks exempt") {
  HostLimits h = roomy();
  h.tasks_free = 10 * kThreadsPerRank + 3;
  CHECK_FALSE(refuse_ranks(10, 10, h));
  auto why = refuse_ranks(11, 11, h);
  REQUIRE(why);
  CHECK_THAT(*why, Catch::Contains("threads") && Catch::Contains("at most 10 ranks here") &&
                       Catch::Contains("--hosts"));
  CHECK_FALSE(refuse_ranks(11, 10, h));  // one of them on another host

  h = roomy();
  h.memory_available = 100 * kBytesPerRank;
  CHECK_FALSE(refuse_ranks(100, 100, h));
  why = refuse_ranks(101, 101, h);
  REQUIRE(why);
  CHECK_THAT(*why, Catch::Contains("memory") && Catch::Contains("at most 100 ranks here"));
}
