#include "job.hpp"
#include "host_limits.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

namespace ordorun {
namespace {

using Clock = EventLoop::Clock;

constexpr std::chrono::milliseconds blame_window{300};
// How long the ranks have to end with their own messages, once the store has told them why the
// job stops, when the rank to blame exited 0 (job.hpp): they end in milliseconds, and a SIGTERM
// sent at once would beat them to it.
constexpr std::chrono::milliseconds left_notice{1000};

int signal_pipe_write = -1;

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t k = ::write(signal_pipe_write, &b, 1);
  errno = saved;
}

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string fmt_seconds(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

Clock::duration seconds(double s) { return std::chrono::milliseconds(long(s * 1000)); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGKILL: return "SIGKILL";
    default: return "a signal";
  }
}

std::string random_token() {
  unsigned char raw[16];
  if (::getrandom(raw, sizeof raw, 0) != ssize_t(sizeof raw))
    throw std::runtime_error("getrandom: " + errno_text(errno));
  static const char hex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : raw) {
    token += hex[b >> 4];
    token += hex[b & 15];
  }
  return token;
}

// The address of this machine that traffic to `host` leaves from (the kernel's route choice,
// asked by connecting a UDP socket, which sends nothing).
std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "9", &hints, &res); rc != 0)
    throw UsageError("cannot tell which address of this machine host '" + host + "' reaches (" +
                     ::gai_strerror(rc) + "); give --store-addr with this machine's IPv4 "
                     "address on the ranks' network");
  std::string found;
  for (addrinfo* a = res; a != nullptr && found.empty(); a = a->ai_next) {
    Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.is_open() || ::connect(s.get(), a->ai_addr, a->ai_addrlen) != 0) continue;
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN];
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) != nullptr)
      found = text;
  }
  ::freeaddrinfo(res);
  if (found.empty())
    throw UsageError("no route from this machine to host '" + host +
                     "'; give --store-addr with this machine's IPv4 address on the ranks' network");
  return found;
}

}  // namespace

Job::Job(JobOptions o) : opt_(std::move(o)) {
  plan_ranks();
  const auto here = std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return !r.place.remote; });
  if (opt_.check_host)
    if (auto why = refuse_ranks(ranks_.size(), std::uint64_t(here), read_host_limits()))
      throw UsageError(*why + " (--no-host-check starts them all the same)");  // before anything starts
  token_ = random_token();
  std::vector<std::size_t> listener_of_rank;
  const auto addresses = plan_store(listener_of_rank);
  store_.emplace(loop_, token_, int(ranks_.size()), addresses, opt_.store_limits,
                 [this](int rank) { on_hello(rank); });
  for (std::size_t i = 0; i < ranks_.size(); ++i) ranks_[i].place.store = store_->endpoint(listener_of_rank[i]);
}

Job::~Job() {
  if (signal_read_.is_open()) loop_.unwatch(signal_read_.get());
}

void Job::plan_ranks() {
  std::vector<std::pair<std::string, bool>> slots;  // host, remote
  if (opt_.hosts.empty()) {
    const std::string host = this_host();
    for (int i = 0; i < (opt_.n > 0 ? opt_.n : 1); ++i) slots.emplace_back(host, false);
  } else {
    for (const HostEntry& e : parse_hosts(opt_.hosts))
      for (int i = 0; i < e.count; ++i) slots.emplace_back(e.host, true);
    if (opt_.n > 0 && std::size_t(opt_.n) != slots.size())
      throw UsageError("-n " + std::to_string(opt_.n) + " does not match the " + std::to_string(slots.size()) +
                       " slots of --hosts; drop -n or fix it");
  }
  std::map<std::string, int> per_host;
  for (const auto& s : slots) ++per_host[s.first];
  std::map<std::string, int> seen;
  for (const auto& [host, remote] : slots) {
    Rank r;
    r.place.rank = int(ranks_.size());
    r.place.host = host;
    r.place.remote = remote;
    r.place.local_rank = seen[host]++;
    r.place.local_size = per_host[host];
    ranks_.push_back(std::move(r));
  }
}

// Where the store listens: on loopback for a job on this host, at --store-addr when given,
// else at the address of this machine that each remote host's traffic leaves from (one
// listener per such address; usually one). Never on every address.
std::vector<std::string> Job::plan_store(std::vector<std::size_t>& listener_of_rank) {
  if (!opt_.store_addr.empty()) {
    in_addr probe{};
    if (::inet_pton(AF_INET, opt_.store_addr.c_str(), &probe) != 1)
      throw UsageError("--store-addr '" + opt_.store_addr + "' is not an IPv4 address");
    listener_of_rank.assign(ranks_.size(), 0);
    return {opt_.store_addr};
  }
  if (opt_.hosts.empty()) {
    listener_of_rank.assign(ranks_.size(), 0);
    return {"127.0.0.1"};
  }
  std::vector<std::string> addresses;
  std::map<std::string, std::size_t> listener_of_host;
  for (const Rank& r : ranks_) {
    if (listener_of_host.count(r.place.host) != 0) continue;
    const std::string a = local_address_towards(r.place.host);
    auto it = std::find(addresses.begin(), addresses.end(), a);
    listener_of_host[r.place.host] = std::size_t(it - addresses.begin());
    if (it == addresses.end()) addresses.push_back(a);
  }
  for (const Rank& r : ranks_) listener_of_rank.push_back(listener_of_host[r.place.host]);
  return addresses;
}

int Job::run() {
  // Two pipes per rank and two store connections per rank: a large job needs more descriptors
  // than the usual soft limit of 1024, and the hard limit is ours to take. The ranks start
  // with the limit ordorun was given.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    rank_fd_limit_ = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe: " + errno_text(errno));
  signal_read_.reset(p[0]);
  signal_pipe_write = p[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  loop_.watch(signal_read_.get(), POLLIN, [this](short) { on_signals(); });

  start_ = Clock::now();
  start_ranks();
  if (opt_.timeout > 0)
    loop_.at(start_ + seconds(opt_.timeout), [this] {
      if (stopping_) return;
      const std::string why = "the job ran longer than --timeout " + fmt_seconds(opt_.timeout) + " s";
      say(why + "; stopping every rank");
      stop_ranks(124, SIGTERM, why);
    });

  for (;;) {
    const bool any_running = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
    if (!any_running) {
      // No rank is left to die by a signal: the suspect is the culprit.
      if (!stopping_ && suspect_) blame(ranks_[std::size_t(*suspect_)]);
      // Every rank has exited. Its output may still sit in the pipes; a daemon it left
      // behind could hold them open forever, so the drain is bounded.
      const bool any_open = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
        return r.streams[0].fd.is_open() || r.streams[1].fd.is_open();
      });
      if (!any_open || drained_) break;
      if (!drain_timer_) drain_timer_ = loop_.at(Clock::now() + std::chrono::seconds(2), [this] { drained_ = true; });
    }
    loop_.run_once();
    reap();
  }
  for (Rank& r : ranks_)
    for (Stream& s : r.streams)
      if (s.fd.is_open()) loop_.unwatch(s.fd.get());
  if (opt_.verbose) say_store_traffic();
  if (stopping_ && exit_code_ == kFromOthers) {
    exit_code_ = 1;
    for (const Rank& r : ranks_)
      if (r.place.rank != blamed_ && WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0) {
        exit_code_ = WEXITSTATUS(r.status);
        break;
      }
  }
  return stopping_ ? exit_code_ : 0;
}

// --verbose: what the store sent and was asked, in all and to the rank that cost the most
// (ordo-bench-scale reads this line; docs/distributed.md, "Start-up").
void Job::say_store_traffic() const {
  const auto& bytes = store_->bytes_sent_per_rank();
  const auto& requests = store_->requests_per_rank();
  std::uint64_t total = 0;
  for (std::uint64_t b : bytes) total += b;
  const std::uint64_t most_bytes = bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
  const std::uint64_t most_requests =
      requests.empty() ? 0 : *std::max_element(requests.begin(), requests.end());
  say("store: sent " + std::to_string(total) + " bytes to " + std::to_string(bytes.size()) +
      " rank(s), at most " + std::to_string(most_bytes) + " to one rank; at most " +
      std::to_string(most_requests) + " request(s) from one rank");
}

void Job::start_ranks() {
  JobLaunch launch;
  launch.size = int(ranks_.size());
  launch.command = opt_.command;
  launch.rsh = opt_.rsh;
  launch.token = token_;
  launch.fd_soft_limit = rank_fd_limit_;
  // A little beyond ordorun's own startup clock, so that ordorun names the missing rank.
  launch.bootstrap_timeout = fmt_seconds(opt_.timeout_startup + 2);
  // Variables a remote rank gets from ordorun's environment: UCX_* and OMP_* (the transport's
  // tuning must match on every host), plus every -x NAME.
  launch.exports = opt_.exports;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("UCX_", 0) == 0 || kv.rfind("OMP_", 0) == 0) launch.exports.push_back(kv.substr(0, kv.find('=')));
  }
  for (Rank& r : ranks_) {
    Child c;
    try {
      c = spawn(r.place.rank, plan_launch(r.place, launch));
    } catch (const SpawnError& e) {
      // The ranks already started would otherwise wait for this one (ordo ranks until their
      // bootstrap timeout, other programs for ever).
      const auto started = std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& x) { return x.running; });
      say(std::string(e.what()) + (started > 0 ? "; stopping the " + std::to_string(started) + " rank(s) already started" : ""));
      stop_ranks(1, SIGTERM, e.what());
      return;
    }
    r.pid = c.pid;
    r.running = true;
    const std::string prefix = "[" + std::to_string(r.place.rank) + "] ";
    r.streams[0].fd = std::move(c.out);
    r.streams[0].out = 1;
    r.streams[1].fd = std::move(c.err);
    r.streams[1].out = 2;
    for (Stream& s : r.streams) {
      s.lines = LinePrefixer(prefix);
      loop_.watch(s.fd.get(), POLLIN, [this, &r, &s](short) { pump(r, s); });
    }
  }
}

void Job::on_hello(int rank) {
  ranks_[std::size_t(rank)].hello = true;
  if (left_early_ && !stopping_)
    blame_unfinished(ranks_[std::size_t(*left_early_)],
                     "before it connected to the other ranks (it never built its Runtime)");
  if (any_hello_) return;
  any_hello_ = true;
  loop_.at(start_ + seconds(opt_.timeout_startup), [this] { on_startup_deadline(); });
}

// A rank has reached the store and another, still running, has not.
bool Job::is_startup_pending() const {
  return any_hello_ && std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running && !r.hello; });
}

void Job::on_startup_deadline() {
  if (stopping_ || !is_startup_pending()) return;
  std::string missing;
  for (const Rank& r : ranks_)
    if (r.running && !r.hello) missing += (missing.empty() ? "" : ", ") + who(r);
  const std::string why = "rank " + missing + " did not connect to the store within " +
                          fmt_seconds(opt_.timeout_startup) + " s (--timeout-startup)";
  say(why + "; stopping the job");
  stop_ranks(124, SIGTERM, why);
}

std::string Job::who(const Rank& r) const {
  return std::to_string(r.place.rank) + " (pid " + std::to_string(r.pid) + " on host " + r.place.host + ")";
}

void Job::on_signals() {
  unsigned char buf[64];
  ssize_t k;
  while ((k = ::read(signal_read_.get(), buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < k; ++i) {
      const int sig = buf[i];
      if (sig == SIGCHLD) continue;  // reaped after every turn in any case
      if (forwarded_) {
        say(std::string("second ") + signal_name(sig) + ": killing every rank");
        for (Rank& r : ranks_)
          if (r.running) signal_rank(r, SIGKILL);
        continue;
      }
      forwarded_ = true;
      if (sig == SIGHUP) {
        say("got SIGHUP (the session ended): forwarding it to every rank as SIGTERM");
        stop_ranks(128 + sig, SIGTERM, "ordorun got SIGHUP");
      } else {
        say(std::string("forwarding ") + signal_name(sig) + " to every rank");
        stop_ranks(128 + sig, sig, std::string("ordorun got ") + signal_name(sig));
      }
    }
  }
}

void Job::stop_ranks(int exit_code, int sig, const std::string& why, Clock::duration notice) {
  if (stopping_) {
    // A signal to ordorun while a failure already stops the job: pass it on, keep the status.
    for (Rank& r : ranks_)
      if (r.running) signal_rank(r, sig);
    return;
  }
  stopping_ = true;
  exit_code_ = exit_code;
  stop_signal_ = sig;
  if (store_) store_->stop_job(why);
  auto signal_ranks = [this, sig] {
    for (Rank& r : ranks_)
      if (r.running) signal_rank(r, sig);
    loop_.at(Clock::now() + seconds(opt_.grace), [this] { on_grace_over(); });
  };
  if (notice > Clock::duration::zero())
    loop_.at(Clock::now() + notice, signal_ranks);
  else
    signal_ranks();
}

void Job::on_grace_over() {
  for (Rank& r : ranks_) {
    if (!r.running) continue;
    say("rank " + who(r) + " did not stop within " + fmt_seconds(opt_.grace) + " s of " +
        signal_name(stop_signal_) + "; sending SIGKILL");
    signal_rank(r, SIGKILL);
  }
}

void Job::signal_rank(Rank& r, int sig) {
  r.signals_sent.set(std::size_t(sig));
  ::kill(-r.pid, sig);
}

// A rank killed by what ordorun sent it, or a remote shell that exited 255 after ordorun
// signalled it (ssh does on SIGTERM), says nothing about its host: the job was stopping.
void Job::note_if_down(const Rank& r) {
  if (!r.place.remote) return;
  const bool killed =
      WIFSIGNALED(r.status) && !r.signals_sent.test(std::size_t(WTERMSIG(r.status)));
  const bool unreachable =
      WIFEXITED(r.status) && WEXITSTATUS(r.status) == 255 && r.signals_sent.none();
  if (killed || unreachable) down_hosts_.insert(r.place.host);
}

void Job::pump(Rank& r, Stream& s) {
  char buf[65536];
  for (;;) {
    const ssize_t k = ::read(s.fd.get(), buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno == EAGAIN) return;
    if (k <= 0) {
      const std::string last = s.lines.finish();
      write_all(s.out, last.data(), last.size());
      loop_.unwatch(s.fd.get());
      s.fd.reset();
      return;
    }
    const std::string lines = s.lines.feed(std::string_view(buf, std::size_t(k)));
    write_all(s.out, lines.data(), lines.size());
  }
  (void)r;
}

void Job::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Rank& r : ranks_) {
      if (r.pid != pid || !r.running) continue;
      r.running = false;
      r.status = status;
      note_if_down(r);
      // Whatever the rank left running in its process group goes with it.
      ::kill(-r.pid, SIGKILL);
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (!failed && !stopping_ && !is_finished(r)) {
        if (r.hello)
          unfinished_ = unfinished_.value_or(r.place.rank);
        else if (any_hello_)
          blame_unfinished(r,
                           "before it connected to the other ranks (it never built its Runtime)");
        else
          left_early_ = left_early_.value_or(r.place.rank);
      }
      if (!failed || stopping_) continue;
      // A rank killed by a signal is blamed at once; one that exits with an error status only
      // if no rank dies by a signal within blame_window (see job.hpp).
      if (WIFSIGNALED(status)) {
        blame(r);
      } else if (!suspect_) {
        suspect_ = r.place.rank;
        blame_timer_ = loop_.at(Clock::now() + blame_window, [this] {
          blame_timer_.reset();
          if (!stopping_ && suspect_) blame(ranks_[std::size_t(*suspect_)]);
        });
      }
    }
  }
}

// What `r` told the store it stopped on ("cause/<rank>" = "<rank> <what>",
// comm::Bootstrap::caused_by), when that is another rank of the job.
std::optional<std::pair<int, std::string>> Job::cause_named_by(const Rank& r) const {
  if (!store_) return std::nullopt;
  const std::string said = store_->text_of("cause/" + std::to_string(r.place.rank));
  const auto space = said.find(' ');
  if (space == 0 || space == std::string::npos || space > 9 ||
      said.find_first_not_of("0123456789") != space)
    return std::nullopt;
  const int cause = std::stoi(said.substr(0, space));
  if (cause == r.place.rank || cause >= int(ranks_.size())) return std::nullopt;
  return std::make_pair(cause, said.substr(space + 1));
}

bool Job::is_finished(const Rank& r) const {
  return store_ && store_->holds("done/" + std::to_string(r.place.rank));
}

void Job::blame_unfinished(const Rank& r, const std::string& how) {
  blamed_ = r.place.rank;
  const std::string why = "rank " + who(r) + " exited with status 0 " + how +
                          ", while the other ranks still needed it; every rank must build its "
                          "Runtime and end it with the others";
  say(why + "; stopping the other ranks");
  stop_ranks(kFromOthers, SIGTERM, why, left_notice);
}

void Job::blame(const Rank& r) {
  suspect_.reset();
  if (blame_timer_) loop_.cancel(*blame_timer_);
  blame_timer_.reset();
  for (const Rank& a : ranks_) {
    // Runtime::abort told every rank to exit: the rank that called it is the cause.
    const std::string said = store_ ? store_->text_of("abort/" + std::to_string(a.place.rank)) : "";
    const auto space = said.find(' ');
    if (space == std::string::npos) continue;
    blamed_ = a.place.rank;
    const std::string why =
        "rank " + who(a) + " aborted the job (Runtime::abort): " + said.substr(space + 1);
    say(why + (ranks_.size() > 1 ? "; stopping the other ranks" : ""));
    stop_ranks(std::atoi(said.c_str()), SIGTERM, why, left_notice);
    return;
  }
  if (unfinished_ && *unfinished_ != r.place.rank && WIFEXITED(r.status)) {
    // Its peers saw it go and stopped: their failure (an error status, not a signal, which
    // is a cause of its own) is the report of it.
    blamed_ = *unfinished_;
    const std::string why = "rank " + who(ranks_[std::size_t(*unfinished_)]) +
                            " exited with status 0 without ending its Runtime (exit() before "
                            "its destructor ran), while the other ranks still needed it; rank " +
                            who(r) + " then " + describe_status(r.status);
    say(why + "; stopping the other ranks");
    // The others learn it through their transports, as this one did: time to say so.
    stop_ranks(exit_code_of(r.status), SIGTERM, why, left_notice);
    return;
  }
  if (auto cause = cause_named_by(r); cause && WIFEXITED(r.status)) {
    // Every rank of a failed job exits with an error at about the same time: the rank it says
    // it stopped on is the one to name.
    blamed_ = cause->first;
    const Rank& c = ranks_[std::size_t(cause->first)];
    const std::string why = "rank " + who(c) + " stopped the job: " + cause->second + "; rank " +
                            who(r) + " then " + describe_status(r.status);
    say(why + "; stopping the other ranks");
    stop_ranks(exit_code_of(r.status), SIGTERM, why, left_notice);
    return;
  }
  blamed_ = r.place.rank;
  const std::string why = "rank " + who(r) + " " + describe_status(r.status) + rsh_hint(r);
  loss_ = RankLoss{r.place.rank, r.status, why};
  say(why + (ranks_.size() > 1 ? "; stopping the other ranks" : ""));
  stop_ranks(exit_code_of(r.status), SIGTERM, why);
}

// ssh exits with 255 when it cannot reach or log into the host (the rank never ran).
std::string Job::rsh_hint(const Rank& r) const {
  if (!r.place.remote || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 255) return "";
  return " (status 255: did '" + opt_.rsh + " " + r.place.host + "' fail?)";
}

}  // namespace ordorun
