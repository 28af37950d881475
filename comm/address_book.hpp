// AddressBook: what a rank knows of the other ranks' whereabouts, in O(hosts + the ranks it
// talks to) memory rather than O(ranks).
//
// Start-up (the constructor, collective) is one Bootstrap::exchange: every rank gives its host
// record (the kernel's boot id, its PID, network and time namespaces: the same on every rank
// of a host) as the shared part, answered as runs of consecutive ranks (ordorun places ranks
// in blocks, so a run per host), and two parts of its own, its transport address and its
// pid, which stay with the launcher. Which ranks share this rank's host or clock is then a
// lookup in the runs; the pids of the ranks on this host are fetched at once (one request, to
// watch them: O(ranks per host)); a peer's address is fetched when needed: learn() for a batch
// of peers (the control plane's tree neighbours at start-up, a graph's peers before its first
// run), address() for one peer not learned (the last resort, at a first send). See
// docs/distributed.md, "Start-up".
//
// Threading: after the constructor, every member may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "comm/bootstrap.hpp"

namespace ordo::comm {

// Where a process runs: two processes with equal boot id and namespace inodes share a kernel
// and see each other's process ids. The exchange's shared part, as bytes (trivially copyable).
struct HostRecord {
  char boot_id[40] = {};     // /proc/sys/kernel/random/boot_id, NUL-terminated
  std::uint64_t pid_ns = 0;  // inode of /proc/self/ns/pid (0: unknown)
  std::uint64_t net_ns = 0;  // inode of /proc/self/ns/net: other namespaces count as other hosts
  std::uint64_t time_ns = 0;  // inode of /proc/self/ns/time (0: a kernel without them)
  // Rank 0's is random and names the job (AddressBook::job_id); every other rank's is 0, so
  // rank 0 is a run of its own (one run more per reply).
  std::uint64_t job_nonce = 0;

  // This process's (job_nonce drawn at random when `draw_nonce`).
  static HostRecord here(bool draw_nonce);
  // One kernel (other PID and network namespaces included).
  bool same_kernel_as(const HostRecord& o) const;
  // One CLOCK_MONOTONIC: one kernel, and one time namespace (a time namespace adds its own
  // offset to the monotonic clock; containers restored elsewhere carry one).
  bool same_clock_as(const HostRecord& o) const { return same_kernel_as(o) && time_ns == o.time_ns; }
  // One kernel, PID and network namespace: the peer's pid means a process here.
  bool same_host_as(const HostRecord& o) const {
    return same_kernel_as(o) && pid_ns != 0 && pid_ns == o.pid_ns && net_ns == o.net_ns;
  }
};

class AddressBook {
 public:
  struct LocalPeer {
    int rank = 0;
    std::int64_t pid = 0;
  };

  // Collective: the start-up exchange of this process's host record, pid and `address`.
  AddressBook(Bootstrap& boot, std::span<const std::byte> address);
  // The same with a given host record and pid (tests: ranks as threads of one process).
  AddressBook(Bootstrap& boot, std::span<const std::byte> address, const HostRecord& here,
              std::int64_t pid);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool same_host(int peer) const;
  bool same_clock(int peer) const;
  // The other ranks on this host (same_host) and their pids, in rank order.
  const std::vector<LocalPeer>& local_peers() const { return local_; }
  // The same number on every rank of the job (rank 0's job_nonce).
  std::uint64_t job_id() const { return job_id_; }
  // The runs the exchange answered with (one per host and rank 0's own, when ranks are
  // placed in blocks).
  std::size_t host_runs() const { return runs_.size(); }

  // Fetches, in one request, the addresses of those of `peers` this book does not hold (this
  // rank's own is never fetched). Throws CommError as Bootstrap::fetch does, or for an empty
  // address.
  void learn(std::span<const int> peers);
  // `peer`'s address, fetched alone when not held (the last resort). The reference stays
  // valid as long as the book.
  const std::vector<std::byte>& address(int peer);
  // The other ranks' addresses held: those fetched, O(the ranks this one talks to).
  std::size_t addresses_held() const;

  // The parts of a rank's own start-up record (Bootstrap::exchange, fetch).
  static constexpr std::size_t kAddressPart = 0, kPidPart = 1;

 private:
  struct Run {
    int first = 0, count = 0;
    HostRecord host;
  };
  const HostRecord& host_of(int peer) const;

  Bootstrap& boot_;
  int rank_, size_;
  HostRecord here_;
  std::vector<std::byte> self_;  // this rank's own address (a send to itself)
  std::uint64_t job_id_ = 0;
  std::vector<Run> runs_;  // in rank order, covering 0..size-1
  std::vector<LocalPeer> local_;
  mutable std::mutex mu_;
  // Guarded by mu_; nodes never move (address() hands out references).
  std::unordered_map<int, std::vector<std::byte>> addresses_;
};

}  // namespace ordo::comm
