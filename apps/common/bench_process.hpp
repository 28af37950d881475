// What the benchmark drivers (ordo-bench-stencil, ordo-bench-tasks) need to run other
// programs: shell quoting, running a command with a time limit and collecting its output,
// finding the binaries of the build tree or of an install, and the Open MPI settings of a
// one-host run. One copy for every driver.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ordo::bench {

// `s` as one word of a POSIX shell command line: single-quoted, with each ' written as '\''.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandOutput {
  int status = -1;   // exit status, or -1 if it did not exit normally (killed, not started)
  std::string text;  // stdout and stderr together
};

// Runs `argv` through the shell (every argument quoted), stdin from /dev/null, under coreutils
// `timeout` when it is installed and `timeout_s` > 0, so that a hung program cannot hang the
// benchmark (it then exits 124, or 137 when it had to be killed).
inline CommandOutput run_command(const std::vector<std::string>& argv, unsigned timeout_s) {
  std::string cmd;
  static const bool have_timeout = std::system("command -v timeout >/dev/null 2>&1") == 0;
  if (have_timeout && timeout_s > 0)
    cmd = "timeout --kill-after=5 " + std::to_string(timeout_s) + " ";
  for (const auto& a : argv) cmd += shell_quote(a) + " ";
  cmd += "2>&1 </dev/null";
  CommandOutput out;
  std::fflush(stdout);  // the child's output must not overtake what this process printed
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.text.append(buf, n);
  const int st = pclose(pipe);
  out.status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// The last `count` lines of `text` (all of it when it has fewer), for quoting a failed run.
inline std::string last_lines(const std::string& text, std::size_t count) {
  // A final newline ends the last line rather than starting an empty one.
  std::size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  for (std::size_t i = 0; i < count; ++i) {
    if (end == 0) return text;
    const std::size_t nl = text.rfind('\n', end - 1);
    if (nl == std::string::npos) return text;
    if (i + 1 == count) return text.substr(nl + 1);
    end = nl;
  }
  return std::string();
}

// An executable `name` in `bin_dir` when given; otherwise in this executable's folder or one of
// its sibling folders (the build tree keeps apps/<name>/ordo-<name> beside apps/bench-*/), or
// <prefix>/bin when this executable is an installed benchmark in <prefix>/libexec/ordo.
inline std::optional<std::filesystem::path> find_binary(const std::string& name,
                                                        const std::string& bin_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  std::error_code ec;
  if (!bin_dir.empty()) {
    dirs.emplace_back(bin_dir);
  } else {
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      dirs.push_back(self.parent_path());
      for (const auto& e : fs::directory_iterator(self.parent_path().parent_path(), ec))
        if (e.is_directory(ec) && e.path() != self.parent_path()) dirs.push_back(e.path());
      dirs.push_back(self.parent_path().parent_path().parent_path() / "bin");
    }
  }
  for (const auto& d : dirs) {
    fs::path p = d / name;
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

// `name` as the shell would find it: a path with a '/' as it is, otherwise through PATH.
inline std::optional<std::filesystem::path> find_in_path(const std::string& name) {
  namespace fs = std::filesystem;
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return fs::path(name);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  const std::string p = path ? path : "/usr/bin:/bin";
  std::size_t pos = 0;
  while (pos <= p.size()) {
    std::size_t c = p.find(':', pos);
    if (c == std::string::npos) c = p.size();
    fs::path cand = fs::path(p.substr(pos, c - pos)) / name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    pos = c + 1;
  }
  return std::nullopt;
}

// ordorun: --bin-dir, this executable's folder and its siblings, the build tree's
// tools/ordorun (drivers sit in <build>/apps/<driver>/), then PATH.
inline std::optional<std::filesystem::path> find_ordorun(const std::string& bin_dir) {
  namespace fs = std::filesystem;
  if (auto p = find_binary("ordorun", bin_dir)) return p;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path p = self.parent_path().parent_path().parent_path() / "tools" / "ordorun" / "ordorun";
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return p;
  }
  return find_in_path("ordorun");
}

// Open MPI settings for a benchmark on one host: shared memory (vader) between ranks, the
// runtime's own wire on loopback, running as root allowed (containers), more ranks than cores
// allowed, no core binding (the other systems are measured the same way), and ranks that
// yield the core while they wait instead of busy-polling: Open MPI does that by itself when it
// sees more ranks than cores, but on a machine shared with other work it does not see that,
// and a polling rank then loses its partner's time slices (docs/baselines.md). A value the
// user exported already wins.
inline void set_mpi_environment() {
  const char* vars[][2] = {
      {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
      {"OMPI_MCA_pml", "ob1"},
      {"OMPI_MCA_btl", "self,vader"},
      {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
      {"OMPI_MCA_oob_tcp_if_include", "lo"},
      {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
      {"OMPI_MCA_hwloc_base_binding_policy", "none"},
      {"OMPI_MCA_mpi_yield_when_idle", "1"},
  };
  for (auto& v : vars) setenv(v[0], v[1], 0);
}

}  // namespace ordo::bench
