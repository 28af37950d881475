// ordorun: starts the ranks of an ordo job and keeps the job bounded.
//
//   ordorun -n N prog args...                         N ranks on this host
//   ordorun --hosts a:2,b:2 [--rsh CMD] prog args...  ranks on other hosts through CMD (ssh)
//   ordorun --srun -n N prog args...                  hand the launch to Slurm (PMIx)
//   ordorun --restarts K [--hosts ...] prog args...   relaunch after a rank died of a signal,
//                                                     up to K times; with --hosts, on the
//                                                     hosts not found down, with fewer ranks
//
// The parts: the rendezvous store the ranks bootstrap from (store_server.hpp), how a rank is
// started (spawner.hpp), the "[R] " prefixing of their output (prefixer.hpp), and the job's
// policy — failures, signals, deadlines — on one event loop (job.hpp, event_loop.hpp). This
// file reads the command line and hands over to Slurm when it should.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include <set>
#include <string>
#include <vector>

#include "cli_main.hpp"
#include "cli_number.hpp"
#include "hosts.hpp"
#include "job.hpp"
#include "posix.hpp"

namespace {

using ordorun::say;
using ordorun::UsageError;

struct Options {
  ordorun::JobOptions job;
  bool srun = false;
  bool no_srun = false;
  int restarts = 0;
};

// --restarts: runs the job, and after a rank died of a signal (a lost node, SIGKILL, a crash)
// runs it again, up to `restarts` times, with ORDO_RELAUNCH=<attempt> in the ranks'
// environment: a program that writes checkpoints resumes from its newest complete one
// (ordo::resume, docs/checkpoint.md). A rank that exits with an error status (bad input,
// a refused checkpoint) is not relaunched: the same command would fail again.
// With --hosts, each relaunch leaves out the hosts the job found down (Job::down_hosts: a
// rank killed by a signal ordorun did not send, a remote shell that exited 255) and runs on
// the ranks of the others; such a host is a reason to relaunch even when no rank died of a
// signal (ssh exits 255 when the remote rank was killed, too). -n must equal the sum of
// --hosts, so the relaunch runs on the sum of what remains. When no host remains, returns 2.
// Returns the last attempt's status, or 2 when every attempt failed the same way.
int run_with_restarts(const ordorun::JobOptions& base, int restarts) {
  rlimit given{};
  const bool have_limit = ::getrlimit(RLIMIT_NOFILE, &given) == 0;
  std::string first_cause;
  bool same = true;
  // --hosts, the hosts found down so far, and what is left (empty without --hosts).
  std::vector<ordorun::HostEntry> listed, hosts;
  if (!base.hosts.empty()) listed = hosts = ordorun::parse_hosts(base.hosts);
  std::set<std::string> all_down;
  for (int attempt = 0;; ++attempt) {
    ordorun::JobOptions jo = base;
    if (attempt > 0) {
      ::setenv("ORDO_RELAUNCH", std::to_string(attempt).c_str(), 1);
      if (!jo.hosts.empty()) jo.exports.push_back("ORDO_RELAUNCH");
      if (have_limit) ::setrlimit(RLIMIT_NOFILE, &given);  // the ranks start with ordorun's
      if (!hosts.empty()) {
        jo.hosts = ordorun::format_hosts(hosts);
        jo.n = ordorun::total_ranks(hosts);
      }
    }
    ordorun::Job job(std::move(jo));
    const int rc = job.run();
    const auto& loss = job.loss();
    const auto& down = job.down_hosts();
    const bool killed = loss && WIFSIGNALED(loss->status);
    if (rc == 0 || restarts == 0 || (!killed && down.empty())) return rc;
    // A rank and its signal: "rank 2 on host h killed by SIGKILL" names the same failure.
    const std::string cause =
        loss ? "rank " + std::to_string(loss->rank) + " " + ordorun::describe_status(loss->status)
             : ordorun::name_hosts(down) + " found down";
    if (attempt == 0) first_cause = cause;
    same = same && cause == first_cause;
    if (attempt == restarts) {
      if (!same) return rc;
      say("the job failed " + std::to_string(attempt + 1) + " times the same way (" + cause +
          "); giving up after --restarts " + std::to_string(restarts));
      return 2;
    }
    const std::string what = loss ? loss->why : "the job ended with status " + std::to_string(rc);
    std::string left_out;
    if (!hosts.empty() && !down.empty()) {
      all_down.insert(down.begin(), down.end());
      auto rest = ordorun::leave_out(listed, all_down);
      if (rest.hosts.empty()) {
        say(what + "; " + rest.why_none + ", so no host is left to relaunch the job on");
        return 2;
      }
      hosts = std::move(rest.hosts);
      left_out = "; leaving out " + ordorun::name_hosts(down);
    }
    const std::size_t ranks =
        hosts.empty() ? job.ranks() : std::size_t(ordorun::total_ranks(hosts));
    say(what + left_out + "; relaunching the job on " + std::to_string(ranks) +
        " rank(s) from its newest complete checkpoint (relaunch " + std::to_string(attempt + 1) +
        " of " + std::to_string(restarts) + ")");
  }
}

// Slurm handoff: srun starts the ranks and provides PMIx; ordo's bootstrap picks it up.
[[noreturn]] void exec_srun(const Options& o) {
  // --label: srun's own rank prefix ("0: "), ordorun no longer sees the output.
  std::vector<std::string> argv = {"srun", "--mpi=pmix", "--label", "-n", std::to_string(o.job.n > 0 ? o.job.n : 1)};
  argv.insert(argv.end(), o.job.command.begin(), o.job.command.end());
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  ::execvp("srun", cargv.data());
  say("cannot execute srun: " + ordorun::errno_text(errno) + " (use --no-srun to launch locally)");
  std::exit(2);
}

bool slurm_fits(const Options& o) {
  if (o.no_srun || !o.job.hosts.empty() || std::getenv("SLURM_JOB_ID") == nullptr) return false;
  const char* ntasks = std::getenv("SLURM_NTASKS");
  return ntasks == nullptr || (o.job.n > 0 ? o.job.n : 1) <= std::atoi(ntasks);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ordorun::JobOptions& j = o.job;
  CLI::App app{"ordorun: start the ranks of an ordo job (locally, on other hosts, or through srun)",
               "ordorun"};
  app.prefix_command();
  using ordo::cli::Integer;
  using ordo::cli::Real;
  app.add_option("-n,--np", j.n, "number of ranks (default 1, or the sum of --hosts)")
      ->check(Integer(1, ordorun::max_ranks));
  app.add_option("--hosts", j.hosts, "ranks per host: h1:n1,h2:n2 (started through --rsh)");
  app.add_option("--rsh", j.rsh,
                 "remote shell command, the host name is appended (default ssh); it must pass "
                 "standard input on (the store's token travels there)");
  app.add_option("--timeout-startup", j.timeout_startup,
                 "seconds every rank has to reach the store once the first one did (default 30)")
      ->check(Real(0.001, 1e7));
  app.add_option("--grace", j.grace, "seconds between SIGTERM and SIGKILL when stopping ranks (default 3)")
      ->check(Real(0, 1e7));
  app.add_option("--timeout", j.timeout, "seconds the whole job may run (default: no limit)")
      ->check(Real(0, 1e7));
  app.add_option("--store-addr", j.store_addr,
                 "IPv4 address of this host, reachable by every rank, that the store listens on "
                 "(default 127.0.0.1, or with --hosts the address each host's traffic leaves from)");
  app.add_option("-x,--export", j.exports, "environment variable to pass to remote ranks (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--srun", o.srun, "hand the launch to srun --mpi=pmix (automatic inside a Slurm allocation)");
  app.add_flag("--no-srun", o.no_srun, "never hand the launch to srun");
  app.add_flag("--no-host-check{false}", j.check_host,
               "start the ranks even when this host looks too small for them (the check counts "
               "what an ordo rank needs at least: 5 threads and 16 MiB; smaller programs may fit)");
  app.add_option("--restarts", o.restarts,
                 "when a rank dies of a signal, relaunch the job up to this many times; a "
                 "program that writes checkpoints resumes from its newest complete one; with "
                 "--hosts, a relaunch leaves out the hosts found down (a rank killed by a "
                 "signal ordorun did not send, or --rsh exiting 255) and runs on the ranks of "
                 "the others (default 0)")
      ->check(Integer(0, 1000));
  app.add_flag("--verbose", j.verbose,
               "when the job ends, say what the store sent (bytes in all, at most to one rank) "
               "and the most requests one rank made");
  return ordo::cli::guarded_main(
      "ordorun",
      [&] {
        if (int rc = ordo::cli::parse(app, argc, argv); rc >= 0) return rc;
        j.command = app.remaining();
        // The first word ordorun does not know starts the program, so a mistyped flag would be
        // run as a program named like it; after "--" the program may start with '-'.
        const bool separated = !j.command.empty() && j.command[0] == "--";
        if (separated) j.command.erase(j.command.begin());
        if (j.command.empty()) throw UsageError("no program given; usage: ordorun -n N prog [args...]");
        if (!separated && j.command[0].size() > 1 && j.command[0][0] == '-')
          throw UsageError("unknown flag '" + j.command[0] +
                           "' (the program and its arguments come after ordorun's flags; "
                           "ordorun --help lists them)");
        if (o.srun && o.no_srun) throw UsageError("--srun and --no-srun contradict each other");
        if (o.srun && !j.hosts.empty())
          throw UsageError("--srun takes -n, not --hosts (Slurm places the ranks)");
        if (o.restarts > 0 && (o.srun || slurm_fits(o)))
          throw UsageError(
              "--restarts relaunches ranks that ordorun starts; under Slurm, use "
              "the relaunch recipe of docs/checkpoint.md, or --no-srun");
        if (o.srun || slurm_fits(o)) exec_srun(o);
        return run_with_restarts(j, o.restarts);
      },
      ordo::cli::bad_input_if<UsageError>);
}
