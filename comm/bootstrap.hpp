// Bootstrap: who am I, how many are we, and a way to exchange small blobs before the transport
// exists (the transport uses it to swap UCX worker addresses).
//
// Three implementations, chosen by Bootstrap::create() from the Launch (what the launcher
// said, below):
//   - store   ORDO_RANK, ORDO_SIZE, ORDO_STORE=host:port and ORDO_STORE_TOKEN set by ordorun:
//             a TCP client of the rendezvous store that ordorun serves (store_protocol.hpp).
//   - PMIx    PMIX_RANK and PMIX_NAMESPACE set by Open MPI's mpirun or Slurm's srun --mpi=pmix.
//   - single  neither: rank 0 of 1, every collective is local.
// ordorun's variables win over PMIx's, so `mpirun ordorun ...` nests predictably.
//
// The bootstrap is the one owner of "who am I": rank, size, local rank and local size (the
// ranks of this host) come from it and from nowhere else. comm never reads the environment
// itself: Launch::from() is handed a lookup (libordo's api/settings.cpp, or a test program's).
//
// Threading: a Bootstrap is used by one thread at a time (collectives are blocking calls that
// every rank must make in the same order). It has no UCX or PMIx types: callers above comm/
// see only this header.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/store_protocol.hpp"

namespace ordo::comm {

// A bootstrap or transport failure that the caller cannot fix by retrying: a peer that never
// arrived, a store that went away, a malformed environment. The message names the cause and,
// where one is involved, the rank.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using Blob = std::vector<std::byte>;

// How this process was started, as the launcher's variables tell (see the top of this file).
struct Launch {
  enum class Kind : std::uint8_t { single, store, pmix };
  Kind kind = Kind::single;
  // Store only (PMIx tells them once connected): this rank, the job's ranks, this rank's index
  // among the ranks of its host (ORDO_LOCAL_RANK) and their number (ORDO_LOCAL_SIZE).
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string store;  // host:port of ordorun's store
  std::string token;  // the job's secret, presented to the store

  // Whether this process is one rank of several: a store launch of more than one rank, or any
  // PMIx launch (whose size is known only once connected). Decided before connecting, for
  // what must be settled first (where a graph keeps its locations).
  bool is_one_of_several() const {
    return kind == Kind::pmix || (kind == Kind::store && size > 1);
  }

  // The value of an environment variable, or nullptr when it is unset.
  using Lookup = std::function<const char*(const char* name)>;
  // Reads the launcher's variables through `lookup`. Throws CommError when they are present
  // but unusable (ORDO_STORE without ORDO_RANK, a rank that is not a number).
  static Launch from(const Lookup& lookup);
};

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks of the job that run on its host, and their number
  // (ordorun: from the launcher; PMIx: PMIX_LOCAL_RANK and PMIX_LOCAL_SIZE; single: 0 of 1).
  // Ranks of one host split its cores by them (docs/scheduler.md).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // "store", "pmix" or "single": for messages and tests.
  virtual const char* kind() const = 0;

  // Every rank contributes `mine`; every rank gets all contributions indexed by rank. Blobs are
  // meant to be small (addresses, sizes): at most a few KiB each. Blocks until every rank has
  // contributed. The first collective is bounded by the bootstrap timeout (then CommError naming
  // the missing rank): a rank that never started shows there. Later ones wait as long as the
  // peers are alive (the launcher ends the job when one dies).
  virtual std::vector<Blob> allgather(std::span<const std::byte> mine) = 0;

  // Consecutive ranks that gave exchange() equal `shared` bytes: `count` of them (the runs of
  // the store's get_runs answer, which the store bootstrap returns as they are).
  using Run = store::Run;
  // The start-up exchange (collective, once, before any fetch): every rank gives `shared`,
  // bytes that many ranks have alike (where it runs), and `own`, parts of its own (its
  // address, its pid), the same number on every rank. Returns every rank's `shared` as runs
  // of consecutive ranks with equal bytes, so that what a rank receives grows with its hosts
  // rather than its ranks; each rank's `own` parts stay with the launcher until fetch() asks
  // for them. Same timeout rule as allgather. The default (single, tests) is an allgather that
  // keeps every rank's `own` here.
  virtual std::vector<Run> exchange(std::span<const std::byte> shared, std::span<const Blob> own);
  // Part `part` of the `own` that `ranks` gave exchange(), in that order, in one request to
  // the launcher (store: one get_list; PMIx: a PMIx_Get each). Any thread, after exchange(),
  // also while another thread fetches. Throws CommError for a rank outside the job, a part or
  // rank the launcher does not have, or a malformed answer; never waits for a rank.
  virtual std::vector<Blob> fetch(std::size_t part, std::span<const int> ranks);

  // Returns once every rank has called barrier() (same timeout rule as allgather). The store
  // bootstrap also keeps a lifeline to ordorun: if ordorun goes away the process exits.
  virtual void barrier() = 0;
  // barrier(), giving up after `bound`: false then (the bootstrap is not used again but to be
  // destroyed). Default: barrier() (the single bootstrap's is immediate).
  virtual bool barrier_within(std::chrono::milliseconds bound) {
    (void)bound;
    barrier();
    return true;
  }
  // This rank's Runtime ended normally. The store bootstrap tells ordorun (a put of
  // "done/<rank>", bounded), which so tells a rank that finished from one that exited with
  // status 0 while the others still needed it. Best effort, never throws; default nothing.
  virtual void finished() {}
  // This rank called Runtime::abort(message) and exits with `status` next: the store bootstrap
  // tells ordorun ("abort/<rank>", bounded), which names it as the cause. Best effort; default
  // nothing.
  virtual void aborted(const std::string& message, int status) {
    (void)message;
    (void)status;
  }
  // This rank's Runtime ends because the job failed: rank `rank` (this one, or the peer that
  // failed or left the job) is the cause, for the reason `what`. The store bootstrap tells
  // ordorun ("cause/<this rank>" = "<rank> <what>", bounded): every rank of a failed job exits
  // with an error at about the same time, and the first to be reaped is seldom the one to
  // name. Best effort; default nothing.
  virtual void caused_by(unsigned rank, const std::string& what) {
    (void)rank;
    (void)what;
  }

  // The implementation `launch` names (see the top of this file); `timeout` bounds start-up
  // (RuntimeOptions: ORDO_TIMEOUT). Throws CommError when it cannot connect (store
  // unreachable, PMIx initialisation failed).
  static std::unique_ptr<Bootstrap> create(const Launch& launch, std::chrono::milliseconds timeout);

  // The pieces, for tests and for callers that know what they want.
  static std::unique_ptr<Bootstrap> single();
  static std::unique_ptr<Bootstrap> store(int rank, int size, const std::string& host_port,
                                          std::chrono::milliseconds timeout,
                                          const std::string& token = "", int local_rank = 0,
                                          int local_size = 1);
  // Throws CommError when built without PMIx.
  static std::unique_ptr<Bootstrap> pmix(std::chrono::milliseconds timeout);

  // CommError unless every one of `ranks` is a rank of this job (naming the first that is not).
  void check_ranks(std::span<const int> ranks) const;

 protected:
  // Merges consecutive equal blobs into runs (exchange()'s result from a full allgather).
  static std::vector<Run> runs_of(std::vector<Blob> all);

 private:
  std::vector<std::vector<Blob>> exchanged_own_;  // the default exchange()'s `own` per rank
};

// The start-up bound when nothing sets one.
inline constexpr std::chrono::seconds kDefaultStartupTimeout{30};

}  // namespace ordo::comm
