// One Catch2 main for every suite. It runs the session as Catch2's own main does, then turns
// "passed, but something was skipped" into exit 77, meson's SKIP (common/skip.hpp): a skipped
// test case must not read as a pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "skip.hpp"

namespace {

std::vector<std::string>& skipped() {
  static std::vector<std::string> reasons;
  return reasons;
}

}  // namespace

namespace ordo::test {

void skip(const std::string& reason) {
  WARN("SKIP: " << reason);
  skipped().push_back("'" + Catch::getResultCapture().getCurrentTestName() + "': " + reason);
}

}  // namespace ordo::test

int main(int argc, char** argv) {
  const int failed = Catch::Session().run(argc, argv);
  // Catch2 returns the number of failed assertions: 77 of them must not read as SKIP.
  if (failed != 0) return failed == 77 ? 1 : failed;
  if (skipped().empty()) return 0;
  for (const std::string& s : skipped()) std::printf("SKIP: %s\n", s.c_str());
  std::printf("%zu test case(s) skipped, none failed: exit 77 (SKIP)\n", skipped().size());
  return 77;
}
