// Built instead of bootstrap_pmix.cpp when PMIx's development files are missing.
#include "comm/bootstrap.hpp"

namespace ordo::comm {

std::unique_ptr<Bootstrap> Bootstrap::pmix(std::chrono::milliseconds) {
  throw CommError("comm: this job was started by a PMIx launcher, but ordo was built without "
                  "PMIx; install libpmix-dev and rebuild, or start it with ordorun");
}

}  // namespace ordo::comm
