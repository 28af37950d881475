// ordo-bench-graph: how declaring and using a graph scales with its size.
// Three measurements, each a ratio taken in one run:
//   - declaring N locations, one location() call each and as one location_family, at a small
//     and a large N: the (CPU) time for the large N over the time for the small one. Linear
//     declaration gives large/small (16 with the defaults); 20 is the bound the issue sets.
//   - declaring a 2-D stencil of B x B blocks and placing it on one rank (its exchange: the
//     halo tasks between neighbours), at a small and a large B: time over time, against the
//     ratio of the block counts (16 with the defaults).
//   - a task reading W inputs through its Context, at W = 16 and W = 256: the time per read at
//     256 over the time per read at 16 (1 when a lookup costs the same at any width).
// The large graph also runs a task reading 256 of its locations, so the size is used, not only
// declared. Output, one key=value line per measurement and per ratio:
//   bench=graph what=declare form=F locations=N cpu_seconds=S ns_per_location=X
//   bench=graph what=declare form=F ratio=R linear=L
//   bench=graph what=stencil blocks=N cpu_seconds=S us_per_block=X
//   bench=graph what=stencil ratio=R linear=L
//   bench=graph what=read inputs=W ns_per_read=X
//   bench=graph what=read ratio=R
// Exit status: 0 ok, 1 a wrong sum, 2 bad command line.
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <ordo/stencil.hpp>

#include "app_cli.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of the calling thread: declaring runs on it alone, and other processes' load on a
// shared machine inflates wall time but not this.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Declares `n` locations of one double in `g`; returns the handles.
std::vector<ordo::Location<double>> declare(ordo::Graph& g, std::uint32_t n, bool family) {
  if (family) return g.location_family<double>("x", n, 1);
  std::vector<ordo::Location<double>> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(g.location<double>("x" + std::to_string(i), 1));
  return out;
}

// CPU seconds to declare a 2-D five-point stencil of side x side blocks of 4 x 4 points and
// place it on this rank: the constructor declares the blocks' locations, place() the exchange
// (compute tasks, and a halo task per pair of neighbours).
double time_stencil(const ordo::Runtime& rt, std::uint32_t side) {
  malloc_trim(0);
  ordo::Graph g;
  ordo::stencil::Spec spec;
  spec.size = {4 * std::size_t{side}, 4 * std::size_t{side}};
  spec.blocks = {side, side};
  const double t0 = thread_seconds();
  ordo::stencil::Stencil st(g, spec, [](const ordo::stencil::Block&) {});
  st.place(rt);
  return thread_seconds() - t0;
}

// Runs a task reading `inputs` (each written once per iteration by one task of a family) for
// `iterations`; returns the reader body's seconds per read, and checks its sum.
double time_reads(ordo::Runtime& rt, ordo::Graph& g, const std::vector<ordo::Location<double>>& inputs,
                  std::uint64_t iterations, bool& wrong) {
  const auto w = static_cast<std::uint32_t>(inputs.size());
  g.task_family("writer", w, [&](std::uint32_t i, ordo::AccessList& acc) {
    acc.add(ordo::write(inputs[i]));
  }, [inputs](ordo::Context& ctx, std::uint32_t i) { ctx.write(inputs[i])[0] += 1; });
  auto sum = g.location<double>("sum", 1);
  double body_seconds = 0;
  std::vector<ordo::Access> acc{ordo::write(sum)};
  for (auto loc : inputs) acc.push_back(ordo::read(loc));
  constexpr int kRepeat = 64;  // reads per input per instance: the body's time is the reads'
  g.task("reader", acc, [inputs, sum, &body_seconds](ordo::Context& ctx) {
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    for (int r = 0; r < kRepeat; ++r)
      for (std::size_t i = inputs.size(); i-- > 0;) s += ctx.read(inputs[i])[0];
    ctx.write(sum)[0] = s / kRepeat;
    body_seconds += seconds_since(t0);
  });
  rt.run(g, iterations);
  // After k iterations every input holds k.
  if (g.data(sum)[0] != static_cast<double>(iterations) * w) wrong = true;
  return body_seconds / (static_cast<double>(iterations) * w * kRepeat);
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::app::guarded_main("ordo-bench-graph", [&]() -> int {
    CLI::App cli{"ordo-bench-graph: declaration and access lookup against graph size"};
    cli.name("ordo-bench-graph");
    std::uint32_t small = 16384, large = 262144, reps = 7, wide = 256;
    std::uint32_t side_small = 32, side_large = 128;
    cli.add_option("--small", small, "locations of the small graph")
        ->check(CLI::Range(1u, 1u << 26));
    cli.add_option("--large", large, "locations of the large graph")
        ->check(CLI::Range(1u, 1u << 26));
    cli.add_option("--reps", reps, "repetitions (the median is reported)")
        ->check(CLI::Range(1u, 100u));
    cli.add_option("--stencil-small", side_small, "blocks per side of the small stencil")
        ->check(CLI::Range(1u, 4096u));
    cli.add_option("--stencil-large", side_large, "blocks per side of the large stencil")
        ->check(CLI::Range(1u, 4096u));
    cli.add_option("--wide", wide, "inputs of the wide reader")->check(CLI::Range(17u, 1u << 16));
    bool quick = false;
    cli.add_flag("--quick", quick,
                 "small sizes and one repetition (a smoke run); a size or --reps given wins");
    if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;
    if (quick) {  // a smoke run's values, where the user gave none
      if (cli.count("--small") == 0) small = 1024;
      if (cli.count("--large") == 0) large = 16384;
      if (cli.count("--reps") == 0) reps = 1;
      if (cli.count("--stencil-small") == 0) side_small = 16;
      if (cli.count("--stencil-large") == 0) side_large = 64;
    }
    if (large < small) throw ordo::Error("--large must be at least --small");
    if (side_large < side_small)
      throw ordo::Error("--stencil-large must be at least --stencil-small");

    bool wrong = false;
    ordo::Runtime rt({.workers = 1});
    for (bool family : {false, true}) {
      const char* form = family ? "family" : "loop";
      // Small and large alternate, so that both meet the same load from other processes.
      std::vector<double> times[2];
      for (std::uint32_t r = 0; r < reps; ++r)
        for (int which = 0; which < 2; ++which) {
          const std::uint32_t n = which ? large : small;
          // Each repetition starts with the memory of the previous ones given back, so that
          // both sizes pay for fresh pages alike (else the small graph reuses warm memory
          // that malloc keeps, and the large one, too big for that, does not).
          malloc_trim(0);
          ordo::Graph g;
          const double t0 = thread_seconds();
          auto locs = declare(g, n, family);
          times[which].push_back(thread_seconds() - t0);
          if (which == 1 && r == 0) {
            // The large graph runs: a task reading `wide` of its locations, spread over it.
            std::vector<ordo::Location<double>> some;
            const std::uint32_t stride = n / std::min(wide, n);
            for (std::uint32_t i = 0; i < wide && i < n; ++i) some.push_back(locs[i * stride]);
            (void)time_reads(rt, g, some, 3, wrong);
          }
        }
      double at[2];
      for (int which = 0; which < 2; ++which) {
        const std::uint32_t n = which ? large : small;
        at[which] = median(times[which]);
        fmt::print("bench=graph what=declare form={} locations={} cpu_seconds={:.4f} "
                   "ns_per_location={:.0f}\n",
                   form, n, at[which], at[which] / n * 1e9);
      }
      fmt::print("bench=graph what=declare form={} ratio={:.2f} linear={:.2f}\n", form,
                 at[1] / at[0], static_cast<double>(large) / small);
    }

    {
      std::vector<double> times[2];
      for (std::uint32_t r = 0; r < reps; ++r)
        for (int which = 0; which < 2; ++which)
          times[which].push_back(time_stencil(rt, which ? side_large : side_small));
      double at[2];
      for (int which = 0; which < 2; ++which) {
        const double blocks = std::pow(which ? side_large : side_small, 2.0);
        at[which] = median(times[which]);
        fmt::print("bench=graph what=stencil blocks={:.0f} cpu_seconds={:.4f} "
                   "us_per_block={:.2f}\n",
                   blocks, at[which], at[which] / blocks * 1e6);
      }
      fmt::print("bench=graph what=stencil ratio={:.2f} linear={:.2f}\n", at[1] / at[0],
                 std::pow(static_cast<double>(side_large) / side_small, 2.0));
    }

    double per_read[2];
    const std::uint32_t widths[2] = {16, wide};
    for (int which = 0; which < 2; ++which) {
      std::vector<double> times;
      for (std::uint32_t r = 0; r < reps; ++r) {
        ordo::Graph g;
        auto inputs = g.location_family<double>("in", widths[which], 1);
        times.push_back(time_reads(rt, g, inputs, quick ? 20 : 200, wrong));
      }
      per_read[which] = median(times);
      fmt::print("bench=graph what=read inputs={} ns_per_read={:.2f}\n", widths[which],
                 per_read[which] * 1e9);
    }
    fmt::print("bench=graph what=read ratio={:.2f}\n", per_read[1] / per_read[0]);
    if (wrong) std::fprintf(stderr, "ordo-bench-graph: a reader computed a wrong sum\n");
    return wrong ? 1 : 0;
  });
}
