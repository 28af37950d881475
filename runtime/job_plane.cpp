// The run-start agreement across ranks (job_plane.hpp).
#include "runtime/job_plane.hpp"

#include <cstring>

#include "runtime/failure.hpp"
#include "runtime/wire.hpp"

namespace ordo::rt {

using wire::append;
using wire::get_u64;
using wire::put_u64;

JobPlane::JobPlane(Net& net)
    : net_(net),
      control_(net, kChannel, net.rank(), net.size(),
               [this](unsigned rank, const std::string& what) { on_failure(rank, what); }) {
  net_.attach(
      kChannel,
      [this](unsigned from, std::span<const std::byte> header, std::span<const std::byte>) {
        wire::Header h{};
        if (header.size() >= sizeof h) std::memcpy(&h, header.data(), sizeof h);
        if (header.size() < sizeof h + 8 || h.kind != wire::Kind::control) {
          on_failure(from, "rank " + std::to_string(from) +
                               " sent the job's control plane a message it never gets; are "
                               "all ranks the same ordo version?");
          return;
        }
        control_.deliver(from, header);
      },
      [this](unsigned rank, const std::string& what) { on_failure(rank, what); });
}

JobPlane::~JobPlane() { net_.detach(kChannel); }

void JobPlane::on_failure(unsigned rank, const std::string& what) {
  {
    std::lock_guard lock(mu_);
    if (!failure_) failure_.emplace(rank, what);
  }
  control_.stop();
}

void JobPlane::throw_failure(unsigned rank, const std::string& what) {
  // The net takes leave without the close barrier, which the others may never reach.
  net_.job_failed(rank, what);
  if (rank == net_.rank())
    throw RunError(Failure::Kind::own, rank,
                   "rank " + std::to_string(rank) + " (this rank) failed: " + what);
  throw RunError(Failure::Kind::peer_lost, rank, what);
}

namespace {

// A range of ranks' descriptions, combined in rank order: its first rank's, and the first
// rank's of the range whose description differs from that one (kNone: none differs).
// Encoded [first rank][length][words][differing rank][length][words].
constexpr std::uint64_t kNone = ~std::uint64_t{0};

struct Described {
  std::uint64_t first = kNone, differs = kNone;
  std::string first_words, differing_words;
};

ControlPlane::Bytes encode(const Described& d) {
  ControlPlane::Bytes out;
  put_u64(out, d.first);
  put_u64(out, d.first_words.size());
  append(out, d.first_words.data(), d.first_words.size());
  put_u64(out, d.differs);
  put_u64(out, d.differing_words.size());
  append(out, d.differing_words.data(), d.differing_words.size());
  return out;
}

// nullopt for bytes no rank of this version encodes.
std::optional<Described> decode(std::span<const std::byte> in) {
  Described d;
  std::size_t at = 0;
  auto words = [&](std::uint64_t& rank, std::string& text) {
    if (in.size() - at < 16) return false;
    rank = get_u64(in, at);
    const std::uint64_t n = get_u64(in, at + 8);
    at += 16;
    if (n > in.size() - at) return false;
    text.assign(reinterpret_cast<const char*>(in.data()) + at, n);
    at += n;
    return true;
  };
  if (!words(d.first, d.first_words) || !words(d.differs, d.differing_words) || at != in.size())
    return std::nullopt;
  return d;
}

}  // namespace

std::optional<std::string> JobPlane::agree(const std::string& call) {
  if (auto failed = net_.job_failure()) throw_failure(failed->first, failed->second);
  Described mine;
  mine.first = net_.rank();
  mine.first_words = call;
  auto total = control_.all_reduce(
      encode(mine), [](std::span<const std::byte> lower, std::span<const std::byte> higher) {
        auto lo = decode(lower), hi = decode(higher);
        if (!lo || !hi) return ControlPlane::Bytes{};  // reported on every rank below
        if (lo->differs == kNone) {
          if (hi->first_words != lo->first_words) {
            lo->differs = hi->first;
            lo->differing_words = hi->first_words;
          } else if (hi->differs != kNone) {
            lo->differs = hi->differs;
            lo->differing_words = hi->differing_words;
          }
        }
        return encode(*lo);
      });
  if (!total) {
    // A rank that left before this round is why it could not complete, even where the exit
    // of a rank that stopped on it was seen first.
    std::optional<std::pair<unsigned, std::string>> failed =
        net_.departed_before(control_.job_round());
    if (!failed) {
      std::lock_guard lock(mu_);
      failed = failure_;
    }
    if (!failed) failed = net_.job_failure();
    if (!failed) failed.emplace(net_.rank(), "the job's control plane stopped");
    throw_failure(failed->first, failed->second);
  }
  const auto all = decode(*total);
  if (!all) return "the ranks' run-start agreements disagree (their ordo versions differ)";
  if (all->differs == kNone) return std::nullopt;
  return "ranks " + std::to_string(all->first) + " and " + std::to_string(all->differs) +
         " made different collective calls (rank " + std::to_string(all->first) + ": " +
         all->first_words + "; rank " + std::to_string(all->differs) + ": " + all->differing_words +
         "). Every rank must make the same collective calls (run, run_until, gather, restart), "
         "with the same arguments, in the same order (SPMD)";
}

}  // namespace ordo::rt
