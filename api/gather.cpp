// The public gather (docs/distributed.md, "Gather"): a location, a grid or one value per rank
// collected onto one rank or every rank, between runs. It is itself an ordo graph run on the
// caller's Runtime, so the bytes travel on the data plane like any replica, and the graph
// check at its first run refuses ranks that did not call the same gather. The graph follows
// the control plane's tree (gather.hpp, GatherRoute), so that a rank's endpoints stay its tree
// and graph neighbours, or goes direct for a large gather onto one rank.
#include "api/gather.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/graph_impl.hpp"
#include "runtime/tree.hpp"
#include "scheduler/pool.hpp"

namespace ordo {

namespace detail {

void check_gather(const Runtime& runtime, unsigned to, const std::string& what) {
  if (sched::Pool::current_worker() >= 0)
    throw Error(what + " called from a task body; gather between runs, from the program (a "
                "body reads the locations among its accesses through its Context)");
  if (to != kAllRanks && to >= runtime.ranks())
    throw Error(what + " onto rank " + std::to_string(to) + ": the job has " +
                std::to_string(runtime.ranks()) + " rank(s), 0 to " +
                std::to_string(runtime.ranks() - 1) +
                "; give one of them, or ordo::kAllRanks to gather onto every rank");
}

namespace {
std::size_t total_bytes(std::span<const GatherPiece> pieces) {
  std::size_t total = 0;
  for (const GatherPiece& p : pieces) total += p.bytes;
  return total;
}
}  // namespace

GatherRoute gather_route(std::span<const GatherPiece> pieces, unsigned to) {
  if (to == kAllRanks) return GatherRoute::tree;
  return total_bytes(pieces) <= kGatherTreeBytes ? GatherRoute::tree : GatherRoute::direct;
}

namespace {

using Fill = std::function<void(std::size_t, std::span<std::byte>)>;
using Take = std::function<void(std::size_t, std::span<const std::byte>)>;

// part[i] lives on piece i's home, where put[i] (which writes it, so runs there) fills it;
// take[q] runs on receiving rank q (it writes sink[q]) and reads every part.
void declare_direct(Graph& g, const std::string& prefix, unsigned ranks,
                    std::span<const GatherPiece> pieces, unsigned to, const Fill& fill,
                    const Take& take) {
  std::vector<Location<std::byte>> part;
  part.reserve(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    // A location holds at least one element; an empty piece moves one unused byte.
    part.push_back(g.location<std::byte>(prefix + "part[" + std::to_string(i) + "]",
                                         std::max<std::size_t>(pieces[i].bytes, 1)));
    g.set_home_rank(part[i], pieces[i].home);
  }
  std::vector<unsigned> receivers;
  for (unsigned q = 0; q < ranks; ++q)
    if (to == kAllRanks || to == q) receivers.push_back(q);
  std::vector<Location<std::byte>> sink;
  for (unsigned q : receivers) {
    sink.push_back(g.location<std::byte>(prefix + "sink[" + std::to_string(q) + "]", 1));
    g.set_home_rank(sink.back(), q);
  }
  for (std::size_t i = 0; i < pieces.size(); ++i)
    g.task(prefix + "put[" + std::to_string(i) + "]", {write(part[i])},
           [&fill, pieces, i, loc = part[i]](Context& ctx) {
             fill(i, ctx.write(loc).first(pieces[i].bytes));
           });
  for (std::size_t k = 0; k < receivers.size(); ++k) {
    std::vector<Access> acc{write(sink[k])};
    for (const Location<std::byte>& p : part) acc.push_back(read(p));
    g.task(prefix + "take[" + std::to_string(receivers[k]) + "]", std::move(acc),
           [&take, pieces, part](Context& ctx) {
             for (std::size_t i = 0; i < part.size(); ++i)
               take(i, ctx.read(part[i]).first(pieces[i].bytes));
           });
  }
}

// The pieces whose homes lie in a rank's subtree of the binomial tree ([r, r + lowbit(r)),
// every rank under rank 0), in piece order, packed in that order into the rank's location.
struct Subtree {
  std::vector<std::size_t> pieces, offset;
  std::size_t bytes = 0;
  // Where piece i sits in this subtree's location (i is one of `pieces`).
  std::size_t offset_of(std::size_t i) const {
    return offset[std::size_t(std::lower_bound(pieces.begin(), pieces.end(), i) - pieces.begin())];
  }
};

// Up: collect[r] on each rank r writes up[r], its subtree's pieces (its own filled there,
// its children's copied from their up[c]); rank 0's up[0] holds every piece. Down (onto
// every rank): pass[r] on each other rank reads its parent's copy (up[0] or down[parent]),
// keeps one in down[r] for its own children (a rank without children keeps one byte) and
// takes every piece. Onto one rank t other than 0: take[t] reads up[0]. Tasks are declared
// children before parents going up and parents before children going down, which is the
// order in which each location's FIFO lock grants them.
void declare_tree(Graph& g, const std::string& prefix, unsigned ranks,
                  std::span<const GatherPiece> pieces, unsigned to, const Fill& fill,
                  const Take& take) {
  auto subtree = std::make_shared<std::vector<Subtree>>(ranks);
  for (std::size_t i = 0; i < pieces.size(); ++i)
    for (unsigned r = pieces[i].home;; r = rt::tree::parent(r)) {
      Subtree& s = (*subtree)[r];
      s.pieces.push_back(i);
      s.offset.push_back(s.bytes);
      s.bytes += pieces[i].bytes;
      if (r == 0) break;
    }
  auto named = [&](const char* what, unsigned r) {
    return prefix + what + "[" + std::to_string(r) + "]";
  };
  auto located = [&](const char* what, unsigned r, std::size_t bytes) {
    Location<std::byte> loc = g.location<std::byte>(named(what, r), std::max<std::size_t>(bytes, 1));
    g.set_home_rank(loc, r);
    return loc;
  };
  // up[r] for the ranks whose subtree holds a piece (rank 0's always).
  std::vector<std::optional<Location<std::byte>>> up(ranks);
  for (unsigned r = 0; r < ranks; ++r)
    if (r == 0 || !(*subtree)[r].pieces.empty()) up[r] = located("up", r, (*subtree)[r].bytes);
  // Every piece, in order, from rank 0's collected copy or a rank's copy of it.
  auto take_all = [&take, subtree, pieces](std::span<const std::byte> all) {
    const Subtree& root = (*subtree)[0];
    for (std::size_t i = 0; i < pieces.size(); ++i)
      take(i, all.subspan(root.offset[i], pieces[i].bytes));
  };
  for (unsigned r = ranks; r-- > 0;) {
    if (!up[r]) continue;
    std::vector<std::pair<unsigned, Location<std::byte>>> from;  // children with pieces
    std::vector<Access> acc{write(*up[r])};
    for (unsigned c : rt::tree::children(r, ranks))
      if (up[c]) {
        from.emplace_back(c, *up[c]);
        acc.push_back(read(*up[c]));
      }
    const bool takes = r == 0 && (to == 0 || to == kAllRanks);
    g.task(named("collect", r), std::move(acc),
           [&fill, subtree, pieces, r, from, takes, take_all, mine = *up[r]](Context& ctx) {
             const Subtree& s = (*subtree)[r];
             const std::span<std::byte> dst = ctx.write(mine);
             for (std::size_t k = 0; k < s.pieces.size(); ++k)
               if (pieces[s.pieces[k]].home == r)
                 fill(s.pieces[k], dst.subspan(s.offset[k], pieces[s.pieces[k]].bytes));
             for (const auto& [c, loc] : from) {
               const Subtree& below = (*subtree)[c];
               const std::span<const std::byte> src = ctx.read(loc);
               for (std::size_t k = 0; k < below.pieces.size(); ++k) {
                 const std::size_t i = below.pieces[k];
                 std::memcpy(dst.data() + s.offset_of(i), src.data() + below.offset[k],
                             pieces[i].bytes);
               }
             }
             if (takes) take_all(dst);
           });
  }
  const std::size_t total = (*subtree)[0].bytes;
  if (to == kAllRanks) {
    std::vector<std::optional<Location<std::byte>>> down(ranks);
    down[0] = up[0];
    for (unsigned r = 1; r < ranks; ++r) {
      const bool relays = !rt::tree::children(r, ranks).empty();
      down[r] = located("down", r, relays ? total : 0);
      g.task(named("pass", r), {write(*down[r]), read(*down[rt::tree::parent(r)])},
             [take_all, relays, total, mine = *down[r],
              above = *down[rt::tree::parent(r)]](Context& ctx) {
               const std::span<const std::byte> src = ctx.read(above);
               if (relays) std::memcpy(ctx.write(mine).data(), src.data(), total);
               take_all(src);
             });
    }
  } else if (to != 0) {
    const Location<std::byte> sink = located("sink", to, 0);
    g.task(named("take", to), {write(sink), read(*up[0])},
           [take_all, all = *up[0]](Context& ctx) { take_all(ctx.read(all)); });
  }
}

}  // namespace

void declare_gather(Graph& g, const std::string& prefix, unsigned ranks,
                    std::span<const GatherPiece> pieces, unsigned to, GatherRoute route,
                    const Fill& fill, const Take& take) {
  if (route == GatherRoute::direct) declare_direct(g, prefix, ranks, pieces, to, fill, take);
  else declare_tree(g, prefix, ranks, pieces, to, fill, take);
}

void gather_pieces(Runtime& runtime, const std::string& what, const std::string& name,
                   std::span<const GatherPiece> pieces, unsigned to, const Fill& fill,
                   const Take& take) {
  check_gather(runtime, to, what);
  const unsigned ranks = runtime.ranks();
  if (ranks == 1) {
    std::vector<std::byte> bytes;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      bytes.resize(pieces[i].bytes);
      fill(i, bytes);
      take(i, bytes);
    }
    return;
  }
  // Names begin "ordo.": ordo-trace lists them apart from the program's graphs.
  Graph g;
  declare_gather(g, "ordo.gather[" + name + "].", ranks, pieces, to, gather_route(pieces, to),
                 fill, take);
  // The run-start agreement compares these words, not the gather graph's run: ranks that
  // gather different things, or onto different ranks, are refused before the graph is built.
  impl_of(g).collective =
      what + " ('" + name + "', " + std::to_string(total_bytes(pieces)) + " bytes in " +
      std::to_string(pieces.size()) + " piece(s)) onto " +
      (to == kAllRanks ? std::string("every rank") : "rank " + std::to_string(to));
  // The run's error, said as the gather's, of the same type (a peer's failure stays one).
  auto said = [&](const Error& e) {
    return what + " failed: " + std::string(e.what()) +
           " (every rank must call the same gathers, with the same arguments, in the same order)";
  };
  try {
    runtime.run(g, 1);
  } catch (const GraphMismatch& e) {
    throw GraphMismatch(said(e));
  } catch (const ProtocolError& e) {
    throw ProtocolError(said(e), e.rank());
  } catch (const PeerFailure& e) {
    throw PeerFailure(said(e), e.rank());
  } catch (const Error& e) {
    throw Error(said(e));
  }
}

}  // namespace detail

void Runtime::gather_location(const Graph& graph, std::uint64_t serial, std::uint32_t location,
                              const std::type_info& type, unsigned to,
                              const std::function<void*(std::size_t)>& out) {
  const detail::GraphImpl& impl = detail::impl_of(graph);
  impl.check_handle(serial, location, "Runtime::gather");
  const rt::Graph& g = impl.graph;
  const rt::LocationDesc& desc = g.locations()[location];
  if (*desc.type != type)
    throw Error("Runtime::gather: location '" + desc.name + "' holds another element type; "
                "gather it through the Location<T> that Graph::location returned (the same T)");
  const std::string what = "Runtime::gather of location '" + desc.name + "'";
  detail::check_gather(*this, to, what);
  unsigned home = 0;
  if (impl.engine) {
    if (impl.engine->ranks() != ranks())
      throw Error(what + ": the graph ran on " + std::to_string(impl.engine->ranks()) +
                  " rank(s), this Runtime has " + std::to_string(ranks()) +
                  "; gather on the Runtime that ran the graph");
    home = impl.engine->home(location);
  } else if (ranks() > 1) {
    throw Error(what + ": a location's home rank is decided at the graph's first run, and this "
                "graph has not run; run it first (until then each rank holds what it set "
                "itself, which Graph::data reads)");
  }
  // Read here, on the caller's thread: the home's own copy (null: nothing written, zeros).
  const void* source = home == rank() && g.has_storage(location) ? g.data(location) : nullptr;
  const std::size_t bytes = g.bytes_of(location);
  void* destination = to == kAllRanks || to == rank() ? out(desc.count) : nullptr;
  const detail::GatherPiece piece{bytes, home};
  detail::gather_pieces(
      *this, what, desc.name, std::span(&piece, 1), to,
      [&](std::size_t, std::span<std::byte> dst) {
        if (source) std::memcpy(dst.data(), source, dst.size());
        else std::memset(dst.data(), 0, dst.size());
      },
      [&](std::size_t, std::span<const std::byte> src) {
        std::memcpy(destination, src.data(), src.size());
      });
}

void Runtime::gather_value_bytes(const void* mine, std::size_t size, unsigned to,
                                 const std::function<void*(std::size_t)>& out) {
  const std::string what = "Runtime::gather_values";
  detail::check_gather(*this, to, what);
  const unsigned n = ranks();
  std::vector<detail::GatherPiece> pieces(n);
  for (unsigned r = 0; r < n; ++r) pieces[r] = {size, r};
  auto* destination =
      static_cast<std::byte*>(to == kAllRanks || to == rank() ? out(n) : nullptr);
  detail::gather_pieces(
      *this, what, "values", pieces, to,
      [&](std::size_t, std::span<std::byte> dst) { std::memcpy(dst.data(), mine, size); },
      [&](std::size_t r, std::span<const std::byte> src) {
        std::memcpy(destination + r * size, src.data(), size);
      });
}

void Runtime::gather_pieces(const std::string& what, const std::string& name,
                            std::span<const GatherPiece> pieces, unsigned to, const PieceFill& fill,
                            const PieceTake& take) {
  detail::gather_pieces(*this, what, name, pieces, to, fill, take);
}

void Runtime::check_gather(unsigned to, const std::string& what) const {
  detail::check_gather(*this, to, what);
}

}  // namespace ordo
