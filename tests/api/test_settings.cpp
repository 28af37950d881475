// Every setting of a Runtime: the RuntimeOptions field wins, else its environment variable,
// else the built-in default; an unusable value is an Error naming the variable or field. And
// the launcher's variables as the bootstrap reads them (who am I: rank, size, local rank and
// local size). The settings are resolved in one file (api/settings.cpp); this test reaches it
// through the library's internal header.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <string>

#include "api/settings.hpp"

using namespace ordo;
using Catch::Contains;

namespace {

// Sets environment variables for its lifetime (nullptr: unset), restoring them after.
class Env {
 public:
  Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value)
        ::setenv(name, value, 1);
      else
        ::unsetenv(name);
    }
  }
  ~Env() {
    for (auto& [name, value] : saved_)
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// Every variable resolve() reads, unset: the built-in defaults.
Env clean() {
  return Env{{"ORDO_PUS", nullptr},
             {"ORDO_VERBOSE", nullptr},
             {"ORDO_FIBER_STACK", nullptr},
             {"ORDO_TRACE", nullptr},
             {"ORDO_TRACE_BUFFER", nullptr},
             {"ORDO_SHARED_MEMORY", nullptr},
             {"ORDO_PROGRESS_SPIN_US", nullptr},
             {"ORDO_TIMEOUT", nullptr},
             {"ORDO_NET_DEVICES", nullptr},
             {"UCX_RNDV_THRESH", nullptr},
             {"ORDO_STORE", nullptr},
             {"ORDO_RANK", nullptr},
             {"ORDO_SIZE", nullptr},
             {"ORDO_LOCAL_RANK", nullptr},
             {"ORDO_LOCAL_SIZE", nullptr},
             {"ORDO_STORE_TOKEN", nullptr},
             {"PMIX_RANK", nullptr},
             {"PMIX_NAMESPACE", nullptr},
             {"ORDO_CHECKPOINT_DIR", nullptr},
             {"ORDO_CHECKPOINT_EVERY", nullptr},
             {"ORDO_NUMA_PLACEMENT", nullptr}};
}

}  // namespace

TEST_CASE("without options or environment every setting has its built-in default", "[settings]") {
  Env e = clean();
  const detail::Settings s = detail::resolve({});
  CHECK(s.pool.workers == 0);
  CHECK(s.pool.pus.empty());
  CHECK_FALSE(s.pool.verbose);
  CHECK(s.fiber_stack_size == 256 * 1024);
  CHECK(s.trace_path.empty());
  CHECK(s.trace_buffer_events == 65536);
  CHECK_FALSE(s.shared_memory);  // one process alone
  CHECK(s.transport.spin == std::chrono::microseconds(100));
  CHECK(s.startup_timeout == std::chrono::seconds(30));
  CHECK(s.transport.net_devices.empty());
  CHECK_FALSE(s.transport.keep_ucx_rndv_threshold);
  CHECK(s.launch.kind == comm::Launch::Kind::single);
  CHECK(s.checkpoint_dir.empty());
  CHECK(s.checkpoint_every == 0);
}

TEST_CASE("ORDO_NUMA_PLACEMENT=off counts this machine on one node; a typo is refused",
          "[settings]") {
  Env e = clean();
  CHECK(detail::resolve({}).pool.topology.empty());
  for (const char* off : {"0", "off"}) {
    Env set{{"ORDO_NUMA_PLACEMENT", off}};
    CHECK(detail::resolve({}).pool.topology == "one-node");
  }
  for (const char* on : {"1", "on"}) {
    Env set{{"ORDO_NUMA_PLACEMENT", on}};
    CHECK(detail::resolve({}).pool.topology.empty());
  }
  Env set{{"ORDO_NUMA_PLACEMENT", "no"}};
  CHECK_THROWS_WITH(detail::resolve({}),
                    Catch::Contains("ORDO_NUMA_PLACEMENT='no'") && Catch::Contains("0 (or off)"));
}

TEST_CASE("the environment gives each setting's default", "[settings]") {
  Env e = clean();
  Env set{{"ORDO_PUS", "0,2-3"},          {"ORDO_VERBOSE", "1"},
          {"ORDO_FIBER_STACK", "1M"},     {"ORDO_TRACE", "/tmp/x.trace"},
          {"ORDO_TRACE_BUFFER", "8"},     {"ORDO_SHARED_MEMORY", "on"},
          {"ORDO_PROGRESS_SPIN_US", "0"}, {"ORDO_TIMEOUT", "2.5"},
          {"ORDO_NET_DEVICES", "lo"},     {"UCX_RNDV_THRESH", "8"},
          {"ORDO_CHECKPOINT_DIR", "/tmp/ckpt"}, {"ORDO_CHECKPOINT_EVERY", "25"}};
  const detail::Settings s = detail::resolve({});
  CHECK(s.checkpoint_dir == "/tmp/ckpt");
  CHECK(s.checkpoint_every == 25);
  CHECK(s.pool.pus == std::vector<unsigned>{0, 2, 3});
  CHECK(s.pool.verbose);
  CHECK(s.fiber_stack_size == 1 << 20);
  CHECK(s.trace_path == "/tmp/x.trace");
  CHECK(s.trace_buffer_events == 8);
  CHECK(s.shared_memory);
  CHECK(s.transport.spin == std::chrono::microseconds(0));
  CHECK(s.startup_timeout == std::chrono::milliseconds(2500));
  CHECK(s.transport.net_devices == "lo");
  CHECK(s.transport.keep_ucx_rndv_threshold);
  {
    Env off{{"ORDO_VERBOSE", "0"}, {"ORDO_SHARED_MEMORY", "0"}};
    const detail::Settings t = detail::resolve({});
    CHECK_FALSE(t.pool.verbose);
    CHECK_FALSE(t.shared_memory);
  }
}

TEST_CASE("a RuntimeOptions field wins over its environment variable", "[settings]") {
  Env e = clean();
  Env set{{"ORDO_PUS", "0"},          {"ORDO_VERBOSE", "1"},       {"ORDO_FIBER_STACK", "1M"},
          {"ORDO_TRACE", "/tmp/env"}, {"ORDO_TRACE_BUFFER", "8"},  {"ORDO_SHARED_MEMORY", "1"},
          {"ORDO_PROGRESS_SPIN_US", "7"}, {"ORDO_TIMEOUT", "9"},   {"ORDO_NET_DEVICES", "eth9"},
          {"ORDO_CHECKPOINT_DIR", "/tmp/env"}, {"ORDO_CHECKPOINT_EVERY", "9"}};
  RuntimeOptions o;
  o.checkpoint_dir = "/tmp/option";
  o.checkpoint_every = 4;
  o.workers = 3;
  o.processing_units = {5, 4};
  o.verbose = false;
  o.fiber_stack_size = 64 * 1024;
  o.trace_path = "/tmp/option";
  o.trace_buffer_events = 16;
  o.shared_memory = false;
  o.transport.progress_spin = std::chrono::microseconds(3);
  o.transport.startup_timeout = std::chrono::seconds(4);
  o.transport.net_devices = "lo";
  const detail::Settings s = detail::resolve(o);
  CHECK(s.pool.workers == 3);
  CHECK(s.pool.pus == std::vector<unsigned>{5, 4});
  CHECK_FALSE(s.pool.verbose);
  CHECK(s.fiber_stack_size == 64 * 1024);
  CHECK(s.trace_path == "/tmp/option");
  CHECK(s.trace_buffer_events == 16);
  CHECK_FALSE(s.shared_memory);
  CHECK(s.transport.spin == std::chrono::microseconds(3));
  CHECK(s.startup_timeout == std::chrono::seconds(4));
  CHECK(s.transport.net_devices == "lo");
  CHECK(s.checkpoint_dir == "/tmp/option");
  CHECK(s.checkpoint_every == 4);
}

TEST_CASE("an unusable setting is an Error naming the variable or field", "[settings]") {
  Env e = clean();
  struct Case {
    const char* name;
    const char* value;
    const char* says;
  };
  for (const Case& c : {Case{"ORDO_PUS", "3-1", "ORDO_PUS='3-1' is not a list of processing units"},
                        Case{"ORDO_FIBER_STACK", "lots", "ORDO_FIBER_STACK='lots' is not a size"},
                        Case{"ORDO_TRACE_BUFFER", "1", "ORDO_TRACE_BUFFER='1' is not a number"},
                        Case{"ORDO_TRACE_BUFFER", "0x10", "ORDO_TRACE_BUFFER='0x10' is not"},
                        Case{"ORDO_SHARED_MEMORY", "maybe", "ORDO_SHARED_MEMORY='maybe' is not understood"},
                        Case{"ORDO_PROGRESS_SPIN_US", "abc", "ORDO_PROGRESS_SPIN_US='abc' is not a number"},
                        Case{"ORDO_PROGRESS_SPIN_US", "-5", "ORDO_PROGRESS_SPIN_US='-5' is not"},
                        Case{"ORDO_TIMEOUT", "0", "ORDO_TIMEOUT='0' is not a positive number"},
                        Case{"ORDO_CHECKPOINT_EVERY", "0", "ORDO_CHECKPOINT_EVERY='0' is not a number"},
                        Case{"ORDO_CHECKPOINT_EVERY", "1e3", "ORDO_CHECKPOINT_EVERY='1e3' is not"}}) {
    INFO(c.name << "=" << c.value);
    Env bad{{c.name, c.value}};
    CHECK_THROWS_AS(detail::resolve({}), Error);
    CHECK_THROWS_WITH(detail::resolve({}), Contains(c.says));
  }
  RuntimeOptions o;
  o.trace_buffer_events = 1;
  CHECK_THROWS_WITH(detail::resolve(o), Contains("RuntimeOptions::trace_buffer_events = 1"));
  o = {};
  o.transport.startup_timeout = std::chrono::milliseconds(-1);
  CHECK_THROWS_WITH(detail::resolve(o), Contains("startup_timeout is negative"));
  // Checkpoints need both a directory and an interval.
  o = {};
  o.checkpoint_every = 5;
  CHECK_THROWS_WITH(detail::resolve(o), Contains("no directory for them"));
  o = {};
  o.checkpoint_dir = "/tmp/ckpt";
  CHECK_THROWS_WITH(detail::resolve(o), Contains("but no interval"));
}

TEST_CASE("the launcher's variables say who this process is", "[settings]") {
  Env e = clean();
  {
    Env store{{"ORDO_STORE", "127.0.0.1:5"}, {"ORDO_RANK", "2"}, {"ORDO_SIZE", "4"},
              {"ORDO_LOCAL_RANK", "0"},      {"ORDO_LOCAL_SIZE", "2"}, {"ORDO_STORE_TOKEN", "t"}};
    const detail::Settings s = detail::resolve({});
    CHECK(s.launch.kind == comm::Launch::Kind::store);
    CHECK(s.launch.rank == 2);
    CHECK(s.launch.size == 4);
    CHECK(s.launch.local_rank == 0);
    CHECK(s.launch.local_size == 2);
    CHECK(s.launch.token == "t");
    CHECK(s.launch.is_one_of_several());
    CHECK(s.shared_memory);  // one rank of several: shared unless told otherwise
  }
  {
    Env one{{"ORDO_STORE", "127.0.0.1:5"}, {"ORDO_RANK", "0"}, {"ORDO_SIZE", "1"}};
    const detail::Settings s = detail::resolve({});
    CHECK_FALSE(s.launch.is_one_of_several());
    CHECK(s.launch.local_size == 1);  // the launcher did not say: alone on its host
  }
  {
    Env pmix{{"PMIX_RANK", "0"}, {"PMIX_NAMESPACE", "x"}};
    CHECK(detail::resolve({}).launch.kind == comm::Launch::Kind::pmix);
    CHECK(detail::resolve({}).launch.is_one_of_several());
  }
  {
    Env half{{"ORDO_STORE", "127.0.0.1:5"}};
    CHECK_THROWS_WITH(detail::resolve({}), Contains("ORDO_RANK or ORDO_SIZE is not"));
  }
  {
    Env bad{{"ORDO_STORE", "127.0.0.1:5"}, {"ORDO_RANK", "x"}, {"ORDO_SIZE", "2"}};
    CHECK_THROWS_WITH(detail::resolve({}), Contains("ORDO_RANK='x'"));
  }
  // The bootstrap checks what the launcher said before it connects.
  CHECK_THROWS_WITH(comm::Bootstrap::store(0, 2, "127.0.0.1:1", std::chrono::milliseconds(100),
                                           "", 2, 2),
                    Contains("local rank 2 of 2"));
}
