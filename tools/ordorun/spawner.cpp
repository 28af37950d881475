#include "spawner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace ordorun {
namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Runs on the remote host: reads the token line from standard input into the rank's
// environment, then executes the rest of the command line ("$@").
constexpr const char* token_reader =
    "IFS= read -r ORDO_STORE_TOKEN || { echo \"ordorun: no store token arrived on standard "
    "input; the remote shell (--rsh) must pass it on\" >&2; exit 126; }; export ORDO_STORE_TOKEN; "
    "exec \"$@\"";

}  // namespace

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

Launch plan_launch(const RankPlace& place, const JobLaunch& job) {
  std::vector<std::string> env = {
      "ORDO_RANK=" + std::to_string(place.rank), "ORDO_SIZE=" + std::to_string(job.size),
      "ORDO_LOCAL_RANK=" + std::to_string(place.local_rank),
      "ORDO_LOCAL_SIZE=" + std::to_string(place.local_size), "ORDO_STORE=" + place.store,
      "ORDO_TIMEOUT=" + job.bootstrap_timeout};
  Launch l;
  l.fd_soft_limit = job.fd_soft_limit;
  if (!place.remote) {
    l.argv = job.command;
    l.env = std::move(env);
    l.env.push_back("ORDO_STORE_TOKEN=" + job.token);
    return l;
  }
  std::vector<std::string> remote = {"sh", "-c", token_reader, "ordorun-rank", "env"};
  remote.insert(remote.end(), env.begin(), env.end());
  for (const std::string& name : job.exports)
    if (const char* v = std::getenv(name.c_str())) remote.push_back(name + "=" + v);
  remote.insert(remote.end(), job.command.begin(), job.command.end());
  l.argv = split_words(job.rsh);
  l.argv.push_back(place.host);
  // ssh and rsh hand one string to the remote shell; other wrappers (ip netns exec, docker
  // exec) take the command as argv.
  const std::string base = l.argv[0].substr(l.argv[0].rfind('/') + 1);
  if (base == "ssh" || base == "rsh") {
    std::string line;
    for (const std::string& w : remote) line += (line.empty() ? "" : " ") + shell_quote(w);
    l.argv.push_back(line);
  } else {
    l.argv.insert(l.argv.end(), remote.begin(), remote.end());
  }
  l.stdin_data = job.token + "\n";
  return l;
}

Child spawn(int rank, const Launch& launch) {
  auto failed = [&](const char* what) {
    return SpawnError("cannot start rank " + std::to_string(rank) + " (" + what + ": " + errno_text(errno) + ")");
  };
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw failed("pipe");
  Fd out_r(p[0]), out_w(p[1]);
  if (::pipe2(p, O_CLOEXEC) != 0) throw failed("pipe");
  Fd err_r(p[0]), err_w(p[1]);
  Fd in_r, in_w;
  if (!launch.stdin_data.empty()) {
    if (::pipe2(p, O_CLOEXEC) != 0) throw failed("pipe");
    in_r.reset(p[0]);
    in_w.reset(p[1]);
  } else {
    in_r.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in_r.is_open()) throw failed("open /dev/null");
  }
  std::vector<char*> cargv;
  for (const auto& a : launch.argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  // Signals stay blocked across fork until the child has dropped ordorun's handlers: one
  // arriving in between would otherwise run ordorun's handler in the child and write to
  // ordorun's signal pipe, as if ordorun itself had been signalled.
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &old);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    errno = e;
    throw failed("fork");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(in_r.get(), 0);
    ::dup2(out_w.get(), 1);
    ::dup2(err_w.get(), 2);
    for (const auto& kv : launch.env) ::putenv(const_cast<char*>(kv.c_str()));
    if (rlimit lim{}; launch.fd_soft_limit != 0 && ::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
      lim.rlim_cur = launch.fd_soft_limit;
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    ::execvp(cargv[0], cargv.data());
    const std::string msg = "ordorun: cannot execute '" + launch.argv[0] + "': " + errno_text(errno) + "\n";
    write_all(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::setpgid(pid, pid);  // also here, so that a signal sent right away finds the group
  if (in_w.is_open()) {
    // A few dozen bytes into an empty pipe: never blocks. A rank gone already is its own
    // failure, reported when it is reaped.
    write_all(in_w.get(), launch.stdin_data.data(), launch.stdin_data.size());
  }
  set_nonblocking(out_r.get());
  set_nonblocking(err_r.get());
  Child c;
  c.pid = pid;
  c.out = std::move(out_r);
  c.err = std::move(err_r);
  return c;
}

}  // namespace ordorun
