// A checkpoint is input from outside (docs/checkpoint.md): a manifest or part that is corrupt,
// truncated or lying -- sizes beyond the file, another graph's fingerprint, a part of another
// rank count, a rank's part missing, a FIFO in a file's place, an older format -- is refused by
// Runtime::restart with an ordo::Error naming the mismatch, at once: never a crash, a hang, or an
// allocation of what a size in the file claims. One process: a checkpoint is written, copied,
// damaged one way per case, and restarted from.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <ordo/ordo.hpp>

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kCount = 64;

// Two locations of doubles, each task adding one to its own and reading the other's.
struct Ring {
  ordo::Graph g;
  ordo::Location<double> a = g.location<double>("a", kCount);
  ordo::Location<double> b = g.location<double>("b", kCount);
  Ring() {
    g.task("ta", {ordo::write(a), ordo::read(b)}, [this](ordo::Context& c) {
      auto x = c.write(a);
      for (std::size_t i = 0; i < kCount; ++i) x[i] += 1 + c.read(b)[i] * 0.5;
    });
    g.task("tb", {ordo::write(b), ordo::read(a)}, [this](ordo::Context& c) {
      auto y = c.write(b);
      for (std::size_t i = 0; i < kCount; ++i) y[i] += 2 + c.read(a)[i] * 0.25;
    });
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spill(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}
template <class T>
void poke(std::string& bytes, std::size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

// Offsets in a part (docs/checkpoint.md "Format"): a 48-byte header (magic 8, version 4,
// rank 4, ranks 4, reserved 4, fingerprint 8, iteration 8, records 8), then per location a
// 24-byte table entry (offset 8, bytes 8, name bytes 4, reserved 4), the names ("a", "b"), and
// the locations' bytes.
constexpr std::size_t kVersionAt = 8, kIterationAt = 32, kRecordsAt = 40, kTable = 48, kEntry = 24,
                      kNames = kTable + 2 * kEntry;

// Restarts a fresh Ring from `dir` on its own thread: what Runtime::restart threw, or "no
// error"; a restart that does not return within 20 s ends the test program (a hang).
std::string restart_from(const fs::path& dir) {
  auto f = std::async(std::launch::async, [dir]() -> std::string {
    ordo::Runtime rt({.workers = 1});
    Ring r;
    try {
      rt.restart(r.g, dir.string());
    } catch (const ordo::Error& e) {
      return e.what();
    }
    return "no error";
  });
  if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    FAIL_CHECK("Runtime::restart did not return within 20 s from " << dir);
    std::fflush(nullptr);
    std::_Exit(1);
  }
  return f.get();
}

}  // namespace

TEST_CASE("a damaged or lying checkpoint is refused, naming what does not match", "[checkpoint]") {
  const fs::path root = fs::temp_directory_path() / ("ordo-ckpt-input-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path good = root / "good";
  {
    ::setenv("ORDO_CHECKPOINT_KEEP", "1", 1);
    ordo::Runtime rt({.workers = 1, .checkpoint_dir = good.string(), .checkpoint_every = 2});
    ::unsetenv("ORDO_CHECKPOINT_KEEP");
    Ring r;
    rt.run(r.g, 4);
  }
  fs::path sub;
  for (const auto& e : fs::directory_iterator(good))
    if (e.path().filename() != "lock") sub = e.path().filename();
  REQUIRE(sub.string() == "ckpt-00000000000000000004");  // the one at 2 was removed (keep 1)
  const std::string manifest = slurp(good / sub / "manifest");
  const std::string part = slurp(good / sub / "rank-0.part");
  REQUIRE(part.size() == kNames + 2 + 2 * kCount * 8);
  CHECK(restart_from(good) == "no error");  // the copy below starts from a usable one

  struct Case {
    std::string name;
    std::function<void(const fs::path& dir)> damage;  // dir: the checkpoint's directory
    std::vector<std::string> says;
  };
  auto manifest_is = [](std::string text) {
    return [text](const fs::path& d) { spill(d / "manifest", text); };
  };
  auto part_is = [&part](std::function<void(std::string&)> edit) {
    return [&part, edit](const fs::path& d) {
      std::string p = part;
      edit(p);
      spill(d / "rank-0.part", p);
    };
  };
  auto fifo_at = [](const char* name) {
    return [name](const fs::path& d) {
      fs::remove(d / name);
      REQUIRE(::mkfifo((d / name).c_str(), 0600) == 0);
    };
  };
  std::string other_graph = manifest;
  other_graph.replace(other_graph.find("graph ") + 6, 16, "0123456789abcdef");
  std::string two_ranks = manifest;
  two_ranks.replace(two_ranks.find("ranks 1"), 7, "ranks 2");
  const std::vector<Case> cases = {
      {"garbage manifest",
       manifest_is("hello\n"),
       {"manifest is not an ordo checkpoint manifest", "first line"}},
      {"empty manifest", manifest_is(""), {"manifest is empty"}},
      {"negative iteration",
       manifest_is("ordo checkpoint 2\ngraph 0000000000000000\niteration -4\nranks 1\n"),
       {"third line"}},
      {"iteration beyond 2^64",
       manifest_is(
           "ordo checkpoint 2\ngraph 0000000000000000\niteration 18446744073709551616\nranks 1\n"),
       {"third line"}},
      {"no ranks",
       manifest_is("ordo checkpoint 2\ngraph 0000000000000000\niteration 4\nranks 0\n"),
       {"fourth line"}},
      {"bytes after the manifest",
       manifest_is(manifest + "ranks 7\n"),
       {"8 bytes after its fourth line"}},
      {"manifest of another iteration",
       manifest_is("ordo checkpoint 2\ngraph 0000000000000000\niteration 6\nranks 1\n"),
       {"manifest names iteration 6"}},
      {"another graph's fingerprint",
       manifest_is(other_graph),
       {"belongs to another graph (fingerprint 0123456789abcdef",
        "or another version of ordo wrote it", "or run from the start without restarting"}},
      {"a manifest of more ranks than parts",
       manifest_is(two_ranks),
       {"rank-0.part belongs to another checkpoint (rank 0 of 1"}},
      {"a manifest of an older format",
       [&manifest](const fs::path& d) {
         std::string m = manifest;
         m.replace(m.find("checkpoint 2"), 12, "checkpoint 1");
         spill(d / "manifest", m);
       },
       {"written by an older ordo (checkpoint format 1; this ordo reads format 2)",
        "run from the start"}},
      {"a part of an older format",
       part_is([](std::string& p) { poke<std::uint32_t>(p, kVersionAt, 1); }),
       {"rank-0.part is of checkpoint format 1; this ordo reads format 2"}},
      {"manifest is a FIFO", fifo_at("manifest"), {"manifest: it is a FIFO, not a regular file"}},
      {"part missing",
       [](const fs::path& d) { fs::remove(d / "rank-0.part"); },
       {"rank-0.part is missing"}},
      {"part is a FIFO", fifo_at("rank-0.part"), {"rank-0.part: it is a FIFO, not a regular file"}},
      {"part truncated in its header",
       part_is([](std::string& p) { p.resize(20); }),
       {"is truncated (20 bytes, shorter than its header)"}},
      {"part truncated in a location",
       part_is([](std::string& p) { p.resize(p.size() - 8); }),
       {"is truncated in location 'b'"}},
      {"part with bytes after its last location",
       part_is([](std::string& p) { p += "extra"; }),
       {"has 5 bytes after its last location"}},
      {"part of another iteration",
       part_is([](std::string& p) { poke<std::uint64_t>(p, kIterationAt, 2); }),
       {"belongs to another checkpoint", "iteration 2"}},
      {"part claiming 2^40 locations",
       part_is([](std::string& p) { poke<std::uint64_t>(p, kRecordsAt, std::uint64_t{1} << 40); }),
       {"claims 1099511627776 locations, more than its"}},
      {"part claiming more locations than the graph has",
       part_is([](std::string& p) { poke<std::uint64_t>(p, kRecordsAt, 3); }),
       {"holds 3 locations; this graph has 2"}},
      {"a name claiming 2^31 bytes",
       part_is([](std::string& p) { poke<std::uint32_t>(p, kTable + 16, 1u << 31); }),
       {"is truncated in its names of locations"}},
      {"a location claiming 2^60 bytes",
       part_is([](std::string& p) { poke<std::uint64_t>(p, kTable + 8, std::uint64_t{1} << 60); }),
       {"holds 1152921504606846976 bytes for location 'a', which has 512"}},
      {"a location's bytes elsewhere",
       part_is([](std::string& p) { poke<std::uint64_t>(p, kTable + kEntry, 7); }),
       {"is not laid out as ordo writes it (location record 1 at byte 7"}},
      {"a record of an unknown location",
       part_is([](std::string& p) { p[kNames] = 'z'; }),
       {"holds location 'z', which this graph lacks"}},
      {"a location twice",
       part_is([](std::string& p) { p[kNames + 1] = 'a'; }),
       {"holds location 'a' a second time"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const fs::path dir = root / "case";
    fs::remove_all(dir);
    fs::copy(good, dir, fs::copy_options::recursive);
    c.damage(dir / sub);
    const std::string said = restart_from(dir);
    for (const std::string& s : c.says) CHECK_THAT(said, Catch::Contains(s));
  }
  fs::remove_all(root);
}
