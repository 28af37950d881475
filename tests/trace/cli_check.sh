#!/usr/bin/env bash
# ordo-trace on the command line: heat2d writes a trace with --trace FILE and with ORDO_TRACE,
# no file without either, the three subcommands succeed on it, and truncated, corrupt and
# newer-version files exit 2 with a message saying what is wrong. With ORDORUN_EXE: a
# two-rank heat2d writes FILE.rank0 and FILE.rank1, which ordo-trace reads by the base path.
# Usage: cli_check.sh ORDO_TRACE_EXE HEAT2D_EXE [ORDORUN_EXE]
set -euo pipefail
tool=$(realpath "$1")
heat=$(realpath "$2")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

run_heat() { "$heat" --size 128x128 --blocks 2x2 --iters 5 --workers 2 --verify "$@"; }

run_heat --trace "$dir/flag.trace" >/dev/null
[ -s "$dir/flag.trace" ] || fail "--trace wrote no file"
ORDO_TRACE="$dir/env.trace" run_heat >/dev/null
[ -s "$dir/env.trace" ] || fail "ORDO_TRACE wrote no file"
(cd "$dir" && run_heat >/dev/null)
[ "$(ls "$dir")" = "$(printf 'env.trace\nflag.trace')" ] || fail "an untraced run wrote a file"

"$tool" summary "$dir/flag.trace" >"$dir/summary.txt"
# heat2d is a stencil-layer app: its tasks are u.compute[b] per block b, u.halo[a>b] per pair
# of neighbours on one rank and u.export[b] per block with a neighbour on another rank.
grep -q "u.compute\[3\]" "$dir/summary.txt" || fail "summary does not list the tasks"
grep -q "critical path" "$dir/summary.txt" || fail "summary has no critical path"
"$tool" summary --json "$dir/flag.trace" >"$dir/summary.json"
grep -q '"iterations": 5' "$dir/summary.json" || fail "summary --json: wrong iteration count"
"$tool" export --format perfetto -o "$dir/out.json" "$dir/flag.trace"
grep -q '"traceEvents"' "$dir/out.json" || fail "export wrote no traceEvents"
"$tool" html -o "$dir/out.html" "$dir/flag.trace"
grep -q "id=\"lanes\"" "$dir/out.html" || fail "html wrote no timeline lanes"
if grep -Eq '(src|href)="(https?:)?//' "$dir/out.html"; then fail "html refers to the network"; fi
"$tool" summary --help | grep -q "lock-wait .*could" || fail "summary --help does not explain lock-wait"
"$tool" summary --help | grep -q "critical path .*ended last" || fail "summary --help does not explain the critical path"
# compare: heat2d on 2x2 and on 4x4 blocks, 5 iterations: 20 and 80 u.compute instances.
"$heat" --size 128x128 --blocks 4x4 --iters 5 --workers 2 --trace "$dir/blocks4.trace" >/dev/null
"$tool" compare "$dir/flag.trace" "$dir/blocks4.trace" >"$dir/compare.txt"
grep -Eq "^u.compute +20 +80 " "$dir/compare.txt" || fail "compare: no row for the u.compute kind: $(cat "$dir/compare.txt")"
"$tool" compare --json "$dir/flag.trace" "$dir/blocks4.trace" >"$dir/compare.json"
grep -q '"kinds"' "$dir/compare.json" || fail "compare --json"

# expect_2 NAME MESSAGE-PATTERN ARGS...: ordo-trace exits 2 and says MESSAGE-PATTERN.
expect_2() {
  local name=$1 pattern=$2
  shift 2
  set +e
  "$tool" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$name: exit $rc, expected 2 ($(cat "$dir/err"))"
  grep -q "$pattern" "$dir/err" || fail "$name: message '$(cat "$dir/err")' lacks '$pattern'"
  echo "ok: $name: $(cat "$dir/err")"
}

size=$(stat -c %s "$dir/flag.trace")
head -c $((size / 2)) "$dir/flag.trace" >"$dir/half.trace"
head -c 40 "$dir/flag.trace" >"$dir/head.trace"
cp "$dir/flag.trace" "$dir/magic.trace"
printf 'XXXX' | dd of="$dir/magic.trace" bs=1 seek=0 conv=notrunc status=none
cp "$dir/flag.trace" "$dir/newer.trace"
printf '\x07' | dd of="$dir/newer.trace" bs=1 seek=8 conv=notrunc status=none
cp "$dir/flag.trace" "$dir/record.trace"
printf '\x2a' | dd of="$dir/record.trace" bs=1 seek=64 conv=notrunc status=none

for sub in summary "export --format perfetto -o $dir/x.json" "html -o $dir/x.html"; do
  # shellcheck disable=SC2086
  expect_2 "$sub half" "truncated" $sub "$dir/half.trace"
done
expect_2 "short header" "truncated" summary "$dir/head.trace"
expect_2 "magic" "not an ordo trace" summary "$dir/magic.trace"
expect_2 "newer" "version 7 is newer" summary "$dir/newer.trace"
expect_2 "record type" "corrupt record" summary "$dir/record.trace"
expect_2 "missing" "no such trace file" summary "$dir/absent.trace"
# A header that claims 10^7 ranks: refused as missing ranks within 200 MB of address space
# (sizing the merged trace by it once took 1.3 GB).
cp "$dir/flag.trace" "$dir/ranks7.trace"
printf '\x80\x96\x98\x00' | dd of="$dir/ranks7.trace" bs=1 seek=24 conv=notrunc status=none
( ulimit -v 200000; expect_2 "10^7 ranks" "rank 1 of 10000000 is missing" summary "$dir/ranks7.trace" )
expect_2 "bad flag" "error" export --format svg -o "$dir/x" "$dir/flag.trace"
# `perfetto` is the export under the name people ask for: the same file, byte for byte.
"$tool" perfetto -o "$dir/alias.json" "$dir/flag.trace"
cmp -s "$dir/out.json" "$dir/alias.json" || fail "ordo-trace perfetto wrote other than export --format perfetto"
# No subcommand, or an unknown one: the message lists what there is.
expect_2 "no subcommand" "say what to do: summary, compare, export (or perfetto) or html"
expect_2 "unknown subcommand" "no subcommand 'view'; say what to do" view "$dir/flag.trace"
# A write that fails part-way (here the file-size limit, as a full disk would) leaves the
# previous output as it was and no temporary file beside it.
printf 'previous result\n' >"$dir/kept.html"
( trap '' XFSZ; ulimit -f 8; expect_2 "write fails" "cannot write" html -o "$dir/kept.html" "$dir/flag.trace" )
[ "$(cat "$dir/kept.html")" = "previous result" ] || fail "a failed html write damaged the previous output"
[ -z "$(find "$dir" -name 'kept.html.tmp.*')" ] || fail "a failed html write left its temporary file"
expect_2 "compare one trace" "2 required" compare "$dir/flag.trace"
# A run killed while it records (SIGKILL; buffers of 64 events, so it writes all along) leaves
# the previous trace byte for byte, and one without a previous trace leaves no file: never a
# partial trace at the path (once, the file was truncated at the start and written in place).
killed_while_recording() {
  ORDO_TRACE_BUFFER=64 "$heat" --size 128x128 --blocks 2x2 --iters 1000000000 --workers 2 \
    --trace "$1" >/dev/null &
  local pid=$! written=0
  # Until it has written 256 KiB (its I/O counter), for at most 60 s.
  for _ in $(seq 600); do
    written=$(awk '/^wchar:/ { print $2 }' "/proc/$pid/io" 2>/dev/null || echo 0)
    [ "${written:-0}" -gt 262144 ] && break
    sleep 0.1
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  [ "${written:-0}" -gt 262144 ] || fail "the traced run did not write 256 KiB within 60 s"
}
cp "$dir/flag.trace" "$dir/kept.trace"
killed_while_recording "$dir/kept.trace"
cmp -s "$dir/flag.trace" "$dir/kept.trace" || fail "a run killed while recording changed the previous trace"
killed_while_recording "$dir/new.trace"
[ ! -e "$dir/new.trace" ] || fail "a run killed while recording left a trace at its path"
# What it leaves instead: its temporary beside the path, which nothing reads.
[ -n "$(find "$dir" -name 'new.trace.tmp-*')" ] || fail "the killed run left no temporary"
# A write that fails (the file-size limit, as a full disk would): the previous trace stays, the
# temporary goes, and the run says so.
printf 'previous trace\n' >"$dir/limited.trace"
( trap '' XFSZ; ulimit -f 4; run_heat --trace "$dir/limited.trace" >/dev/null 2>"$dir/limited.err" ) || true
[ "$(cat "$dir/limited.trace")" = "previous trace" ] || fail "a failed trace write damaged the previous trace"
[ -z "$(find "$dir" -name 'limited.trace.tmp-*')" ] || fail "a failed trace write left its temporary"
grep -q "the trace was not written to '$dir/limited.trace'" "$dir/limited.err" ||
  fail "a failed trace write was not reported: $(cat "$dir/limited.err")"
if [ $# -ge 3 ]; then
  ordorun=$(realpath "$3")
  # Locations copied (as between hosts), so that the halos' bytes are on the wire.
  UCX_TLS=shm,self UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n ORDO_SHARED_MEMORY=0 \
    "$ordorun" --timeout 60 -n 2 "$heat" --size 64x64 --blocks 2x2 --iters 3 --workers 1 \
    --trace "$dir/ranks.trace" >/dev/null
  [ -s "$dir/ranks.trace.rank0" ] && [ -s "$dir/ranks.trace.rank1" ] ||
    fail "a two-rank run did not write ranks.trace.rank0 and .rank1"
  [ ! -e "$dir/ranks.trace" ] || fail "a two-rank run wrote the base path itself"
  "$tool" summary "$dir/ranks.trace" >"$dir/ranks.txt"
  grep -q "^ranks 2 " "$dir/ranks.txt" || fail "the two-rank summary does not show 2 ranks"
  # Halo traffic is traced on both ends: each direction moves bytes, exactly the graph's
  # minimum (one copy per process), and after clock alignment no receive precedes its send.
  for dir_ in "0 -> 1" "1 -> 0"; do
    line=$(grep "  $dir_: " "$dir/ranks.txt") || fail "no traffic $dir_ in the two-rank summary"
    bytes=$(sed -n 's/.*: \([0-9]*\) bytes in .*/\1/p' <<<"$line")
    minimum=$(sed -n 's/.*minimum \([0-9]*\).*/\1/p' <<<"$line")
    [ -n "$bytes" ] && [ "$bytes" -gt 0 ] && [ "$bytes" = "$minimum" ] ||
      fail "traffic $dir_ is not the minimum: $line"
  done
  # Shared between the two ranks (the default on one host): the same messages, no bytes.
  UCX_TLS=shm,self UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n ORDO_SHARED_MEMORY=1 \
    "$ordorun" --timeout 60 -n 2 "$heat" --size 64x64 --blocks 2x2 --iters 3 --workers 1 \
    --trace "$dir/shared.trace" >/dev/null
  "$tool" summary "$dir/shared.trace" >"$dir/shared.txt"
  for dir_ in "0 -> 1" "1 -> 0"; do
    grep -Eq "  $dir_: 0 bytes in [1-9][0-9]* messages, minimum [1-9][0-9]* if copied \(the ranks share" \
      "$dir/shared.txt" || fail "shared run: traffic $dir_ is not messages without bytes: $(grep "  $dir_: " "$dir/shared.txt")"
  done
  # Every message finds its other end, those of the gather graphs too, which number their
  # tags alike.
  ! grep -q "without their other end" "$dir/ranks.txt" ||
    fail "unmatched messages in the two-rank trace: $(grep "without their other end" "$dir/ranks.txt")"
  ! grep -qi "before it was sent\|arrive.* before" "$dir/ranks.txt" ||
    fail "a receive precedes its send in the two-rank trace"
  # Every grant is traced across ranks too (those a remote release causes included): as many
  # as the graph makes. The stencil layer's graph depends on the placement (docs/stencil.md):
  # u.compute[b] writes u[b] and reads the exports u.x[..] of other ranks' blocks,
  # u.export[b] reads u[b] and writes its exports, u.halo[a>b] reads u[a] and writes u[b]
  # (one rank's neighbours). A location is granted once per access per iteration, its first
  # grant before the traced runs: iterations x accesses - locations. The one-rank run checks
  # the rule (no export there). (Across ranks the app also runs small gather graphs to agree
  # on its verdict, docs/distributed.md; their ordo.* tasks and locations are left out.)
  "$heat" --size 64x64 --blocks 2x2 --iters 3 --workers 1 --trace "$dir/one.trace" >/dev/null
  "$tool" summary "$dir/one.trace" >"$dir/one.txt"
  grants() { awk '/^locations/ { f = 1; next } f && NF == 0 { f = 0 } f && $1 !~ /^ordo[.]/ && $2 ~ /^[0-9]+$/ { g += $2 } END { print g + 0 }' "$1"; }
  graph_grants() {
    awk '/^ranks .* iterations/ { for (i = 1; i < NF; ++i) if ($i == "iterations") it = $(i + 1) }
         /^tasks/ { t = 1; next } /^locations/ { t = 0; l = 1; next } NF == 0 { t = 0; l = 0 }
         t && $1 ~ /^u[.](compute|export)\[/ { a += 1 }
         t && $1 ~ /^u[.]halo\[/ { split(substr($1, 8), p, "[]>]"); a += p[1] == p[2] ? 1 : 2 }
         l && $1 ~ /^u[.]x\[/ { a += 2 }
         l && $1 ~ /^u[.[]/ { n += 1 }
         END { print it * a - n }' "$1"
  }
  for run in one ranks; do
    [ "$(grants "$dir/$run.txt")" = "$(graph_grants "$dir/$run.txt")" ] && [ "$(grants "$dir/$run.txt")" -gt 0 ] ||
      fail "the $run trace has $(grants "$dir/$run.txt") grants, its graph makes $(graph_grants "$dir/$run.txt")"
  done
  "$tool" export --format perfetto -o "$dir/ranks.json" "$dir/ranks.trace"
  grep -q '"rank 1"' "$dir/ranks.json" || fail "the two-rank export has no rank 1 process"
  expect_2 "missing rank" "rank 0 of 2 is missing" summary "$dir/ranks.trace.rank1"
  # Rank files of two runs (ranks.trace and shared.trace) are refused, both named.
  expect_2 "two runs" "$dir/shared.trace.rank1 and $dir/ranks.trace.rank0 are from different runs" \
    summary "$dir/ranks.trace.rank0" "$dir/shared.trace.rank1"
  expect_2 "other size" "$dir/ranks.trace.rank1: belongs to a run of 2 ranks, $dir/flag.trace to one of 1" \
    summary "$dir/flag.trace" "$dir/ranks.trace.rank1"
fi
echo "cli: all checks passed"
