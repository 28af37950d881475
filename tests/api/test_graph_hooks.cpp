// The extension points of Graph for libraries built on the public API (docs/architecture.md,
// "Layers"): on_first_run's hooks run once, in order, before the first run freezes the graph,
// and may still declare tasks; on_restore's checks see what a restart loaded and refuse it, or
// rebuild what set_derived left out of the checkpoint.
// Through the public API only, as a library on it would use them.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <ordo/ordo.hpp>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("first-run hooks run once, in order, and may still declare tasks") {
  ordo::Runtime rt({.workers = 2});
  ordo::Graph g;
  auto x = g.location<long>("x", 1);
  g.task("add", {ordo::write(x)}, [x](ordo::Context& ctx) { ctx.write(x)[0] += 1; });
  std::vector<std::string> calls;
  g.on_first_run([&](unsigned rank, unsigned ranks) {
    calls.push_back("first " + std::to_string(rank) + "/" + std::to_string(ranks));
    // Declared by the hook, after "add": it doubles what "add" left, each iteration.
    g.task("double", {ordo::write(x)}, [x](ordo::Context& ctx) { ctx.write(x)[0] *= 2; });
  });
  g.on_first_run([&](unsigned, unsigned) { calls.push_back("second"); });
  CHECK(g.tasks() == 1);
  rt.run(g, 3);
  CHECK(calls == std::vector<std::string>{"first 0/1", "second"});
  CHECK(g.tasks() == 2);
  // ((0 + 1) * 2 + 1) * 2 + 1) * 2: the hook's task ran after "add" in every iteration.
  CHECK(g.data(x)[0] == 14);
  rt.run(g, 1);
  CHECK(calls.size() == 2);  // not again
  CHECK(g.data(x)[0] == 30);
  CHECK_THROWS_WITH(g.on_first_run([](unsigned, unsigned) {}),
                    Contains("Graph::on_first_run: this graph has run already"));
}

TEST_CASE("a first-run hook's Error refuses the run; an empty hook is refused") {
  ordo::Runtime rt({.workers = 1});
  ordo::Graph g;
  auto x = g.location<long>("x", 1);
  g.task("add", {ordo::write(x)}, [x](ordo::Context& ctx) { ctx.write(x)[0] += 1; });
  g.on_first_run([](unsigned, unsigned) { throw ordo::Error("the library is not ready"); });
  CHECK_THROWS_WITH(rt.run(g, 2), Contains("the library is not ready"));
  CHECK(g.data(x)[0] == 0);
  CHECK_THROWS_WITH(g.on_first_run(nullptr), Contains("Graph::on_first_run: the hook is an empty "
                                                      "function"));
  CHECK_THROWS_WITH(g.on_restore(nullptr), Contains("Graph::on_restore: the check is an empty "
                                                    "function"));
}

namespace {

// A graph with a location `state` such as a library keeps: a task adds 1 to its element 0 and
// 10 to element 1 each iteration.
struct Counter {
  ordo::Graph g;
  ordo::Location<double> state = g.location<double>("state", 2);
  Counter() {
    g.task("step", {ordo::write(state)}, [this](ordo::Context& ctx) {
      auto s = ctx.write(state);
      s[0] += 1;
      s[1] += 10;
    });
  }
};

}  // namespace

TEST_CASE("restore checks see what the restart loaded, and refuse it with their words") {
  const fs::path dir =
      fs::temp_directory_path() / ("ordo-graph-hooks-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    ordo::Runtime rt({.workers = 1, .checkpoint_dir = dir.string(), .checkpoint_every = 2});
    Counter c;
    rt.run(c.g, 4);
  }
  SECTION("a check that finds nothing wrong lets the restart go on") {
    ordo::Runtime rt({.workers = 1});
    Counter c;
    std::vector<double> seen;
    std::vector<int> order;
    c.g.on_restore([&](const ordo::Restored& r) {
      order.push_back(1);
      CHECK(r.is_home(c.state));
      for (double v : r.data(c.state)) seen.push_back(v);
      return std::string();
    });
    c.g.on_restore([&](const ordo::Restored&) {
      order.push_back(2);
      return std::string();
    });
    CHECK(rt.restart(c.g, dir.string()) == 4);
    CHECK(seen == std::vector<double>{4, 40});  // the checkpoint's contents, before any run
    CHECK(order == std::vector<int>{1, 2});
    rt.run(c.g, 1);
    CHECK(c.g.data(c.state)[0] == 5);
  }
  SECTION("a check's answer refuses the checkpoint as corrupt") {
    ordo::Runtime rt({.workers = 1});
    Counter c;
    bool later = false;
    c.g.on_restore([&](const ordo::Restored& r) {
      return r.data(c.state)[1] == 40 ? std::string("state says 40, which no run writes")
                                      : std::string();
    });
    c.g.on_restore([&](const ordo::Restored&) {
      later = true;
      return std::string();
    });
    CHECK_THROWS_WITH(rt.restart(c.g, dir.string()),
                      Contains("is corrupt: state says 40, which no run writes"));
    CHECK_FALSE(later);  // the first answer is the restart's
  }
  SECTION("a check reading another graph's location, or another type, gets an Error") {
    ordo::Runtime rt({.workers = 1});
    Counter c, elsewhere;
    c.g.on_restore([&](const ordo::Restored& r) {
      CHECK_THROWS_WITH(r.data(elsewhere.state), Contains("belongs to another Graph"));
      CHECK_THROWS_WITH(r.is_home(ordo::Location<double>()), Contains("names no graph"));
      const auto as_long = std::bit_cast<ordo::Location<std::int64_t>>(c.state);
      CHECK_THROWS_WITH(r.data(as_long), Contains("holds another element type"));
      return std::string();
    });
    CHECK(rt.restart(c.g, dir.string()) == 4);
  }
  fs::remove_all(dir);
}

namespace {

// A graph whose `copy` a library derives from `state` each iteration, as the stencil layer
// packs its exports: "use" reads the copy of the iteration before (declared before "pack"),
// so a restart must rebuild it for the next iteration to see what the uninterrupted run saw.
// `extra`: another derived location and task, as another rank count declares them.
struct Derived {
  ordo::Graph g;
  ordo::Location<double> state = g.location<double>("state", 2);
  ordo::Location<double> sum = g.location<double>("sum", 1);
  ordo::Location<double> copy = g.location<double>("copy", 2);
  explicit Derived(bool mark = true, bool extra = false) {
    g.task("step", {ordo::write(state)}, [this](ordo::Context& ctx) {
      auto s = ctx.write(state);
      s[0] += 1;
      s[1] += 10;
    });
    g.task("use", {ordo::read(copy), ordo::write(sum)},
           [this](ordo::Context& ctx) { ctx.write(sum)[0] += ctx.read(copy)[0]; });
    const std::uint32_t pack =
        g.task("pack", {ordo::read(state), ordo::write(copy)}, [this](ordo::Context& ctx) {
          auto c = ctx.write(copy);
          auto s = ctx.read(state);
          c[0] = s[0];
          c[1] = s[1];
        });
    if (mark) {
      g.set_derived(copy);
      g.set_derived_task(pack);
    }
    if (extra) {
      auto more = g.location<double>("more", 5);
      g.set_derived(more);
      g.set_derived_task(g.task("fill", {ordo::read(state), ordo::write(more)},
                                [more](ordo::Context& ctx) { ctx.write(more)[0] = 1; }));
    }
  }
  // The restore check a library gives: rebuilds the copy from the restored state.
  void rebuild() {
    g.on_restore([this](ordo::Restored& r) {
      auto c = r.write(copy);
      auto s = r.data(state);
      c[0] = s[0];
      c[1] = s[1];
      return std::string();
    });
  }
};

}  // namespace

TEST_CASE("derived locations and tasks stay out of a checkpoint; a restore check rebuilds them") {
  const fs::path dir =
      fs::temp_directory_path() / ("ordo-graph-derived-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    ordo::Runtime rt({.workers = 1});
    Derived d;
    rt.run(d.g, 6);
    CHECK(d.g.data(d.sum)[0] == 15);  // 0 + 1 + ... + 5: each iteration adds the one before's
  }
  {
    ordo::Runtime rt({.workers = 1, .checkpoint_dir = dir.string(), .checkpoint_every = 4});
    Derived d;
    rt.run(d.g, 4);
  }
  // The part names the state and not the copy (names are in the part's table, as text).
  std::string part;
  {
    std::ifstream in(dir / "ckpt-00000000000000000004" / "rank-0.part", std::ios::binary);
    part.assign(std::istreambuf_iterator<char>(in), {});
  }
  CHECK(part.find("state") != std::string::npos);
  CHECK(part.find("copy") == std::string::npos);
  // Rebuilt on restore, the run goes on as the uninterrupted one; with `extra`, the restarting
  // graph declares one more derived location and task, which the fingerprint leaves out (and
  // the accesses to them).
  for (const bool extra : {false, true}) {
    DYNAMIC_SECTION("rebuilt on restore" << (extra ? ", with another derived location" : "")) {
      ordo::Runtime rt({.workers = extra ? 1u : 2u});
      Derived d(true, extra);
      d.rebuild();
      CHECK(rt.restart(d.g, dir.string()) == 4);
      rt.run(d.g, 2);
      CHECK(d.g.data(d.sum)[0] == 15);
    }
  }
  SECTION("the same location, not derived, makes another graph") {
    ordo::Runtime rt({.workers = 1});
    Derived d(false);
    CHECK_THROWS_WITH(rt.restart(d.g, dir.string()), Contains("belongs to another graph"));
  }
  SECTION("marks are refused after the first run, and a task the graph lacks") {
    ordo::Runtime rt({.workers = 1});
    Derived d(false);
    CHECK_THROWS_WITH(d.g.set_derived_task(7), Contains("task #7 does not belong to this graph"));
    rt.run(d.g, 1);
    CHECK_THROWS_WITH(d.g.set_derived(d.copy), Contains("this graph has run already"));
    CHECK_THROWS_WITH(d.g.set_derived_task(0), Contains("this graph has run already"));
  }
  fs::remove_all(dir);
}
