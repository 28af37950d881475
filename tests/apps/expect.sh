#!/usr/bin/env bash
# expect.sh STATUS REGEX -- COMMAND ARGS...
# Runs COMMAND, and fails unless it exits with STATUS and its output (stdout and stderr
# together) matches the extended REGEX. Prints the output on failure.
set -u
want_status=$1 regex=$2
shift 2
[ "$1" = "--" ] && shift
out=$("$@" 2>&1)
status=$?
if [ "$status" -ne "$want_status" ]; then
  printf 'expected exit %s, got %s from: %s\n%s\n' "$want_status" "$status" "$*" "$out"
  exit 1
fi
if ! grep -Eq -- "$regex" <<<"$out"; then
  printf 'output of %s does not match /%s/:\n%s\n' "$*" "$regex" "$out"
  exit 1
fi
exit 0
