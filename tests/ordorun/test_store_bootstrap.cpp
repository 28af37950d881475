// The store bootstrap (comm/bootstrap.cpp) against ordorun's store (tools/ordorun), in one
// process: 1 to 64 ranks as threads, each with its own connections, exchanging blobs through
// the store served on this thread's EventLoop. Every rank gets every rank's blob, and the
// store serves each rank the same number of requests whatever the ranks: two per collective
// (a put and one get_range) after its hellos, where a get per peer made it 3N here. And the
// start-up exchange (comm/address_book.hpp) sends each rank bytes that grow with the hosts,
// the ranks of its host and its tree neighbours, and leaves it the addresses of those
// neighbours only, where a reply with every rank's address grew with the ranks.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/address_book.hpp"
#include "comm/bootstrap.hpp"
#include "runtime/tree.hpp"
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

// Rank r's fake transport address: 300 bytes (UCX's over TCP and shared memory are a few
// hundred), its rank first.
std::vector<std::byte> address_of(int rank) {
  std::vector<std::byte> a(300, std::byte(rank % 251));
  std::memcpy(a.data(), &rank, sizeof rank);
  return a;
}

// Runs `rank_body(r)` on `ranks` threads against `server`, turning `loop` until all are done;
// returns what went wrong per rank ("" when nothing).
std::vector<std::string> run_ranks(ordorun::EventLoop& loop, int ranks,
                                   const std::function<void(int)>& rank_body) {
  std::atomic<int> done{0};
  std::vector<std::string> wrong(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        rank_body(r);
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
  return wrong;
}

}  // namespace

TEST_CASE("start-up costs each rank O(hosts + ranks of its host + tree neighbours) bytes from "
          "the store and holds its tree neighbours' addresses only", "[ordorun][store]") {
  const std::size_t record = 8 + sizeof(ordo::comm::HostRecord);  // one run of a get_runs answer
  const std::size_t per_pid = 4 + 8, per_address = 4 + address_of(0).size();
  // hosts: how many fake hosts the ranks are spread over, in blocks as ordorun places them.
  for (const auto& [ranks, hosts] : {std::pair{2, 1}, {3, 1}, {8, 1}, {16, 1}, {33, 1}, {64, 1},
                                     {64, 4}, {64, 16}}) {
    INFO(ranks << " rank(s) on " << hosts << " host(s)");
    const int per_host = (ranks + hosts - 1) / hosts;
    ordorun::EventLoop loop;
    ordorun::StoreServer server(loop, token, ranks, {"127.0.0.1"}, {}, nullptr);
    const std::string at = server.endpoint(0);
    std::vector<std::unique_ptr<ordo::comm::Bootstrap>> boots(static_cast<std::size_t>(ranks));
    std::vector<std::size_t> held(static_cast<std::size_t>(ranks)), runs(held.size()),
        neighbours(held.size()), locals(held.size());
    std::vector<std::uint64_t> job(held.size());
    const std::vector<std::string> wrong = run_ranks(loop, ranks, [&](int r) {
      auto& boot = boots[std::size_t(r)];
      boot = ordo::comm::Bootstrap::store(r, ranks, at, 20s, token);
      ordo::comm::HostRecord host = ordo::comm::HostRecord::here(r == 0);
      host.boot_id[0] = char('A' + r / per_host);  // another kernel per fake host
      // As Transport::connect and CommNet do: the exchange (and the pids of this host's
      // ranks), then the tree neighbours' addresses in one batch, then the close barrier.
      ordo::comm::AddressBook book(*boot, address_of(r), host, 1000 + r);
      std::vector<int> tree;
      for (unsigned c : ordo::rt::tree::children(unsigned(r), unsigned(ranks))) tree.push_back(int(c));
      if (r != 0) tree.push_back(int(ordo::rt::tree::parent(unsigned(r))));
      book.learn(tree);
      book.learn(tree);  // known already: no request
      for (int q : tree)
        if (book.address(q) != address_of(q))
          throw std::runtime_error("rank " + std::to_string(q) + "'s address differs");
      for (int q = 0; q < ranks; ++q)
        if (book.same_host(q) != (q / per_host == r / per_host) ||
            book.same_clock(q) != (q / per_host == r / per_host))
          throw std::runtime_error("rank " + std::to_string(q) + "'s host is wrong");
      for (const auto& local : book.local_peers())
        if (local.pid != 1000 + local.rank || local.rank / per_host != r / per_host)
          throw std::runtime_error("local rank " + std::to_string(local.rank) + " is wrong");
      held[std::size_t(r)] = book.addresses_held();
      runs[std::size_t(r)] = book.host_runs();
      neighbours[std::size_t(r)] = tree.size();
      locals[std::size_t(r)] = book.local_peers().size();
      job[std::size_t(r)] = book.job_id();
      boot->barrier();
    });
    for (int r = 0; r < ranks; ++r) CHECK(wrong[std::size_t(r)] == "");
    boots.clear();
    for (int r = 0; r < ranks; ++r) {
      INFO("rank " << r);
      const std::size_t n = neighbours[std::size_t(r)], l = locals[std::size_t(r)];
      const int host_first = r / per_host * per_host;
      CHECK(l == std::size_t(std::min(ranks, host_first + per_host) - host_first - 1));
      CHECK(held[std::size_t(r)] == n);
      // A run per host, and rank 0's own (its record carries the job's nonce).
      CHECK(runs[std::size_t(r)] == std::size_t(hosts) + (per_host > 1 ? 1 : 0));
      CHECK(job[std::size_t(r)] == job[0]);
      // After the hellos: three puts (address, pid, host record), the exchange's get_runs, a
      // get_list of this host's pids and one of the neighbours' addresses, the barrier's put
      // and get_runs.
      CHECK(server.requests_per_rank()[std::size_t(r)] == 6u + (l > 0 ? 1u : 0u) + (n > 0 ? 1u : 0u));
      // The answers (5 bytes and a value each): two hellos', four puts' (the barrier's
      // included), the exchange's runs, the pids, the addresses and the barrier's one run of
      // nothing. What grows is the hosts, the ranks of this host and the neighbours; a reply
      // with every rank's address grows with the ranks.
      CHECK(server.bytes_sent_per_rank()[std::size_t(r)] ==
            5 * 6 + (5 + runs[std::size_t(r)] * record) + (l > 0 ? 5 + l * per_pid : 0) +
                (n > 0 ? 5 + n * per_address : 0) + (5 + 8));
    }
    CHECK(job[0] != 0);
  }
}

TEST_CASE("a pid that is not 8 bytes, put by a rank of this host, is refused at start-up, "
          "naming the rank", "[ordorun][store]") {
  ordorun::EventLoop loop;
  ordorun::StoreServer server(loop, token, 2, {"127.0.0.1"}, {}, nullptr);
  const std::string at = server.endpoint(0);
  const ordo::comm::HostRecord host = ordo::comm::HostRecord::here(false);
  const std::vector<std::string> wrong = run_ranks(loop, 2, [&](int r) {
    auto boot = ordo::comm::Bootstrap::store(r, 2, at, 20s, token);
    if (r == 0) {  // as Transport::connect does; it fetches rank 1's pid, on its host
      ordo::comm::AddressBook book(*boot, address_of(0), host, 1000);
      return;
    }
    // Rank 1 publishes a 4-byte pid, as a rank of another ordo build might.
    const ordo::comm::Blob own[] = {address_of(1), ordo::comm::Blob(4, std::byte{7})};
    boot->exchange(std::as_bytes(std::span(&host, 1)), own);
  });
  CHECK(wrong == std::vector<std::string>{
                     "comm: rank 1 published a malformed pid (4 bytes); are all ranks the same "
                     "ordo build?",
                     ""});
}

TEST_CASE("a fetch of an address nobody published, or of a rank outside the job, fails at "
          "once", "[ordorun][store]") {
  ordorun::EventLoop loop;
  ordorun::StoreServer server(loop, token, 2, {"127.0.0.1"}, {}, nullptr);
  const std::string at = server.endpoint(0);
  std::vector<std::string> errors(2);
  const std::vector<std::string> wrong = run_ranks(loop, 2, [&](int r) {
    auto boot = ordo::comm::Bootstrap::store(r, 2, at, 20s, token);
    if (r != 0) return;
    // Before any exchange: rank 1 has published nothing. Answered at once (the bootstrap's
    // 20 s timeout would show a wait), with the key.
    const int one = 1, two = 2;
    try {
      boot->fetch(0, std::span(&one, 1));
    } catch (const ordo::comm::CommError& e) {
      errors[0] = e.what();
    }
    try {
      boot->fetch(0, std::span(&two, 1));
    } catch (const ordo::comm::CommError& e) {
      errors[1] = e.what();
    }
  });
  CHECK(wrong == std::vector<std::string>{"", ""});
  CHECK_THAT(errors[0], Catch::Contains("asked ordorun's store for 'pub/0/1'") &&
                            Catch::Contains("which no rank put there"));
  CHECK_THAT(errors[1], Catch::Contains("rank 2, but the job has ranks 0..1"));
}

TEST_CASE("the store bootstrap's collectives cost each rank the same requests at any size",
          "[ordorun][store]") {
  for (int ranks : {1, 2, 5, 16, 64}) {
    INFO(ranks << " rank(s)");
    ordorun::EventLoop loop;
    ordorun::StoreServer server(loop, token, ranks, {"127.0.0.1"}, {}, nullptr);
    const std::string at = server.endpoint(0);
    std::vector<std::unique_ptr<ordo::comm::Bootstrap>> boots(static_cast<std::size_t>(ranks));
    const std::vector<std::string> wrong = run_ranks(loop, ranks, [&](int r) {
      auto& boot = boots[std::size_t(r)];
      boot = ordo::comm::Bootstrap::store(r, ranks, at, 20s, token);
      for (int round = 0; round < 2; ++round) {
        const std::vector<ordo::comm::Blob> all = boot->allgather(blob(round, r));
        if (all.size() != std::size_t(ranks)) throw std::runtime_error("wrong count");
        for (int q = 0; q < ranks; ++q)
          if (all[std::size_t(q)] != blob(round, q))
            throw std::runtime_error("rank " + std::to_string(q) + "'s blob of round " +
                                     std::to_string(round) + " differs");
      }
      boot->barrier();
    });
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
