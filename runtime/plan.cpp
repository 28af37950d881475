#include "runtime/plan.hpp"

#include <algorithm>
#include <numeric>
#include <queue>
#include <sstream>

namespace ordo::rt {

namespace {

struct Request {
  std::uint32_t task;
  Mode mode;
  bool explicit_pos;
  std::int64_t position;
};

// The initial FIFO of every location, in grant order, before phases are formed: one flat
// array, location after location (CSR), filled by counting (no per-location vectors).
struct Fifos {
  std::vector<std::uint32_t> offsets;  // per location l: [offsets[l], offsets[l + 1])
  std::vector<Request> requests;
  std::span<Request> of(std::uint32_t l) {
    return {requests.data() + offsets[l], requests.data() + offsets[l + 1]};
  }
  std::span<const Request> of(std::uint32_t l) const {
    return {requests.data() + offsets[l], requests.data() + offsets[l + 1]};
  }
  std::uint32_t size() const { return static_cast<std::uint32_t>(offsets.size() - 1); }
};

std::string initial_fifos(const Graph& graph, Fifos& fifos) {
  const auto& locs = graph.locations();
  const auto& all = graph.all_accesses();
  fifos.offsets.assign(locs.size() + 1, 0);
  for (const AccessDesc& a : all) ++fifos.offsets[a.location + 1];
  for (std::size_t l = 0; l < locs.size(); ++l) fifos.offsets[l + 1] += fifos.offsets[l];
  fifos.requests.resize(all.size());
  std::vector<std::uint32_t> cursor(fifos.offsets.begin(), fifos.offsets.end() - 1);
  for (const Family& f : graph.families()) {
    if (f.offsets == Graph::kNoAccesses) continue;
    for (std::uint32_t i = 0; i < f.count; ++i)
      for (const AccessDesc& a : graph.member_accesses(f, i))
        fifos.requests[cursor[a.location]++] = {f.first + i, a.mode, a.has_position, a.position};
  }

  for (std::uint32_t l = 0; l < fifos.size(); ++l) {
    auto fifo = fifos.of(l);
    if (fifo.empty()) continue;
    auto explicit_count = std::count_if(fifo.begin(), fifo.end(),
                                        [](const Request& r) { return r.explicit_pos; });
    if (explicit_count == 0) continue;  // program order
    if (explicit_count != static_cast<std::ptrdiff_t>(fifo.size())) {
      const Request& with = *std::find_if(fifo.begin(), fifo.end(),
                                          [](const Request& r) { return r.explicit_pos; });
      const Request& without = *std::find_if(fifo.begin(), fifo.end(),
                                             [](const Request& r) { return !r.explicit_pos; });
      return "location '" + locs[l].name + "': task '" + graph.task_name(with.task) +
             "' gives an explicit position but task '" + graph.task_name(without.task) +
             "' does not; give positions to every access of this location or to none "
             "(none means program order)";
    }
    std::stable_sort(fifo.begin(), fifo.end(), [](const Request& a, const Request& b) {
      return a.position < b.position;
    });
    for (std::size_t i = 1; i < fifo.size(); ++i) {
      if (fifo[i].position == fifo[i - 1].position &&
          (fifo[i].mode == Mode::write || fifo[i - 1].mode == Mode::write)) {
        return "location '" + locs[l].name + "': tasks '" + graph.task_name(fifo[i - 1].task) +
               "' and '" + graph.task_name(fifo[i].task) + "' share position " +
               std::to_string(fifo[i].position) +
               " and one of them writes; equal positions are allowed for reads only (they "
               "form a read group), so give the write a position of its own";
      }
    }
  }
  return {};
}

struct Edge {
  std::uint32_t to;
  std::uint32_t location;
};

// Delay digraph over tasks: u -> v when v's request on some location comes in the phase right
// after u's (v waits for u). Adjacent phases suffice for reachability.
std::vector<std::vector<Edge>> delay_digraph(const Graph& graph, const Fifos& fifos) {
  std::vector<std::vector<Edge>> adj(graph.task_count());
  for (std::uint32_t l = 0; l < fifos.size(); ++l) {
    const auto fifo = fifos.of(l);
    bool has_writer = std::any_of(fifo.begin(), fifo.end(),
                                  [](const Request& r) { return r.mode == Mode::write; });
    if (!has_writer) continue;
    // Split into phases, then connect each phase to the next.
    std::vector<std::pair<std::size_t, std::size_t>> phases;
    for (std::size_t i = 0; i < fifo.size();) {
      std::size_t j = i + 1;
      if (fifo[i].mode == Mode::read)
        while (j < fifo.size() && fifo[j].mode == Mode::read) ++j;
      phases.emplace_back(i, j);
      i = j;
    }
    for (std::size_t p = 0; p + 1 < phases.size(); ++p)
      for (std::size_t a = phases[p].first; a < phases[p].second; ++a)
        for (std::size_t b = phases[p + 1].first; b < phases[p + 1].second; ++b)
          adj[fifo[a].task].push_back({fifo[b].task, l});
  }
  return adj;
}

// Returns a description of one cycle, or an empty string. Iterative DFS (graphs can hold
// millions of tasks).
std::string find_cycle(const Graph& graph, const std::vector<std::vector<Edge>>& adj) {
  const std::size_t n = adj.size();
  enum : std::uint8_t { white, grey, black };
  std::vector<std::uint8_t> colour(n, white);
  std::vector<std::uint32_t> parent(n, 0), parent_loc(n, 0);
  std::vector<std::pair<std::uint32_t, std::size_t>> stack;
  for (std::uint32_t root = 0; root < n; ++root) {
    if (colour[root] != white) continue;
    stack.push_back({root, 0});
    colour[root] = grey;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      if (next == adj[u].size()) {
        colour[u] = black;
        stack.pop_back();
        continue;
      }
      const Edge e = adj[u][next++];
      if (colour[e.to] == white) {
        colour[e.to] = grey;
        parent[e.to] = u;
        parent_loc[e.to] = e.location;
        stack.push_back({e.to, 0});
      } else if (colour[e.to] == grey) {
        // Cycle: e.to -> ... -> u -> e.to. Walk back from u.
        std::vector<std::pair<std::uint32_t, std::uint32_t>> chain;  // (task, loc of edge in)
        chain.push_back({e.to, e.location});
        for (std::uint32_t v = u; v != e.to; v = parent[v]) chain.push_back({v, parent_loc[v]});
        std::reverse(chain.begin() + 1, chain.end());
        // chain[0] = e.to entered from u via e.location; chain[i] entered via its loc.
        const auto& locs = graph.locations();
        std::ostringstream msg;
        msg << "cyclic lock order (the run would deadlock): ";
        for (std::size_t i = 0; i < chain.size(); ++i) {
          std::uint32_t waiter = chain[(i + 1) % chain.size()].first;
          std::uint32_t loc = chain[(i + 1) % chain.size()].second;
          if (i) msg << ", ";
          msg << "task '" << graph.task_name(waiter) << "' waits for task '"
              << graph.task_name(chain[i].first) << "' on location '" << locs[loc].name << "'";
        }
        msg << ". Reorder the explicit positions so that every location orders these tasks the "
               "same way, or drop the positions to use program order";
        return msg.str();
      }
    }
  }
  return {};
}

}  // namespace

CompileResult compile(const Graph& graph) {
  CompileResult result;
  Fifos fifos;
  result.error = initial_fifos(graph, fifos);
  if (!result.error.empty()) return result;
  // Program order everywhere: every delay edge goes from an earlier to a later declared task,
  // so there is no cycle to look for (header); the check, a graph as large as the task list,
  // is only built when some location has explicit positions.
  const auto& all = graph.all_accesses();
  const bool any_explicit =
      std::any_of(all.begin(), all.end(), [](const AccessDesc& a) { return a.has_position; });
  if (any_explicit) {
    result.error = find_cycle(graph, delay_digraph(graph, fifos));
    if (!result.error.empty()) return result;
  }

  Plan& plan = result.plan;
  plan.tasks = graph.task_count();
  plan.locks.resize(fifos.size());
  // Per-task lock lists (CSR): count, then fill location after location, which sorts each
  // task's list by location (fiber tasks binary-search it).
  std::uint32_t last_locked = 0;
  bool any_locked = false;
  for (std::uint32_t l = 0; l < fifos.size(); ++l) {
    const auto fifo = fifos.of(l);
    plan.locks[l].locked = std::any_of(fifo.begin(), fifo.end(),
                                       [](const Request& r) { return r.mode == Mode::write; });
    if (!plan.locks[l].locked) continue;
    any_locked = true;
    for (const Request& r : fifo) last_locked = std::max(last_locked, r.task);
  }
  if (any_locked) {
    auto& offsets = plan.task_lock_offsets;
    offsets.assign(std::size_t{last_locked} + 2, 0);
    for (std::uint32_t l = 0; l < fifos.size(); ++l)
      if (plan.locks[l].locked)
        for (const Request& r : fifos.of(l)) ++offsets[r.task + 1];
    for (std::size_t t = 0; t + 1 < offsets.size(); ++t) offsets[t + 1] += offsets[t];
    plan.task_locks.resize(offsets.back());
    std::vector<std::uint32_t> cursor(offsets.begin(), offsets.end() - 1);
    for (std::uint32_t l = 0; l < fifos.size(); ++l)
      if (plan.locks[l].locked)
        for (const Request& r : fifos.of(l)) plan.task_locks[cursor[r.task]++] = l;
  }
  for (std::uint32_t l = 0; l < fifos.size(); ++l) {
    const auto fifo = fifos.of(l);
    LockPlan& lp = plan.locks[l];
    if (!lp.locked) continue;
    lp.members.reserve(fifo.size());

    for (std::size_t i = 0; i < fifo.size();) {
      std::size_t j = i + 1;
      if (fifo[i].mode == Mode::read)
        while (j < fifo.size() && fifo[j].mode == Mode::read) ++j;
      Phase ph;
      ph.begin = static_cast<std::uint32_t>(lp.members.size());
      for (std::size_t k = i; k < j; ++k) lp.members.push_back(fifo[k].task);
      ph.end = static_cast<std::uint32_t>(lp.members.size());
      ph.mode = fifo[i].mode;
      lp.phases.push_back(ph);
      i = j;
    }
    lp.initial_phase = 0;
    lp.initial_begin = lp.phases[0].begin;
    lp.initial_end = lp.phases[0].end;
    if (lp.phases.size() > 1 && lp.phases.front().mode == Mode::read &&
        lp.phases.back().mode == Mode::read) {
      // Merge the first read group into the last one: members become [last..., first...].
      Phase first = lp.phases.front();
      Phase last = lp.phases.back();
      std::vector<std::uint32_t> merged(lp.members.begin() + last.begin,
                                        lp.members.begin() + last.end);
      merged.insert(merged.end(), lp.members.begin() + first.begin,
                    lp.members.begin() + first.end);
      std::vector<std::uint32_t> members(lp.members.begin() + first.end,
                                         lp.members.begin() + last.begin);
      const std::uint32_t shift = first.end - first.begin;
      std::vector<Phase> phases(lp.phases.begin() + 1, lp.phases.end() - 1);
      for (Phase& p : phases) {
        p.begin -= shift;
        p.end -= shift;
      }
      Phase wrap;
      wrap.begin = static_cast<std::uint32_t>(members.size());
      members.insert(members.end(), merged.begin(), merged.end());
      wrap.end = static_cast<std::uint32_t>(members.size());
      wrap.mode = Mode::read;
      phases.push_back(wrap);
      lp.members = std::move(members);
      lp.phases = std::move(phases);
      lp.initial_phase = static_cast<std::uint32_t>(lp.phases.size() - 1);
      lp.initial_begin = wrap.begin + (last.end - last.begin);
      lp.initial_end = wrap.end;
    }
  }
  return result;
}

std::vector<std::uint32_t> sequential_order(const Graph& graph) {
  Fifos fifos;
  initial_fifos(graph, fifos);
  auto adj = delay_digraph(graph, fifos);
  const std::size_t n = adj.size();
  std::vector<std::uint32_t> indegree(n, 0);
  for (const auto& out : adj)
    for (const Edge& e : out) ++indegree[e.to];
  // Kahn's algorithm, smallest declaration index first.
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
  for (std::uint32_t t = 0; t < n; ++t)
    if (indegree[t] == 0) ready.push(t);
  std::vector<std::uint32_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    std::uint32_t u = ready.top();
    ready.pop();
    order.push_back(u);
    for (const Edge& e : adj[u])
      if (--indegree[e.to] == 0) ready.push(e.to);
  }
  return order;
}

}  // namespace ordo::rt
