// The flags the iterative apps (ordo-cg, ordo-spcg, ordo-pagerank, ordo-lbm) share: --iters,
// --tol, --workers, --verify, --output and --trace, declared once so that their checks (strict
// ranges, an empty path refused) and words stay the same in every app. Each app says in its own
// words what --iters, --tol, --verify and --output mean for it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "app_cli.hpp"
#include "cli_number.hpp"

namespace ordo::app {

// Where the parsed values go.
struct RunFlags {
  std::uint64_t& iters;
  double& tol;
  unsigned& workers;
  bool& verify;
  std::string& output;
  std::string& trace_path;
};

// What --iters, --tol, --verify and --output mean in the app's words. Without `iters` the app
// declares --iters and --tol itself (ordo-lbm shares its model flags with its OpenMP baseline).
struct RunFlagWords {
  const char* iters;
  const char* tol;
  const char* verify;
  const char* output;
};

inline void add_run_flags(CLI::App& cli, const RunFlags& f, const RunFlagWords& words) {
  if (words.iters) {
    cli.add_option("--iters", f.iters, words.iters)
        ->check(ordo::cli::Integer(1, max_iters))
        ->capture_default_str();
    cli.add_option("--tol", f.tol, words.tol)->check(ordo::cli::Real(0, 1))->capture_default_str();
  }
  cli.add_option("--workers", f.workers,
                 "worker threads (default: one per core of this process's share of the host, "
                 "docs/scheduler.md)")
      ->check(ordo::cli::Integer(1, max_workers));
  cli.add_flag("--verify", f.verify, words.verify);
  cli.add_option("--output", f.output, words.output)->check(ordo::cli::Path());
  cli.add_option("--trace", f.trace_path,
                 "record a trace of the run to FILE (read it with ordo-trace; docs/tracing.md)")
      ->check(ordo::cli::Path())
      ->type_name("FILE");
}

}  // namespace ordo::app
