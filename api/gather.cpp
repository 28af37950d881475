// The public gather (docs/distributed.md, "Gather"): a location, a grid or one value per rank
// collected onto one rank or every rank, between runs. It is itself an ordo graph run on the
// caller's Runtime, so the bytes travel on the data plane like any replica, and the graph
// check at its first run refuses ranks that did not call the same gather.
#include "api/gather.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "api/graph_impl.hpp"
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

void gather_pieces(Runtime& runtime, const std::string& what, const std::string& name,
                   std::span<const GatherPiece> pieces, unsigned to,
                   const std::function<void(std::size_t, std::span<std::byte>)>& fill,
                   const std::function<void(std::size_t, std::span<const std::byte>)>& take) {
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
  // part[i] lives on piece i's home, where put[i] (which writes it, so runs there) fills it;
  // take[q] runs on receiving rank q (it writes sink[q]) and reads every part. Names begin
  // "ordo.": ordo-trace lists them apart from the program's graphs.
  const std::string prefix = "ordo.gather[" + name + "].";
  Graph g;
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
           [&fill, &pieces, i, loc = part[i]](Context& ctx) {
             fill(i, ctx.write(loc).first(pieces[i].bytes));
           });
  for (std::size_t k = 0; k < receivers.size(); ++k) {
    std::vector<Access> acc{write(sink[k])};
    for (const Location<std::byte>& p : part) acc.push_back(read(p));
    g.task(prefix + "take[" + std::to_string(receivers[k]) + "]", std::move(acc),
           [&take, &pieces, &part](Context& ctx) {
             for (std::size_t i = 0; i < part.size(); ++i)
               take(i, ctx.read(part[i]).first(pieces[i].bytes));
           });
  }
  try {
    runtime.run(g, 1);
  } catch (const Error& e) {
    throw Error(what + " failed: " + std::string(e.what()) +
                " (every rank must call the same gathers, with the same arguments, in the same "
                "order)");
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
    throw Error("Runtime::gather: location '" + desc.name + "' holds another element type");
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

}  // namespace ordo
