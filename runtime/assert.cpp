#include "runtime/assert.hpp"

#include <cstdio>
#include <cstdlib>

namespace ordo::rt {

void assertion_failed(const char* condition, const char* file, int line,
                      const char* function) noexcept {
  std::fprintf(stderr,
               "ordo: internal error: assertion '%s' failed in %s (%s:%d); this is a bug in "
               "ordo, please report it with the program that shows it\n",
               condition, function, file, line);
  std::abort();
}

}  // namespace ordo::rt
