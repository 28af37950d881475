// Reductions across ranks, for the multiprocess suite (reduce_ranks_test.py runs it on 1-3
// ranks x 1, 2, 4 workers, locations shared and copied). Every rank builds the same graph:
// per iteration each block updates its data from the previous iteration's reduced value, and
// contributes to three reductions (a sum, a min and a non-commutative user operator); after
// their combines each block reads this iteration's sum and contributes to a fourth reduction,
// on which run_until stops. Every rank checks, against a sequential run of the same
// computation in this binary (combine_in_order), the value its condition saw at every check,
// where the run stopped, and the final values (Graph::value, its own copy). It prints one line
// with the bits, which the driver compares across every configuration and rank.
// Exit status: 0 all match, 1 a mismatch, 2 an error.
// With --throwing-operator it runs a reduction whose operator throws in iteration 2 instead:
// every rank must stop with an error (exit 2), the rank that ran the operator naming it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace {

constexpr std::uint32_t kBlocks = 10;
constexpr std::size_t kWidth = 3;
constexpr std::uint64_t kCheckEvery = 3;
constexpr double kStop = 1e-7;

struct Mix {
  std::uint64_t operator()(const std::uint64_t& a, const std::uint64_t& b) const {
    return a * 0x9E3779B97F4A7C15ull + (b ^ (a >> 7));
  }
};

// The block update, shared by the graph and the sequential reference.
void update(std::span<double> x, std::uint32_t b, std::uint64_t k, double previous_energy) {
  for (std::size_t j = 0; j < x.size(); ++j)
    x[j] = std::sin(1.0 + b + 0.7 * j + 0.3 * static_cast<double>(k)) *
               std::ldexp(1.0, -static_cast<int>(k / 2) + static_cast<int>(b % 4) * 7) +
           1e-9 * previous_energy;
}
double energy_of(std::span<const double> x) {
  double e = 0;
  for (double v : x) e += v * v;
  return e;
}
double scaled(double y, double x0, double energy, std::uint32_t b) {
  return 0.5 * y + (energy * 1e-6 + x0 * 1e-9) / (b + 1);
}

struct Trace {
  std::vector<double> seen;  // the norm at every check
  std::uint64_t iterations = 0;
  double energy = 0, lowest = 0, norm = 0;
  std::uint64_t mix = 0;
};

Trace sequential() {
  Trace t;
  std::vector<std::vector<double>> x(kBlocks, std::vector<double>(kWidth, 0.0));
  std::vector<double> y(kBlocks, 0.0);
  double energy = 0;  // a reader before the combine sees 0 in iteration 0
  for (std::uint64_t k = 0; k < 200; ++k) {
    std::vector<double> e(kBlocks), lo(kBlocks), ny(kBlocks);
    std::vector<std::uint64_t> m(kBlocks);
    for (std::uint32_t b = 0; b < kBlocks; ++b) {
      update(x[b], b, k, energy);
      e[b] = energy_of(x[b]);
      lo[b] = x[b][0];
      m[b] = b * 7919 + k;
    }
    energy = ordo::combine_in_order<double>(e);
    t.lowest = ordo::combine_in_order<double>(lo, ordo::Min{});
    t.mix = ordo::combine_in_order<std::uint64_t>(m, Mix{});
    for (std::uint32_t b = 0; b < kBlocks; ++b) {
      y[b] = scaled(y[b], x[b][0], energy, b);
      ny[b] = y[b] * y[b];
    }
    t.norm = ordo::combine_in_order<double>(ny);
    t.energy = energy;
    t.iterations = k + 1;
    if (t.iterations % kCheckEvery == 0) {
      t.seen.push_back(t.norm);
      if (t.norm < kStop) break;
    }
  }
  return t;
}

std::string hex(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(bits));
  return buf;
}

// A reduction over blocks homed on every rank whose operator throws on the value block 3
// contributes in iteration 2 (wherever the combining step runs).
int run_throwing_operator(ordo::Runtime& rt) {
  ordo::Graph g;
  auto fragile = g.reduction<int>("fragile", kBlocks, [](const int& a, const int& b) -> int {
    if (b == 7) throw std::runtime_error("seven is not allowed");
    return a + b;
  });
  auto x = g.location_family<int>("x", kBlocks, 1);
  for (std::uint32_t b = 0; b < kBlocks; ++b) g.set_home_rank(x[b], b % rt.ranks());
  g.task_family("c", kBlocks, [&](std::uint32_t b, ordo::AccessList& acc) {
    acc.add(ordo::write(x[b]));
    acc.add(ordo::contribute(fragile, b));
  }, [=](ordo::Context& ctx, std::uint32_t b) {
    ctx.contribute(fragile, b, ctx.iteration() == 2 && b == 3 ? 7 : 1);
  });
  g.combine(fragile);
  rt.run(g, 5);
  std::printf("the run did not stop on the operator's exception\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned workers = 1;
  bool scatter = false, throwing = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--scatter")) scatter = true;
    if (!std::strcmp(argv[i], "--throwing-operator")) throwing = true;
    if (!std::strcmp(argv[i], "--workers") && i + 1 < argc) workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  try {
    ordo::Runtime rt({.workers = workers});
    if (throwing) return run_throwing_operator(rt);
    ordo::Graph g;
    auto energy = g.reduction<double>("energy", kBlocks);
    auto lowest = g.reduction<double>("lowest", kBlocks, ordo::Min{});
    auto mix = g.reduction<std::uint64_t>("mix", kBlocks, Mix{});
    auto norm = g.reduction<double>("norm", kBlocks);
    auto x = g.location_family<double>("x", kBlocks, kWidth);
    auto y = g.location_family<double>("y", kBlocks, 1);
    if (scatter)
      for (std::uint32_t b = 0; b < kBlocks; ++b) {
        g.set_home_rank(x[b], (b * 7 + 1) % rt.ranks());
        g.set_home_rank(y[b], (b * 3) % rt.ranks());
      }
    g.task_family("update", kBlocks, [&](std::uint32_t b, ordo::AccessList& acc) {
      acc.add(ordo::write(x[b]));
      acc.add(ordo::read(energy));  // before the combine: the previous iteration's
      acc.add(ordo::contribute(energy, b));
      acc.add(ordo::contribute(lowest, b));
      acc.add(ordo::contribute(mix, b));
    }, [=](ordo::Context& ctx, std::uint32_t b) {
      auto v = ctx.write(x[b]);
      update(v, b, ctx.iteration(), ctx.value(energy));
      ctx.contribute(energy, b, energy_of(v));
      ctx.contribute(lowest, b, v[0]);
      ctx.contribute(mix, b, b * 7919 + ctx.iteration());
    });
    g.combine(energy);
    g.combine(lowest);
    g.combine(mix);
    g.task_family("scale", kBlocks, [&](std::uint32_t b, ordo::AccessList& acc) {
      acc.add(ordo::write(y[b]));
      acc.add(ordo::read(x[b]));
      acc.add(ordo::read(energy));  // after the combine: this iteration's
      acc.add(ordo::contribute(norm, b));
    }, [=](ordo::Context& ctx, std::uint32_t b) {
      auto v = ctx.write(y[b]);
      v[0] = scaled(v[0], ctx.read(x[b])[0], ctx.value(energy), b);
      ctx.contribute(norm, b, v[0] * v[0]);
    });
    g.combine(norm);

    Trace got;
    ordo::Until until;
    until.done = [&](const ordo::Graph& graph) {
      got.seen.push_back(graph.value(norm));
      return got.seen.back() < kStop;
    };
    until.check_every = kCheckEvery;
    until.max_iterations = 200;
    got.iterations = rt.run_until(g, until).iterations;
    got.energy = g.value(energy);
    got.lowest = g.value(lowest);
    got.mix = g.value(mix);
    got.norm = g.value(norm);

    const Trace want = sequential();
    std::string wrong;
    if (got.seen != want.seen) wrong += " checks";
    if (got.iterations != want.iterations) wrong += " iterations";
    if (hex(got.energy) != hex(want.energy)) wrong += " energy";
    if (hex(got.lowest) != hex(want.lowest)) wrong += " lowest";
    if (got.mix != want.mix) wrong += " mix";
    if (hex(got.norm) != hex(want.norm)) wrong += " norm";
    std::printf("iterations=%llu checks=%zu energy=%s lowest=%s mix=%016llx norm=%s %s\n",
                static_cast<unsigned long long>(got.iterations), got.seen.size(),
                hex(got.energy).c_str(), hex(got.lowest).c_str(),
                static_cast<unsigned long long>(got.mix), hex(got.norm).c_str(),
                wrong.empty() ? "sequential=same" : ("sequential=differs:" + wrong).c_str());
    return wrong.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reduce_ranks: %s\n", e.what());
    return 2;
  }
}
