// StoreServer: the rendezvous store the ranks of a job bootstrap from (wire format and
// operations in comm/store_protocol.hpp), served inside ordorun's event loop.
//
// Who may use it: a connection is *pending* until its first request, a hello with the job's
// token and a rank of the job, has arrived; only then may it put and get. The store may listen
// where strangers reach it (--hosts), and strangers may share the ranks' address (loopback,
// another user of a rank's host), so what a stranger can make it hold, and how long it can
// keep a rank waiting, are bounded:
//   - a pending connection is read only as far as a hello can reach (max_hello_bytes): its
//     first 9 bytes must announce a hello of plausible size, or it is dropped at once;
//   - it is dropped unless it authenticates within auth_timeout;
//   - the store accepts whatever the kernel has queued (accepts_per_turn at a time), and reads
//     a new connection at once: a rank's hello follows its connect, so it is usually there;
//   - at most max_pending_per_address connections from one address are pending at once, and
//     max_pending in all: a new one beyond them takes the place of the oldest pending one of
//     its address (of the address with the most, beyond max_pending). A stranger's flood so
//     pushes out its own idle connections, not a rank's hello, and the kernel's backlog never
//     fills up with connections the store will not accept;
//   - authenticated connections (the ranks') count against none of these: they are never
//     dropped to make room, each rank may hold connections_per_rank of them (its request
//     connection and its lifeline, with room for a program that bootstraps twice);
//   - a hello that is refused (a wrong token, a rank outside the job or over its connections)
//     is answered bad_request before the drop, so a rank tells a refusal, which it reports,
//     from a connection dropped to make room, after which it connects again
//     (comm/bootstrap.cpp);
//   - when accept() fails for want of descriptors or memory, the store drops its oldest
//     pending connection and stops accepting for accept_backoff, instead of polling a listener
//     it cannot serve in a tight loop.
// An authenticated rank is trusted: its puts may be as large as the protocol allows.
//
// Threading: none; everything runs on the EventLoop's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/store_protocol.hpp"
#include "event_loop.hpp"
#include "posix.hpp"

namespace ordorun {
namespace store = ordo::comm::store;

struct StoreLimits {
  std::size_t max_pending = 256;
  std::size_t max_pending_per_address = 64;
  std::size_t accepts_per_turn = 64;
  std::chrono::milliseconds auth_timeout{5'000};
  std::size_t connections_per_rank = 4;
  std::chrono::milliseconds accept_backoff{100};
};

class StoreServer {
 public:
  // Ranges kept at most: the collectives in progress, whose ranks are at most a collective or
  // two apart, with room; beyond, the one asked for least recently is forgotten (a get_range's
  // answer holds every rank's value, which kv_ holds too).
  static constexpr std::size_t max_ranges_kept = 16;
  // Listens on each IPv4 address of `addresses` (dotted quad), on a port the kernel picks.
  // on_hello(rank) runs when a connection of `rank` has authenticated. Throws
  // std::runtime_error when a socket cannot be opened or bound.
  StoreServer(EventLoop& loop, std::string token, int ranks, const std::vector<std::string>& addresses,
              StoreLimits limits, std::function<void(int rank)> on_hello);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // "address:port" of the i-th listener (in the order of `addresses`).
  std::string endpoint(std::size_t i) const;

  // The job is stopping because of `why` (for the ranks' messages): every get that waits, and
  // every later one for a key without a value, is answered job_stopping (store_protocol.hpp),
  // so that no rank waits in the store for a peer that is gone. The first reason is kept.
  void stop_job(const std::string& why);

  // Whether a rank has put `key` (the job reads the ranks' marks: "done/<rank>").
  bool holds(const std::string& key) const { return kv_.count(key) != 0; }
  // The value a rank put under `key`, as text ("" when none).
  std::string text_of(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end()
               ? std::string()
               : std::string(reinterpret_cast<const char*>(it->second.data()), it->second.size());
  }

  // For tests and messages.
  std::size_t pending_count() const;
  std::size_t client_count() const { return clients_.size(); }
  std::size_t buffered_bytes() const;
  // Requests each rank made after its hello, over all its connections (puts, gets).
  const std::vector<std::uint64_t>& requests_per_rank() const { return requests_; }
  // Bytes the store answered each rank with, over all its connections, hellos included: what
  // a job's start-up costs ordorun per rank (docs/distributed.md, "Start-up").
  const std::vector<std::uint64_t>& bytes_sent_per_rank() const { return bytes_sent_; }
  // Values looked up by key so far: what answering costs the store (a collective's answer
  // must cost O(ranks) lookups, not one per key per rank).
  std::uint64_t key_lookups() const { return key_lookups_; }

 private:
  // A request not answered yet: a get, a get_range or get_runs of keys prefix<first> ..
  // prefix<first + count - 1>, or a get_list (answerable at once, waiting only for its turn).
  struct Parked {
    std::string key;  // get: the key; the others: the prefix
    store::Op op = store::Op::get;
    std::uint32_t first = 0, count = 0;
    std::uint32_t present = 0;  // get_range/get_runs: the keys known to have values, from the first
    std::vector<std::uint32_t> list;  // get_list: the indices
    bool is_refused = false;    // malformed: answered bad_request in its turn
  };
  struct Client {
    Fd fd;
    std::uint64_t order = 0;  // accept order: the oldest pending goes first under pressure
    int rank = -1;            // -1 while pending
    std::uint32_t address = 0;  // the peer's IPv4 address (network order), for the cap on it
    std::vector<std::byte> in, out;
    std::deque<Parked> waiting;  // parked gets, answered in order
    EventLoop::TimerId auth_timer = 0;
  };
  struct Listener {
    Fd fd;
    std::string endpoint;
  };

  void accept_clients(Listener& l);
  void on_client(int fd, short revents);
  // Reads what the client sent and serves complete requests; false: drop the client.
  bool read_requests(Client& c);
  bool serve(Client& c);
  // `r`, to be answered in its turn (its fields other than key and op: the caller's).
  static Parked parked(const store::Request& r);
  bool authenticate(Client& c, const std::string& key, const std::vector<std::byte>& value);
  // What the store learnt about a range (get_range or get_runs of the same keys) that many
  // clients ask for alike, as every rank of a collective does: how many of its keys, from the
  // first, have values, and its answer once built (empty before). So each key is looked up
  // and each answer built once, not once per rank, whether the ranks park before the last put
  // or ask after it, each in a pass of its own. Kept until a put to a key that starts with its
  // prefix, which may add or overwrite one of its values.
  struct RangeAsk {
    store::Op op;
    std::string prefix;
    std::uint32_t first, count;
    auto operator<=>(const RangeAsk&) const = default;
  };
  struct RangeSeen {
    std::uint32_t present = 0;
    std::vector<std::byte> response;
    std::uint64_t used = 0;  // when last asked for (ranges_used_)
  };
  // Answers, in each client's order, what can be answered now (everything, with why, once the
  // job stops).
  void answer_parked();
  // Whether `p` can be answered now: its keys all have values (a range: counting on from what
  // ranges_ or p.present knows, so that each key is looked up once it has a value), or it is
  // refused. For a range, `range` is set to its entry in ranges_ (else nullptr).
  bool is_answerable(Parked& p, RangeSeen*& range);
  // Forgets what ranges_ knows of the ranges `key` may belong to (a put to it).
  void forget_ranges(const std::string& key);
  // Queues the answer to an answerable `p` to `c`; `range`: what is_answerable set.
  void answer(Client& c, const Parked& p, RangeSeen* range);
  // The answer to an answerable get_range or get_runs.
  std::vector<std::byte> range_answer(const Parked& p) const;
  // The value of `key`, or nullptr; counted in key_lookups.
  const std::vector<std::byte>* value_of(const std::string& key) const;
  // Queues `response` to `c`, counted in bytes_sent_per_rank.
  void reply(Client& c, const std::vector<std::byte>& response);
  void flush(Client& c);
  void drop(int fd);
  // Drops the oldest pending connection, of `address` when given, else of any.
  void drop_oldest_pending(std::optional<std::uint32_t> address = std::nullopt);
  // Makes room for a new pending connection from `address` (see the top of this file).
  void make_room(std::uint32_t address);
  // A connection stops being pending (authenticated or dropped).
  void forget_pending(const Client& c);
  void update_accepting();

  EventLoop& loop_;
  std::string token_;
  int ranks_;
  StoreLimits limits_;
  std::function<void(int)> on_hello_;
  std::vector<Listener> listeners_;
  std::map<int, std::unique_ptr<Client>> clients_;
  std::map<std::string, std::vector<std::byte>> kv_;
  std::map<RangeAsk, RangeSeen> ranges_;  // see RangeAsk
  std::uint64_t ranges_used_ = 0;
  std::vector<int> per_rank_;  // authenticated connections per rank
  std::vector<std::uint64_t> requests_;
  std::vector<std::uint64_t> bytes_sent_;
  mutable std::uint64_t key_lookups_ = 0;
  std::optional<std::string> stopping_;  // why the job stops, once it does
  std::uint64_t accepted_ = 0;
  std::size_t pending_ = 0;
  std::map<std::uint32_t, std::size_t> pending_by_address_;
  bool backing_off_ = false;
  bool said_accept_failure_ = false;
};

}  // namespace ordorun
