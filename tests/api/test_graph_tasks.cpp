// Declaring tasks through the public API: duplicate accesses are refused (short lists take a
// linear scan, long ones are checked through the wide-task index once complete: both paths), and each task runs its own body, also after
// the Graph was moved (the runtime's closures point at the graph's body table).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

TEST_CASE("a location listed twice is refused, in short and long access lists") {
  for (std::size_t n : {2u, 5u, 16u, 17u, 40u}) {
    ordo::Graph g;
    std::vector<ordo::Location<int>> locs;
    for (std::size_t i = 0; i < n; ++i) locs.push_back(g.location<int>("l" + std::to_string(i), 1));
    std::vector<ordo::Access> acc;
    for (std::size_t i = 0; i < n; ++i) acc.push_back(ordo::read(locs[i]));
    CHECK_NOTHROW(g.task("distinct", acc, [](ordo::Context&) {}));
    acc.back() = ordo::write(locs[0]);  // the first location again
    CHECK_THROWS_AS(g.task("dup", acc, [](ordo::Context&) {}), ordo::Error);
    CHECK(g.tasks() == 1);  // the refused task was not added
  }
}

TEST_CASE("every task runs its own body, also after the graph was moved") {
  constexpr int kTasks = 300;
  ordo::Graph built;
  std::vector<ordo::Location<std::int64_t>> out;
  for (int i = 0; i < kTasks; ++i)
    out.push_back(built.location<std::int64_t>("out" + std::to_string(i), 1));
  for (int i = 0; i < kTasks; ++i)
    built.task("t" + std::to_string(i), {ordo::write(out[i])},
               [o = out[i], i](ordo::Context& ctx) { ctx.write(o)[0] += 1000 + i; });
  ordo::Graph g(std::move(built));
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 3);
  for (int i = 0; i < kTasks; ++i) CHECK(g.data(out[i])[0] == 3 * (1000 + i));
}
