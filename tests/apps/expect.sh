#!/usr/bin/env bash
# expect.sh STATUS [-F] [--once] PATTERN... -- COMMAND [ARG...]
# Runs COMMAND and passes when it exits with STATUS and its output (stdout and stderr together)
# matches every PATTERN: an extended regular expression, or a fixed string with -F. A PATTERN
# after --once must match exactly one line (a message that one process of several prints,
# where each printing it would pass the plain check too). -F and --once may stand anywhere
# before `--`; -F applies to every PATTERN. The output is printed, so that a failing test's
# log shows it. Every test that checks a program's exit status and messages (apps, baselines,
# benchmarks, ordorun) goes through this one script.
set -u
usage() { echo "expect.sh: usage: expect.sh STATUS [-F] [--once] PATTERN... -- COMMAND..."; exit 2; }
[ $# -gt 0 ] || usage
want=$1
shift
grep_mode=-E
patterns=()
once=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    -F) grep_mode=-F ;;
    --once)
      shift
      [ $# -gt 0 ] && [ "$1" != "--" ] || usage
      once+=("$1")
      patterns+=("$1")
      ;;
    *) patterns+=("$1") ;;
  esac
  shift
done
[ $# -gt 1 ] || usage
shift
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
if [ "$status" -ne "$want" ]; then
  printf 'expect.sh: exit status %s, expected %s, from: %s\n' "$status" "$want" "$*"
  exit 1
fi
for p in "${patterns[@]}"; do
  if ! grep -q "$grep_mode" -- "$p" <<<"$out"; then
    printf 'expect.sh: the output of %s lacks %s\n' "$*" "'$p'"
    exit 1
  fi
done
for p in "${once[@]}"; do
  n=$(grep -c "$grep_mode" -- "$p" <<<"$out")
  if [ "$n" -ne 1 ]; then
    printf 'expect.sh: the output of %s has %s lines with %s, expected one\n' "$*" "$n" "'$p'"
    exit 1
  fi
done
exit 0
