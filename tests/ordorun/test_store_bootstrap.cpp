// The store bootstrap (comm/bootstrap.cpp) against ordorun's store (tools/ordorun), in one
// process: 1 to 64 ranks as threads, each with its own connections, exchanging blobs through
// the store served on this thread's EventLoop. Every rank gets every rank's blob, and the
// store serves each rank the same number of requests whatever the ranks: two per collective
// (a put and one get_range) after its hellos, where a get per peer made it 3N here.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap.hpp"
#include "event_loop.hpp"
#include "store_server.hpp"

using namespace std::chrono_literals;

namespace {

const std::string token = "0123456789abcdef0123456789abcdef";

ordo::comm::Blob blob(int round, int rank) {
  const std::string s = "round " + std::to_string(round) + " rank " + std::to_string(rank) +
                        std::string(std::size_t(rank % 7), '*');
  ordo::comm::Blob out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

}  // namespace

TEST_CASE("the store bootstrap's collectives cost each rank the same requests at any size",
          "[ordorun][store]") {
  for (int ranks : {1, 2, 5, 16, 64}) {
    INFO(ranks << " rank(s)");
    ordorun::EventLoop loop;
    ordorun::StoreServer server(loop, token, ranks, {"127.0.0.1"}, {}, nullptr);
    const std::string at = server.endpoint(0);
    std::atomic<int> done{0};
    std::vector<std::string> wrong(static_cast<std::size_t>(ranks));  // per rank: what went wrong, or ""
    std::vector<std::unique_ptr<ordo::comm::Bootstrap>> boots(static_cast<std::size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        try {
          auto& boot = boots[std::size_t(r)];
          boot = ordo::comm::Bootstrap::store(r, ranks, at, 20s, token);
          for (int round = 0; round < 2; ++round) {
            const std::vector<ordo::comm::Blob> all = boot->allgather(blob(round, r));
            if (all.size() != std::size_t(ranks)) wrong[std::size_t(r)] = "wrong count";
            for (int q = 0; q < ranks && all.size() == std::size_t(ranks); ++q)
              if (all[std::size_t(q)] != blob(round, q))
                wrong[std::size_t(r)] = "rank " + std::to_string(q) + "'s blob of round " +
                                        std::to_string(round) + " differs";
          }
          boot->barrier();
        } catch (const std::exception& e) {
          wrong[std::size_t(r)] = e.what();
        }
        done.fetch_add(1);
      });
    const auto end = ordorun::EventLoop::Clock::now() + 60s;
    while (done.load() < ranks && ordorun::EventLoop::Clock::now() < end) {
      loop.at(ordorun::EventLoop::Clock::now() + 5ms, [] {});  // bounds each turn's wait
      loop.run_once();
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) CHECK(wrong[std::size_t(r)] == "");
    // The bootstraps close their connections (and lifelines) before the store goes.
    boots.clear();
    for (int r = 0; r < ranks; ++r) {
      INFO("rank " << r);
      // After its hellos, a put and a get_range per collective: three collectives (two
      // allgathers, the barrier).
      CHECK(server.requests_per_rank()[std::size_t(r)] == 2 * 3);
    }
  }
}
