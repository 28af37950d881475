// The parser ordo-bench-stencil reads the apps' result lines with (apps/bench-stencil/
// result_line.hpp): fields, numbers, picking the right line out of noisy output, and --help
// flag detection.
#include <catch2/catch.hpp>

#include "result_line.hpp"

using namespace ordo::bench;

TEST_CASE("parse_fields splits key=value tokens and ignores the rest") {
  auto f = parse_fields("app=heat2d  size=8x8 junk seconds=0.5\tgstencils=1.25 =x verify=ok");
  CHECK(f.size() == 5);
  CHECK(f["app"] == "heat2d");
  CHECK(f["size"] == "8x8");
  CHECK(f["seconds"] == "0.5");
  CHECK(f["gstencils"] == "1.25");
  CHECK(f["verify"] == "ok");
  CHECK(f.count("junk") == 0);
  CHECK(parse_fields("").empty());
  CHECK(parse_fields("a=b=c")["a"] == "b=c");
}

TEST_CASE("parse_number accepts finite non-negative decimals only") {
  CHECK(parse_number("0.2488") == Approx(0.2488));
  CHECK(parse_number("12") == Approx(12.0));
  CHECK(parse_number("1e-3") == Approx(0.001));
  CHECK_FALSE(parse_number(""));
  CHECK_FALSE(parse_number("abc"));
  CHECK_FALSE(parse_number("1.5x"));
  CHECK_FALSE(parse_number("-1"));
  CHECK_FALSE(parse_number("nan"));
  CHECK_FALSE(parse_number("inf"));
}

TEST_CASE("find_result picks the app's last valid result line out of other output") {
  const std::string out =
      "mpirun: some banner gstencils=9\n"
      "app=heat2dx size=1 gstencils=7\n"
      "app=heat2d size=64x64 blocks=2x1 iters=5 workers=2 seconds=0.001000 gstencils=0.0205 "
      "verify=ok system=mpi\n"
      "app=heat2d gstencils=oops\n"
      "app=heat3d size=4x4x4 gstencils=3.5\r\n";
  auto r = find_result(out, "heat2d");
  REQUIRE(r);
  CHECK(r->gstencils == Approx(0.0205));
  CHECK(r->seconds == Approx(0.001));
  CHECK(r->fields.at("system") == "mpi");
  CHECK(r->fields.at("blocks") == "2x1");
  CHECK(r->fields.at("workers") == "2");

  auto r3 = find_result(out, "heat3d");
  REQUIRE(r3);
  CHECK(r3->gstencils == Approx(3.5));
  CHECK(r3->seconds == 0);  // no seconds field
  CHECK(r3->fields.at("size") == "4x4x4");

  CHECK_FALSE(find_result(out, "heat1d"));
  CHECK_FALSE(find_result("", "heat2d"));
  CHECK_FALSE(find_result("app=heat2d seconds=1", "heat2d"));  // no gstencils

  // Across ranks rank 0's line ends with ranks=R (docs/distributed.md).
  auto ranked = find_result(
      "app=heat2d size=8x8 blocks=2x2 iters=3 workers=1 seconds=0.1 gstencils=0.5 verify=ok "
      "tb=2 ranks=4", "heat2d");
  REQUIRE(ranked);
  CHECK(ranked->fields.at("ranks") == "4");
  CHECK(ranked->fields.at("tb") == "2");

  // Two valid lines: the last wins (an app printing a warm-up line first).
  auto two = find_result("app=heat2d gstencils=1\napp=heat2d gstencils=2", "heat2d");
  REQUIRE(two);
  CHECK(two->gstencils == Approx(2.0));
}

TEST_CASE("help_lists_flag finds option names, not substrings") {
  const std::string help =
      "Usage: ordo-heat2d [OPTIONS]\n\nOptions:\n  -h,--help   Print this help\n"
      "  --tbx UINT  not it\n  --tb UINT   temporal-blocking depth\n";
  CHECK(help_lists_flag(help, "--tb"));
  CHECK(help_lists_flag(help, "--help"));
  CHECK_FALSE(help_lists_flag(help, "--t"));
  CHECK_FALSE(help_lists_flag("  --tbx UINT  other\n", "--tb"));
  CHECK(help_lists_flag("  --tb=DEPTH\n", "--tb"));
  CHECK_FALSE(help_lists_flag("", "--tb"));
}

TEST_CASE("find_rank_results reads each rank's line out of ordorun's prefixed output") {
  const std::string out =
      "[1] app=heat2d size=64x64 blocks=2x1 iters=5 workers=1 seconds=0.2 gstencils=0.1 "
      "verify=skipped\n"
      "[0] ordo-heat2d: --verify ... skipped\n"
      "[0] app=heat2d size=64x64 blocks=2x1 iters=5 workers=1 seconds=0.1 gstencils=0.2 "
      "verify=skipped\n"
      "[10] app=heat2d gstencils=bad\n"
      "[x] app=heat2d gstencils=5\n";
  auto r = find_rank_results(out, "heat2d");
  REQUIRE(r.size() == 2);  // rank 10's line is invalid; "[x] ..." is rank 0's, not a result
  CHECK(r[0].gstencils == Approx(0.2));
  CHECK(r[1].gstencils == Approx(0.1));
}

TEST_CASE("parse_ucx_perftest_mbps reads the Final row") {
  const std::string out =
      "+--------------+\n"
      "|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |\n"
      "[thread 0]              1506      4.271   669.812   669.812       93.31      93.31   1493   1493\n"
      "Final:                  2000      6.923    73.119    73.119      854.77     854.77  13676  13676\n";
  auto v = parse_ucx_perftest_mbps(out, 65536);
  REQUIRE(v);
  CHECK(*v == Approx(13676.0 * 65536 / 1e6));
  // Without the rate columns: the overall bandwidth, MiB/s.
  auto w = parse_ucx_perftest_mbps("Final: 10 1.0 2.0 3.0 100.0 200.0\n", 8);
  REQUIRE(w);
  CHECK(*w == Approx(200.0 * 1.048576));
  CHECK(parse_ucx_perftest_mbps("Final: 1,000 1.0 2.0 3.0 4.0 5.0 6 7\n", 8));
  CHECK_FALSE(parse_ucx_perftest_mbps("", 8));
  CHECK_FALSE(parse_ucx_perftest_mbps("connection refused\nFinal: n/a\n", 8));
  CHECK_FALSE(parse_ucx_perftest_mbps("Final: 1 2 3\n", 8));
}
