// Job: one run of ordorun — it places the ranks, serves the store, starts the ranks, passes
// their output on and decides how the job ends. Everything happens on one EventLoop.
//
// How a job ends:
//   - every rank exits 0: exit 0;
//   - a rank exits non-zero or by a signal: the first one is named (where and why), the others
//     get SIGTERM and SIGKILL after --grace; ordorun exits with that rank's status (128+signal
//     for a signal death). A rank that exits with an error status is blamed only if no rank
//     dies by a signal within blame_window: survivors whose transport saw the dead peer's
//     connection reset may exit before ordorun has reaped the dead one, and the message must
//     name the cause, not the first to notice;
//   - SIGINT or SIGTERM to ordorun is forwarded to every rank, SIGHUP (the terminal went away)
//     becomes SIGTERM (libraries in the ranks, UCX among them, catch SIGHUP for their own
//     purposes); SIGKILL follows after --grace, and a second signal sends it at once; exit
//     128+the signal ordorun received;
//   - once one rank has reached the store, every rank must have within --timeout-startup of the
//     start (exit 124, the missing ranks named); --timeout bounds the whole job (exit 124);
//   - a rank that cannot be started (no descriptors, no processes): the ranks already started
//     are stopped as above and ordorun exits 1;
//   - a rank that exits with status 0 has finished if its Runtime said so to the store
//     ("done/<rank>", comm::Bootstrap::finished), or if it never used the store and no rank
//     did. One that exits 0 before saying hello while another rank has said it (it never
//     built its Runtime, which every rank must) is blamed at once: the others wait in the
//     store for it. One that said hello and exits 0 unfinished (exit() without ending its
//     Runtime) is blamed if another rank fails after it: that failure is its peers' report of
//     it. Either way the ranks waiting in the store are answered with why at once, and get
//     SIGTERM only after left_notice, so that each can end with its own message; ordorun then
//     exits with the first status another rank exits with (1 if none fails).
//   - a rank that exits with an error status after telling the store which other rank it
//     stopped on ("cause/<rank>", comm::Bootstrap::caused_by: a peer whose task failed, or
//     that left the job while it needed it) names that rank, not itself: every rank of a
//     failed job exits at about the same time, and the first reaped is seldom the cause.
// Each local rank runs in its own process group, so that a terminal's Ctrl-C reaches ordorun
// once and is forwarded once, and so that stopping a rank stops its children too.

#pragma once

#include <bitset>
#include <chrono>
#include <csignal>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "event_loop.hpp"
#include "hosts.hpp"
#include "prefixer.hpp"
#include "spawner.hpp"
#include "store_server.hpp"

namespace ordorun {

struct JobOptions {
  int n = 0;
  std::string hosts;
  std::string rsh = "ssh";
  double timeout_startup = 30;
  double grace = 3;
  double timeout = 0;
  std::string store_addr;
  std::vector<std::string> exports;
  std::vector<std::string> command;
  StoreLimits store_limits;
  bool check_host = true;  // refuse more ranks than the host can start (host_limits.hpp)
  bool verbose = false;     // say what the store served when the job ends
};

class Job {
 public:
  // Plans the ranks and opens the store; throws UsageError for options that cannot work.
  explicit Job(JobOptions o);
  ~Job();
  // Starts the ranks and runs the job to its end; returns ordorun's exit status.
  int run();

  // The rank whose death ended the job, once one did (blamed for its own status): which, its
  // wait status, and the sentence that said so. Unset when the job ended otherwise.
  struct RankLoss {
    int rank = -1;
    int status = 0;
    std::string why;
  };
  const std::optional<RankLoss>& loss() const { return loss_; }
  // The number of ranks the job runs.
  std::size_t ranks() const { return ranks_.size(); }
  // The --hosts hosts found down while the job ran: one where a rank died of a signal that
  // ordorun did not send it, or whose remote shell exited with status 255 (what ssh returns
  // when it cannot connect or lost the connection) before ordorun signalled it. A relaunch
  // leaves them out (main.cpp). Empty for ranks on this host.
  const std::set<std::string>& down_hosts() const { return down_hosts_; }

 private:
  struct Stream {
    Fd fd;
    int out = 1;  // our descriptor its lines go to
    LinePrefixer lines{""};
  };
  struct Rank {
    RankPlace place;
    pid_t pid = -1;
    bool running = false;
    bool hello = false;
    int status = 0;
    std::bitset<NSIG> signals_sent;  // what ordorun sent it (down_hosts)
    Stream streams[2];
  };

  void plan_ranks();
  std::vector<std::string> plan_store(std::vector<std::size_t>& listener_of_rank);
  void start_ranks();
  void say_store_traffic() const;
  void on_signals();
  void on_hello(int rank);
  void pump(Rank& r, Stream& s);
  void reap();
  void blame(const Rank& r);
  // `r` exited with status 0 while the job was not finished (job.hpp, "How a job ends").
  void blame_unfinished(const Rank& r, const std::string& how);
  bool is_finished(const Rank& r) const;
  std::optional<std::pair<int, std::string>> cause_named_by(const Rank& r) const;
  // Sends `sig` to every running rank (SIGKILL after --grace) and answers every rank that
  // waits in the store with `why` (StoreServer::stop_job): a rank that ignores `sig` ends then
  // too, unless it waits elsewhere.
  // `notice`: how long the ranks have to end on their own, told why by the store, before
  // `sig` (0: at once). An exit_code of kFromOthers: the first status another rank exits with.
  static constexpr int kFromOthers = -1;
  void stop_ranks(int exit_code, int sig, const std::string& why,
                  EventLoop::Clock::duration notice = {});
  void on_grace_over();
  void on_startup_deadline();
  bool is_startup_pending() const;
  std::string rsh_hint(const Rank& r) const;
  std::string who(const Rank& r) const;
  // Sends `sig` to the process group of `r` and remembers it (down_hosts).
  void signal_rank(Rank& r, int sig);
  void note_if_down(const Rank& r);

  JobOptions opt_;
  EventLoop loop_;
  std::vector<Rank> ranks_;
  std::optional<StoreServer> store_;
  std::string token_;
  Fd signal_read_;
  EventLoop::Clock::time_point start_;
  bool stopping_ = false, forwarded_ = false, any_hello_ = false, drained_ = false;
  int exit_code_ = 0;
  unsigned long rank_fd_limit_ = 0;  // the soft limit ordorun was started with, when raised
  int stop_signal_ = 0;  // what the ranks were sent when the job began to stop
  std::optional<int> suspect_;  // first rank to exit with an error status, not blamed yet
  std::optional<int> unfinished_;  // first rank to exit 0 after its hello but unfinished
  std::optional<int> left_early_;  // first rank to exit 0 before its hello
  std::optional<int> blamed_;      // the rank the job's end is blamed on
  std::optional<RankLoss> loss_;
  std::set<std::string> down_hosts_;
  std::optional<EventLoop::TimerId> blame_timer_, drain_timer_;
};

}  // namespace ordorun
