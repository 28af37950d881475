#include "comm/address_book.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <type_traits>

namespace ordo::comm {

static_assert(std::is_trivially_copyable_v<HostRecord>);

HostRecord HostRecord::here(bool draw_nonce) {
  HostRecord h;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (f >> id) std::strncpy(h.boot_id, id.c_str(), sizeof h.boot_id - 1);
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) == 0) h.pid_ns = st.st_ino;
  if (::stat("/proc/self/ns/net", &st) == 0) h.net_ns = st.st_ino;
  if (::stat("/proc/self/ns/time", &st) == 0) h.time_ns = st.st_ino;
  if (draw_nonce) {
    std::random_device entropy;
    h.job_nonce = (std::uint64_t(entropy()) << 32) | entropy();
  }
  return h;
}

bool HostRecord::same_kernel_as(const HostRecord& o) const {
  return boot_id[0] != 0 && std::strncmp(boot_id, o.boot_id, sizeof boot_id) == 0;
}

AddressBook::AddressBook(Bootstrap& boot, std::span<const std::byte> address)
    : AddressBook(boot, address, HostRecord::here(boot.rank() == 0), ::getpid()) {}

AddressBook::AddressBook(Bootstrap& boot, std::span<const std::byte> address,
                         const HostRecord& here, std::int64_t pid)
    : boot_(boot), rank_(boot.rank()), size_(boot.size()), here_(here) {
  if (rank_ != 0) here_.job_nonce = 0;  // only rank 0's names the job (and breaks a run)
  self_.assign(address.begin(), address.end());
  Blob pid_bytes(sizeof pid);
  std::memcpy(pid_bytes.data(), &pid, sizeof pid);
  const Blob own[] = {self_, pid_bytes};
  const auto shared = std::as_bytes(std::span(&here_, 1));
  const std::vector<Bootstrap::Run> runs = boot_.exchange(shared, own);
  int first = 0;
  for (const Bootstrap::Run& r : runs) {
    if (r.value.size() != sizeof(HostRecord) || r.count < 1 || r.count > std::uint32_t(size_ - first))
      throw CommError("comm: the start-up exchange gave rank " + std::to_string(rank_) +
                      " a malformed host record for ranks from " + std::to_string(first) + " (" +
                      std::to_string(r.value.size()) + " bytes, " + std::to_string(r.count) +
                      " rank(s)); are all ranks the same ordo build?");
    Run run{first, int(r.count), {}};
    std::memcpy(&run.host, r.value.data(), sizeof run.host);
    runs_.push_back(run);
    first += int(r.count);
  }
  if (first != size_)
    throw CommError("comm: the start-up exchange gave rank " + std::to_string(rank_) +
                    " host records for " + std::to_string(first) + " of " +
                    std::to_string(size_) + " ranks; are all ranks the same ordo build?");
  job_id_ = runs_.front().host.job_nonce;
  // The ranks of this host and their pids, in one request.
  std::vector<int> local;
  for (const Run& run : runs_)
    if (here_.same_host_as(run.host))
      for (int r = run.first; r < run.first + run.count; ++r)
        if (r != rank_) local.push_back(r);
  if (local.empty()) return;
  const std::vector<Blob> pids = boot_.fetch(kPidPart, local);
  if (pids.size() != local.size())
    throw CommError("comm: rank " + std::to_string(rank_) + " asked for the pids of " +
                    std::to_string(local.size()) + " rank(s) of its host and got " +
                    std::to_string(pids.size()));
  for (std::size_t i = 0; i < local.size(); ++i) {
    if (pids[i].size() != sizeof(std::int64_t))
      throw CommError("comm: rank " + std::to_string(local[i]) + " published a malformed pid (" +
                      std::to_string(pids[i].size()) + " bytes); are all ranks the same ordo "
                      "build?");
    LocalPeer p{local[i], 0};
    std::memcpy(&p.pid, pids[i].data(), sizeof p.pid);
    local_.push_back(p);
  }
}

const HostRecord& AddressBook::host_of(int peer) const {
  boot_.check_ranks(std::span(&peer, 1));
  auto it = std::upper_bound(runs_.begin(), runs_.end(), peer,
                             [](int r, const Run& run) { return r < run.first; });
  return std::prev(it)->host;
}

bool AddressBook::same_host(int peer) const { return here_.same_host_as(host_of(peer)); }

bool AddressBook::same_clock(int peer) const { return here_.same_clock_as(host_of(peer)); }

void AddressBook::learn(std::span<const int> peers) {
  // Outside the mutex: it reads only the job's size, which never changes.
  boot_.check_ranks(peers);
  std::vector<int> missing;
  {
    std::lock_guard lock(mu_);
    for (int p : peers) {
      if (p != rank_ && addresses_.count(p) == 0) missing.push_back(p);
    }
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  if (missing.empty()) return;
  std::vector<Blob> got = boot_.fetch(kAddressPart, missing);
  if (got.size() != missing.size())
    throw CommError("comm: rank " + std::to_string(rank_) + " asked for " +
                    std::to_string(missing.size()) + " address(es) and got " +
                    std::to_string(got.size()));
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i].empty())
      throw CommError("comm: rank " + std::to_string(missing[i]) + " published an empty "
                      "address; are all ranks the same ordo build?");
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < got.size(); ++i) addresses_.emplace(missing[i], std::move(got[i]));
}

const std::vector<std::byte>& AddressBook::address(int peer) {
  boot_.check_ranks(std::span(&peer, 1));
  if (peer == rank_) return self_;
  {
    std::lock_guard lock(mu_);
    if (auto it = addresses_.find(peer); it != addresses_.end()) return it->second;
  }
  learn(std::span(&peer, 1));
  std::lock_guard lock(mu_);
  return addresses_.at(peer);
}

std::size_t AddressBook::addresses_held() const {
  std::lock_guard lock(mu_);
  return addresses_.size();
}

}  // namespace ordo::comm
