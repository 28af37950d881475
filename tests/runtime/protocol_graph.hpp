// The small graph that the remote-lock protocol's tests (test_remote_locks.cpp,
// test_failures.cpp) and its fuzz target (tests/fuzz/fuzz_remote_lock.cpp) forge messages into,
// declared alike on every rank.
// The forged headers name its locations and phases, so it is declared in one place:
//   x (location 0) and z (2, with_z) homed on rank 0, y (1) on rank 1, 4 longs each but z, 64;
//   wx writes x (and z) on rank 0: x's phase 0, z's phase 0;
//   wy writes y and reads x on rank 1: x's phase 1, small enough to be granted early.
// With a third rank (third_rank, which brings z too): w (location 3) homed on rank 2, which wx
// reads, rz writing y and reading z on rank 1, and ww writing w and reading y on rank 2, so that a
// message may name a rank that must not be left waiting.
#pragma once

#include <cstdint>
#include <typeinfo>
#include <vector>

#include "runtime/graph.hpp"

namespace ordo::test {

struct ProtocolGraph {
  bool with_z = false;
  bool third_rank = false;
  rt::Body wx_body = [](const rt::Instance&) {};  // where a test forges its message
  rt::Body wy_body = [](const rt::Instance&) {};
};

inline void declare_protocol_graph(rt::Graph& g, const ProtocolGraph& p) {
  const auto x = g.add_location("x", 8, 4, typeid(long));
  const auto y = g.add_location("y", 8, 4, typeid(long));
  g.set_home(x, 0);
  g.set_home(y, 1);
  std::vector<rt::AccessDesc> wx{{x, rt::Mode::write}};
  std::uint32_t z = 0, w = 0;
  if (p.with_z || p.third_rank) {
    z = g.add_location("z", 8, 64, typeid(long));
    g.set_home(z, 0);
    wx.push_back({z, rt::Mode::write});
  }
  if (p.third_rank) {
    w = g.add_location("w", 8, 4, typeid(long));
    g.set_home(w, 2);
    wx.push_back({w, rt::Mode::read});
  }
  g.add_task({"wx", wx, p.wx_body});
  g.add_task({"wy", {{y, rt::Mode::write}, {x, rt::Mode::read}}, p.wy_body});
  if (p.third_rank) {
    g.add_task({"rz", {{y, rt::Mode::write}, {z, rt::Mode::read}}, [](const rt::Instance&) {}});
    g.add_task({"ww", {{w, rt::Mode::write}, {y, rt::Mode::read}}, [](const rt::Instance&) {}});
  }
}

}  // namespace ordo::test
