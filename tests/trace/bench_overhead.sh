#!/usr/bin/env bash
# Benchmark (meson benchmark, not a test): the cost of tracing on heat2d with tasks of 100 us
# or more. Runs the same problem with tracing off and on, alternating, REPS times each, in this
# one invocation, and prints the ratio of the best times:
#   bench=trace app=heat2d ... task_us=T off_s=A on_s=B overhead=R
# R = B / A - 1 (target: at most 0.03). task_us is the mean step-task time read back from the
# trace with ordo-trace, to show the tasks are in the target's range.
# Usage: bench_overhead.sh HEAT2D_EXE ORDO_TRACE_EXE [REPS]
set -euo pipefail
heat=$1
tool=$2
reps=${3:-7}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
workers=${ORDO_BENCH_WORKERS:-2}
args=(--size 2048x2048 --blocks 4x4 --iters 200 --workers "$workers")

seconds() { sed -n 's/.* seconds=\([0-9.]*\) .*/\1/p'; }
best_off=""; best_on=""
for ((i = 0; i < reps; i++)); do
  off=$(env -u ORDO_TRACE "$heat" "${args[@]}" | seconds)
  on=$("$heat" "${args[@]}" --trace "$dir/heat.trace" | seconds)
  best_off=$(awk -v a="$off" -v b="$best_off" 'BEGIN { print (b == "" || a < b) ? a : b }')
  best_on=$(awk -v a="$on" -v b="$best_on" 'BEGIN { print (b == "" || a < b) ? a : b }')
done
task_us=$("$tool" summary "$dir/heat.trace" | awk '
  $1 ~ /^step\[/ { sum += $4; k++ } END { printf "%.1f", k ? sum / k : 0 }')
overhead=$(awk -v a="$best_off" -v b="$best_on" 'BEGIN { printf "%.4f", b / a - 1 }')
echo "bench=trace app=heat2d size=2048x2048 blocks=4x4 iters=200 workers=$workers reps=$reps" \
     "task_us=$task_us off_s=$best_off on_s=$best_on overhead=$overhead"
