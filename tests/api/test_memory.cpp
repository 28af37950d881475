// Memory in proportion to what a rank uses (docs/distributed.md, "Memory"), on one rank: a
// declared location costs nothing until the program or the first run gives it storage
// (Graph::storage_held counts it), storage nothing has written costs no memory yet, and a
// problem that cannot fit is refused with the bytes needed and available.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

#include "peak_rss.hpp"  // apps/common: status_bytes

using Catch::Contains;

namespace {

// This process's resident memory now (VmRSS), in bytes.
std::uint64_t resident_bytes() { return ordo::app::status_bytes("VmRSS"); }

}  // namespace

TEST_CASE("a location gets storage at its first data() or at the first run, not when declared") {
  ordo::Graph g;
  auto a = g.location<double>("a", 1000);
  auto b = g.location<std::uint32_t>("b", 3);
  auto unused = g.location<char>("unused", 5000);
  CHECK(g.storage_held().locations == 0);
  CHECK(g.storage_held().bytes == 0);
  g.data(b)[1] = 7;  // the program sets b before the first run
  CHECK(g.storage_held().locations == 1);
  CHECK(g.storage_held().bytes == 12);
  g.task("t", {ordo::write(a), ordo::read(b)}, [=](ordo::Context& ctx) {
    ctx.write(a)[0] += ctx.read(b)[1];
  });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 3);
  // One rank uses every location (home of all of them), the untouched one included.
  CHECK(g.storage_held().locations == 3);
  CHECK(g.storage_held().bytes == 8000 + 12 + 5000);
  CHECK(g.data(a)[0] == 21);
  CHECK(g.data(a)[1] == 0);  // zero where nothing wrote
  CHECK(g.data(unused)[4999] == 0);
}

// A gibibyte declared, one page of it written: the rest never becomes resident, neither when
// declared nor when the run gives it storage (no zero-filling up front).
TEST_CASE("storage nothing writes costs no memory") {
  constexpr std::size_t kCount = std::size_t{1} << 27;  // doubles: 1 GiB
  const std::uint64_t before = resident_bytes();
  {
    ordo::Graph g;
    auto big = g.location<double>("big", kCount);
    g.task("first page", {ordo::write(big)}, [=](ordo::Context& ctx) {
      auto d = ctx.write(big);
      for (std::size_t i = 0; i < 512; ++i) d[i] = 1.0;
    });
    ordo::Runtime rt({.workers = 1});
    rt.run(g, 2);
    CHECK(g.storage_held().bytes == kCount * sizeof(double));
    const std::uint64_t after = resident_bytes();
    INFO("resident before " << before << " bytes, after " << after);
    CHECK(after < before + (std::uint64_t{256} << 20));
    CHECK(g.data(big)[0] == 1.0);
    CHECK(g.data(big)[kCount - 1] == 0.0);
  }
}

// The allocated size: a location takes its bytes rounded to 64 bytes below a page and to pages
// from a page up. One just over a huge page (2 MiB) is not rounded to two of them (storage once
// was, and was zero-filled: a block of 2 MiB + 8 KiB cost 4 MiB); written whole, it costs its
// pages resident, and no more.
TEST_CASE("a location's allocated size is its bytes rounded to a page, not to a huge page") {
  constexpr std::size_t kPage = 4096, kHugePage = std::size_t{2} << 20;
  constexpr std::size_t kCount = 16, kJustOver = kHugePage + 2 * kPage;
  [[maybe_unused]] const std::uint64_t before = resident_bytes();
  {
    ordo::Graph g;
    std::vector<ordo::Location<char>> big;
    for (std::size_t i = 0; i < kCount; ++i)
      big.push_back(g.location<char>("big" + std::to_string(i), kJustOver));
    auto odd = g.location<char>("odd", 3 * kHugePage + 1);
    auto paged = g.location<char>("paged", 5000);
    auto small = g.location<char>("small", 100);
    g.data(small)[0] = 1;  // before the run: the same rounding
    CHECK(g.storage_held().reserved == 128);
    for (std::size_t i = 0; i < kCount; ++i)
      g.task("fill" + std::to_string(i), {ordo::write(big[i])}, [l = big[i]](ordo::Context& ctx) {
        auto d = ctx.write(l);
        std::fill(d.begin(), d.end(), 'x');
      });
    g.task("rest", {ordo::write(odd), ordo::write(paged), ordo::read(small)},
           [](ordo::Context&) {});
    ordo::Runtime rt({.workers = 2});
    rt.run(g, 1);
    const std::size_t want = kCount * kJustOver + (3 * kHugePage + kPage) + 2 * kPage + 128;
    CHECK(g.storage_held().bytes == kCount * kJustOver + 3 * kHugePage + 1 + 5000 + 100);
    CHECK(g.storage_held().reserved == want);
    // What the statistic says is what the system gave: the written locations are resident,
    // with a few MiB for the runtime itself, not a huge page more each (32 MiB). Not under
    // ThreadSanitizer, whose shadow of every written byte is resident too.
#if !defined(__SANITIZE_THREAD__)
    const std::uint64_t after = resident_bytes();
    INFO("resident before " << before << " bytes, after " << after);
    CHECK(after > before + kCount * kJustOver);
    CHECK(after < before + kCount * kJustOver + (std::uint64_t{12} << 20));
#endif
    CHECK(g.data(big[kCount - 1])[kJustOver - 1] == 'x');
  }
}

// A pebibyte: refused by the first run (per rank, with the bytes), and by data() before it,
// with an Error instead of std::bad_alloc.
TEST_CASE("a location that cannot fit is refused with the bytes needed and available") {
  constexpr std::size_t kPiB = std::size_t{1} << 50;
  {
    ordo::Graph g;
    auto big = g.location<char>("big", kPiB);
    g.task("w", {ordo::write(big)}, [](ordo::Context&) {});
    ordo::Runtime rt({.workers = 1});
    try {
      rt.run(g, 1);
      FAIL("a pebibyte location ran");
    } catch (const ordo::Error& e) {
      CHECK_THAT(e.what(), Contains("rank 0 needs 1.00 PiB (1125899906842624 bytes) more "
                                    "for its locations"));
      CHECK_THAT(e.what(), Contains("are available ("));
    }
    CHECK(g.storage_held().bytes == 0);
    // The refusal stays: the graph does not run later either.
    CHECK_THROWS_AS(rt.run(g, 1), ordo::Error);
  }
  {
    ordo::Graph g;
    auto big = g.location<char>("big", kPiB);
    CHECK_THROWS_WITH(g.data(big), Contains("Graph::data: cannot allocate 1.00 PiB "
                                            "(1125899906842624 bytes) for location 'big'"));
  }
  ordo::Graph g;
  CHECK_THROWS_WITH(g.location<double>("x", SIZE_MAX / 4),
                    Contains("more bytes than an address space holds"));
}

// The apps' check of their own arrays (app_cli.hpp's check_grid_fits) and the first run's
// check of a rank's locations read the same probe: a pebibyte is refused with both figures.
TEST_CASE("check_memory_available refuses what the system cannot give, naming the bytes") {
  constexpr std::uint64_t kPiB = std::uint64_t{1} << 50;
  CHECK_NOTHROW(ordo::check_memory_available(4096, "a page"));
  try {
    ordo::check_memory_available(kPiB, "--size 12345678x12345678 is too large: its 3 grids");
    FAIL("a pebibyte was allowed");
  } catch (const ordo::Error& e) {
    CHECK_THAT(e.what(), Contains("--size 12345678x12345678 is too large: its 3 grids need "
                                  "1.00 PiB (1125899906842624 bytes), but this process can get "));
    CHECK_THAT(e.what(), Contains("make the problem smaller"));
  }
}
