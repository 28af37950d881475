// The job's own control plane, on a channel no graph uses (kChannel): the agreement that
// starts each collective call of a Runtime across ranks (a run, run_until, gather, restart).
// Each rank describes the call it is about to make, with its arguments and the graph it runs
// (graphs are numbered by their channels, which every rank gives in the same order); one
// all-reduce of the descriptions (ControlPlane's tree) carries rank 0's and the first that
// differs from it, so every rank refuses a mismatch alike, naming both. A graph's own
// channel could not do it: ranks that run different graphs, or build one while another runs
// an old one, send on channels that never meet, and would wait for ever.
//
// Cost: one all-reduce per call, its messages a description or two long; the api makes it the
// barrier that starts a run, so a graph's later runs cost no more rounds than before.
//
// Threads: agree() on the thread that makes the call (one at a time); the net's callbacks on
// its thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "runtime/control_plane.hpp"
#include "runtime/net.hpp"

namespace ordo::rt {

class JobPlane {
 public:
  // Below the transport's flag bit (CommNet::kBigHeader) and far above any graph's channel.
  static constexpr std::uint32_t kChannel = 0x7fff'fff0;

  explicit JobPlane(Net& net);
  ~JobPlane();
  JobPlane(const JobPlane&) = delete;
  JobPlane& operator=(const JobPlane&) = delete;

  // Compares `call` (this rank's words for what it is about to do) across ranks: nullopt when
  // every rank described the same, else the words of the difference, the same on every rank.
  // Throws RunError when the job failed or fails meanwhile (a rank lost, or one that left).
  std::optional<std::string> agree(const std::string& call);

 private:
  void on_failure(unsigned rank, const std::string& what);
  [[noreturn]] void throw_failure(unsigned rank, const std::string& what);

  Net& net_;
  ControlPlane control_;
  std::mutex mu_;
  std::optional<std::pair<unsigned, std::string>> failure_;  // guarded by mu_
};

}  // namespace ordo::rt
