// The benchmark drivers' shared helpers (apps/common/bench_process.hpp, bench_numbers.hpp):
// quoting survives a real shell, a command's status and output come back, a hung command is
// stopped by its time limit, medians, the systems' order per round and size lists.
#include <catch2/catch.hpp>

#include "bench_numbers.hpp"
#include "bench_process.hpp"
#include "skip.hpp"

using namespace ordo::bench;

TEST_CASE("run_command passes every argument through the shell unchanged") {
  for (std::string word : {std::string("plain"), std::string("two words"), std::string("it's"),
                           std::string("'"), std::string("$HOME `id` \\n \"q\" *"),
                           std::string("line\nbreak"), std::string("")}) {
    CommandOutput out = run_command({"printf", "%s", word}, 10);
    CHECK(out.status == 0);
    CHECK(out.text == word);
  }
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("run_command returns the exit status and stderr with stdout") {
  CommandOutput out = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
  CHECK(out.status == 3);
  CHECK(out.text.find("out\n") != std::string::npos);
  CHECK(out.text.find("err\n") != std::string::npos);
  CHECK(run_command({"/nonexistent/program"}, 10).status == 127);
}

TEST_CASE("run_command stops a command that outlives its time limit") {
  if (run_command({"sh", "-c", "command -v timeout"}, 0).status != 0)
    ORDO_SKIP("coreutils timeout is not installed");
  CommandOutput out = run_command({"sleep", "30"}, 1);
  CHECK(out.status == 124);
}

TEST_CASE("last_lines keeps the tail of a text") {
  CHECK(last_lines("a\nb\nc\n", 2) == "b\nc\n");
  CHECK(last_lines("a\nb", 5) == "a\nb");
  CHECK(last_lines("a\nb\nc", 1) == "c");
  CHECK(last_lines("a\nb\nc\n", 3) == "a\nb\nc\n");
  CHECK(last_lines("", 3).empty());
  CHECK(last_lines("\n", 2) == "\n");
  CHECK(last_lines("a\n", 0).empty());
}

TEST_CASE("median of odd, even and empty lists") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  CHECK(median({7}) == 7);
  CHECK(median({}) == 0);
}

TEST_CASE("round_order alternates the systems' order from round to round") {
  using V = std::vector<std::size_t>;
  CHECK(round_order(4, 0) == V{0, 1, 2, 3});
  CHECK(round_order(4, 1) == V{3, 2, 1, 0});
  CHECK(round_order(4, 2) == V{0, 1, 2, 3});
  CHECK(round_order(3, 7) == V{2, 1, 0});
  CHECK(round_order(1, 1) == V{0});
  CHECK(round_order(0, 1).empty());
}

TEST_CASE("parse_size_list reads sizes and refuses what the rule excludes") {
  const SizeRule bytes{8, 1u << 30, 8};
  CHECK(parse_size_list("8192,65536", "--bytes", bytes) == std::vector<std::size_t>{8192, 65536});
  CHECK(parse_size_list("8", "--bytes", bytes) == std::vector<std::size_t>{8});
  for (const char* bad : {"", "100", "0", "4", "8,", ",8", "8,,16", "-8", "8k", "1e3", " 8",
                          "2147483648", "99999999999999999999999"}) {
    CAPTURE(bad);
    try {
      parse_size_list(bad, "--bytes", bytes);
      FAIL("accepted");
    } catch (const ordo::Error& e) {
      const std::string what = e.what();
      CHECK(what.find("--bytes") == 0);
      CHECK(what.find("multiple of 8") != std::string::npos);
    }
  }
  CHECK(parse_size_list("1,3", "--n", {}) == std::vector<std::size_t>{1, 3});
}
