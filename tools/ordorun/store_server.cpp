#include "store_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <stdexcept>

#include "comm/store_protocol.hpp"

namespace ordorun {

namespace {

// Compares in time independent of where the strings differ, so that a stranger cannot learn
// the token a byte at a time from how fast a wrong one is refused.
bool same_secret(const std::string& a, const std::vector<std::byte>& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i]) ^ std::to_integer<unsigned char>(b[i]);
  return diff == 0;
}

}  // namespace

StoreServer::StoreServer(EventLoop& loop, std::string token, int ranks,
                         const std::vector<std::string>& addresses, StoreLimits limits,
                         std::function<void(int)> on_hello)
    : loop_(loop), token_(std::move(token)), ranks_(ranks), limits_(limits),
      on_hello_(std::move(on_hello)), per_rank_(std::size_t(ranks), 0),
      requests_(std::size_t(ranks), 0), bytes_sent_(std::size_t(ranks), 0) {
  for (const std::string& address : addresses) {
    Listener l;
    l.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!l.fd.is_open()) throw std::runtime_error("cannot open the store's socket: " + errno_text(errno));
    int one = 1;
    ::setsockopt(l.fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
      throw std::runtime_error("the store address '" + address + "' is not an IPv4 address");
    if (::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("cannot bind the store to " + address + ": " + errno_text(errno));
    if (::listen(l.fd.get(), SOMAXCONN) != 0)
      throw std::runtime_error("cannot listen on " + address + ": " + errno_text(errno));
    socklen_t len = sizeof a;
    ::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    l.endpoint = address + ":" + std::to_string(ntohs(a.sin_port));
    listeners_.push_back(std::move(l));
  }
  for (std::size_t i = 0; i < listeners_.size(); ++i)
    loop_.watch(listeners_[i].fd.get(), POLLIN, [this, i](short) { accept_clients(listeners_[i]); });
}

StoreServer::~StoreServer() {
  for (auto& [fd, c] : clients_) {
    loop_.unwatch(fd);
    if (c->auth_timer != 0) loop_.cancel(c->auth_timer);
  }
  for (Listener& l : listeners_) loop_.unwatch(l.fd.get());
}

std::string StoreServer::endpoint(std::size_t i) const { return listeners_.at(i).endpoint; }

std::size_t StoreServer::pending_count() const { return pending_; }

std::size_t StoreServer::buffered_bytes() const {
  std::size_t n = 0;
  for (const auto& [fd, c] : clients_) n += c->in.size() + c->out.size();
  return n;
}

void StoreServer::accept_clients(Listener& l) {
  for (std::size_t turn = 0; turn < limits_.accepts_per_turn && !backing_off_; ++turn) {
    sockaddr_in peer{};
    socklen_t peer_len = sizeof peer;
    const int fd = ::accept4(l.fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        if (!said_accept_failure_)
          say("the store cannot accept a connection (" + errno_text(err) +
              "); dropping its oldest unauthenticated one and retrying every " +
              std::to_string(limits_.accept_backoff.count()) + " ms");
        said_accept_failure_ = true;
        drop_oldest_pending();
        backing_off_ = true;
        update_accepting();
        loop_.at(EventLoop::Clock::now() + limits_.accept_backoff, [this] {
          backing_off_ = false;
          update_accepting();
        });
      }
      // EAGAIN: nothing more to accept; ECONNABORTED and the like: that client gave up.
      if (err == EINTR || err == ECONNABORTED) continue;
      break;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const std::uint32_t address = peer.sin_family == AF_INET ? peer.sin_addr.s_addr : 0;
    make_room(address);
    auto c = std::make_unique<Client>();
    c->fd.reset(fd);
    c->order = accepted_++;
    c->address = address;
    c->auth_timer = loop_.at(EventLoop::Clock::now() + limits_.auth_timeout, [this, fd] {
      auto it = clients_.find(fd);
      if (it == clients_.end()) return;
      it->second->auth_timer = 0;
      if (it->second->rank < 0) drop(fd);
    });
    clients_.emplace(fd, std::move(c));
    ++pending_;
    ++pending_by_address_[address];
    loop_.watch(fd, POLLIN, [this, fd](short revents) { on_client(fd, revents); });
    // A rank sends its hello right after connecting: read it now, before more strangers come.
    on_client(fd, POLLIN);
  }
  update_accepting();
}

void StoreServer::make_room(std::uint32_t address) {
  const auto mine = pending_by_address_.find(address);
  if (mine != pending_by_address_.end() && mine->second >= limits_.max_pending_per_address) {
    drop_oldest_pending(address);
    return;
  }
  if (pending_ < limits_.max_pending || pending_by_address_.empty()) return;
  auto most = pending_by_address_.begin();
  for (auto it = pending_by_address_.begin(); it != pending_by_address_.end(); ++it)
    if (it->second > most->second) most = it;
  drop_oldest_pending(most->first);
}

void StoreServer::forget_pending(const Client& c) {
  --pending_;
  auto it = pending_by_address_.find(c.address);
  if (it != pending_by_address_.end() && --it->second == 0) pending_by_address_.erase(it);
}

void StoreServer::update_accepting() {
  for (Listener& l : listeners_) loop_.set_events(l.fd.get(), backing_off_ ? 0 : POLLIN);
}

void StoreServer::on_client(int fd, short revents) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = *it->second;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !read_requests(c)) {
    drop(fd);
    return;
  }
  answer_parked();
  for (auto& [other, client] : clients_) flush(*client);
}

bool StoreServer::read_requests(Client& c) {
  std::byte buf[65536];
  for (;;) {
    // A pending client is read no further than the hello it must start with, so that a
    // stranger cannot make the store hold more than that.
    std::size_t want = sizeof buf;
    if (c.rank < 0) {
      std::size_t need = store::request_header_bytes;
      if (c.in.size() >= store::request_header_bytes)
        need += store::get_u32(c.in.data() + 1) + std::size_t(store::get_u32(c.in.data() + 5));
      want = need - c.in.size();
    }
    const ssize_t k = ::recv(c.fd.get(), buf, want, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno == EAGAIN) return true;
    if (k <= 0) return false;
    c.in.insert(c.in.end(), buf, buf + k);
    if (c.rank < 0 && c.in.size() >= store::request_header_bytes) {
      const auto op = std::uint8_t(c.in[0]);
      if (op != std::uint8_t(store::Op::hello) || store::get_u32(c.in.data() + 1) > store::max_hello_key ||
          store::get_u32(c.in.data() + 5) > store::max_token)
        return false;
    }
    if (!serve(c)) return false;
  }
}

StoreServer::Parked StoreServer::parked(const store::Request& r) {
  Parked p;
  p.key = r.key;
  p.op = r.op;
  return p;
}

bool StoreServer::serve(Client& c) {
  for (;;) {
    std::size_t used = 0;
    bool bad = false;
    auto req = store::parse_request(c.in, used, bad);
    if (bad) return false;
    if (!req) return true;
    c.in.erase(c.in.begin(), c.in.begin() + std::ptrdiff_t(used));
    if (c.rank >= 0) ++requests_[std::size_t(c.rank)];
    switch (req->op) {
      case store::Op::hello:
        if (c.rank >= 0) return false;
        if (!authenticate(c, req->key, req->value)) {
          // Said before the drop, best effort: a rank reports a refusal instead of retrying.
          const auto no = store::encode_response(store::Status::bad_request, {});
          [[maybe_unused]] ssize_t k =
              ::send(c.fd.get(), no.data(), no.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          return false;
        }
        break;
      case store::Op::put: {
        if (c.rank < 0) return false;
        kv_[req->key] = std::move(req->value);
        forget_ranges(req->key);
        reply(c, store::encode_response(store::Status::ok, {}));
        break;
      }
      case store::Op::get:
        if (c.rank < 0) return false;
        c.waiting.push_back(parked(*req));
        break;
      case store::Op::get_range:
      case store::Op::get_runs: {
        if (c.rank < 0) return false;
        Parked p = parked(*req);
        if (req->value.size() == 8) {
          p.first = store::get_u32(req->value.data());
          p.count = store::get_u32(req->value.data() + 4);
        }
        // A range longer than the job's ranks, or past the largest key, is no collective's:
        // refused (in its turn, after the gets parked before it) rather than kept waiting for
        // keys no rank will put.
        p.is_refused = req->value.size() != 8 || p.count > std::uint32_t(ranks_) ||
                       p.first > std::numeric_limits<std::uint32_t>::max() - p.count;
        c.waiting.push_back(std::move(p));
        break;
      }
      case store::Op::get_list: {
        if (c.rank < 0) return false;
        Parked p = parked(*req);
        // More indices than ranks, or an index past them, names no rank's key: refused.
        auto list = store::parse_list(req->value);
        p.is_refused = !list || list->size() > std::size_t(ranks_) ||
                       std::any_of(list->begin(), list->end(),
                                   [&](std::uint32_t i) { return i >= std::uint32_t(ranks_); });
        if (!p.is_refused) p.list = std::move(*list);
        c.waiting.push_back(std::move(p));
        break;
      }
    }
  }
}

bool StoreServer::authenticate(Client& c, const std::string& key, const std::vector<std::byte>& value) {
  if (!same_secret(token_, value)) return false;
  // A rank is spelled one way, as the ranks write it (std::to_string): "01" or "00" are no
  // rank's hello, as the protocol says and as fuzz_store holds the store to.
  if (key.empty() || !std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
      (key.size() > 1 && key[0] == '0'))
    return false;
  const long long r = std::stoll(key);  // at most max_hello_key digits: no overflow
  if (r >= ranks_) return false;
  if (std::size_t(per_rank_[std::size_t(r)]) >= limits_.connections_per_rank) return false;
  ++per_rank_[std::size_t(r)];
  forget_pending(c);
  c.rank = int(r);
  if (c.auth_timer != 0) loop_.cancel(c.auth_timer);
  c.auth_timer = 0;
  reply(c, store::encode_response(store::Status::ok, {}));
  update_accepting();
  if (on_hello_) on_hello_(c.rank);
  return true;
}

const std::vector<std::byte>* StoreServer::value_of(const std::string& key) const {
  ++key_lookups_;
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

bool StoreServer::is_answerable(Parked& p, RangeSeen*& range) {
  range = nullptr;
  if (p.is_refused || p.op == store::Op::get_list) return true;
  if (p.op == store::Op::get) return value_of(p.key) != nullptr;
  // An entry found is up to date: every put to one of its keys erased it (forget_ranges).
  auto [at, is_new] = ranges_.try_emplace(RangeAsk{p.op, p.key, p.first, p.count});
  RangeSeen& seen = at->second;
  range = &seen;
  seen.used = ++ranges_used_;
  if (is_new && ranges_.size() > max_ranges_kept)
    ranges_.erase(std::min_element(ranges_.begin(), ranges_.end(), [](const auto& a, const auto& b) {
      return a.second.used < b.second.used;
    }));
  if (is_new) {
    // Stops at the first key without a value: every client's p.present is at most that far.
    seen.present = p.present;
    while (seen.present < p.count && value_of(p.key + std::to_string(p.first + seen.present)))
      ++seen.present;
  }
  p.present = seen.present;
  return p.present == p.count;
}

void StoreServer::forget_ranges(const std::string& key) {
  // Every range whose prefix starts the key, whether or not the rest names one of its keys:
  // a few entries per collective, and a put is one per rank and collective.
  std::erase_if(ranges_, [&](const auto& entry) { return key.starts_with(entry.first.prefix); });
}

void StoreServer::stop_job(const std::string& why) {
  if (stopping_) return;
  stopping_ = why;
  answer_parked();
  for (auto& [fd, c] : clients_) flush(*c);
}

void StoreServer::answer_parked() {
  for (auto& [fd, c] : clients_) {
    while (!c->waiting.empty()) {
      Parked& p = c->waiting.front();
      RangeSeen* range = nullptr;
      if (is_answerable(p, range))
        answer(*c, p, range);
      else if (stopping_)  // a request that lacks a value is answered with why the job stops
        reply(*c, store::encode_response(
                      store::Status::job_stopping,
                      std::vector<std::byte>(reinterpret_cast<const std::byte*>(stopping_->data()),
                                             reinterpret_cast<const std::byte*>(stopping_->data()) +
                                                 stopping_->size())));
      else
        break;
      c->waiting.pop_front();
    }
  }
}

void StoreServer::answer(Client& c, const Parked& p, RangeSeen* range) {
  if (p.is_refused) return reply(c, store::encode_response(store::Status::bad_request, {}));
  switch (p.op) {
    case store::Op::get:
      return reply(c, store::encode_response(store::Status::ok, *value_of(p.key)));
    case store::Op::get_range:
    case store::Op::get_runs: {
      if (range->response.empty()) range->response = range_answer(p);
      return reply(c, range->response);
    }
    case store::Op::get_list: {
      std::vector<std::byte> all;
      for (std::uint32_t i : p.list) {
        const std::string key = p.key + std::to_string(i);
        const std::vector<std::byte>* value = value_of(key);
        if (value == nullptr)
          return reply(c, store::encode_response(
                              store::Status::missing,
                              std::vector<std::byte>(reinterpret_cast<const std::byte*>(key.data()),
                                                     reinterpret_cast<const std::byte*>(key.data()) +
                                                         key.size())));
        store::append_entry(all, *value);
      }
      return reply(c, store::encode_response(store::Status::ok, all));
    }
    case store::Op::hello:
    case store::Op::put:
      break;  // never parked
  }
}

std::vector<std::byte> StoreServer::range_answer(const Parked& p) const {
  std::vector<std::byte> all;
  if (p.op == store::Op::get_range) {
    for (std::uint32_t k = 0; k < p.count; ++k)
      store::append_entry(all, *value_of(p.key + std::to_string(p.first + k)));
    return store::encode_response(store::Status::ok, all);
  }
  // get_runs: equal values of consecutive keys go once, with how many keys share them.
  const std::vector<std::byte>* run = nullptr;
  std::uint32_t length = 0;
  for (std::uint32_t k = 0; k < p.count; ++k) {
    const std::vector<std::byte>* v = value_of(p.key + std::to_string(p.first + k));
    if (run != nullptr && *v == *run) {
      ++length;
      continue;
    }
    if (run != nullptr) store::append_run(all, length, *run);
    run = v;
    length = 1;
  }
  if (run != nullptr) store::append_run(all, length, *run);
  return store::encode_response(store::Status::ok, all);
}

void StoreServer::reply(Client& c, const std::vector<std::byte>& response) {
  c.out.insert(c.out.end(), response.begin(), response.end());
  if (c.rank >= 0) bytes_sent_[std::size_t(c.rank)] += response.size();
}

void StoreServer::flush(Client& c) {
  while (!c.out.empty()) {
    const ssize_t k = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;  // full (POLLOUT below) or gone (the next read says so)
    c.out.erase(c.out.begin(), c.out.begin() + k);
  }
  loop_.set_events(c.fd.get(), short(POLLIN | (c.out.empty() ? 0 : POLLOUT)));
}

void StoreServer::drop(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = *it->second;
  if (c.auth_timer != 0) loop_.cancel(c.auth_timer);
  if (c.rank >= 0)
    --per_rank_[std::size_t(c.rank)];
  else
    forget_pending(c);
  loop_.unwatch(fd);
  clients_.erase(it);
  update_accepting();
}

void StoreServer::drop_oldest_pending(std::optional<std::uint32_t> address) {
  int oldest = -1;
  std::uint64_t order = 0;
  for (const auto& [fd, c] : clients_)
    if (c->rank < 0 && (!address || c->address == *address) && (oldest < 0 || c->order < order)) {
      oldest = fd;
      order = c->order;
    }
  if (oldest >= 0) drop(oldest);
}

}  // namespace ordorun
