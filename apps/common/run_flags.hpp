// The flags the iterative apps (ordo-cg, ordo-spcg, ordo-pagerank, ordo-lbm) share: --iters,
// --tol, --workers, --verify, --output and --trace, declared once so that their checks (strict
// ranges, an empty path refused) and words stay the same in every app. Each app says in its own
// words what --iters, --tol, --verify and --output mean for it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include <ordo/ordo.hpp>

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

// --checkpoint DIR, --checkpoint-every N and --restart DIR (docs/checkpoint.md), as every app
// that writes checkpoints takes them; `every_words` says what an iteration is in the app.
struct CheckpointFlags {
  std::string& dir;
  std::uint64_t& every;
  std::string& restart;
};

inline void add_checkpoint_flags(CLI::App& cli, const CheckpointFlags& f, const char* every_words,
                                 std::uint64_t min_every = 1) {
  cli.add_option("--checkpoint", f.dir,
                 "write checkpoints into DIR (docs/checkpoint.md); needs --checkpoint-every")
      ->check(ordo::cli::Path())
      ->type_name("DIR");
  cli.add_option("--checkpoint-every", f.every, every_words)
      ->check(ordo::cli::Integer(min_every, max_iters));
  cli.add_option("--restart", f.restart,
                 "resume from the newest complete checkpoint in DIR, written by the same "
                 "command on any number of ranks; the result is the uninterrupted run's")
      ->check(ordo::cli::Path())
      ->type_name("DIR");
}

// After parsing: --checkpoint and --checkpoint-every go together.
inline void check_checkpoint_flags(const CheckpointFlags& f) {
  if (f.dir.empty() != (f.every == 0))
    throw ordo::Error(f.dir.empty() ? "--checkpoint-every needs --checkpoint DIR"
                                    : "--checkpoint needs --checkpoint-every N (iterations)");
}

}  // namespace ordo::app
