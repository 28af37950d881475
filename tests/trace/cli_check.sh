#!/usr/bin/env bash
# ordo-trace on the command line: heat2d writes a trace with --trace FILE and with ORDO_TRACE,
# no file without either, the three subcommands succeed on it, and truncated, corrupt and
# newer-version files exit 2 with a message saying what is wrong.
# Usage: cli_check.sh ORDO_TRACE_EXE HEAT2D_EXE
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
grep -q "step\[1,1\]" "$dir/summary.txt" || fail "summary does not list the tasks"
grep -q "critical path" "$dir/summary.txt" || fail "summary has no critical path"
"$tool" summary --json "$dir/flag.trace" >"$dir/summary.json"
grep -q '"iterations": 5' "$dir/summary.json" || fail "summary --json: wrong iteration count"
"$tool" export --format perfetto -o "$dir/out.json" "$dir/flag.trace"
grep -q '"traceEvents"' "$dir/out.json" || fail "export wrote no traceEvents"
"$tool" html -o "$dir/out.html" "$dir/flag.trace"
grep -q "timeline" "$dir/out.html" || fail "html wrote no timeline"
if grep -Eq '(src|href)="(https?:)?//' "$dir/out.html"; then fail "html refers to the network"; fi

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
expect_2 "bad flag" "error" export --format svg -o "$dir/x" "$dir/flag.trace"
echo "cli: all checks passed"
