// oneTBB's side of ordo-bench-tasks: a flow graph of continue_nodes, one node per task, with
// the edges of bench.hpp made explicitly (a flow graph has no data accesses to derive them
// from), run inside a task_arena of the requested concurrency.
//   independent  N nodes without edges; each gets a try_put from the main thread.
//   chain        N nodes, edge i -> i+1; node 0 gets the try_put.
//   stencil1d    K x T nodes, edges (k, i-1) -> (k, i), (k-1, i) -> (k, i) and
//                (k-1, i+1) -> (k, i); node (0, 0), the only one without predecessors, gets
//                the try_put.
// Timed: building the graph (nodes and edges), running it (wait_for_all) and destroying it.
// The arena and its worker threads are created untimed.
#include <chrono>
#include <deque>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include "bench.hpp"

namespace ordo::bench {

namespace {

namespace flow = oneapi::tbb::flow;
using Node = flow::continue_node<flow::continue_msg>;

class TbbSystem final : public System {
 public:
  explicit TbbSystem(unsigned threads)
      : limit_(oneapi::tbb::global_control::max_allowed_parallelism, threads),
        arena_(static_cast<int>(threads)) {
    arena_.initialize();
    arena_.execute([] {});
  }

 private:
  double within(const std::function<double()>& pattern) override {
    double secs = 0;
    arena_.execute([&] { secs = pattern(); });
    return secs;
  }

  double independent(const Sizes& s) override {
    std::vector<std::uint64_t> counters(s.independent, 0);
    auto t0 = Clock::now();
    {
      flow::graph g;
      std::deque<Node> nodes;  // a deque: nodes cannot move once edges point at them
      for (std::uint64_t i = 0; i < s.independent; ++i)
        nodes.emplace_back(g, [c = &counters[i]](const flow::continue_msg&) { ++*c; });
      for (Node& n : nodes) n.try_put(flow::continue_msg());
      g.wait_for_all();
    }
    double secs = since(t0);
    check_independent("tbb", counters);
    return secs;
  }

  double chain(const Sizes& s, const Expected& e) override {
    std::uint64_t x = 0;
    auto t0 = Clock::now();
    {
      flow::graph g;
      std::deque<Node> nodes;
      for (std::uint64_t i = 0; i < s.chain; ++i) {
        nodes.emplace_back(g, [&x, i](const flow::continue_msg&) { x = chain_step(x, i); });
        if (i > 0) flow::make_edge(nodes[i - 1], nodes[i]);
      }
      if (!nodes.empty()) nodes.front().try_put(flow::continue_msg());
      g.wait_for_all();
    }
    double secs = since(t0);
    check_chain("tbb", x, e);
    return secs;
  }

  double stencil(const Sizes& s, const Expected& e) override {
    std::vector<Tile> tiles(s.tiles);
    Tile* t = tiles.data();
    const std::uint32_t n = s.tiles;
    auto t0 = Clock::now();
    {
      flow::graph g;
      std::deque<Node> nodes;
      for (std::uint32_t k = 0; k < s.iterations; ++k) {
        for (std::uint32_t i = 0; i < n; ++i) {
          const bool has_left = i > 0, has_right = i + 1 < n;
          nodes.emplace_back(g, [t, i, has_left, has_right](const flow::continue_msg&) {
            t[i].v = stencil_step(has_left ? t[i - 1].v : 0, t[i].v, has_right ? t[i + 1].v : 0);
          });
          Node& self = nodes.back();
          const std::size_t at = std::size_t{k} * n + i;
          if (has_left) flow::make_edge(nodes[at - 1], self);
          if (k > 0) {
            flow::make_edge(nodes[at - n], self);
            if (has_right) flow::make_edge(nodes[at - n + 1], self);
          }
        }
      }
      if (!nodes.empty()) nodes.front().try_put(flow::continue_msg());
      g.wait_for_all();
    }
    double secs = since(t0);
    std::vector<std::uint64_t> result(n);
    for (std::uint32_t i = 0; i < n; ++i) result[i] = tiles[i].v;
    check_stencil("tbb", result, e);
    return secs;
  }

  // Lets the arena have `threads` threads even beyond the default (hardware threads).
  oneapi::tbb::global_control limit_;
  oneapi::tbb::task_arena arena_;
};

}  // namespace

std::unique_ptr<System> make_tbb(unsigned threads) { return std::make_unique<TbbSystem>(threads); }

}  // namespace ordo::bench
