// Memory shared with the ranks of this host (docs/distributed.md, "Shared memory between ranks
// of one host"). A graph that keeps its small locations in a SharedArena (shared_memory.hpp)
// lets a rank on the same host (Net::same_host) map them; when two ranks have mapped each
// other's, a location homed on one of them whose buffer lies in the home's arena is *shared*:
// GRANTs and RELEASEs between them carry no bytes (wire::kShared), and for the length of a run
// the proxy's tasks read and write the home's buffer (RunViews).
//
// Set-up (setup(): collective, at the engine's construction, after the graph check and before
// the first GRANT; two rounds of messages between each rank and its neighbours on this host,
// Distribution::neighbours, the only ranks it exchanges GRANTs and RELEASEs with, whatever it
// shares). Round 1: each rank's process id, the chunks of its arena (descriptor, size, inode)
// and where each location lies in them (describe_memory). A rank maps the chunks of each such
// peer when both keep locations in shared memory and it is asked to share. Round 2: whether
// it mapped them. Two ranks share when each mapped the other. Both ends decide from the same data, and the home
// decides before it sends its first GRANT; a proxy needs no table to handle a message (the
// flag says), so a GRANT that overtakes round 2 is handled right.
//
// Threads: written once by setup() on the engine's thread before any protocol message goes
// out; read-only afterwards (shared_with() on any thread). RunViews changes the graph's views
// of shared locations on the engine's thread while no task runs; the transport's thread
// meanwhile only copies GRANT bytes into other (unshared) locations' replicas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/control_plane.hpp"
#include "runtime/distribution.hpp"
#include "runtime/graph.hpp"
#include "runtime/net.hpp"
#include "runtime/plan.hpp"
#include "runtime/shared_memory.hpp"

namespace ordo::rt {

class SharedPeers {
 public:
  // Nothing shared until setup().
  SharedPeers(const Graph& graph, const Distribution& dist)
      : graph_(graph), dist_(dist), peer_(dist.ranks, 0), view_(graph.locations().size()) {}
  SharedPeers(const SharedPeers&) = delete;
  SharedPeers& operator=(const SharedPeers&) = delete;

  // The collective set-up above. `share`: whether this rank shares at all (RuntimeOptions).
  // Returns the peer and what is wrong when a peer's description does not fit this graph
  // (ranks of different ordo versions), nullopt otherwise, also when the control plane was
  // stopped.
  struct Refusal {
    unsigned rank;
    std::string what;
  };
  std::optional<Refusal> setup(ControlPlane& control, const Net& net, const Plan& plan, bool share);

  // Whether `location`'s bytes are shared between this rank and `peer`: both use the home's
  // buffer. At the home, asked per peer; at a proxy, the peer is the home.
  bool shared_with(std::uint32_t location, unsigned peer) const {
    return dist_.is_home(location)
               ? peer_[peer] != 0 && graph_.shared_slot(location).has_value()
               : view_[location] != nullptr;
  }

  // For the length of a run: the graph's data() of every shared proxy location is the home's
  // buffer; back to the rank's own buffer when it ends.
  class RunViews {
   public:
    // `graph` is the one the peers were set up for (the engine's, writable).
    RunViews(Graph& graph, const SharedPeers& peers) : graph_(graph), peers_(peers) { set(true); }
    ~RunViews() { set(false); }
    RunViews(const RunViews&) = delete;
    RunViews& operator=(const RunViews&) = delete;

   private:
    void set(bool on);
    Graph& graph_;
    const SharedPeers& peers_;
  };

 private:
  const Graph& graph_;
  const Distribution& dist_;
  std::vector<char> peer_;          // per peer: the two share location memory
  std::vector<std::byte*> view_;    // per location homed on such a peer: its buffer, mapped here
  std::vector<PeerMapping> mappings_;
};

}  // namespace ordo::rt
