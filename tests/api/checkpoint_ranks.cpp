// Checkpoints and restart across ranks, for checkpoint_test.py (the multiprocess suite runs it
// under ordorun on 1 and 2 ranks). Every rank builds the same graph: blocks of doubles in a
// ring, each updated from its neighbours' edges, the iteration number (Context::iteration)
// and the previous iteration's reduced energy (a reduction read before its combine: state
// that crosses iterations, on every rank's copy). The run writes checkpoints when asked, can
// kill its own process (SIGKILL) in a given iteration, and can restart from a directory. At
// the end each rank writes the bytes of its home blocks and the energy to OUT.<rank>, which
// the driver compares between an uninterrupted run and a killed-then-restarted one.
// Exit status: 0 done, 2 an error (its message on stderr).
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <ordo/checkpoint.hpp>
#include <ordo/ordo.hpp>

namespace {

struct Args {
  std::uint64_t iters = 20;
  std::uint32_t blocks = 8;
  std::size_t width = 64;
  unsigned workers = 2;
  std::string checkpoint, restart, out;
  std::uint64_t every = 0;
  std::uint64_t die_at = 0;  // 0: never
  unsigned die_rank = 0;
  std::string die_once;  // a file: die only while it does not exist (created just before)
  bool until = false;  // run_until, checking a condition that never holds every 3 iterations
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("flag " + f + " needs a value");
    const std::string v = argv[++i];
    if (f == "--iters") a.iters = std::stoull(v);
    else if (f == "--blocks") a.blocks = static_cast<std::uint32_t>(std::stoul(v));
    else if (f == "--width")
      a.width = std::stoul(v);
    else if (f == "--workers") a.workers = static_cast<unsigned>(std::stoul(v));
    else if (f == "--checkpoint") a.checkpoint = v;
    else if (f == "--every") a.every = std::stoull(v);
    else if (f == "--restart") a.restart = v;
    else if (f == "--out") a.out = v;
    else if (f == "--die-at") a.die_at = std::stoull(v);
    else if (f == "--die-rank") a.die_rank = static_cast<unsigned>(std::stoul(v));
    else if (f == "--die-once")
      a.die_once = v;
    else if (f == "--until") a.until = v == "1";
    else throw std::runtime_error("unknown flag " + f);
  }
  return a;
}

int run(const Args& a) {
  ordo::Runtime rt({.workers = a.workers, .checkpoint_dir = a.checkpoint,
                    .checkpoint_every = a.every});
  const unsigned rank = rt.rank();
  ordo::Graph g;
  auto energy = g.reduction<double>("energy", a.blocks);
  auto x = g.location_family<double>("x", a.blocks, a.width);
  for (std::uint32_t b = 0; b < a.blocks; ++b) {
    auto d = g.data(x[b]);
    for (std::size_t j = 0; j < d.size(); ++j) d[j] = std::sin(0.1 * (b * a.width + j));
  }
  const std::uint32_t n = a.blocks;
  const Args args = a;
  g.task_family("update", n, [&](std::uint32_t b, ordo::AccessList& acc) {
    acc.add(ordo::write(x[b]));
    acc.add(ordo::read(x[(b + n - 1) % n]));
    acc.add(ordo::read(x[(b + 1) % n]));
    acc.add(ordo::read(energy));  // before the combine: the previous iteration's
    acc.add(ordo::contribute(energy, b));
  }, [=](ordo::Context& ctx, std::uint32_t b) {
    const std::uint64_t k = ctx.iteration();
    // A rank dies as a node would: no destructor, no message (ordorun then ends the job).
    // --die-once: a relaunched job (ordorun --restarts) passes the iteration it died in.
    const bool dies = args.die_at != 0 && k == args.die_at && args.die_rank == rank &&
                      (args.die_once.empty() || ::access(args.die_once.c_str(), F_OK) != 0);
    if (dies) {
      if (!args.die_once.empty())
        if (std::FILE* f = std::fopen(args.die_once.c_str(), "w")) std::fclose(f);
      ::raise(SIGKILL);
    }
    auto v = ctx.write(x[b]);
    const double left = ctx.read(x[(b + n - 1) % n]).back();
    const double right = ctx.read(x[(b + 1) % n])[0];
    const double e = ctx.value(energy);
    double sum = 0;
    for (std::size_t j = 0; j < v.size(); ++j) {
      const double l = j == 0 ? left : v[j - 1];
      const double r = j + 1 == v.size() ? right : v[j + 1];
      v[j] = 0.25 * (l + 2 * v[j] + r) + 1e-3 * std::cos(0.37 * static_cast<double>(k) + b) +
             1e-7 * e;
      sum += v[j] * v[j];
    }
    ctx.contribute(energy, b, sum);
  });
  g.combine(energy);

  std::uint64_t first = 0;
  if (!a.restart.empty()) first = rt.restart(g, a.restart);
  else
    first = ordo::resume(rt, g, a.checkpoint);  // 0 unless ordorun --restarts relaunched it
  std::uint64_t checks = 0;
  if (first < a.iters && a.until) {
    ordo::Until u;
    u.done = [&](const ordo::Graph&) {
      ++checks;
      return false;
    };
    u.check_every = 3;
    u.max_iterations = a.iters - first;
    rt.run_until(g, u);
  } else if (first < a.iters) {
    rt.run(g, a.iters - first);
  }
  if (rank == 0)
    std::printf("resumed_at=%llu checks=%llu\n", static_cast<unsigned long long>(first),
                static_cast<unsigned long long>(checks));

  if (!a.out.empty()) {
    std::vector<double> bytes;
    for (std::uint32_t b = 0; b < n; ++b)
      if (g.home_rank(x[b]) == rank) {
        auto d = std::as_const(g).data(x[b]);
        bytes.insert(bytes.end(), d.begin(), d.end());
      }
    bytes.push_back(g.value(energy));
    const std::string path = a.out + "." + std::to_string(rank);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), sizeof(double), bytes.size(), f) != bytes.size() ||
        std::fclose(f) != 0)
      throw std::runtime_error("cannot write " + path);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_ranks: %s\n", e.what());
    return 2;
  }
}
