// The program of edges_ranks_test.py: every rank runs a ring of locations (x[r] homed on rank
// r, written by t[r] from x[r-1]), so that no rank's run can finish without every other; after
// a first run together, the last rank does one thing the others do not (--case):
//   return-in-run, return-in-until, return-in-gather  it returns from main (its Runtime ends)
//       while the others run, run_until or gather;
//   return-before-runtime  it returns 0 before building its Runtime (no first run at all);
//   exit-in-run  it calls std::exit(0) while the others run: status 0, its Runtime never ended;
//   mismatch-run, mismatch-until, mismatch-gather  it calls with other arguments;
//   throwing-condition  its run_until condition throws;
//   throwing-reads  its run_until condition throws in the dataflow (Until::reads: the check of
//       a reduction that every rank takes locally, with no vote);
//   abort  it calls Runtime::abort("the input is unusable", 3).
// The last rank prints "edges: rank R event at NS" (steady clock) just before; every rank that
// catches an error prints "edges: rank R: <type>: <what>" and exits 2.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace {

void event(unsigned rank) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  std::printf("edges: rank %u event at %lld\n", rank, static_cast<long long>(ns));
  std::fflush(stdout);
}

int report(unsigned rank, const char* type, const char* what) {
  std::printf("edges: rank %u: %s: %s\n", rank, type, what);
  std::fflush(stdout);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string what;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--case")) what = argv[i + 1];
  const char* rank_env = std::getenv("ORDO_RANK");
  const char* size_env = std::getenv("ORDO_SIZE");
  const unsigned my_rank = rank_env ? static_cast<unsigned>(std::atoi(rank_env)) : 0;
  const unsigned size = size_env ? static_cast<unsigned>(std::atoi(size_env)) : 1;
  if (what == "return-before-runtime" && my_rank == size - 1) {
    event(my_rank);
    return 0;
  }
  unsigned me = my_rank;
  try {
    ordo::Runtime rt({.workers = 1});
    me = rt.rank();
    const unsigned n = rt.ranks(), last = n - 1;
    ordo::Graph g;
    std::vector<ordo::Location<double>> x;
    // Only the dataflow case has a reduction, so that the other cases run the graph they did.
    const bool reduce = what == "throwing-reads";
    std::optional<ordo::Reduction<double>> sum;
    if (reduce) sum = g.reduction<double>("sum", n);
    for (unsigned r = 0; r < n; ++r) {
      x.push_back(g.location<double>("x" + std::to_string(r), 1));
      g.set_home_rank(x[r], r);
    }
    for (unsigned r = 0; r < n; ++r) {
      const auto in = x[(r + n - 1) % n], out = x[r];
      std::vector<ordo::Access> access{ordo::write(out), ordo::read(in)};
      if (reduce) access.push_back(ordo::contribute(*sum, r));
      g.task("t" + std::to_string(r), access, [in, out, r, reduce, sum](ordo::Context& ctx) {
        ctx.write(out)[0] = ctx.read(in)[0] + 1;
        if (reduce) ctx.contribute(*sum, r, ctx.read(in)[0]);
      });
    }
    if (reduce) g.combine(*sum);
    if (what != "return-before-runtime") rt.run(g, 3);
    auto never = [](const ordo::Graph&) { return false; };
    if (me == last) {
      event(me);
      if (what.rfind("return-in-", 0) == 0) return 0;  // the Runtime ends here
      if (what == "exit-in-run") std::exit(0);         // it does not
      if (what == "mismatch-run") rt.run(g, 5);
      if (what == "mismatch-until") rt.run_until(g, ordo::Until{never, 1, 7});
      if (what == "mismatch-gather") rt.gather(g, x[0], 0);
      if (what == "throwing-condition")
        rt.run_until(g,
                     ordo::Until{[](const ordo::Graph&) -> bool {
                                   throw std::runtime_error("the condition cannot read its input");
                                 },
                                 1, 50});
      if (what == "throwing-reads")
        rt.run_until(g, ordo::Until{[](const ordo::Graph&) -> bool {
                                      throw std::runtime_error("the check cannot read its sum");
                                    },
                                    1,
                                    50,
                                    {ordo::read(*sum)}});
      if (what == "abort") rt.abort("the input is unusable", 3);
    } else {
      if (what == "return-in-run" || what == "mismatch-run" || what == "return-before-runtime" ||
          what == "exit-in-run")
        rt.run(g, 10);
      if (what == "return-in-until" || what == "abort")
        rt.run_until(g, ordo::Until{never, 1, 1000000000});
      if (what == "mismatch-until" || what == "throwing-condition")
        rt.run_until(g, ordo::Until{never, 1, what == "throwing-condition" ? 50u : 9u});
      if (what == "throwing-reads") rt.run_until(g, ordo::Until{never, 1, 50, {ordo::read(*sum)}});
      if (what == "return-in-gather" || what == "mismatch-gather")
        rt.gather(g, x[0], ordo::kAllRanks);
    }
    std::printf("edges: rank %u finished\n", me);
    return 0;
  } catch (const ordo::GraphMismatch& e) {
    return report(me, "GraphMismatch", e.what());
  } catch (const ordo::PeerFailure& e) {
    return report(me, ("PeerFailure of rank " + std::to_string(e.rank())).c_str(), e.what());
  } catch (const ordo::Error& e) {
    return report(me, "Error", e.what());
  } catch (const std::exception& e) {
    return report(me, "exception", e.what());
  }
}
