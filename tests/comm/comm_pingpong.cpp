// Multi-process check of the transport, started by ordorun (or mpirun, or alone).
//
// Every rank sends, for every round and every payload size, one message to every rank (itself
// included). The header says who sent it and which (round, size) it is; the payload is a
// pattern derived from (source, destination, round, size, byte index), so the receiver checks
// every byte against what it can compute itself. A rank finishes when it has received and
// checked rounds * sizes * ranks messages and its own sends have completed, then closes the
// transport (collective). Exit 0: all correct; 1: wrong data; 3: a peer failed; 2: bad usage.
//
// Fault injection for the launcher tests: --die-rank R kills rank R with SIGKILL after half of
// its sends; --late-rank R --late-seconds S makes rank R sleep before it even bootstraps;
// --hang-after-connect waits forever after connecting (the test then kills ordorun);
// --ignore-sigterm leaves failure detection to the transport until ordorun's SIGKILL.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap.hpp"
#include "comm/transport.hpp"

namespace {

using namespace ordo::comm;

struct Header {
  std::uint32_t source;
  std::uint32_t round;
  std::uint32_t size_index;
  std::uint32_t size;
};

std::byte pattern(std::uint32_t src, int dst, std::uint32_t round, std::uint32_t si, std::size_t i) {
  return std::byte((src * 131u + std::uint32_t(dst) * 31u + round * 17u + si * 7u + i * 13u + (i >> 8)) & 0xffu);
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr, "comm_pingpong: %s\n", what.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint32_t> sizes = {0, 1, 100, 4096, 65536, 1u << 20, 4u << 20};
  int rounds = 2, die_rank = -1, late_rank = -1, exit_rank = -1;
  double late_seconds = 0;
  std::size_t rndv_threshold = 0;
  bool idle_check = false, hang = false, detect = true, ucx_detection = false;
  std::string expect_bootstrap;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--die-rank") die_rank = std::stoi(next());
    else if (a == "--exit-before-bootstrap") exit_rank = std::stoi(next());
    else if (a == "--late-rank") late_rank = std::stoi(next());
    else if (a == "--late-seconds") late_seconds = std::stod(next());
    else if (a == "--rndv-threshold") rndv_threshold = std::stoul(next());
    else if (a == "--idle-check") idle_check = true;
    else if (a == "--hang-after-connect") hang = true;
    else if (a == "--no-failure-detection") detect = false;
    else if (a == "--ucx-detection") ucx_detection = true;
    else if (a == "--ignore-sigterm") ::signal(SIGTERM, SIG_IGN);
    else if (a == "--expect-bootstrap") expect_bootstrap = next();
    else usage("unknown argument " + a);
  }

  const char* env_rank = std::getenv("ORDO_RANK");
  // Dies before its first put: the others wait in the store for it.
  if (exit_rank >= 0 && env_rank != nullptr && std::atoi(env_rank) == exit_rank) {
    std::fprintf(stderr, "rank %d: exiting before the bootstrap, as asked\n", exit_rank);
    return 5;
  }
  if (late_rank >= 0 && env_rank != nullptr && std::atoi(env_rank) == late_rank)
    std::this_thread::sleep_for(std::chrono::milliseconds(long(late_seconds * 1000)));

  try {
    // This test program reads the launcher's variables itself (libordo's api/settings.cpp
    // does it for a Runtime).
    std::chrono::milliseconds timeout = kDefaultStartupTimeout;
    if (const char* t = std::getenv("ORDO_TIMEOUT"))  // ordorun's --timeout-startup
      timeout = std::chrono::milliseconds(static_cast<long long>(std::atof(t) * 1000));
    auto boot = Bootstrap::create(Launch::from([](const char* name) { return std::getenv(name); }),
                                  timeout);
    const int me = boot->rank(), n = boot->size();
    if (!expect_bootstrap.empty() && expect_bootstrap != boot->kind()) {
      std::fprintf(stderr, "rank %d: bootstrap is %s, expected %s\n", me, boot->kind(), expect_bootstrap.c_str());
      return 1;
    }
    TransportOptions topt;
    topt.rndv_threshold = rndv_threshold;
    topt.detect_peer_failure = detect;
    topt.ucx_detection_for_local_peers = ucx_detection;
    Transport t(*boot, topt);

    const std::size_t expected = std::size_t(rounds) * sizes.size() * std::size_t(n);
    std::size_t received = 0, eager = 0, rndv = 0, wrong = 0;
    std::vector<std::unique_ptr<std::vector<std::byte>>> inbox;
    auto check = [&](const Header& h, const std::byte* data) {
      for (std::size_t i = 0; i < h.size; ++i)
        if (data[i] != pattern(h.source, me, h.round, h.size_index, i)) {
          if (wrong++ == 0)
            std::fprintf(stderr, "rank %d: byte %zu of the %u-byte payload from rank %u (round %u) is wrong\n",
                         me, i, h.size, h.source, h.round);
          break;
        }
      ++received;
    };
    t.on_message(7, [&](Incoming& m) {
      Header h;
      if (m.header().size() != sizeof h) usage("malformed header");
      std::memcpy(&h, m.header().data(), sizeof h);
      if (h.source != std::uint32_t(m.peer()) || m.payload_size() != h.size) {
        std::fprintf(stderr, "rank %d: header says rank %u / %u bytes, transport says rank %d / %zu\n", me,
                     h.source, h.size, m.peer(), m.payload_size());
        ++wrong;
      }
      if (auto eager_data = m.eager_payload()) {
        ++eager;
        check(h, eager_data->data());
        return;
      }
      ++rndv;
      inbox.push_back(std::make_unique<std::vector<std::byte>>(h.size));
      std::vector<std::byte>* buf = inbox.back().get();
      m.receive_into(*buf, [&, h, buf](Status s) {
        if (s != Status::ok) {
          std::fprintf(stderr, "rank %d: rendezvous receive from rank %u failed: %s\n", me, h.source, to_string(s));
          ++wrong;
          ++received;
          return;
        }
        check(h, buf->data());
      });
    });
    t.on_peer_failure([&](const PeerFailure& f) {
      std::fprintf(stderr, "rank %d: peer rank %d failed (%s): %s\n", me, f.peer,
                   f.scope == FailureScope::process ? "process" : "endpoint", f.cause.c_str());
      std::exit(3);
    });
    t.connect();
    if (hang) {  // wait for messages that never come (launcher-death and idle-peer tests)
      std::printf("rank %d pid %d ready\n", me, int(::getpid()));
      std::fflush(stdout);
      if (me == die_rank) {  // dies while no traffic flows: only a watcher of the process sees it
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::fprintf(stderr, "rank %d: killing myself with SIGKILL as asked\n", me);
        std::fflush(stderr);
        ::raise(SIGKILL);
      }
      for (;;) t.wait_for_event(std::chrono::milliseconds(1000));
    }

    // Payloads stay alive until the end: sends read from them until their completion.
    std::vector<std::vector<std::byte>> payloads;
    std::vector<Header> headers;
    for (int round = 0; round < rounds; ++round)
      for (std::uint32_t si = 0; si < sizes.size(); ++si)
        for (int d = 0; d < n; ++d) {
          const int dst = (me + 1 + d) % n;  // start with the next rank: no one is flooded first
          std::vector<std::byte> p(sizes[si]);
          for (std::size_t i = 0; i < p.size(); ++i) p[i] = pattern(std::uint32_t(me), dst, std::uint32_t(round), si, i);
          payloads.push_back(std::move(p));
          headers.push_back(Header{std::uint32_t(me), std::uint32_t(round), si, sizes[si]});
          (void)dst;
        }
    std::size_t send_failures = 0, sent = 0;
    std::size_t k = 0;
    for (int round = 0; round < rounds; ++round)
      for (std::uint32_t si = 0; si < sizes.size(); ++si)
        for (int d = 0; d < n; ++d, ++k) {
          const int dst = (me + 1 + d) % n;
          if (me == die_rank && k == payloads.size() / 2) {
            std::fprintf(stderr, "rank %d: killing myself with SIGKILL as asked\n", me);
            std::fflush(stderr);
            ::raise(SIGKILL);
          }
          t.send(dst, 7, std::as_bytes(std::span(&headers[k], 1)), payloads[k], [&](Status s) {
            ++sent;
            if (s != Status::ok) ++send_failures;
          });
          t.progress();
        }
    while (received < expected || t.outstanding_sends() > 0) t.wait_for_event(std::chrono::milliseconds(100));

    double idle_cpu = -1;
    if (idle_check) {
      // Nothing is in flight: a second of waiting must cost (almost) no CPU.
      const double before = cpu_seconds();
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (std::chrono::steady_clock::now() < until) t.wait_for_event(std::chrono::milliseconds(200));
      idle_cpu = cpu_seconds() - before;
    }
    t.close();
    std::printf("rank %d of %d (%s): received %zu messages (%zu eager, %zu rendezvous), %zu wrong, %zu send failures\n",
                me, n, boot->kind(), received, eager, rndv, wrong, send_failures);
    if (idle_check) {
      std::printf("rank %d: idle wait used %.3f s of CPU in 1 s\n", me, idle_cpu);
      if (idle_cpu > 0.25) {
        std::fprintf(stderr, "rank %d: waiting for events burned CPU (%.3f s in 1 s)\n", me, idle_cpu);
        return 1;
      }
    }
    return wrong == 0 && send_failures == 0 && sent == payloads.size() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
}
