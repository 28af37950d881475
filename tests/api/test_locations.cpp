// Graphs of any size: location families (the same graph as location() in a loop, refused
// whole), wide tasks (a task with hundreds of accesses reads each through its Context, through
// the hashed index, and a refused wide member leaves the index as it was), and names checked
// unique through a hash, however many locations there are.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

using Catch::Contains;

namespace {

// One writer per location, then one task reading all of them (in the order `order` lists them),
// which sums them into `sum`. Returns the sum after `iterations`.
std::uint64_t run_wide(ordo::Graph& g, const std::vector<ordo::Location<std::uint64_t>>& in,
                       std::vector<std::uint32_t> order, std::uint64_t iterations, bool family) {
  auto sum = g.location<std::uint64_t>("sum", 1);
  for (std::uint32_t i = 0; i < in.size(); ++i)
    g.task("w" + std::to_string(i), {ordo::write(in[i])}, [loc = in[i], i](ordo::Context& ctx) {
      ctx.write(loc)[0] += i + 1;
    });
  auto body = [in, sum](ordo::Context& ctx) {
    std::uint64_t s = 0;
    // Read in reverse declaration order: no access is where a scan would look first.
    for (std::size_t i = in.size(); i-- > 0;) s += ctx.read(in[i])[0] * (i + 1);
    ctx.write(sum)[0] = s;
  };
  if (family) {
    g.task_family("reader", 1, [&](std::uint32_t, ordo::AccessList& acc) {
      acc.add(ordo::write(sum));
      for (std::uint32_t i : order) acc.add(ordo::read(in[i]));
    }, [body](ordo::Context& ctx, std::uint32_t) { body(ctx); });
  } else {
    std::vector<ordo::Access> acc{ordo::write(sum)};
    for (std::uint32_t i : order) acc.push_back(ordo::read(in[i]));
    g.task("reader", acc, body);
  }
  ordo::Runtime rt({.workers = 2});
  rt.run(g, iterations);
  return g.data(sum)[0];
}

// What run_wide computes, sequentially: after k iterations location i holds k * (i + 1).
std::uint64_t wide_expected(std::uint64_t n, std::uint64_t k) {
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < n; ++i) s += k * (i + 1) * (i + 1);
  return s;
}

}  // namespace

TEST_CASE("a location family is the same as location() in a loop") {
  ordo::Graph g;
  auto before = g.location<int>("before", 2);
  auto block = g.location_family<double>("block", 5, 7);
  auto uneven = g.location_family<float>("uneven", 4, [](std::uint32_t i) { return i + 1; });
  auto after = g.location<int>("after", 1);
  REQUIRE(block.size() == 5);
  REQUIRE(uneven.size() == 4);
  CHECK(g.locations() == 11);
  for (std::uint32_t i = 0; i < 5; ++i) {
    CHECK(block[i].id() == before.id() + 1 + i);
    CHECK(block[i].size() == 7);
  }
  for (std::uint32_t i = 0; i < 4; ++i) CHECK(uneven[i].size() == i + 1);
  CHECK(after.id() == uneven[3].id() + 1);
  // Members are named name[i]: the names are taken.
  CHECK_THROWS_WITH(g.location<int>("block[3]", 1), Contains("'block[3]' already exists"));
  CHECK(g.location_family<int>("none", 0, 3).empty());

  // Families of locations and tasks compute what the same graph declared one by one does.
  auto chain = [](bool family) {
    ordo::Graph h;
    std::vector<ordo::Location<std::uint64_t>> t;
    if (family) {
      t = h.location_family<std::uint64_t>("t", 6, 3);
    } else {
      for (int i = 0; i < 6; ++i) t.push_back(h.location<std::uint64_t>("t[" + std::to_string(i) + "]", 3));
    }
    for (std::uint32_t i = 0; i < 6; ++i)
      h.task("s" + std::to_string(i), {ordo::read(t[(i + 5) % 6]), ordo::write(t[i])},
             [t, i](ordo::Context& ctx) {
               auto out = ctx.write(t[i]);
               auto in = ctx.read(t[(i + 5) % 6]);
               for (std::size_t j = 0; j < out.size(); ++j) out[j] = 3 * out[j] + in[j] + i + j;
             });
    ordo::Runtime rt({.workers = 2});
    rt.run(h, 9);
    std::vector<std::uint64_t> all;
    for (auto loc : t)
      for (std::uint64_t v : h.data(loc)) all.push_back(v);
    return all;
  };
  CHECK(chain(true) == chain(false));
}

TEST_CASE("a refused location family adds nothing") {
  ordo::Graph g;
  g.location<int>("u[3]", 1);
  CHECK_THROWS_WITH(g.location_family<int>("u", 5, 1), Contains("'u[3]' already exists"));
  CHECK(g.locations() == 1);
  CHECK_THROWS_WITH(g.location_family<int>("v", 4, [](std::uint32_t i) { return i == 2 ? 0 : 1; }),
                    Contains("location 'v[2]' has 0 elements"));
  CHECK(g.locations() == 1);
  // The names of the refused families are free again.
  auto v = g.location_family<int>("v", 4, 2);
  CHECK(v[0].id() == 1);
  auto x = g.location<int>("x", 1);
  g.task("t", {ordo::write(x)}, [](ordo::Context&) {});
  ordo::Runtime rt({.workers = 1});
  rt.run(g, 1);
  CHECK_THROWS_WITH(g.location_family<int>("late", 2, 1), Contains("after the graph's first run"));
}

// Four billion members: their sizes alone would take 32 GB before any check (std::bad_alloc).
TEST_CASE("a location family too large to declare is an Error naming it, adding nothing") {
  ordo::Graph g;
  CHECK_THROWS_AS(g.location_family<double>("huge", 4'000'000'000u, 1), ordo::Error);
  CHECK_THROWS_WITH(g.location_family<double>("huge", 4'000'000'000u, 1),
                    Contains("location family 'huge' of 4000000000 members is too large"));
  CHECK(g.locations() == 0);
  auto ok = g.location_family<double>("huge", 4, 1);  // the name is free
  CHECK(ok.size() == 4);
}

TEST_CASE("a task with hundreds of accesses reads each one through its Context") {
  for (bool family : {false, true}) {
    INFO("family " << family);
    ordo::Graph g;
    auto in = g.location_family<std::uint64_t>("in", 300, 1);
    std::vector<std::uint32_t> order(in.size());
    std::iota(order.begin(), order.end(), 0u);
    // An order that is not the declaration order (the index must not assume it).
    std::reverse(order.begin() + 100, order.begin() + 200);
    CHECK(run_wide(g, in, order, 4, family) == wide_expected(in.size(), 4));
  }
}

TEST_CASE("a wide task listing a location twice is refused and leaves the graph as it was") {
  ordo::Graph g;
  auto in = g.location_family<std::uint64_t>("in", 40, 1);
  std::vector<ordo::Access> twice;
  for (auto loc : in) twice.push_back(ordo::read(loc));
  twice.push_back(ordo::read(in[17]));
  CHECK_THROWS_WITH(g.task("twice", twice, [](ordo::Context&) {}),
                    Contains("task 'twice' lists location 'in[17]' twice"));
  // A family whose member 2 is refused: members 0 and 1 were indexed, then undone.
  CHECK_THROWS_WITH(g.task_family("fam", 4, [&](std::uint32_t i, ordo::AccessList& acc) {
    for (auto loc : in) acc.add(ordo::read(loc));
    if (i == 2) acc.add(ordo::read(in[39]));
  }, [](ordo::Context&, std::uint32_t) {}), Contains("task 'fam[2]' lists location 'in[39]' twice"));
  CHECK(g.tasks() == 0);
  // A wide task declared afterwards finds its accesses, and one it did not declare is refused.
  auto extra = g.location<std::uint64_t>("extra", 1);
  std::vector<std::uint32_t> order(in.size());
  std::iota(order.begin(), order.end(), 0u);
  CHECK(run_wide(g, in, order, 3, false) == wide_expected(in.size(), 3));

  ordo::Graph h;
  auto hin = h.location_family<int>("in", 20, 1);
  auto other = h.location<int>("other", 1);
  std::vector<ordo::Access> acc;
  for (auto loc : hin) acc.push_back(ordo::write(loc));
  h.task("wide", acc, [other](ordo::Context& ctx) { (void)ctx.read(other); });
  ordo::Runtime rt({.workers = 1});
  CHECK_THROWS_WITH(rt.run(h, 1), Contains("task 'wide' accesses location 'other', which it did not declare"));
  (void)extra;
}
