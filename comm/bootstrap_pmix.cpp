// PMIx bootstrap: used when the job was started by a PMIx server (Open MPI's mpirun, Slurm's
// srun --mpi=pmix). Rank and size come from PMIx; allgather is put + commit + fence with data
// collection + one get per rank. This file is the only one that includes pmix.h.
#include <pmix.h>

#include <cstring>
#include <optional>
#include <string>

#include "comm/bootstrap.hpp"

namespace ordo::comm {
namespace {

std::string pmix_error(const char* what, pmix_status_t rc) {
  return std::string("comm: PMIx ") + what + " failed: " + PMIx_Error_string(rc);
}

class PmixBootstrap final : public Bootstrap {
 public:
  explicit PmixBootstrap(std::chrono::milliseconds timeout) : timeout_(timeout) {
    if (pmix_status_t rc = PMIx_Init(&me_, nullptr, 0); rc != PMIX_SUCCESS)
      throw CommError(pmix_error("initialisation (is a PMIx server running this job?)", rc));
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* v = nullptr;
    if (pmix_status_t rc = PMIx_Get(&wild, PMIX_JOB_SIZE, nullptr, 0, &v); rc != PMIX_SUCCESS) {
      PMIx_Finalize(nullptr, 0);
      throw CommError(pmix_error("get of the job size", rc));
    }
    size_ = int(v->data.uint32);
    PMIX_VALUE_RELEASE(v);
    // The ranks of this host: PMIx's own answer (mpirun and srun give it). A server that does
    // not leaves each rank alone on its host, as a launcher that does not say would.
    if (PMIx_Get(&me_, PMIX_LOCAL_RANK, nullptr, 0, &v) == PMIX_SUCCESS) {
      if (v->type == PMIX_UINT16) local_rank_ = int(v->data.uint16);
      PMIX_VALUE_RELEASE(v);
    }
    if (PMIx_Get(&wild, PMIX_LOCAL_SIZE, nullptr, 0, &v) == PMIX_SUCCESS) {
      if (v->type == PMIX_UINT32) local_size_ = int(v->data.uint32);
      PMIX_VALUE_RELEASE(v);
    }
    if (local_rank_ < 0 || local_size_ < 1 || local_rank_ >= local_size_) {
      local_rank_ = 0;
      local_size_ = 1;
    }
  }
  ~PmixBootstrap() override { PMIx_Finalize(nullptr, 0); }

  int rank() const override { return int(me_.rank); }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const char* kind() const override { return "pmix"; }

  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    const std::string key = "ordo.ag." + std::to_string(round_++);
    put(key, mine);
    if (pmix_status_t rc = PMIx_Commit(); rc != PMIX_SUCCESS)
      throw CommError(pmix_error("commit", rc));
    fence(true);
    std::vector<Blob> all(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) all[std::size_t(r)] = get(r, key);
    return all;
  }

  void barrier() override { fence(false); }
  // PMIx counts its timeout in whole seconds: `bound` is rounded up to them.
  bool barrier_within(std::chrono::milliseconds bound) override {
    try {
      fence(false, bound);
      return true;
    } catch (const CommError&) {
      return false;
    }
  }

  // The `own` parts go under keys of their own before the allgather of `shared` commits them;
  // fetch() then takes each peer's from the PMIx server with a PMIx_Get, so that a rank holds
  // only the ones it asked for. (`shared` is an allgather: one PMIx_Get per rank from this
  // host's server, merged into runs.)
  std::vector<Run> exchange(std::span<const std::byte> shared, std::span<const Blob> own) override {
    for (std::size_t part = 0; part < own.size(); ++part) put(own_key(part), own[part]);
    return runs_of(allgather(shared));
  }

  std::vector<Blob> fetch(std::size_t part, std::span<const int> ranks) override {
    check_ranks(ranks);
    std::vector<Blob> out;
    out.reserve(ranks.size());
    for (int r : ranks) out.push_back(get(r, own_key(part)));
    return out;
  }

 private:
  static std::string own_key(std::size_t part) { return "ordo.own." + std::to_string(part); }

  // A leading byte keeps the byte object non-empty (barrier is an allgather of nothing).
  void put(const std::string& key, std::span<const std::byte> bytes) {
    Blob tagged(1 + bytes.size());
    tagged[0] = std::byte{1};
    if (!bytes.empty()) std::memcpy(tagged.data() + 1, bytes.data(), bytes.size());
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    // safety: PMIx_Put copies the value; the cast only drops const for its C signature.
    v.data.bo.bytes = reinterpret_cast<char*>(tagged.data());
    v.data.bo.size = tagged.size();
    if (pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v); rc != PMIX_SUCCESS)
      throw CommError(pmix_error("put", rc));
  }

  // Rank r's value of `key`, without put()'s leading byte.
  Blob get(int r, const std::string& key) {
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, me_.nspace, pmix_rank_t(r));
    pmix_value_t* got = nullptr;
    if (pmix_status_t rc = PMIx_Get(&p, key.c_str(), nullptr, 0, &got); rc != PMIX_SUCCESS)
      throw CommError(pmix_error(("get of rank " + std::to_string(r) + "'s " + key).c_str(), rc));
    if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size < 1) {
      PMIX_VALUE_RELEASE(got);
      throw CommError("comm: PMIx returned a malformed " + key + " for rank " + std::to_string(r));
    }
    const auto* b = reinterpret_cast<const std::byte*>(got->data.bo.bytes);
    Blob out(b + 1, b + got->data.bo.size);
    PMIX_VALUE_RELEASE(got);
    return out;
  }

  void fence(bool collect, std::optional<std::chrono::milliseconds> bound = std::nullopt) {
    pmix_info_t info[2];
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    bool flag = collect;
    int seconds = int((bound.value_or(timeout_).count() + 999) / 1000);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me_.nspace, PMIX_RANK_WILDCARD);
    const pmix_status_t rc = PMIx_Fence(&wild, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) throw CommError(pmix_error("fence", rc));
  }

  pmix_proc_t me_{};
  int size_ = 1;
  int local_rank_ = 0, local_size_ = 1;
  std::chrono::milliseconds timeout_;
  std::uint64_t round_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::pmix(std::chrono::milliseconds timeout) {
  return std::make_unique<PmixBootstrap>(timeout);
}

}  // namespace ordo::comm
