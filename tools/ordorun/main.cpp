// ordorun: starts the ranks of an ordo job and keeps the job bounded.
//
//   ordorun -n N prog args...                       N ranks on this host
//   ordorun --hosts a:2,b:2 [--rsh CMD] prog args...  ranks on other hosts through CMD (ssh)
//   ordorun --srun -n N prog args...                  hand the launch to Slurm (PMIx)
//
// What it does, in one event loop (poll over a self-pipe for signals, the store's sockets and
// the ranks' output pipes):
//   - serves the rendezvous store (comm/store_protocol.hpp) the ranks bootstrap from; each rank
//     gets ORDO_RANK, ORDO_SIZE, ORDO_LOCAL_RANK, ORDO_LOCAL_SIZE, ORDO_STORE=addr:port, ORDO_STORE_TOKEN (a
//     random secret: the store drops clients that do not present it), ORDO_TIMEOUT;
//   - prefixes every line a rank writes with "[R] ", stdout to stdout and stderr to stderr;
//   - forwards SIGINT, SIGTERM and SIGHUP to every rank (a second one kills them);
//   - on the first rank that exits non-zero or by a signal, prints which rank, where and why,
//     sends SIGTERM to the others and SIGKILL after --grace seconds, and exits with that rank's
//     status (128+signal for a signal death);
//   - once one rank has reached the store, every rank must reach it within --timeout-startup
//     seconds of the start, or the job is stopped with a message naming the missing ranks
//     (exit 124); programs that never use the store are not subject to it;
//   - --timeout bounds the whole job (exit 124).
// Each local rank runs in its own process group so that a terminal's Ctrl-C reaches ordorun
// once and is forwarded once, and so that stopping a rank stops its children too.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "comm/store_protocol.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace store = ordo::comm::store;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t k = ::write(signal_pipe[1], &b, 1);
  errno = saved;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno == EAGAIN) {
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, 100);
      continue;
    }
    if (k <= 0) return;  // our own output is gone: nothing better to do
    p += k;
    n -= std::size_t(k);
  }
}

void say(const std::string& msg) {
  const std::string line = "ordorun: " + msg + "\n";
  write_all(2, line.data(), line.size());
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

struct Stream {
  int fd = -1;
  int out = 1;  // our fd the lines go to
  std::string partial;
};

struct Rank {
  int rank = 0;
  std::string host;
  bool remote = false;
  pid_t pid = -1;
  bool running = false;
  bool hello = false;
  int status = 0;
  Stream streams[2];
};

struct Client {
  int fd = -1;
  std::vector<std::byte> in;
  std::vector<std::byte> out;
  std::vector<std::string> waiting;  // parked gets, answered in order
  int rank = -1;
};

struct Options {
  int n = 0;
  std::string hosts;
  std::string rsh = "ssh";
  double timeout_startup = 30;
  double grace = 3;
  double timeout = 0;
  std::string store_addr;
  bool srun = false;
  bool no_srun = false;
  std::vector<std::string> exports;
  std::vector<std::string> command;
};

class Launcher {
 public:
  explicit Launcher(Options o) : opt_(std::move(o)) {}

  int run() {
    plan_ranks();
    open_store();
    install_signals();
    start_ = Clock::now();
    for (Rank& r : ranks_) spawn(r);
    loop();
    return exit_code_;
  }

 private:
  static Rank make_rank(int rank, const std::string& host, bool remote) {
    Rank r;
    r.rank = rank;
    r.host = host;
    r.remote = remote;
    return r;
  }

  void plan_ranks() {
    if (opt_.hosts.empty()) {
      const int n = opt_.n > 0 ? opt_.n : 1;
      const std::string host = this_host();
      for (int i = 0; i < n; ++i) ranks_.push_back(make_rank(i, host, false));
      return;
    }
    std::stringstream in(opt_.hosts);
    for (std::string item; std::getline(in, item, ',');) {
      if (item.empty()) throw UsageError("--hosts has an empty entry; write h1:n1,h2:n2");
      std::string host = item;
      int count = 1;
      if (const auto colon = item.rfind(':'); colon != std::string::npos) {
        host = item.substr(0, colon);
        try {
          std::size_t used = 0;
          count = std::stoi(item.substr(colon + 1), &used);
          if (used != item.size() - colon - 1) throw std::invalid_argument("");
        } catch (const std::exception&) {
          throw UsageError("--hosts entry '" + item + "': the count after ':' is not a number");
        }
      }
      if (host.empty() || count < 1)
        throw UsageError("--hosts entry '" + item + "' needs a host name and a count >= 1");
      for (int i = 0; i < count; ++i)
        ranks_.push_back(make_rank(int(ranks_.size()), host, true));
    }
    if (opt_.n > 0 && opt_.n != int(ranks_.size()))
      throw UsageError("-n " + std::to_string(opt_.n) + " does not match the " +
                       std::to_string(ranks_.size()) + " slots of --hosts; drop -n or fix it");
  }

  void open_store() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::string advertised;
    if (!opt_.store_addr.empty()) {
      if (::inet_pton(AF_INET, opt_.store_addr.c_str(), &a.sin_addr) != 1)
        throw UsageError("--store-addr '" + opt_.store_addr + "' is not an IPv4 address");
      advertised = opt_.store_addr;
    } else if (opt_.hosts.empty()) {
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      advertised = "127.0.0.1";
    } else {
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      advertised = this_host();
    }
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("cannot bind the store to " + advertised + ": " + std::strerror(errno));
    ::listen(listen_fd_, 128);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    set_nonblocking(listen_fd_);
    store_where_ = advertised + ":" + std::to_string(ntohs(a.sin_port));
    unsigned char raw[16];
    if (::getrandom(raw, sizeof raw, 0) != ssize_t(sizeof raw))
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    static const char hex[] = "0123456789abcdef";
    for (unsigned char b : raw) {
      token_ += hex[b >> 4];
      token_ += hex[b & 15];
    }
  }

  void install_signals() {
    if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
  }

  std::vector<std::string> env_for(const Rank& r) const {
    int local = 0, local_size = 0;  // r's index among the ranks of its host, and their number
    for (const Rank& o : ranks_) {
      if (o.rank < r.rank && o.host == r.host) ++local;
      if (o.host == r.host) ++local_size;
    }
    std::vector<std::string> env = {
        "ORDO_RANK=" + std::to_string(r.rank), "ORDO_SIZE=" + std::to_string(ranks_.size()),
        "ORDO_LOCAL_RANK=" + std::to_string(local),
        "ORDO_LOCAL_SIZE=" + std::to_string(local_size), "ORDO_STORE=" + store_where_,
        "ORDO_STORE_TOKEN=" + token_,
        // A little beyond ordorun's own startup clock, so that ordorun names the missing rank.
        "ORDO_TIMEOUT=" + fmt_seconds(opt_.timeout_startup + 2)};
    return env;
  }

  std::vector<std::string> argv_for(const Rank& r) const {
    const auto env = env_for(r);
    if (!r.remote) return opt_.command;
    std::vector<std::string> remote = {"env"};
    remote.insert(remote.end(), env.begin(), env.end());
    for (const std::string& name : exports_())
      if (const char* v = std::getenv(name.c_str())) remote.push_back(name + "=" + v);
    remote.insert(remote.end(), opt_.command.begin(), opt_.command.end());
    std::vector<std::string> argv = split_words(opt_.rsh);
    argv.push_back(r.host);
    // ssh and rsh hand one string to the remote shell; other wrappers (ip netns exec, docker
    // exec) take the command as argv.
    const std::string base = argv[0].substr(argv[0].rfind('/') + 1);
    if (base == "ssh" || base == "rsh") {
      std::string line;
      for (const std::string& w : remote) line += (line.empty() ? "" : " ") + shell_quote(w);
      argv.push_back(line);
    } else {
      argv.insert(argv.end(), remote.begin(), remote.end());
    }
    return argv;
  }

  // Variables a remote rank gets from ordorun's environment: UCX_* and OMP_* by default (the
  // transport's tuning must match on every host), plus every -x NAME.
  std::vector<std::string> exports_() const {
    std::vector<std::string> names = opt_.exports;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      if (kv.rfind("UCX_", 0) == 0 || kv.rfind("OMP_", 0) == 0) names.push_back(kv.substr(0, kv.find('=')));
    }
    return names;
  }

  void spawn(Rank& r) {
    const auto argv = argv_for(r);
    const auto env = env_for(r);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    // Signals stay blocked across fork until the child has dropped ordorun's handlers: one
    // arriving in between would otherwise run ordorun's handler in the child and write to
    // ordorun's signal pipe, as if ordorun itself had been signalled.
    sigset_t all, old;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &old);
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::sigprocmask(SIG_SETMASK, &old, nullptr);
      throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      struct sigaction dfl{};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      const int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
      ::execvp(cargv[0], cargv.data());
      const std::string msg = "ordorun: cannot execute '" + argv[0] + "': " + std::strerror(errno) + "\n";
      write_all(2, msg.data(), msg.size());
      ::_exit(127);
    }
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::setpgid(pid, pid);  // also here, so that a signal sent right away finds the group
    ::close(out[1]);
    ::close(err[1]);
    set_nonblocking(out[0]);
    set_nonblocking(err[0]);
    r.pid = pid;
    r.running = true;
    r.streams[0] = Stream{out[0], 1, {}};
    r.streams[1] = Stream{err[0], 2, {}};
  }

  void signal_ranks(int sig) {
    for (Rank& r : ranks_)
      if (r.running) ::kill(-r.pid, sig);
  }

  void abort_job(int code) {
    if (aborting_) return;
    aborting_ = true;
    exit_code_ = code;
    signal_ranks(SIGTERM);
    kill_at_ = Clock::now() + std::chrono::milliseconds(long(opt_.grace * 1000));
  }

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (Rank& r : ranks_) {
        if (r.pid != pid || !r.running) continue;
        r.running = false;
        r.status = status;
        // Whatever the rank left running in its process group goes with it.
        ::kill(-r.pid, SIGKILL);
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (!failed || aborting_) continue;
        // A rank killed by a signal is blamed at once. One that exits with an error status
        // may be reacting to a peer's death that ordorun has not reaped yet (its transport saw
        // the connection reset first): it is blamed only if no rank dies by a signal within
        // blame_window, so the message names the cause, not the first to notice it.
        if (WIFSIGNALED(status)) {
          blame(r);
        } else if (!suspect_) {
          suspect_ = r.rank;
          blame_at_ = Clock::now() + blame_window;
        }
      }
    }
  }

  static constexpr std::chrono::milliseconds blame_window{300};

  void blame(const Rank& r) {
    suspect_.reset();
    blame_at_.reset();
    say("rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + " on host " + r.host + ") " +
        describe_status(r.status) + rsh_hint(r, r.status) + (ranks_.size() > 1 ? "; stopping the other ranks" : ""));
    abort_job(exit_code_of(r.status));
  }

  // ssh exits with 255 when it cannot reach or log into the host (the rank never ran).
  std::string rsh_hint(const Rank& r, int status) const {
    if (!r.remote || !WIFEXITED(status) || WEXITSTATUS(status) != 255) return "";
    return " (status 255: did '" + opt_.rsh + " " + r.host + "' fail?)";
  }

  void on_signals() {
    unsigned char buf[64];
    ssize_t k;
    while ((k = ::read(signal_pipe[0], buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < k; ++i) {
        const int sig = buf[i];
        if (sig == SIGCHLD) continue;  // reaped below in any case
        if (forwarded_) {
          say(std::string("second ") + ::strsignal(sig) + ": killing every rank");
          signal_ranks(SIGKILL);
          continue;
        }
        forwarded_ = true;
        say(std::string("forwarding ") + ::strsignal(sig) + " to every rank");
        signal_ranks(sig);
        if (!aborting_) {
          aborting_ = true;
          exit_code_ = 128 + sig;
          kill_at_ = Clock::now() + std::chrono::milliseconds(long(opt_.grace * 1000));
        }
      }
    }
    reap();
  }

  void pump(Rank& r, Stream& s) {
    char buf[65536];
    for (;;) {
      const ssize_t k = ::read(s.fd, buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && errno == EAGAIN) return;
      if (k <= 0) {
        if (!s.partial.empty()) emit(r, s, s.partial + "\n");
        s.partial.clear();
        ::close(s.fd);
        s.fd = -1;
        return;
      }
      s.partial.append(buf, std::size_t(k));
      std::size_t start = 0, nl;
      std::string lines;
      while ((nl = s.partial.find('\n', start)) != std::string::npos) {
        lines += prefix(r);
        lines.append(s.partial, start, nl + 1 - start);
        start = nl + 1;
      }
      s.partial.erase(0, start);
      if (!lines.empty()) write_all(s.out, lines.data(), lines.size());
    }
  }

  void emit(const Rank& r, const Stream& s, const std::string& text) {
    const std::string line = prefix(r) + text;
    write_all(s.out, line.data(), line.size());
  }

  static std::string prefix(const Rank& r) { return "[" + std::to_string(r.rank) + "] "; }

  void accept_clients() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      clients_.push_back(Client{fd, {}, {}, {}, -1});
    }
  }

  void answer_parked() {
    for (Client& c : clients_) {
      while (!c.waiting.empty()) {
        auto it = kv_.find(c.waiting.front());
        if (it == kv_.end()) break;
        auto resp = store::encode_response(store::Status::ok, it->second);
        c.out.insert(c.out.end(), resp.begin(), resp.end());
        c.waiting.erase(c.waiting.begin());
      }
    }
  }

  // Returns false when the client must be dropped.
  bool serve(Client& c) {
    std::byte buf[65536];
    for (;;) {
      const ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && errno == EAGAIN) break;
      if (k <= 0) return false;
      c.in.insert(c.in.end(), buf, buf + k);
    }
    for (;;) {
      std::size_t used = 0;
      bool bad = false;
      auto req = store::parse_request(c.in, used, bad);
      if (bad) return false;
      if (!req) break;
      c.in.erase(c.in.begin(), c.in.begin() + std::ptrdiff_t(used));
      switch (req->op) {
        case store::Op::hello: {
          const std::string token(reinterpret_cast<const char*>(req->value.data()), req->value.size());
          char* end = nullptr;
          const long r = std::strtol(req->key.c_str(), &end, 10);
          if (token != token_ || end == req->key.c_str() || *end != '\0' || r < 0 || r >= long(ranks_.size()))
            return false;
          ranks_[std::size_t(r)].hello = true;
          c.rank = int(r);
          any_hello_ = true;
          auto resp = store::encode_response(store::Status::ok, {});
          c.out.insert(c.out.end(), resp.begin(), resp.end());
          break;
        }
        case store::Op::put: {
          if (c.rank < 0) return false;  // no hello with the job's token yet
          kv_[req->key] = std::move(req->value);
          auto resp = store::encode_response(store::Status::ok, {});
          c.out.insert(c.out.end(), resp.begin(), resp.end());
          break;
        }
        case store::Op::get:
          if (c.rank < 0) return false;
          c.waiting.push_back(req->key);
          break;
      }
    }
    return true;
  }

  void flush(Client& c) {
    while (!c.out.empty()) {
      const ssize_t k = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return;
      c.out.erase(c.out.begin(), c.out.begin() + k);
    }
  }

  void check_timers() {
    const auto now = Clock::now();
    if (!aborting_ && suspect_ && blame_at_ && now >= *blame_at_) blame(ranks_[std::size_t(*suspect_)]);
    if (aborting_ && kill_at_ && now >= *kill_at_) {
      bool any = false;
      for (Rank& r : ranks_) {
        if (!r.running) continue;
        any = true;
        say("rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + " on host " +
            r.host + ") did not stop within " + fmt_seconds(opt_.grace) + " s of SIGTERM; sending SIGKILL");
        ::kill(-r.pid, SIGKILL);
      }
      (void)any;
      kill_at_.reset();
    }
    if (!aborting_ && startup_pending() && now - start_ >= seconds(opt_.timeout_startup)) {
      std::string missing;
      for (const Rank& r : ranks_)
        if (r.running && !r.hello)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r.rank) + " (pid " +
                     std::to_string(r.pid) + " on host " + r.host + ")";
      say("rank " + missing + " did not connect to the store within " +
          fmt_seconds(opt_.timeout_startup) + " s (--timeout-startup); stopping the job");
      abort_job(124);
    }
    if (!aborting_ && opt_.timeout > 0 && now - start_ >= seconds(opt_.timeout)) {
      say("the job ran longer than --timeout " + fmt_seconds(opt_.timeout) + " s; stopping every rank");
      abort_job(124);
    }
  }

  static std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(long(s * 1000)); }
  static std::string fmt_seconds(double s) {
    std::ostringstream o;
    o << s;
    return o.str();
  }

  // A rank has reached the store and another, still running, has not: the startup deadline
  // matters. (Once every rank is in, a deadline left in the past would make poll() return at
  // once, forever: a launcher spinning on a core for the rest of the job.)
  bool startup_pending() const {
    if (!any_hello_) return false;
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const Rank& r) { return r.running && !r.hello; });
  }

  int next_timeout_ms() const {
    auto now = Clock::now();
    std::optional<Clock::time_point> next;
    auto consider = [&](Clock::time_point t) {
      if (!next || t < *next) next = t;
    };
    if (kill_at_) consider(*kill_at_);
    if (blame_at_) consider(*blame_at_);
    if (!aborting_ && startup_pending()) consider(start_ + seconds(opt_.timeout_startup));
    if (!aborting_ && opt_.timeout > 0) consider(start_ + seconds(opt_.timeout));
    if (drain_until_) consider(*drain_until_);
    if (!next) return -1;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*next - now).count();
    return ms < 0 ? 0 : int(ms) + 1;
  }

  void loop() {
    for (;;) {
      bool any_running = false, any_open = false;
      for (const Rank& r : ranks_) {
        any_running |= r.running;
        any_open |= r.streams[0].fd >= 0 || r.streams[1].fd >= 0;
      }
      if (!any_running) {
        // No rank is left to die by a signal: the suspect is the culprit.
        if (!aborting_ && suspect_) blame(ranks_[std::size_t(*suspect_)]);
        // Every rank has exited. Its output may still sit in the pipes; a daemon it left
        // behind could hold them open forever, so the drain is bounded.
        if (!any_open) break;
        if (!drain_until_) drain_until_ = Clock::now() + std::chrono::seconds(2);
        if (Clock::now() >= *drain_until_) break;
      }
      std::vector<pollfd> fds;
      std::vector<std::pair<int, int>> stream_of;  // (rank, stream) per pipe entry
      fds.push_back({signal_pipe[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const Client& c : clients_)
        fds.push_back({c.fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      const std::size_t first_stream = fds.size();
      for (const Rank& r : ranks_)
        for (int s = 0; s < 2; ++s)
          if (r.streams[s].fd >= 0) {
            fds.push_back({r.streams[s].fd, POLLIN, 0});
            stream_of.emplace_back(r.rank, s);
          }
      const int rc = ::poll(fds.data(), fds.size(), next_timeout_ms());
      if (rc < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      if (rc > 0) {
        if (fds[0].revents) on_signals();
        if (fds[1].revents) accept_clients();
        for (std::size_t i = 0; i < clients_.size(); ++i) {
          if (fds[2 + i].revents == 0) continue;
          if (!serve(clients_[i])) {
            ::close(clients_[i].fd);
            clients_[i].fd = -1;
          }
        }
        for (std::size_t i = first_stream; i < fds.size(); ++i)
          if (fds[i].revents) {
            auto [rank, s] = stream_of[i - first_stream];
            pump(ranks_[std::size_t(rank)], ranks_[std::size_t(rank)].streams[s]);
          }
        std::erase_if(clients_, [](const Client& c) { return c.fd < 0; });
        answer_parked();
        for (Client& c : clients_) flush(c);
      }
      reap();
      check_timers();
    }
    for (Client& c : clients_) ::close(c.fd);
    if (!aborting_) exit_code_ = 0;
  }

  Options opt_;
  std::vector<Rank> ranks_;
  std::vector<Client> clients_;
  std::map<std::string, std::vector<std::byte>> kv_;
  int listen_fd_ = -1;
  std::string store_where_;
  std::string token_;  // proves a store client belongs to this job
  Clock::time_point start_;
  bool aborting_ = false, forwarded_ = false, any_hello_ = false;
  int exit_code_ = 0;
  std::optional<Clock::time_point> kill_at_, drain_until_, blame_at_;
  std::optional<int> suspect_;  // first rank to exit with an error status, not blamed yet
};

// Slurm handoff: srun starts the ranks and provides PMIx; ordo's bootstrap picks it up.
[[noreturn]] void exec_srun(const Options& o) {
  // --label: srun's own rank prefix ("0: "), ordorun no longer sees the output.
  std::vector<std::string> argv = {"srun", "--mpi=pmix", "--label", "-n", std::to_string(o.n > 0 ? o.n : 1)};
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  ::execvp("srun", cargv.data());
  say(std::string("cannot execute srun: ") + std::strerror(errno) + " (use --no-srun to launch locally)");
  std::exit(2);
}

bool slurm_fits(const Options& o) {
  if (o.no_srun || !o.hosts.empty() || std::getenv("SLURM_JOB_ID") == nullptr) return false;
  const char* ntasks = std::getenv("SLURM_NTASKS");
  return ntasks == nullptr || (o.n > 0 ? o.n : 1) <= std::atoi(ntasks);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"ordorun: start the ranks of an ordo job (locally, on other hosts, or through srun)"};
  app.prefix_command();
  app.add_option("-n,--np", o.n, "number of ranks (default 1, or the sum of --hosts)")->check(CLI::PositiveNumber);
  app.add_option("--hosts", o.hosts, "ranks per host: h1:n1,h2:n2 (started through --rsh)");
  app.add_option("--rsh", o.rsh, "remote shell command, the host name is appended (default ssh)");
  app.add_option("--timeout-startup", o.timeout_startup,
                 "seconds every rank has to reach the store once the first one did (default 30)")
      ->check(CLI::PositiveNumber);
  app.add_option("--grace", o.grace, "seconds between SIGTERM and SIGKILL when stopping ranks (default 3)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", o.timeout, "seconds the whole job may run (default: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--store-addr", o.store_addr,
                 "IPv4 address of this host that every rank can reach (default 127.0.0.1, or this "
                 "host's name with --hosts)");
  app.add_option("-x,--export", o.exports, "environment variable to pass to remote ranks (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--srun", o.srun, "hand the launch to srun --mpi=pmix (automatic inside a Slurm allocation)");
  app.add_flag("--no-srun", o.no_srun, "never hand the launch to srun");
  try {
    app.parse(argc, argv);
    o.command = app.remaining();
    if (o.command.empty()) throw UsageError("no program given; usage: ordorun -n N prog [args...]");
    if (o.srun && o.no_srun) throw UsageError("--srun and --no-srun contradict each other");
    if (o.srun && !o.hosts.empty()) throw UsageError("--srun takes -n, not --hosts (Slurm places the ranks)");
    if (o.srun || slurm_fits(o)) exec_srun(o);
    Launcher launcher(std::move(o));
    return launcher.run();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const UsageError& e) {
    say(e.what());
    return 2;
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }
}
