#!/usr/bin/env bash
# run_fuzz.sh TARGET CORPUS WORK SECONDS
# Fuzzes TARGET (a libFuzzer binary) for SECONDS, starting from the checked-in CORPUS, which it
# never modifies: new inputs go to WORK/corpus, a crash to WORK/crash-* (its path is printed;
# add the input to CORPUS once the bug is fixed). Exit 0 when nothing was found.
set -euo pipefail
target=$1 corpus=$2 work=$3 seconds=$4
mkdir -p "$work/corpus"
# -rss_limit_mb and -malloc_limit_mb: an input must not make the target allocate what it claims.
exec "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=512 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$corpus"
