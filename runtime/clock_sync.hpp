// Start-up measurement of each rank's steady-clock offset to rank 0 (traces put every rank's
// times on rank 0's clock), over the binomial tree of tree.hpp so that no rank talks to more
// than its tree neighbours: rank 0 answers its ceil(log2 N) children, not N - 1 ranks.
//
// Each rank measures its offset to its tree parent by Cristian's method (a ping at t0, the
// parent's clock t1 in the answer, received at t2: the parent's clock at t2 is about
// t1 + (t2 - t0) / 2, off by at most half the round trip; the shortest of 8 round trips is
// kept), receives its parent's offset to rank 0 and adds the two: offset(r) = offset(parent) +
// offset(r to parent). The errors add up along the way to rank 0 (at most ceil(log2 N) hops),
// and each rank knows the sum of its hops' half round trips: a bound on its error.
//
// Ranks that read one clock (one kernel, one time namespace: `shares_clock_with`) neither
// ping nor wait: a rank that shares rank 0's clock has offset 0, and one that shares its
// parent's has no offset to it. So a job on one host sends no message at all here.
//
// Threads: measure() on the thread that starts the rank (it blocks); deliver() on the
// transport's thread; stop() on any (a peer failed). Pairs: deliver() stores an answer or the
// parent's offset under mu_ and notifies <-> measure()'s waits on cv_.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ordo::rt {

// A rank's offset to rank 0's steady clock: add `ns` to a time of this rank's clock to get rank
// 0's. `error_ns` bounds how far that may be off (0 where the clocks are one); `is_known` is
// false when a ping or the parent's offset did not come in time (then `ns` is 0, a guess).
struct ClockOffset {
  std::int64_t ns = 0;
  std::int64_t error_ns = 0;
  bool is_known = true;
};

// What a rank says about its offset once measured (a line for stderr; empty: nothing). An
// unknown offset is a warning wherever it matters: with ORDO_VERBOSE (`verbose`), and when
// the rank records a trace (`tracing`), whose times then do not line up with rank 0's. A
// measured offset is said with ORDO_VERBOSE only, and one of clocks that are one never.
std::string clock_report(const ClockOffset& offset, bool verbose, bool tracing);

class ClockSync {
 public:
  using Message = std::vector<std::byte>;
  // Sends `message` to `peer` (from measure()'s thread). The transport delivers it to the
  // peer's deliver().
  using Send = std::function<void(unsigned peer, const Message& message)>;
  // This rank's steady clock in ns (tests give each simulated rank its own).
  using Now = std::function<std::int64_t()>;
  // Whether `peer` reads this rank's clock.
  using SharesClock = std::function<bool(unsigned peer)>;

  ClockSync(unsigned rank, unsigned ranks, SharesClock shares_clock_with, Send send, Now now);
  ClockSync(const ClockSync&) = delete;
  ClockSync& operator=(const ClockSync&) = delete;

  // Measures this rank's offset (collective: every rank calls it once; ranks that need
  // nothing return at once) and hands it to the children that need it. `patience` bounds each
  // wait for an answer; a parent that is itself waiting gets that much per tree level above it.
  ClockOffset measure(std::chrono::milliseconds patience = std::chrono::seconds(5));

  // A message from `from`. Returns the answer to send back to `from` at once (a ping's), if
  // any. Messages that are malformed or from a rank that has no business sending them (not a
  // child pinging, not the parent answering) are dropped.
  std::optional<Message> deliver(unsigned from, std::span<const std::byte> message);

  // Ends measure()'s waits (a peer failed): it returns with is_known false. Idempotent.
  void stop();

  // Exposed for tests: how many pings measure() sends per rank.
  static constexpr int kPings = 8;

 private:
  std::optional<std::int64_t> measure_to_parent(std::chrono::milliseconds patience,
                                                std::int64_t& error_ns);

  unsigned rank_, ranks_, parent_;
  SharesClock shares_clock_with_;
  Send send_;
  Now now_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_: the answer to the ping sent at `ping_sent_` (the parent's time), the
  // parent's offset message, whether stop() was called.
  std::int64_t ping_sent_ = -1;
  std::optional<std::int64_t> answer_;
  std::optional<ClockOffset> parent_offset_;
  bool stopped_ = false;
};

}  // namespace ordo::rt
