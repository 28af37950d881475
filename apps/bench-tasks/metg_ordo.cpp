// ordo's side of ordo-bench-tasks --metg (metg.hpp): the 1-D stencil of width W as one graph
// of two steps, run for steps/2 iterations. Locations a[i] and b[i] hold the two buffers; the
// first W tasks read a[i-1], a[i], a[i+1] and write b[i], the next W read b and write a, so
// the locks' program order gives exactly Task Bench's dependencies (a task after the three
// tasks of the previous step that wrote its inputs, which are also the last readers of the
// tile it overwrites). Timed: Runtime::run of the steps; the graph is built and run once for one
// iteration before (plan, engine and first-touch costs are not the steady state).
#include <string>

#include <ordo/ordo.hpp>

#include "metg.hpp"
#include "metg_systems.hpp"

namespace ordo::bench::metg {

namespace {

class OrdoStencil final : public StencilSystem {
 public:
  explicit OrdoStencil(unsigned workers) : rt_(ordo::RuntimeOptions{.workers = workers}) {}

  double run(unsigned width, std::uint64_t steps, std::uint64_t iterations,
             std::vector<std::uint64_t>& tiles) override {
    ordo::Graph g;
    std::vector<ordo::Location<std::uint64_t>> buf[2];
    for (int k = 0; k < 2; ++k)
      for (unsigned i = 0; i < width; ++i)
        buf[k].push_back(g.location<std::uint64_t>(std::string(k ? "b" : "a") + std::to_string(i), 1));
    for (int k = 0; k < 2; ++k)
      for (unsigned i = 0; i < width; ++i) {
        const auto& in = buf[k];
        const auto out = buf[1 - k][i];
        const bool has_left = i > 0, has_right = i + 1 < width;
        std::vector<ordo::Access> acc;
        if (has_left) acc.push_back(ordo::read(in[i - 1]));
        acc.push_back(ordo::read(in[i]));
        if (has_right) acc.push_back(ordo::read(in[i + 1]));
        acc.push_back(ordo::write(out));
        const auto left = in[has_left ? i - 1 : i], self = in[i], right = in[has_right ? i + 1 : i];
        g.task(std::string(k ? "b" : "a") + std::to_string(i), std::move(acc),
               [=](ordo::Context& ctx) {
                 const std::uint64_t l = has_left ? ctx.read(left)[0] : 0;
                 const std::uint64_t r = has_right ? ctx.read(right)[0] : 0;
                 ctx.write(out)[0] = task(l, ctx.read(self)[0], r, iterations);
               });
      }
    const std::vector<std::uint64_t> start = initial_tiles(width);
    auto set_start = [&] {
      for (unsigned i = 0; i < width; ++i) g.data(buf[0][i])[0] = start[i];
    };
    set_start();
    rt_.run(g, 1);
    set_start();
    const auto t0 = Clock::now();
    rt_.run(g, steps / 2);
    const double seconds = since(t0);
    tiles.resize(width);
    for (unsigned i = 0; i < width; ++i) tiles[i] = g.data(buf[0][i])[0];
    return seconds;
  }

 private:
  ordo::Runtime rt_;
};

}  // namespace

std::unique_ptr<StencilSystem> make_ordo_stencil(unsigned workers) {
  return std::make_unique<OrdoStencil>(workers);
}

}  // namespace ordo::bench::metg
