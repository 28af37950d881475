// Single-process and store-client bootstraps, and the choice between them and PMIx.
// The store protocol is described in store_protocol.hpp.
#include "comm/bootstrap.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "comm/store_protocol.hpp"

namespace ordo::comm {
namespace {

class SingleBootstrap final : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* kind() const override { return "single"; }
  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    return {Blob(mine.begin(), mine.end())};
  }
  void barrier() override {}
};

using Clock = std::chrono::steady_clock;

// How long one connect to the store may wait before a fresh one starts (see connect_and_hello).
constexpr std::chrono::milliseconds connect_attempt{1000};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? int(left.count()) : 0;
}

class StoreBootstrap final : public Bootstrap {
 public:
  StoreBootstrap(int rank, int size, const std::string& host_port, std::chrono::milliseconds timeout,
                 const std::string& token, int local_rank, int local_size)
      : rank_(rank), size_(size), local_rank_(local_rank), local_size_(local_size),
        timeout_(timeout), where_(host_port) {
    if (rank < 0 || size < 1 || rank >= size)
      throw CommError("comm: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                      " is not a valid rank; check ORDO_RANK and ORDO_SIZE");
    if (local_rank < 0 || local_size < 1 || local_rank >= local_size || local_size > size)
      throw CommError("comm: local rank " + std::to_string(local_rank) + " of " +
                      std::to_string(local_size) +
                      " is not a valid rank of this host in a job of " + std::to_string(size) +
                      "; check ORDO_LOCAL_RANK and ORDO_LOCAL_SIZE");
    const auto secret = std::as_bytes(std::span(token.data(), token.size()));
    const auto deadline = Clock::now() + timeout_;
    fd_ = connect_and_hello(secret, deadline, "saying hello");
    try {
      start_lifeline(secret, deadline);
    } catch (...) {
      ::close(fd_);  // no destructor runs for a constructor that throws
      throw;
    }
  }
  ~StoreBootstrap() override {
    if (lifeline_.joinable()) {
      // Pairs with the acquire load in the lifeline thread: it sees the flag when recv returns.
      stopping_.store(true, std::memory_order_release);
      ::shutdown(lifeline_fd_, SHUT_RDWR);
      lifeline_.join();
    }
    if (lifeline_fd_ >= 0) ::close(lifeline_fd_);
    if (fd_ >= 0) ::close(fd_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const char* kind() const override { return "store"; }

  // Two requests whatever the ranks: the put, and one get_range answered once every rank has
  // put (store_protocol.hpp).
  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    const Blob answer = gather(store::Op::get_range, mine);
    auto all = store::parse_entries(answer, std::size_t(size_));
    if (!all) malformed(answer, "collective");
    return std::move(*all);
  }

  // An allgather of nothing answered as runs: one run, so that its reply does not grow with
  // the ranks as get_range's N empty entries would.
  void barrier() override { runs(gather(store::Op::get_runs, {}), "barrier"); }

  bool barrier_within(std::chrono::milliseconds bound) override {
    try {
      runs(gather(store::Op::get_runs, {}, Clock::now() + bound), "barrier");
      return true;
    } catch (const CommError&) {
      return false;  // timed out, or ordorun stops the job: either way, leave without the others
    }
  }

  void aborted(const std::string& message, int status) override {
    tell_launcher("abort/", std::to_string(status) + " " + message, "saying it aborts");
  }

  void caused_by(unsigned rank, const std::string& what) override {
    tell_launcher("cause/", std::to_string(rank) + " " + what, "saying why it stops");
  }

  void finished() override { tell_launcher("done/", "", "saying it finished"); }

  // A put of "<prefix><this rank>" for ordorun to read when the job ends, bounded by 0.5 s;
  // best effort: when ordorun is gone or stops the job, no one is left to tell.
  void tell_launcher(const char* prefix, const std::string& value, const char* doing) {
    try {
      request(store::Op::put, prefix + std::to_string(rank_),
              std::as_bytes(std::span(value.data(), value.size())), doing,
              Clock::now() + std::chrono::milliseconds(500));
    } catch (const CommError&) {
    }
  }

  // A put per part of `own`, then an allgather of `shared` answered as runs (a put and a
  // get_runs: store_protocol.hpp).
  std::vector<Run> exchange(std::span<const std::byte> shared, std::span<const Blob> own) override {
    for (std::size_t part = 0; part < own.size(); ++part)
      request(store::Op::put, own_prefix(part) + std::to_string(rank_), own[part],
              "publishing its start-up record");
    return runs(gather(store::Op::get_runs, shared), "start-up exchange");
  }

  std::vector<Blob> fetch(std::size_t part, std::span<const int> ranks) override {
    check_ranks(ranks);
    if (ranks.empty()) return {};
    const std::vector<std::byte> list =
        store::encode_list(std::vector<std::uint32_t>(ranks.begin(), ranks.end()));
    const Blob answer = request(store::Op::get_list, own_prefix(part), list,
                                "fetching part " + std::to_string(part) + " of " +
                                    std::to_string(ranks.size()) + " rank(s)' start-up records");
    auto all = store::parse_entries(answer, ranks.size());
    if (!all)
      throw CommError("comm: ordorun's store answered rank " + std::to_string(rank_) +
                      "'s request for " + std::to_string(ranks.size()) + " record(s) with a "
                      "malformed reply (" + std::to_string(answer.size()) + " bytes); is "
                      "ordorun the same ordo build as the program?");
    return std::move(*all);
  }

 private:
  // A second connection to ordorun that carries nothing: when it closes, ordorun is gone (killed,
  // or stopping the job while this rank runs on a host it reaches only through ssh, which does
  // not pass signals on). The rank then exits at once instead of living on as an orphan that
  // waits for peers forever.
  // The lifeline says hello too: the store drops a connection that does not authenticate.
  void start_lifeline(std::span<const std::byte> secret, Clock::time_point deadline) {
    lifeline_fd_ = connect_and_hello(secret, deadline, "saying hello on the lifeline");
    lifeline_ = std::thread([this] {
      char b;
      for (;;) {
        const ssize_t k = ::recv(lifeline_fd_, &b, 1, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k > 0) continue;
        break;
      }
      if (stopping_.load(std::memory_order_acquire)) return;
      const std::string msg = "comm: rank " + std::to_string(rank_) + " lost its launcher (ordorun's store at " +
                              where_ + " closed); exiting\n";
      [[maybe_unused]] ssize_t w = ::write(2, msg.data(), msg.size());
      std::_Exit(1);
    });
  }

  // A connection to the store that has said hello, by `deadline`. Every step is bounded: a
  // connect waits at most connect_attempt (the store may be unreachable for a while, or its
  // backlog full, and the kernel's own SYN retries stretch to minutes), then starts afresh. A
  // connection the store closes before answering the hello (it made room for newer ones under
  // a stranger's flood, tools/ordorun/store_server.hpp) is tried again; a refused hello is not.
  int connect_and_hello(std::span<const std::byte> secret, Clock::time_point deadline,
                        const std::string& doing) {
    const auto colon = where_.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == where_.size())
      throw CommError("comm: ORDO_STORE='" + where_ + "' is not host:port");
    const std::string host = where_.substr(0, colon), port = where_.substr(colon + 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
      throw CommError("comm: cannot resolve the store address '" + where_ + "': " +
                      ::gai_strerror(rc));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(res, ::freeaddrinfo);
    std::string last = "no address";
    auto pause = std::chrono::milliseconds(10);
    for (;;) {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        const int fd = connect_once(*a, deadline, last);
        if (fd < 0) continue;
        bool answered = false;
        try {
          answered = say_hello(fd, secret, deadline, doing);
        } catch (...) {
          ::close(fd);
          throw;
        }
        if (answered) return fd;
        last = "the store closed the connection before answering its hello";
        ::close(fd);
      }
      const int left = remaining_ms(deadline);
      if (left == 0) break;
      std::this_thread::sleep_for(std::min(pause, std::chrono::milliseconds(left)));
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    throw CommError("comm: rank " + std::to_string(rank_) + " cannot reach ordorun's store at " +
                    where_ + " (" + last + ") within " + std::to_string(timeout_.count()) +
                    " ms, " + doing +
                    " (bootstrap timeout: ORDO_TIMEOUT / ordorun "
                    "--timeout-startup)");
  }

  // A non-blocking connect to `a`, waited for at most connect_attempt and never past
  // `deadline`: the connected descriptor (blocking again, as the lifeline's recv needs), or -1
  // with `last` saying why not.
  static int connect_once(const addrinfo& a, Clock::time_point deadline, std::string& last) {
    const int fd =
        ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      return -1;
    }
    int err = 0;
    if (::connect(fd, a.ai_addr, a.ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const auto until = std::min(deadline, Clock::now() + connect_attempt);
        pollfd p{fd, POLLOUT, 0};
        int rc;
        do rc = ::poll(&p, 1, remaining_ms(until));
        while (rc < 0 && errno == EINTR);
        socklen_t len = sizeof err;
        if (rc <= 0)
          err = rc == 0 ? ETIMEDOUT : errno;
        else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
          err = errno;
      }
    }
    if (err != 0) {
      last = std::strerror(err);
      ::close(fd);
      return -1;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  // Says hello on `fd`: true once answered ok, false when the store closed the connection
  // first. Throws CommError when the store refused it or `deadline` passed.
  bool say_hello(int fd, std::span<const std::byte> secret, Clock::time_point deadline,
                 const std::string& doing) {
    const auto msg = store::encode_request(store::Op::hello, std::to_string(rank_), secret.data(),
                                           secret.size());
    std::byte head[5];
    if (!send_all(fd, msg.data(), msg.size(), deadline, doing) ||
        !recv_all(fd, head, 5, deadline, doing))
      return false;
    if (std::uint8_t(head[0]) != std::uint8_t(store::Status::ok) || store::get_u32(head + 1) != 0)
      throw CommError("comm: ordorun's store at " + where_ + " refused rank " +
                      std::to_string(rank_) +
                      "'s hello: its ORDO_STORE_TOKEN or ORDO_RANK is not of the job that store "
                      "serves, or the rank already holds as many connections as the store allows; "
                      "start every rank with the ordorun that serves ORDO_STORE");
    return true;
  }

  // Where part `part` of the ranks' own start-up records is kept: "pub/<part>/<rank>".
  static std::string own_prefix(std::size_t part) { return "pub/" + std::to_string(part) + "/"; }

  // Collective number s: puts `mine` as "ag/s/<rank>", then asks for every rank's with `op`
  // (get_range or get_runs); the answer's bytes.
  // `deadline` bounds it where the timeout rule of request() would not.
  Blob gather(store::Op op, std::span<const std::byte> mine,
              std::optional<Clock::time_point> deadline = std::nullopt) {
    const std::uint64_t round = round_++;
    const std::string prefix = "ag/" + std::to_string(round) + "/";
    request(store::Op::put, prefix + std::to_string(rank_), mine, "publishing", deadline);
    const std::vector<std::byte> range = store::encode_range(0, std::uint32_t(size_));
    return request(op, prefix, range,
                   "waiting for every rank's part of collective " + std::to_string(round),
                   deadline);
  }

  std::vector<Run> runs(const Blob& answer, const char* what) {
    auto parsed = store::parse_runs(answer, std::size_t(size_));
    if (!parsed) malformed(answer, what);
    return std::move(*parsed);
  }

  [[noreturn]] void malformed(const Blob& answer, const char* what) {
    throw CommError("comm: ordorun's store answered rank " + std::to_string(rank_) + "'s " + what +
                    " with a malformed reply (" + std::to_string(answer.size()) + " bytes for " +
                    std::to_string(size_) + " ranks); is ordorun the same ordo build as the "
                    "program?");
  }

  // On the request connection, one request at a time (fetch() may come from any thread).
  Blob request(store::Op op, const std::string& key, std::span<const std::byte> value,
               const std::string& doing, std::optional<Clock::time_point> deadline = std::nullopt) {
    std::lock_guard lock(request_mu_);
    return request(fd_, op, key, value, doing, deadline);
  }

  Blob request(int fd, store::Op op, const std::string& key, std::span<const std::byte> value,
               const std::string& doing, std::optional<Clock::time_point> bound = std::nullopt) {
    const auto msg = store::encode_request(op, key, value.data(), value.size());
    // Only startup is timed (hello and the first collective, where a rank that never started
    // shows), and get_list, which the store answers at once. Later collectives may
    // legitimately wait on a slow peer; a dead one ends the job through ordorun, and a dead
    // ordorun through the lifeline. A caller's `bound` wins.
    const bool timed = round_.load(std::memory_order_relaxed) <= 1 || op == store::Op::get_list;
    const auto deadline = bound   ? *bound
                          : timed ? Clock::now() + timeout_
                                  : Clock::time_point::max();
    std::byte head[5];
    if (!send_all(fd, msg.data(), msg.size(), deadline, doing) ||
        !recv_all(fd, head, 5, deadline, doing))
      lost(doing);
    Blob out(store::get_u32(head + 1));
    if (!recv_all(fd, out.data(), out.size(), deadline, doing)) lost(doing);
    if (std::uint8_t(head[0]) == std::uint8_t(store::Status::job_stopping))
      throw CommError("comm: rank " + std::to_string(rank_) + " stopped " + doing +
                      ": ordorun is stopping the job (" +
                      std::string(reinterpret_cast<const char*>(out.data()), out.size()) + ")");
    if (std::uint8_t(head[0]) == std::uint8_t(store::Status::missing))
      throw CommError("comm: rank " + std::to_string(rank_) + " asked ordorun's store for '" +
                      std::string(reinterpret_cast<const char*>(out.data()), out.size()) +
                      "' while " + doing + ", which no rank put there; is every rank the same "
                      "ordo build?");
    if (std::uint8_t(head[0]) != std::uint8_t(store::Status::ok))
      throw CommError("comm: ordorun's store refused a request from rank " +
                      std::to_string(rank_) + " while " + doing);
    return out;
  }

  void wait_fd(int fd, short events, Clock::time_point deadline, const std::string& doing) {
    for (;;) {
      pollfd p{fd, events, 0};
      const int ms = deadline == Clock::time_point::max() ? -1 : remaining_ms(deadline);
      const int rc = ::poll(&p, 1, ms);
      if (rc > 0) return;
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0)
        throw CommError("comm: rank " + std::to_string(rank_) + " timed out after " +
                        std::to_string(timeout_.count()) + " ms " + doing +
                        " (bootstrap timeout: ORDO_TIMEOUT / ordorun --timeout-startup); "
                        "did every rank start?");
      throw CommError(std::string("comm: poll on the store connection failed: ") +
                      std::strerror(errno));
    }
  }

  // Both return false when the connection is gone, and throw CommError past `deadline`.
  bool send_all(int fd, const std::byte* p, std::size_t n, Clock::time_point deadline,
                const std::string& doing) {
    while (n > 0) {
      wait_fd(fd, POLLOUT, deadline, doing);
      const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (k <= 0) return false;
      p += k;
      n -= std::size_t(k);
    }
    return true;
  }

  bool recv_all(int fd, std::byte* p, std::size_t n, Clock::time_point deadline,
                const std::string& doing) {
    while (n > 0) {
      wait_fd(fd, POLLIN, deadline, doing);
      const ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (k <= 0) return false;
      p += k;
      n -= std::size_t(k);
    }
    return true;
  }

  [[noreturn]] void lost(const std::string& doing) {
    throw CommError("comm: rank " + std::to_string(rank_) + " lost its connection to ordorun's "
                    "store at " + where_ + " while " + doing + " (did ordorun stop the job?)");
  }

  int rank_, size_, local_rank_, local_size_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  int fd_ = -1;
  std::atomic<std::uint64_t> round_{0};  // collectives begun (read by fetch's timeout rule)
  std::mutex request_mu_;                // one request at a time on fd_
  int lifeline_fd_ = -1;
  std::thread lifeline_;
  std::atomic<bool> stopping_{false};
};

int env_int(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < 0 || v > 1 << 24)
    throw CommError(std::string("comm: ") + name + "='" + value + "' is not a rank count/index");
  return int(v);
}

}  // namespace

Launch Launch::from(const Lookup& lookup) {
  Launch l;
  const char* store_addr = lookup("ORDO_STORE");
  if (store_addr != nullptr && *store_addr != '\0') {
    const char* rank = lookup("ORDO_RANK");
    const char* size = lookup("ORDO_SIZE");
    if (rank == nullptr || size == nullptr)
      throw CommError("comm: ORDO_STORE is set but ORDO_RANK or ORDO_SIZE is not; start the "
                      "program with ordorun");
    l.kind = Kind::store;
    l.store = store_addr;
    l.rank = env_int("ORDO_RANK", rank);
    l.size = env_int("ORDO_SIZE", size);
    // A launcher that does not say how many ranks share the host: each rank alone on it.
    const char* local_rank = lookup("ORDO_LOCAL_RANK");
    const char* local_size = lookup("ORDO_LOCAL_SIZE");
    if (local_rank != nullptr && local_size != nullptr) {
      l.local_rank = env_int("ORDO_LOCAL_RANK", local_rank);
      l.local_size = env_int("ORDO_LOCAL_SIZE", local_size);
    }
    if (const char* token = lookup("ORDO_STORE_TOKEN")) l.token = token;
    return l;
  }
  if (lookup("PMIX_RANK") != nullptr && lookup("PMIX_NAMESPACE") != nullptr) l.kind = Kind::pmix;
  return l;
}

std::vector<Bootstrap::Run> Bootstrap::runs_of(std::vector<Blob> all) {
  std::vector<Run> runs;
  for (Blob& b : all) {
    if (!runs.empty() && runs.back().value == b)
      ++runs.back().count;
    else
      runs.push_back({1, std::move(b)});
  }
  return runs;
}

void Bootstrap::check_ranks(std::span<const int> ranks) const {
  for (int r : ranks)
    if (r < 0 || r >= size())
      throw CommError("comm: rank " + std::to_string(rank()) + " asked about rank " +
                      std::to_string(r) + ", but the job has ranks 0.." + std::to_string(size() - 1));
}

// Every rank's shared bytes and own parts as entries of one allgather; the parts are kept
// for fetch().
std::vector<Bootstrap::Run> Bootstrap::exchange(std::span<const std::byte> shared,
                                                std::span<const Blob> own) {
  std::size_t bytes = 4 + shared.size();
  for (const Blob& part : own) bytes += 4 + part.size();
  std::vector<std::byte> mine;
  mine.reserve(bytes);
  store::append_entry(mine, shared);
  for (const Blob& part : own) store::append_entry(mine, part);
  std::vector<Blob> all = allgather(mine);
  std::vector<Blob> shared_of(all.size());
  exchanged_own_.assign(all.size(), {});
  for (std::size_t r = 0; r < all.size(); ++r) {
    auto entries = store::parse_entries(all[r], 1 + own.size());
    if (!entries)
      throw CommError("comm: rank " + std::to_string(r) + " sent a malformed start-up record (" +
                      std::to_string(all[r].size()) + " bytes); are all ranks the same ordo build?");
    shared_of[r] = std::move((*entries)[0]);
    exchanged_own_[r].assign(std::make_move_iterator(entries->begin() + 1),
                             std::make_move_iterator(entries->end()));
  }
  return runs_of(std::move(shared_of));
}

std::vector<Blob> Bootstrap::fetch(std::size_t part, std::span<const int> ranks) {
  check_ranks(ranks);
  std::vector<Blob> out;
  for (int r : ranks) {
    if (std::size_t(r) >= exchanged_own_.size() || part >= exchanged_own_[std::size_t(r)].size())
      throw CommError("comm: rank " + std::to_string(rank()) + " asked for part " +
                      std::to_string(part) + " of rank " + std::to_string(r) +
                      "'s start-up record, which it did not give");
    out.push_back(exchanged_own_[std::size_t(r)][part]);
  }
  return out;
}

std::unique_ptr<Bootstrap> Bootstrap::single() { return std::make_unique<SingleBootstrap>(); }

std::unique_ptr<Bootstrap> Bootstrap::store(int rank, int size, const std::string& host_port,
                                            std::chrono::milliseconds timeout, const std::string& token,
                                            int local_rank, int local_size) {
  return std::make_unique<StoreBootstrap>(rank, size, host_port, timeout, token, local_rank,
                                          local_size);
}

std::unique_ptr<Bootstrap> Bootstrap::create(const Launch& launch, std::chrono::milliseconds timeout) {
  switch (launch.kind) {
    case Launch::Kind::store:
      return store(launch.rank, launch.size, launch.store, timeout, launch.token,
                   launch.local_rank, launch.local_size);
    case Launch::Kind::pmix:
      return pmix(timeout);
    case Launch::Kind::single:
      break;
  }
  return single();
}

}  // namespace ordo::comm
