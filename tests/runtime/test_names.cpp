// NameIndex against a std::map: random names that are a stem and a counter (dense, sparse,
// huge, with leading zeros), names without digits and names with several numbers, inserted in
// random order; every name inserted is found at its location, every other one is absent.
// Also rt::Graph's wide-member index: every access of a wide task found, a duplicate reported.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/graph.hpp"
#include "runtime/name_index.hpp"

using namespace ordo;

namespace {

std::string random_name(std::mt19937_64& rng) {
  static const char* stems[] = {"x", "block", "b", "u_", "a.b", ""};
  static const char* tails[] = {"", "]", ".main", "_e", "7x"};
  std::string s = stems[rng() % 6];
  switch (rng() % 6) {
    case 0: s += std::to_string(rng() % 64); break;             // dense counter
    case 1: s += std::to_string(rng() % 100000); break;         // sparse: beyond the slack
    case 2: s += std::to_string(rng() % 4000000000ull); break;  // up to 10 digits
    case 3: s += "0" + std::to_string(rng() % 50); break;       // leading zero: not counted
    case 4: s += std::to_string(rng() % 30) + "_" + std::to_string(rng() % 30); break;
    default: break;                                             // no number
  }
  return s + tails[rng() % 5];
}

}  // namespace

TEST_CASE("NameIndex finds exactly the names it was given") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    rt::NameIndex index;
    std::vector<std::string> names;
    std::map<std::string, std::uint32_t> want;
    auto name_of = [&](std::uint32_t l) { return std::string_view(names[l]); };
    for (int i = 0; i < 3000; ++i) {
      std::string n = random_name(rng);
      const auto it = want.find(n);
      const std::int64_t got = index.find(n, name_of);
      if (it != want.end()) {
        REQUIRE(got == it->second);
        continue;
      }
      REQUIRE(got == rt::NameIndex::kAbsent);
      const auto l = static_cast<std::uint32_t>(names.size());
      names.push_back(n);
      want.emplace(n, l);
      index.insert(n, l);
    }
    for (const auto& [n, l] : want) CHECK(index.find(n, name_of) == l);
    // Close misses: a digit more, a leading zero, the number moved.
    for (const auto& [n, l] : want)
      for (std::string other : {n + "0", "0" + n, n + "x", n.substr(0, n.size() / 2)})
        if (!want.count(other)) CHECK(index.find(other, name_of) == rt::NameIndex::kAbsent);
  }
}

TEST_CASE("a wide member's accesses are all found, and a location listed twice is named") {
  rt::Graph g(false);
  for (int l = 0; l < 100; ++l) g.add_location("l" + std::to_string(l), 8, 1, typeid(double));
  g.begin_family("f", [](const rt::Instance&) {});
  for (std::uint32_t m = 0; m < 3; ++m) {
    // Member m lists locations (7 * i + m) % 100 for i < 40: a different order per member.
    for (std::uint32_t i = 0; i < 40; ++i) g.add_access({(7 * i + m) % 100, rt::Mode::read});
    CHECK(g.end_member() == -1);
  }
  g.end_family();
  const rt::Family& f = g.families()[0];
  for (std::uint32_t m = 0; m < 3; ++m) {
    const auto acc = g.member_accesses(f, m);
    REQUIRE(acc.size() == 40);
    for (std::uint32_t l = 0; l < 100; ++l) {
      const std::int64_t i = g.find_access(acc, l);
      bool listed = false;
      for (const auto& a : acc) listed = listed || a.location == l;
      if (!listed) {
        CHECK(i == -1);
      } else {
        REQUIRE(i >= 0);
        CHECK(acc[static_cast<std::size_t>(i)].location == l);
      }
    }
  }
  g.begin_family("dup", [](const rt::Instance&) {});
  for (std::uint32_t i = 0; i < 30; ++i) g.add_access({i, rt::Mode::read});
  g.add_access({12, rt::Mode::write});
  CHECK(g.end_member() == 12);
  g.abandon_family();
  // The first family's index survives the undo.
  const auto acc = g.member_accesses(g.families()[0], 1);
  CHECK(g.find_access(acc, (7 * 5 + 1) % 100) == 5);
}
