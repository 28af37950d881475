// Bootstrap: who am I, how many are we, and a way to exchange small blobs before the transport
// exists (the transport uses it to swap UCX worker addresses).
//
// Three implementations, chosen by Bootstrap::from_environment():
//   - store   ORDO_RANK, ORDO_SIZE, ORDO_STORE=host:port and ORDO_STORE_TOKEN set by ordorun:
//             a TCP client of the rendezvous store that ordorun serves (store_protocol.hpp).
//   - PMIx    PMIX_RANK and PMIX_NAMESPACE set by Open MPI's mpirun or Slurm's srun --mpi=pmix.
//   - single  neither: rank 0 of 1, every collective is local.
// ordorun's variables win over PMIx's, so `mpirun ordorun ...` nests predictably.
//
// Threading: a Bootstrap is used by one thread at a time (collectives are blocking calls that
// every rank must make in the same order). It has no UCX or PMIx types: callers above comm/
// see only this header.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ordo::comm {

// A bootstrap or transport failure that the caller cannot fix by retrying: a peer that never
// arrived, a store that went away, a malformed environment. The message names the cause and,
// where one is involved, the rank.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using Blob = std::vector<std::byte>;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "store", "pmix" or "single": for messages and tests.
  virtual const char* kind() const = 0;

  // Every rank contributes `mine`; every rank gets all contributions indexed by rank. Blobs are
  // meant to be small (addresses, sizes): at most a few KiB each. Blocks until every rank has
  // contributed. The first collective is bounded by the bootstrap timeout (then CommError naming
  // the missing rank): a rank that never started shows there. Later ones wait as long as the
  // peers are alive (the launcher ends the job when one dies).
  virtual std::vector<Blob> allgather(std::span<const std::byte> mine) = 0;

  // Returns once every rank has called barrier() (same timeout rule as allgather). The store
  // bootstrap also keeps a lifeline to ordorun: if ordorun goes away the process exits.
  virtual void barrier() = 0;

  // Picks the implementation from the environment (see the top of this file). Throws CommError
  // when the variables are present but unusable (bad ORDO_STORE, store unreachable, PMIx
  // initialisation failed).
  static std::unique_ptr<Bootstrap> from_environment();

  // The pieces, for tests and for callers that know what they want.
  static std::unique_ptr<Bootstrap> single();
  static std::unique_ptr<Bootstrap> store(int rank, int size, const std::string& host_port,
                                          std::chrono::milliseconds timeout,
                                          const std::string& token = "");
  static std::unique_ptr<Bootstrap> pmix();  // throws CommError when built without PMIx
};

// The timeout used by from_environment(): ORDO_TIMEOUT (seconds, set by ordorun from
// --timeout-startup), 30 s when unset.
std::chrono::milliseconds bootstrap_timeout_from_env();

}  // namespace ordo::comm
