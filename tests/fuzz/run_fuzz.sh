#!/usr/bin/env bash
# run_fuzz.sh TARGET CORPUS WORK SECONDS
# Fuzzes TARGET (a libFuzzer binary) for SECONDS, starting from the checked-in CORPUS, which it
# never modifies: new inputs go to WORK/corpus, emptied first, a crash to WORK/crash-* (its path
# is printed; add the input to CORPUS once the bug is fixed). Exit 0 when nothing was found, 1 for any
# finding: never 77, which meson counts as a skipped test, and which is libFuzzer's default
# exit status for a crash, a deadly signal, a leak or a fuzz target that exits.
set -uo pipefail
target=$1 corpus=$2 work=$3 seconds=$4
# libFuzzer runs every input of its corpora before it fuzzes, and -max_total_time does not
# bound that: a scratch corpus kept from earlier runs grew with each run in a worktree until
# replaying it took most of the budget and more (fuzz_remote_lock: 669 inputs, 47 s of 12).
rm -rf "$work/corpus" && mkdir -p "$work/corpus" || exit 1
# -rss_limit_mb and -malloc_limit_mb: an input must not make the target allocate what it claims
# (those end with libFuzzer's out-of-memory status, 71). -error_exitcode and -timeout_exitcode:
# crashes, sanitizer reports, leaks and hangs end with 1. UBSan only prints a report and goes
# on unless told to halt; halted, its report is a crash like the others.
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
  "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=512 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$corpus"
status=$?
# Whatever ended the run otherwise (a signal libFuzzer does not handle, its interrupt status
# 72, an option it refused), a non-zero status is a failure, and 77 is never passed on.
if [ "$status" -ne 0 ]; then
  echo "run_fuzz.sh: $(basename "$target") failed with exit status $status (inputs that" \
    "failed, if any: $work/{crash,leak,timeout,oom}-*)" >&2
  exit 1
fi
