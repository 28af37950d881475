#!/usr/bin/env bash
# signal_storm.sh RUN_FUZZ TARGET CORPUS WORK SECONDS
# Runs RUN_FUZZ (run_fuzz.sh) on the other arguments while sending the fuzzer a SIGALRM every
# few milliseconds. libFuzzer's -timeout timer sends one every few seconds, handled without
# SA_RESTART, so a harness that takes a blocking call's EINTR for a failure crashes now and
# then (fuzz_store's connect did, about one run of 12 s in 7); under the storm, within a second.
# Exit: run_fuzz.sh's, or 1 when no signal could be sent.
set -uo pipefail
run_fuzz=$1 target=$(readlink -f "$2")
shift
"$run_fuzz" "$@" &
runner=$!
fuzzer=
while kill -0 "$runner" 2>/dev/null; do
  if [ -z "$fuzzer" ]; then
    # run_fuzz.sh's child once it is the target and libFuzzer catches SIGALRM (bit 14 of
    # SigCgt): a signal before that would end it as an uncaught one, or hit the script.
    for p in $(pgrep -P "$runner"); do
      [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$target" ] || continue
      caught=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
      [ -n "$caught" ] && (( (16#$caught >> 13) & 1 )) && fuzzer=$p
    done
  fi
  [ -n "$fuzzer" ] && kill -ALRM "$fuzzer" 2>/dev/null
  sleep 0.002
done
wait "$runner"
status=$?
# A storm that never started tested nothing: say so rather than pass.
if [ -z "$fuzzer" ]; then
  echo "signal_storm.sh: never saw $(basename "$target") catching SIGALRM; no signal was sent" >&2
  exit 1
fi
exit "$status"
