// Sharing location memory with the ranks of this host (protocol in shared_peers.hpp).
#include "runtime/shared_peers.hpp"

#include <cstdio>
#include <utility>

#include <unistd.h>

#include "runtime/wire.hpp"

namespace ordo::rt {

namespace {

using wire::get_u64;
using wire::put_u64;

// A rank's location memory as setup()'s first round describes it: its process id, then (when
// it shares a SharedArena) the number of chunks plus one, each chunk's fd, size and inode, and
// per location its chunk plus one (0: private) and offset; without an arena, a 0.
struct PeerMemory {
  struct Chunk {
    int fd;
    std::uint64_t size, inode;
  };
  std::int64_t pid = 0;
  bool arena = false;
  std::vector<Chunk> chunks;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> slots;  // (chunk + 1, offset)
};

// `share` false: described as without an arena, so that no peer shares with this rank.
std::vector<std::byte> describe_memory(const Graph& graph, bool share) {
  std::vector<std::byte> out;
  put_u64(out, static_cast<std::uint64_t>(::getpid()));
  const SharedArena* arena = share ? graph.arena() : nullptr;
  put_u64(out, arena ? arena->chunks().size() + 1 : 0);
  if (!arena) return out;
  for (const SharedArena::Chunk& c : arena->chunks()) {
    put_u64(out, static_cast<std::uint64_t>(c.fd));
    put_u64(out, c.size);
    put_u64(out, c.inode);
  }
  for (std::uint32_t l = 0; l < graph.locations().size(); ++l) {
    const auto& slot = graph.shared_slot(l);
    put_u64(out, slot ? slot->chunk + std::uint64_t{1} : 0);
    put_u64(out, slot ? slot->offset : 0);
  }
  return out;
}

// Reads describe_memory()'s bytes of a peer with the same graph; nullopt when they do not
// describe it (wrong length, a location outside its chunk).
std::optional<PeerMemory> parse_memory(std::span<const std::byte> in,
                                       const std::vector<LocationDesc>& locs) {
  PeerMemory m;
  m.pid = static_cast<std::int64_t>(get_u64(in, 0));
  const std::uint64_t n = get_u64(in, 8);
  if (n == 0) return in.size() == 16 ? std::optional(m) : std::nullopt;
  // The peer's numbers are checked against the bytes before any arithmetic on them: a chunk
  // count or an offset near 2^64 would otherwise wrap past the checks (a loop of 2^61 chunks,
  // a location mapped before its chunk).
  if (in.size() < 16 || n - 1 > (in.size() - 16) / 24 ||
      in.size() != 16 + (n - 1) * 24 + locs.size() * 16)
    return std::nullopt;
  m.arena = true;
  for (std::uint64_t c = 0; c + 1 < n; ++c)
    m.chunks.push_back({static_cast<int>(get_u64(in, 16 + c * 24)), get_u64(in, 24 + c * 24),
                        get_u64(in, 32 + c * 24)});
  const std::size_t table = 16 + (n - 1) * 24;
  for (std::size_t l = 0; l < locs.size(); ++l) {
    const std::uint64_t chunk = get_u64(in, table + l * 16), offset = get_u64(in, table + l * 16 + 8);
    if (chunk > m.chunks.size()) return std::nullopt;
    if (chunk != 0) {
      const std::uint64_t size = m.chunks[chunk - 1].size;
      if (offset > size || locs[l].elem_size * locs[l].count > size - offset) return std::nullopt;
    }
    m.slots.emplace_back(chunk, offset);
  }
  return m;
}

}  // namespace

std::optional<SharedPeers::Refusal> SharedPeers::setup(ControlPlane& control, const Net& net,
                                                       const Plan& plan, bool share) {
  const auto& locs = graph_.locations();
  // The ranks of this host the protocol talks to: no other pair ever sends a GRANT.
  std::vector<unsigned> peers;
  for (unsigned q : dist_.neighbours)
    if (net.same_host(q)) peers.push_back(q);
  const std::vector<std::byte> mine = describe_memory(graph_, share);
  auto theirs = control.exchange_with(peers, std::vector<ControlPlane::Bytes>(peers.size(), mine));
  if (!theirs) return std::nullopt;

  // Per peer, when both keep locations in shared memory: its chunks mapped here.
  std::vector<PeerMemory> memory(peers.size());
  std::vector<std::vector<std::byte*>> bases(peers.size());
  std::vector<ControlPlane::Bytes> mapped(peers.size(), ControlPlane::Bytes{std::byte{0}});
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const unsigned h = peers[i];
    if (!share || !graph_.arena()) continue;
    auto m = parse_memory((*theirs)[i], locs);
    if (!m)
      return Refusal{h, "rank " + std::to_string(h) + " described its shared memory in " +
                            std::to_string((*theirs)[i].size()) +
                            " bytes that do not fit this graph: the ranks' ordo versions differ"};
    if (!m->arena) continue;
    memory[i] = std::move(*m);
    mapped[i][0] = std::byte{1};
    for (const PeerMemory::Chunk& c : memory[i].chunks) {
      std::string error;
      PeerMapping pm = PeerMapping::map(memory[i].pid, c.fd, c.size, c.inode, error);
      if (pm.base() == nullptr) {
        std::fprintf(stderr,
                     "ordo: rank %u cannot share rank %u's location memory (%s); their "
                     "locations are copied instead\n",
                     dist_.rank, h, error.c_str());
        mapped[i][0] = std::byte{0};
        break;
      }
      bases[i].push_back(pm.base());
      mappings_.push_back(std::move(pm));
    }
  }
  auto answers = control.exchange_with(peers, mapped);
  if (!answers) return std::nullopt;

  for (std::size_t i = 0; i < peers.size(); ++i) {
    const unsigned h = peers[i];
    if (mapped[i][0] != std::byte{1} || (*answers)[i].size() != 1 ||
        (*answers)[i][0] != std::byte{1})
      continue;
    peer_[h] = 1;
    for (std::uint32_t l = 0; l < locs.size(); ++l) {
      const auto [chunk, offset] = memory[i].slots[l];
      if (dist_.home[l] == h && chunk != 0 && plan.locks[l].locked)
        view_[l] = bases[i][chunk - 1] + offset;
    }
  }
  return std::nullopt;
}

void SharedPeers::RunViews::set(bool on) {
  for (std::uint32_t l = 0; l < peers_.view_.size(); ++l)
    if (peers_.view_[l] != nullptr) on ? graph_.set_view(l, peers_.view_[l]) : graph_.reset_view(l);
}

}  // namespace ordo::rt
