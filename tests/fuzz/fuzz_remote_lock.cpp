// Fuzz target: the remote-lock protocol's messages as a peer could send them. Three ranks run a
// small graph over the in-process loopback net (tests/runtime/loopback_net.hpp), in steps of 2
// iterations with a vote between them (run_until's shape); at iteration 5 rank 1 "sends" rank
// 0 the input as one message on the engine's channel (its first byte is the header's length,
// the rest header then payload; the byte's top bit set: rank 0 sends it to rank 1 instead).
// The graph is tests/runtime/protocol_graph.hpp's with its third rank: rank 0 is the home of x
// and z, rank 1 of y and a proxy of x and z, rank 2 of w, which rank 0 reads, and a proxy of
// y: a third rank that an ABORT may name, and that must not be left waiting. Whatever the
// message is, the run must end on every rank: completed, or failed with an exception naming
// the problem — never a crash, a hang or memory that the message claims.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "loopback_net.hpp"
#include "protocol_graph.hpp"
#include "runtime/engine.hpp"
#include "runtime/failure.hpp"
#include "runtime/plan.hpp"
#include "scheduler/pool.hpp"

using namespace ordo;

namespace {

struct Rank {
  rt::Graph graph{false};
  std::unique_ptr<sched::Pool> pool;
  std::unique_ptr<rt::Engine> engine;
};

constexpr std::uint32_t kChannel = 1;
constexpr std::uint64_t kIterations = 8;
constexpr unsigned kRanks = 3;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool to_rank1 = (data[0] & 0x80) != 0;
  const std::size_t header_len = std::min<std::size_t>(data[0] & 0x7f, size - 1);
  const std::vector<std::byte> header(reinterpret_cast<const std::byte*>(data + 1),
                                      reinterpret_cast<const std::byte*>(data + 1 + header_len));
  const std::vector<std::byte> payload(reinterpret_cast<const std::byte*>(data + 1 + header_len),
                                       reinterpret_cast<const std::byte*>(data + size));
  test::LoopbackHub hub(kRanks);
  std::vector<Rank> rs(kRanks);
  std::vector<std::future<void>> f;
  for (unsigned r = 0; r < kRanks; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      rt::Graph& g = rs[r].graph;
      test::declare_protocol_graph(
          g, {.third_rank = true,
              .wx_body = [&hub, &header, &payload, to_rank1, r](const rt::Instance& in) {
                if (r == 0 && in.iteration == 5)
                  hub.inject(to_rank1 ? 0 : 1, to_rank1 ? 1 : 0, kChannel, header, payload);
              }});
      auto c = rt::compile(g);
      rs[r].pool = std::make_unique<sched::Pool>(sched::PoolConfig{1});
      rs[r].engine = std::make_unique<rt::Engine>(g, std::move(c.plan), &hub.net(r), kChannel);
      try {
        rs[r].engine->run(*rs[r].pool, kIterations, [](std::uint64_t) { return false; }, 2);
      } catch (const rt::RunError& e) {
        // Refused, with a message: what a bad message must come to (anything else thrown is
        // a crash for libFuzzer). FUZZ_VERBOSE=1 shows the messages, to triage an input.
        if (std::getenv("FUZZ_VERBOSE")) std::fprintf(stderr, "rank %u: %s\n", r, e.what());
      }
    }));
  for (auto& x : f) x.get();
  return 0;
}
