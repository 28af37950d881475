// all_gather: every rank's value of one small trivially copyable T, on every rank, expressed
// as an ordo graph (no side channel): the apps use it to agree on a verdict across ranks and as
// the run-level barrier after they write their slabs of the output (docs/distributed.md).
//
// Graph (SPMD: every rank declares it identically):
//   v[r]    one T, home rank r            put[r]  writes v[r] = this rank's value
//   all[r]  ranks T, home rank r          get[r]  writes all[r], reads every v[q]
// A task runs on the home of the first location it writes, so put[r] runs on rank r (and
// stores rank r's value), get[r] on rank r. Program order puts every put before every get on
// each v[q]'s FIFO, so get[r] reads the values of this call. get[r] cannot run before every
// put[q] has, and put[q] runs only once rank q has called all_gather: when all_gather returns
// on any rank, every rank has reached it (a barrier). A rank that dies ends the run on the
// others with the transport's error (docs/distributed.md, Failures), so there is no hang.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ordo/ordo.hpp>

namespace ordo::app {

template <class T>
std::vector<T> all_gather(Runtime& rt, const T& mine) {
  static_assert(std::is_trivially_copyable_v<T>, "all_gather moves values as bytes");
  const unsigned ranks = rt.ranks();
  if (ranks == 1) return {mine};
  // Names begin "ordo.": ordo-trace lists such helper graphs apart from the user's and leaves
  // their runs out of its window (docs/tracing.md).
  Graph g;
  std::vector<Location<T>> v, all;
  for (unsigned r = 0; r < ranks; ++r) {
    v.push_back(g.location<T>("ordo.all_gather.v[" + std::to_string(r) + "]", 1));
    all.push_back(g.location<T>("ordo.all_gather.all[" + std::to_string(r) + "]", ranks));
    g.set_home_rank(v[r], r);
    g.set_home_rank(all[r], r);
  }
  for (unsigned r = 0; r < ranks; ++r)
    g.task("ordo.all_gather.put[" + std::to_string(r) + "]", {ordo::write(v[r])},
           [loc = v[r], mine](Context& ctx) { ctx.write(loc)[0] = mine; });
  for (unsigned r = 0; r < ranks; ++r) {
    std::vector<Access> acc{ordo::write(all[r])};
    for (unsigned q = 0; q < ranks; ++q) acc.push_back(ordo::read(v[q]));
    g.task("ordo.all_gather.get[" + std::to_string(r) + "]", std::move(acc),
           [out = all[r], v](Context& ctx) {
             auto o = ctx.write(out);
             for (std::size_t q = 0; q < v.size(); ++q) o[q] = ctx.read(v[q])[0];
           });
  }
  rt.run(g, 1);
  auto got = std::as_const(g).data(all[rt.rank()]);
  return {got.begin(), got.end()};
}

}  // namespace ordo::app
