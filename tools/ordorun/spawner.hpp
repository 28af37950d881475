// Spawner: how a rank is started. plan_launch() decides the command line, the environment and
// what goes to the rank's standard input (pure, so that tests can read it); spawn() forks and
// executes it with its output on pipes.
//
// Local ranks get their ORDO_* variables (the store token included) in their environment,
// which only their own user can read. Remote ranks are started through the remote shell
// (--rsh), whose command line every user of both machines can see in ps: it carries the
// ORDO_* variables except the token, which goes to the remote shell's standard input and is
// read there by a small sh wrapper into the rank's environment. So the remote shell must pass
// standard input on (ssh, ip netns exec and docker exec -i do).
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "posix.hpp"

namespace ordorun {

struct RankPlace {
  int rank = 0;
  std::string host;
  bool remote = false;
  int local_rank = 0, local_size = 1;  // among the ranks of its host
  std::string store;                   // "address:port" of the store, as this rank reaches it
};

struct JobLaunch {
  int size = 1;
  std::vector<std::string> command;
  std::string rsh = "ssh";             // split on white space
  std::vector<std::string> exports;    // variables of ordorun's environment remote ranks get
  std::string token;
  std::string bootstrap_timeout;       // seconds, ORDO_TIMEOUT
  unsigned long fd_soft_limit = 0;     // RLIMIT_NOFILE the rank starts with (0: ordorun's)
};

struct Launch {
  std::vector<std::string> argv;
  std::vector<std::string> env;        // NAME=value, added to ordorun's environment
  std::string stdin_data;              // written to the rank's standard input, then EOF
  unsigned long fd_soft_limit = 0;     // set in the child before exec (0: leave it)
};

Launch plan_launch(const RankPlace& place, const JobLaunch& job);

// A started rank: its pid (leader of its own process group) and its output pipes.
struct Child {
  pid_t pid = -1;
  Fd out, err;
};

// Thrown when ordorun cannot start a rank (no descriptors, no processes): the message says
// which rank and why.
struct SpawnError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Forks and executes `launch` in a new process group with standard input from stdin_data (or
// /dev/null) and its output on two non-blocking pipes. A program that cannot be executed exits
// with status 127 after saying so.
Child spawn(int rank, const Launch& launch);

// Quotes s for a POSIX shell (unchanged when it needs no quoting).
std::string shell_quote(const std::string& s);

}  // namespace ordorun
