// ORDO_SKIP(reason): ends the current test case as skipped, with the reason. Catch2 v2 has no
// skip, and a test case that returns early passes: so the reason is printed and recorded, and a
// test program in which something was skipped and nothing failed exits 77, which meson reports
// as SKIP (tests/catch_main.cpp). A failure elsewhere in the program still fails it.
#pragma once

#include <string>

namespace ordo::test {

// Records `reason` for the current test case and prints it (as a Catch2 warning).
void skip(const std::string& reason);

}  // namespace ordo::test

#define ORDO_SKIP(reason)       \
  do {                          \
    ::ordo::test::skip(reason); \
    return;                     \
  } while (0)
