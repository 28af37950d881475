// Fuzz target: the store's protocol as strangers and ranks speak it, through a StoreServer on
// loopback (tools/ordorun/store_server.hpp) and the wire format's parser
// (comm/store_protocol.hpp). The input is a script of chunks — [client][length][bytes] — sent
// over three connections, the loop turned after each. The server must never crash, never
// answer a connection whose first request is not a hello with the job's token and rank (but
// for one bad_request that refuses a hello), and
// never hold more than a hello's bytes for a connection that has not authenticated.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/store_protocol.hpp"
#include "store_server.hpp"

namespace {

namespace store = ordo::comm::store;
using ordorun::EventLoop;

const std::string token = "tok";  // short, so that inputs can carry it
constexpr int ranks = 2;

struct Server {
  EventLoop loop;
  ordorun::StoreServer server{loop, token, ranks, {"127.0.0.1"}, {}, nullptr};
  sockaddr_in at{};
  Server() {
    const std::string e = server.endpoint(0);
    at.sin_family = AF_INET;
    at.sin_port = htons(std::uint16_t(std::stoi(e.substr(e.rfind(':') + 1))));
    ::inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  }
  void turn(int n) {
    for (int i = 0; i < n; ++i) {
      loop.at(EventLoop::Clock::now(), [] {});  // a turn that does not wait
      loop.run_once();
    }
  }
};

// A new connection to the server. Not a blocking connect(): libFuzzer's -timeout alarm
// (SIGALRM, handled without SA_RESTART) interrupts one now and then with EINTR although the
// connection goes on being made, which trapped as if the store had refused it (about one run
// of 12 s in 7). A non-blocking connect waits in poll, which is simply called again.
int connect_to(const sockaddr_in& at) {
  const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (f < 0) __builtin_trap();
  if (::connect(f, reinterpret_cast<const sockaddr*>(&at), sizeof at) == 0) return f;
  if (errno != EINPROGRESS) __builtin_trap();
  pollfd p{f, POLLOUT, 0};
  while (::poll(&p, 1, -1) < 0)
    if (errno != EINTR) __builtin_trap();
  int error = 0;
  socklen_t len = sizeof error;
  if (::getsockopt(f, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) __builtin_trap();
  return f;
}

// Whether `sent` starts with a hello the store must accept.
bool starts_with_good_hello(const std::vector<std::byte>& sent) {
  std::size_t used = 0;
  bool bad = false;
  const auto r = store::parse_request(sent, used, bad);
  if (!r || r->op != store::Op::hello) return false;
  const std::string value(reinterpret_cast<const char*>(r->value.data()), r->value.size());
  return value == token && (r->key == "0" || r->key == "1");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {  // The parser alone, on the whole input.
    std::vector<std::byte> in(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
    std::size_t used = 0;
    bool bad = false;
    while (auto r = store::parse_request(in, used, bad)) {
      if (used == 0 || used > in.size()) __builtin_trap();
      in.erase(in.begin(), in.begin() + std::ptrdiff_t(used));
    }
  }
  static Server s;
  std::array<int, 3> fd{};
  std::array<std::vector<std::byte>, 3> sent, got;
  for (int& f : fd) f = connect_to(s.at);
  s.turn(2);
  auto drain = [&](int c) {
    std::byte buf[4096];
    for (;;) {
      const ssize_t k = ::recv(fd[c], buf, sizeof buf, MSG_DONTWAIT);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return;
      got[c].insert(got[c].end(), buf, buf + k);
    }
  };
  const std::size_t hello_max = store::request_header_bytes + store::max_hello_key + store::max_token;
  for (std::size_t i = 0; i + 2 <= size;) {
    const int c = data[i] % 3;
    const std::size_t n = std::min<std::size_t>(data[i + 1], size - i - 2);
    const auto* p = reinterpret_cast<const std::byte*>(data + i + 2);
    // What the server may have got is what send took, which may be less than the chunk.
    const ssize_t k = ::send(fd[c], p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) sent[c].insert(sent[c].end(), p, p + k);
    i += 2 + n;
    s.turn(2);
    if (s.server.pending_count() == s.server.client_count() &&
        s.server.buffered_bytes() > s.server.client_count() * hello_max)
      __builtin_trap();  // strangers only, and more than their hellos held
    for (int k = 0; k < 3; ++k) drain(k);
  }
  s.turn(3);
  for (int c = 0; c < 3; ++c) {
    drain(c);
    // A stranger gets nothing, or one refusal of its hello (bad_request, said before the drop).
    const auto refusal = store::encode_response(store::Status::bad_request, {});
    if (!got[c].empty() && !starts_with_good_hello(sent[c]) && got[c] != refusal)
      __builtin_trap();  // answered a stranger
  }
  for (int f : fd) ::close(f);
  for (int i = 0; i < 100 && s.server.client_count() > 0; ++i) s.turn(1);
  return 0;
}
