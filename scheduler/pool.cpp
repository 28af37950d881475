// Worker pool: work stealing over Chase-Lev deques, NUMA placement, and parking.
//
// Where work lives
//   - each worker owns a deque (deque.hpp): pushes from a worker go to the bottom of its own
//     deque, and it pops from there (newest first, warm caches);
//   - each pool node (a NUMA node with workers on it) has an injection queue, the inbox: pushes
//     from outside the pool, and pushes hinted for another node, go there.
// How a worker looks for work (find): its own deque; then its sources in order, nearest
// first: its node's inbox, then the other workers' deques sorted by nearness in the hwloc tree
// (same core, same cache, same NUMA node, same package, the rest), with each farther node's
// inbox just before that node's first worker. Ties are broken by rotation from the thief's
// index so thieves do not all hit worker 0. Every 32nd find looks at the inbox before the own
// deque so that injected work cannot starve behind a worker that keeps feeding itself.
//
// Parking protocol (an event count; states of one worker):
//   SEARCHING --nothing found after a few rounds--> PREPARED --found work--> SEARCHING
//   PREPARED --nothing found again--> PARKED --epoch changed or stop--> SEARCHING
//
//   Worker (prepare_wait, re-check, commit_wait):
//     W1  key = state_.fetch_add(1)          (waiters + 1; returns the epoch; seq_cst)
//     W2  fence(seq_cst)                      (pairs with N1)
//     W3  look at its pinned slot, every deque and inbox once more; if any has work:
//         waiters - 1, run it
//     W4  lock park_mu_; while epoch(state_) == key and its pinned slot is empty and not stop:
//         list itself in sleepers_ (once) and wait on its own condition variable; off the list;
//         waiters - 1; unlock
//   Notifier (after every push, notify):
//     P   publish the item: deque bottom store (release) or inbox count store under its mutex
//     N1  fence(seq_cst)                      (pairs with W2)
//     N2  if waiters(state_) == 0: return
//     N3  lock park_mu_; state_ += 1 << 32 (epoch + 1); take one worker off sleepers_ (with
//         steal_far off, one of the item's node); unlock; notify it
//   Pinned push (push_to, notify_pinned): P is the store into worker w's pinned slot, N1 and N2
//   as above, then
//     N3' lock park_mu_; if w is in sleepers_: take it off; unlock; notify it
//
// No lost wake-up. Suppose a worker parks at W4 while an item pushed at P is still queued.
// The fences W2 and N1 are ordered in the single total order of seq_cst operations:
//   - N1 before W2: then W3's loads (after W2) see the store at P (before N1) -- for a deque
//     the bottom index, for an inbox its count -- so W3 finds the item (or sees that another
//     worker took it), and the worker does not park for it. Contradiction.
//   - W2 before N1: then N2's load (after N1) sees W1's increment (before W2), so the notifier
//     runs N3. N3 changes the epoch under park_mu_; the worker's W4 checks the epoch under the
//     same mutex: if W4's check comes after N3 it sees a new epoch and does not sleep; if
//     before, the worker is listed in sleepers_ and waiting (the wait released the mutex) when
//     N3 takes the lock, and N3 wakes a listed worker (of the item's node, with steal_far off,
//     which this one is if the item is for it). Any woken worker searches everything again.
//     Contradiction.
// Waking one suffices: each push wakes (at most) one worker for its one item, any worker can
// reach any item, and workers between W1 and W4 need no wake-up because they see the epoch
// change. With steal_far off a worker reaches only its own node's work (its inbox and its
// workers' deques), so N3 takes a listed worker of the node the item was queued on; when none
// is listed, that node's waiters are all before W4 and see the epoch.
// The epoch is 32 bits; a worker would have to stay between W1 and W4 for 2^32 notifications
// to be fooled.
// A pinned item is for its worker alone, so N3' wakes that worker by name and leaves the epoch:
// the same argument with W4's check of its pinned slot in place of the epoch (the slot is
// stored before N3' takes the mutex, so a W4 after N3' sees it; a W4 before N3' has listed the
// worker, which N3' finds). A worker that a plain push woke and that then finds a pinned item
// runs that first, and the pushed item waits for it or for another searcher: nothing is lost,
// since the worker looks again afterwards. The engine pins only lane items, one per worker.
//
// Mailboxes (the hand-off to a spinning worker). A worker that spins idle (spin_while_idle:
// it has a core of its own, no poller) opens its mailbox, one item on a line of its own, and
// looks into it between its searches. A push from a worker of the same node puts the item
// into the open mailbox of one of its nearest workers (one CAS, kOpen -> item) instead of its
// own deque: the spinner then takes it with one load of that line, where a steal reads the
// deque's bottom, its slot and CASes its top (three lines that move between the two workers
// for every item). Only the owner empties a full mailbox, and it closes it (an exchange) before
// it stops spinning, taking what was delivered until then, so an item in a mailbox always has
// a worker awake that will run it: such a push needs no notify(), and the parking protocol
// below never sees mailboxes. A spinner that finds work elsewhere first pushes a late delivery
// onto its own deque (with notify()). The scan is limited to the kMailboxScan nearest workers
// of the pusher's node, so a hinted item stays on its node.
//
// Shutdown: the destructor sets stop_ and bumps the epoch under park_mu_, then wakes every
// worker; a worker checks stop_ at the top of its loop and in W4's predicate, so each one
// exits. Items still queued then are dropped: detach() requires that none are.
//
// Placement: push(item, node) from a worker on `node` goes to its own deque (already on the
// right node); to another node, to that node's inbox, where that node's workers look before
// stealing. In flat mode (one pool node) hints are ignored. steal_far = false keeps every
// thief on its own node, so an item runs on a worker of the node it was hinted to.
#include "scheduler/pool.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace ordo::sched {

namespace {

thread_local int tls_worker = -1;
thread_local const Pool* tls_pool = nullptr;

constexpr std::uint64_t kWaiterMask = 0xffffffffu;
constexpr std::uint64_t kEpochOne = std::uint64_t{1} << 32;
constexpr int kSpinRounds = 16;      // searches (with a yield between) before parking
constexpr std::uint32_t kInboxEvery = 32;
// An idle worker that polls yields the core once every this many polls and only pauses in
// between: a yield is a system call, and one per poll cost halo throughput
// (docs/benchmarks.md, "Figures behind defaults").
constexpr unsigned kPollsPerYield = 8;

}  // namespace

Pool::Pool(PoolConfig config) : topo_(std::make_unique<Topology>(config.topology)) {
  const auto& pus = topo_->pus();
  // Each worker keeps a steal order over all the others (n^2 entries in all): a count far
  // beyond the machine ("--workers 4294967295") would take minutes and gigabytes to set up
  // and could only run slower than one worker per unit.
  const std::size_t most = std::max<std::size_t>(kMinWorkerLimit, kWorkersPerUnit * pus.size());
  if (config.workers > most)
    throw std::invalid_argument(std::to_string(config.workers) + " workers are more than " + std::to_string(most) +
                                " (" + std::to_string(kWorkersPerUnit) + " per processing unit of " +
                                topo_->describe() + ", at least " + std::to_string(kMinWorkerLimit) +
                                "); give at most " + std::to_string(most) + ", or 0 for one per core");

  // Which processing unit each worker gets (indices into pus), and how it is bound.
  std::vector<std::size_t> map;
  bool oversubscribed = false;  // more workers than units: bind nothing, or the share only
  const std::vector<unsigned>& picked = config.pus;
  if (!picked.empty()) {
    std::vector<std::size_t> units;
    for (unsigned os : picked) {
      auto it = std::find_if(pus.begin(), pus.end(),
                             [&](const ProcessingUnit& u) { return u.os_index == os; });
      if (it == pus.end())
        throw std::invalid_argument(
            "processing unit " + std::to_string(os) +
            (config.pus_origin.empty() ? "" : " (" + config.pus_origin + ")") +
            " is not in the topology (" + topo_->describe() +
            "); list OS indices that lstopo shows as PU P#");
      units.push_back(static_cast<std::size_t>(it - pus.begin()));
    }
    // Worker i runs on the i-th listed unit, cycling when there are more workers.
    const std::size_t n = config.workers ? config.workers : units.size();
    oversubscribed = n > units.size();
    if (oversubscribed)
      oversubscribed_note_ = std::to_string(n) + " workers on the " +
                             std::to_string(units.size()) + " listed processing unit(s)";
    for (std::size_t i = 0; i < n; ++i) map.push_back(units[i % units.size()]);
  } else {
    const CoreShare share =
        share_of_cores(pus, topo_->nodes(), config.share_index, config.share_count);
    share_pus_ = share.pus;
    if (config.share_count > 1)
      share_note_ = "local rank " + std::to_string(config.share_index) + " of " +
                    std::to_string(config.share_count) + " on this machine: " +
                    (share.oversubscribed ? std::string("every core (no disjoint share)")
                                          : describe_share(share, pus));
    // The first unit of every core of the share, in logical order.
    std::vector<std::size_t> cores;
    for (std::size_t k = 0; k < share.pus.size(); ++k)
      if (k == 0 || pus[share.pus[k]].core != pus[share.pus[k - 1]].core)
        cores.push_back(share.pus[k]);
    // Default: one worker per core of the share; one per process when the processes
    // outnumber the cores (each then has every core, and more would only add threads).
    const std::size_t n = config.workers ? config.workers : share.oversubscribed ? 1 : cores.size();
    // Spread: worker i takes unit floor(i * units / n) of the cores, or of all the share's
    // units (SMT siblings) when there are more workers than cores; beyond those, wrap around.
    const std::vector<std::size_t>& units = n > cores.size() ? share.pus : cores;
    oversubscribed = n > units.size();
    for (std::size_t i = 0; i < n; ++i)
      map.push_back(oversubscribed ? units[i % units.size()] : units[i * units.size() / n]);
    if (share.oversubscribed)
      oversubscribed_note_ = std::to_string(config.share_count) +
                             " processes on this machine's " + std::to_string(share.cores) +
                             " core(s)";
    else if (oversubscribed)
      oversubscribed_note_ = std::to_string(n) + " workers on " + std::to_string(units.size()) +
                             " processing unit(s)" + (config.share_count > 1 ? " of the share" : "");
    // Several processes share the machine: a worker with no unit of its own still stays in
    // its process's share, so that the processes keep off each other's cores.
    if (oversubscribed && !share.oversubscribed && config.share_count > 1) {
      bind_ = Bind::share;
      oversubscribed = false;
    } else if (share.oversubscribed) {
      oversubscribed = true;
    }
  }

  steal_far_ = config.steal_far;
  // The decision is made (and reported by allowed_pus) on any topology; it is applied only
  // to this machine's.
  if (oversubscribed) bind_ = Bind::none;
  else if (bind_ != Bind::share) bind_ = Bind::unit;
  binds_threads_ = config.bind && topo_->is_this_system() && topo_->from_hwloc() &&
                   bind_ != Bind::none;
  if (!config.bind) bind_note_ = "off (not asked)";
  else if (!topo_->from_hwloc()) bind_note_ = "off (no hwloc)";
  else if (!topo_->is_this_system()) bind_note_ = "off (topology is not this system)";
  else if (oversubscribed) bind_note_ = "off (oversubscribed)";
  else if (bind_ == Bind::share) bind_note_ = "on (each worker to the whole share)";
  else bind_note_ = "on";
  if (!is_oversubscribed()) idle_spin_ = config.idle_spin;

  // Pool nodes: the topology's nodes that have a worker, in topology order.
  for (std::size_t pu : map)
    if (std::find(node_hw_.begin(), node_hw_.end(), pus[pu].node) == node_hw_.end())
      node_hw_.push_back(pus[pu].node);
  std::sort(node_hw_.begin(), node_hw_.end());
  for (std::size_t i = 0; i < node_hw_.size(); ++i) inboxes_.push_back(std::make_unique<Inbox>());

  for (std::size_t i = 0; i < map.size(); ++i) {
    auto w = std::make_unique<Worker>(config.deque_capacity);
    w->index = static_cast<unsigned>(i);
    w->pu = map[i];
    w->node = static_cast<unsigned>(
        std::find(node_hw_.begin(), node_hw_.end(), pus[map[i]].node) - node_hw_.begin());
    workers_.push_back(std::move(w));
  }
  sleepers_.reserve(workers_.size());  // no allocation while parking

  // Steal order: nearest first, then rotation from the thief. How near a victim is depends
  // only on the two processing units, so the hwloc walk (affinity) runs once per pair of units
  // in use, and each thief sorts plain keys.
  const std::size_t n = workers_.size();
  std::vector<std::size_t> used_pus(map.begin(), map.end());
  std::sort(used_pus.begin(), used_pus.end());
  used_pus.erase(std::unique(used_pus.begin(), used_pus.end()), used_pus.end());
  auto slot = [&](std::size_t pu) {
    return std::size_t(std::lower_bound(used_pus.begin(), used_pus.end(), pu) - used_pus.begin());
  };
  const std::size_t u = used_pus.size();
  std::vector<int> nearness(u * u);
  for (std::size_t a = 0; a < u; ++a)
    for (std::size_t b = 0; b < u; ++b) nearness[a * u + b] = topo_->affinity(used_pus[a], used_pus[b]);
  std::vector<std::size_t> pu_slot(n);
  for (std::size_t i = 0; i < n; ++i) pu_slot[i] = slot(workers_[i]->pu);
  std::vector<std::pair<long, std::size_t>> keyed;  // (key, victim): smaller key, stolen first
  for (std::size_t i = 0; i < n; ++i) {
    Worker& w = *workers_[i];
    keyed.clear();
    for (std::size_t k = 1; k < n; ++k) {
      const std::size_t v = (i + k) % n;
      const bool same_node = workers_[v]->node == w.node;
      keyed.emplace_back((same_node ? 0L : 1L << 32) - nearness[pu_slot[i] * u + pu_slot[v]], v);
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<bool> node_listed(nodes(), false);
    w.sources.push_back({true, w.node});
    node_listed[w.node] = true;
    for (const auto& [key, v] : keyed) {
      const unsigned vn = workers_[v]->node;
      if (vn != w.node && !config.steal_far) continue;
      if (!node_listed[vn]) {
        w.sources.push_back({true, vn});
        node_listed[vn] = true;
      }
      w.sources.push_back({false, static_cast<unsigned>(v)});
      if (vn == w.node && w.near.size() < kMailboxScan) w.near.push_back(static_cast<unsigned>(v));
    }
  }

  if (config.verbose) std::fprintf(stderr, "%s", describe().c_str());

  for (auto& w : workers_) {
    Worker* wp = w.get();
    w->thread = std::thread([this, wp] { worker_main(*wp); });
  }
}

Pool::~Pool() {
  {
    std::lock_guard lock(park_mu_);
    stop_.store(true, std::memory_order_relaxed);  // read under park_mu_ or, relaxed, as a hint
    state_.fetch_add(kEpochOne, std::memory_order_seq_cst);
    for (auto& w : workers_) w->wake.notify_all();
  }
  for (auto& w : workers_) w->thread.join();
}

std::string Pool::describe() const {
  std::string s = "ordo: scheduler mode=";
  s += numa_mode() ? "numa (placement by node, hierarchical stealing)"
                   : "flat (plain work stealing)";
  s += ", workers=" + std::to_string(size()) + ", nodes=" + std::to_string(nodes()) +
       ", binding " + bind_note_ + "\nordo: topology " + topo_->describe() + "\n";
  if (!share_note_.empty()) s += "ordo: " + share_note_ + "\n";
  if (!oversubscribed_note_.empty())
    s += "ordo: oversubscribed: " + oversubscribed_note_ + "; threads share cores\n";
  s += "ordo: workers";
  for (const auto& w : workers_)
    s += " " + std::to_string(w->index) + ":pu" + std::to_string(topo_->pus()[w->pu].os_index) +
         "/node" + std::to_string(w->node);
  return s + "\n";
}

std::vector<unsigned> Pool::allowed_pus(unsigned worker) const {
  const auto& pus = topo_->pus();
  std::vector<unsigned> out;
  if (bind_ == Bind::unit) {
    out.push_back(pus[workers_[worker]->pu].os_index);
  } else if (bind_ == Bind::share) {
    for (std::size_t u : share_pus_) out.push_back(pus[u].os_index);
  } else {
    for (const ProcessingUnit& u : pus) out.push_back(u.os_index);
  }
  return out;
}

std::vector<unsigned> Pool::steal_order(unsigned worker) const {
  std::vector<unsigned> v;
  for (const Source& s : workers_[worker]->sources)
    if (!s.inbox) v.push_back(s.index);
  return v;
}

Binding Pool::bind_memory(void* data, std::size_t bytes, unsigned node) const {
  return topo_->bind_memory(data, bytes, node_hw_[node % nodes()]);
}

int Pool::memory_node(const void* data, std::size_t bytes) const {
  int hw = topo_->memory_node(data, bytes);
  for (std::size_t i = 0; i < node_hw_.size(); ++i)
    if (static_cast<int>(node_hw_[i]) == hw) return static_cast<int>(i);
  return -1;
}

void Pool::attach(Executor& exec) { exec_.store(&exec, std::memory_order_relaxed); }
// Both relaxed: the executor reaches workers through the items, whose queues synchronise.
void Pool::detach() { exec_.store(nullptr, std::memory_order_relaxed); }

int Pool::current_worker() { return tls_worker; }

bool Pool::deliver(const Worker& self, Item item) {
  for (unsigned v : self.near) {
    std::atomic<Item>& box = workers_[v]->mailbox;
    Item open = kOpen;
    // release: pairs with the owner's acquire load (what the item refers to is published).
    if (box.load(std::memory_order_relaxed) == kOpen &&
        box.compare_exchange_strong(open, item, std::memory_order_release,
                                    std::memory_order_relaxed))
      return true;
  }
  return false;
}

void Pool::push(Item item, int node) {
  if (item >= kOpen) throw std::invalid_argument("pool items must be below Pool::kOpen");
  Worker* self = tls_pool == this ? workers_[static_cast<unsigned>(tls_worker)].get() : nullptr;
  unsigned target;
  if (node < 0 || !numa_mode()) {
    if (self) {
      if (deliver(*self, item)) return;  // no notify: its owner is awake
      self->own.push(item);
      notify(self->node);
      return;
    }
    target = nodes() == 1 ? 0 : next_inbox_.fetch_add(1, std::memory_order_relaxed) % nodes();
  } else {
    target = static_cast<unsigned>(node) % nodes();
    if (self && self->node == target) {
      if (deliver(*self, item)) return;
      self->own.push(item);
      notify(self->node);
      return;
    }
  }
  Inbox& in = *inboxes_[target];
  {
    std::lock_guard lock(in.mu);
    in.items.push_back(item);
    in.count.store(in.items.size(), std::memory_order_relaxed);  // ordered by N1 in notify()
  }
  notify(target);
}

bool Pool::take_inbox(unsigned node, Item& item) {
  Inbox& in = *inboxes_[node];
  if (in.count.load(std::memory_order_relaxed) == 0) return false;  // ordered by W2 when parking
  std::lock_guard lock(in.mu);
  if (in.items.empty()) return false;
  item = in.items.front();
  in.items.pop_front();
  in.count.store(in.items.size(), std::memory_order_relaxed);
  return true;
}

bool Pool::steal_from(Worker& thief, unsigned victim, Item& item) {
  Deque<Item>::Stealer s = workers_[victim]->deque.stealer();
  for (;;) {
    auto r = s.steal();
    if (r.status == Deque<Item>::Steal::empty) return false;
    if (r.status == Deque<Item>::Steal::success) {
      item = r.value;
      // acquire: pairs with the release store in set_observer().
      if (Observer* o = observer_.load(std::memory_order_acquire)) o->on_steal(thief.index, victim);
      return true;
    }
    // lost_race: someone else took the oldest item; the deque may hold more, so look again.
  }
}

bool Pool::find(Worker& w, Item& item) {
  // acquire: pairs with the release store in push_to().
  if (const Item p = w.pinned.load(std::memory_order_acquire); p != kClosed) {
    // relaxed: a pusher orders its next pin after this through its own protocol (the lanes'
    // parked word); push_to's exchange refuses a pin that finds the slot still full.
    w.pinned.store(kClosed, std::memory_order_relaxed);
    item = p;
    return true;
  }
  if (++w.ticks % kInboxEvery == 0 && take_inbox(w.node, item)) return true;
  if (auto v = w.own.pop()) {
    item = *v;
    return true;
  }
  for (const Source& s : w.sources)
    if (s.inbox ? take_inbox(s.index, item) : steal_from(w, s.index, item)) return true;
  return false;
}

bool Pool::close_mailbox(Worker& w, Item& item) {
  // acquire: pairs with the CAS in deliver(); a pusher may fill the box until this exchange.
  const Item m = w.mailbox.exchange(kClosed, std::memory_order_acquire);
  if (m >= kOpen) return false;
  item = m;
  return true;
}

// An idle worker with a core of its own searches with a pause between looks for idle_spin_
// before it starts yielding: a yield is a system call, and an item pushed while the worker is
// in one waits for it to return (the hand-off of one task per step between two workers). Its
// mailbox is open meanwhile (the top of this file).
bool Pool::spin_while_idle(Worker& w, Item& item) {
  SpinDeadline deadline(idle_spin_);
  w.mailbox.store(kOpen, std::memory_order_relaxed);
  while (!stop_.load(std::memory_order_relaxed)) {
    cpu_relax();
    // A delivery: taken as at the end of the spin (the box stays closed until the next).
    if (w.mailbox.load(std::memory_order_relaxed) < kOpen) return close_mailbox(w, item);
    if (find(w, item)) {
      Item late;
      if (close_mailbox(w, late)) {  // delivered meanwhile: for whoever looks next
        w.own.push(late);
        notify(w.node);
      }
      return true;
    }
    if (deadline.is_over()) break;
  }
  return close_mailbox(w, item);
}

// An idle worker polls (yielding the core every kPollsPerYield polls, for oversubscribed
// machines) until it finds an item or the poller has had nothing for idle_spin(). A worker that finds another
// thread polling stops at once and goes the usual way (a short search, then parking): one
// poller per process is enough.
bool Pool::poll_while_idle(Worker& w, Poller& p, Item& item) {
  using Clock = std::chrono::steady_clock;
  const auto spin = p.idle_spin();
  auto last = Clock::now();
  unsigned polls = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const Poller::Result r = p.poll(w.index);
    if (r == Poller::Result::taken) return find(w, item);
    if (find(w, item)) return true;
    const auto now = Clock::now();
    if (r == Poller::Result::work)
      last = now;
    else if (now - last >= spin)
      return false;
    if (++polls % kPollsPerYield == 0)
      std::this_thread::yield();
    else
      cpu_relax();
  }
  return false;
}

void Pool::run(Worker& w, Item item) {
  Executor* exec = exec_.load(std::memory_order_relaxed);
  exec->execute(item, w.index);
}

void Pool::push_to(unsigned worker, Item item) {
  if (item >= kOpen) throw std::invalid_argument("pool items must be below Pool::kOpen");
  if (worker >= size()) throw std::invalid_argument("push_to: no worker " + std::to_string(worker));
  Worker& w = *workers_[worker];
  // release: pairs with the acquire load in find(). The owner sees it in its next search, or,
  // parked, once notify_pinned() wakes it (find() runs between W2 and W4, as for any item).
  Item empty = kClosed;
  if (!w.pinned.compare_exchange_strong(empty, item, std::memory_order_release,
                                        std::memory_order_relaxed))
    throw std::logic_error("push_to: worker " + std::to_string(worker) +
                           " has not taken its pinned item " + std::to_string(empty) +
                           " yet, so item " + std::to_string(item) +
                           " cannot be pinned to it (at most one at a time): the caller's "
                           "protocol pinned twice, an internal error of ordo");
  notify_pinned(w);
}

void Pool::notify(unsigned node) {
  // seq_cst: N1, pairs with W2 (the fence in prepare_wait); see the protocol above.
  full_fence();
  if ((state_.load(std::memory_order_relaxed) & kWaiterMask) == 0) return;  // N2
  Worker* woken = nullptr;
  {
    std::lock_guard lock(park_mu_);
    // seq_cst for uniformity with the other read-modify-writes of state_; the epoch check in
    // commit_wait reads it under park_mu_, which is what orders the two.
    state_.fetch_add(kEpochOne, std::memory_order_seq_cst);  // N3
    // The latest sleeper, or without far stealing the latest of the item's node (only those
    // can reach it).
    std::size_t at = sleepers_.size();
    while (at > 0 && !steal_far_ && workers_[sleepers_[at - 1]]->node != node) --at;
    if (at == 0) return;  // every waiter that could take it is before W4 and sees the epoch
    woken = workers_[sleepers_[at - 1]].get();
    sleepers_[at - 1] = sleepers_.back();
    sleepers_.pop_back();
    woken->asleep = false;
  }
  // After the unlock, so that it does not wake into a held mutex. Should it wake on its own
  // meanwhile and park again, this only makes it look once more.
  woken->wake.notify_one();
}

void Pool::notify_pinned(Worker& w) {
  // seq_cst: N1, pairs with W2; see the protocol above.
  full_fence();
  if ((state_.load(std::memory_order_relaxed) & kWaiterMask) == 0) return;  // N2
  {
    std::lock_guard lock(park_mu_);  // N3'
    if (!w.asleep) return;  // awake, or before W4's check, which sees the pinned slot
    unlist_sleeper(w);
  }
  w.wake.notify_one();
}

void Pool::unlist_sleeper(Worker& w) {
  auto it = std::find(sleepers_.begin(), sleepers_.end(), w.index);
  *it = sleepers_.back();
  sleepers_.pop_back();
  w.asleep = false;
}

std::uint64_t Pool::prepare_wait() {
  // seq_cst: W1, pairs with the load at N2 (through the fences W2 / N1).
  std::uint64_t s = state_.fetch_add(1, std::memory_order_seq_cst);
  // seq_cst: W2, pairs with N1 in notify().
  full_fence();
  return s >> 32;
}

void Pool::cancel_wait() {
  // seq_cst: undoes W1; pairs with the load at N2 (a notifier may skip waking us now).
  state_.fetch_sub(1, std::memory_order_seq_cst);
}

void Pool::commit_wait(Worker& w, std::uint64_t epoch) {
  std::unique_lock lock(park_mu_);
  // relaxed: the epoch is bumped under park_mu_ (N3, destructor), and the pinned slot is
  // stored before N3' takes it, which orders both with this.
  while ((state_.load(std::memory_order_relaxed) >> 32) == epoch &&
         w.pinned.load(std::memory_order_relaxed) == kClosed &&
         !stop_.load(std::memory_order_relaxed)) {
    if (!w.asleep) {
      w.asleep = true;
      sleepers_.push_back(w.index);
    }
    w.wake.wait(lock);
  }
  if (w.asleep) unlist_sleeper(w);  // it woke on its own, or for the epoch or stop
  // seq_cst: undoes W1; pairs with the load at N2.
  state_.fetch_sub(1, std::memory_order_seq_cst);
}

void Pool::worker_main(Worker& w) {
  tls_worker = static_cast<int>(w.index);
  tls_pool = this;
  // Best effort: an unbound worker still works.
  if (binds_threads_ && bind_ == Bind::unit) topo_->bind_thread(w.pu);
  if (binds_threads_ && bind_ == Bind::share) topo_->bind_thread(share_pus_);
  Item item = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool found = find(w, item);
    // acquire: pairs with set_poller().
    Poller* poller = poller_.load(std::memory_order_acquire);
    if (!found && poller) found = poll_while_idle(w, *poller, item);
    if (!found && !poller && idle_spin_.count() > 0) found = spin_while_idle(w, item);
    for (int r = 0; !found && r < kSpinRounds; ++r) {
      std::this_thread::yield();
      found = find(w, item);
    }
    if (!found) {
      const std::uint64_t key = prepare_wait();  // W1, W2
      if (stop_.load(std::memory_order_relaxed)) {
        cancel_wait();
        break;
      }
      found = find(w, item);  // W3
      if (found) {
        cancel_wait();
      } else {
        Observer* o = observer_.load(std::memory_order_acquire);  // pairs with set_observer()
        if (o) o->on_park(w.index);
        if (poller) poller->parking(w.index);
        commit_wait(w, key);  // W4
        if (o) o->on_unpark(w.index);
        continue;
      }
    }
    run(w, item);
  }
}

}  // namespace ordo::sched
