#!/usr/bin/env python3
"""ordo-bench-scale reads its jobs (stdlib only).

  bench_scale_test.py BENCH ORDORUN HEAT2D
      Runs BENCH --ranks 2,4 --reps 2 --iters 2 --bin-dir D, where D holds HEAT2D and, as
      `ordorun`, a wrapper that logs each job's ORDO_VERBOSE, its arguments and its output,
      then runs ORDORUN. Each rank count's line must give the most bytes ordorun's own
      --verbose line says it sent one rank, and addresses_per_rank as the ranks' endpoint
      lines say, the most one rank holds (2 ranks: 1, each the other's; 4 ranks, a row of
      blocks each: 3, rank 2's tree parent 0 and child 3 and its other graph neighbour 1); and
      one job per rank count may run verbose (ordorun --verbose, ORDO_VERBOSE=1): the
      timed ones (--reps per count) run without it, so they do not pay for its output.
      control_messages_per_rank_per_run must be the median of rank 0's control_messages in
      the timed jobs. Then, on 2 ranks, the wrapper drops the ranks' endpoint lines, or
      ordorun's store line, from what the jobs print: the rank count must be reported as
      failed (no_store_or_address_line, exit 1), never printed with a made-up number.
"""
import os
import re
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env)

fail, run = mp.fail, mp.run

WRAPPER = """#!/bin/sh
# A job of ordo-bench-scale: what it asked for, then ordorun's output.
out=$(mktemp "{log}.out.XXXXXX")
{real} "$@" >"$out" 2>&1
status=$?
# The test's own fault injection: lines that a job does not print.
if [ -n "${{DROP_LINES-}}" ]; then
  grep -v -E -- "$DROP_LINES" "$out" >"$out.kept"
  mv "$out.kept" "$out"
fi
{{ printf 'job ORDO_VERBOSE=%s args=%s\\n' "${{ORDO_VERBOSE-unset}}" "$*"; cat "$out"; }} >>{log}
cat "$out"
rm -f "$out"
exit $status
"""


def main():
    bench, ordorun, heat2d = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="ordo-bench-scale-test-") as bin_dir:
        log = os.path.join(bin_dir, "jobs.log")
        wrapper = os.path.join(bin_dir, "ordorun")
        with open(wrapper, "w") as f:
            f.write(WRAPPER.format(real=shlex.quote(os.path.abspath(ordorun)),
                                   log=shlex.quote(log)))
        os.chmod(wrapper, 0o755)
        os.symlink(os.path.abspath(heat2d), os.path.join(bin_dir, "ordo-heat2d"))
        env = mp.ucx_env("tcp,self")
        env.pop("ORDO_VERBOSE", None)
        p, _ = run([bench, "--ranks", "2,4", "--reps", "2", "--iters", "2", "--bin-dir", bin_dir],
                   env=env, timeout=300)
        if p.returncode != 0:
            fail("ordo-bench-scale exited %d" % p.returncode)
        with open(log) as f:
            jobs = re.split(r"(?m)^(?=job )", f.read())[1:]
        for drop in (r"ordo: endpoints: ", r"store: sent "):
            lost, _ = run([bench, "--ranks", "2", "--reps", "1", "--iters", "2", "--bin-dir",
                           bin_dir], env=dict(env, DROP_LINES=drop), timeout=300)
            if lost.returncode != 1 or not re.search(
                    r"(?m)^ranks=2 failed no_store_or_address_line$", lost.stdout):
                fail("without the lines %r, ordo-bench-scale exited %d and printed\n%s\n"
                     "(want exit 1 and 'ranks=2 failed no_store_or_address_line')" %
                     (drop, lost.returncode, lost.stdout))
            print("without the lines %r: ranks=2 failed no_store_or_address_line" % drop)
    print("".join(jobs))
    for n, want_held in ((2, 1), (4, 3)):
        mine = [j for j in jobs if re.search(r" -n %d " % n, j.splitlines()[0])]
        verbose = [j for j in mine if "ORDO_VERBOSE=1" in j.splitlines()[0]]
        quiet = [j for j in mine if j.startswith("job ORDO_VERBOSE=unset ")]
        if len(verbose) != 1 or len(quiet) != 2 or len(mine) != 3:
            fail("%d ranks: %d job(s), %d verbose and %d without ORDO_VERBOSE; want one verbose "
                 "and the 2 timed ones without" % (n, len(mine), len(verbose), len(quiet)))
        if any(" --verbose " in j.splitlines()[0] for j in quiet):
            fail("%d ranks: a timed job ran ordorun --verbose" % n)
        sent = re.search(r"at most (\d+) to one rank", verbose[0])
        held = [int(h) for h in re.findall(r"it holds (\d+) rank address", verbose[0])]
        if not sent or len(held) != n:
            fail("%d ranks: the verbose job lacks ordorun's store line or a rank's endpoints "
                 "line" % n)
        if max(held) != want_held:
            fail("%d ranks: the ranks hold %s addresses, expected at most %d" % (n, held, want_held))
        line = re.search(r"(?m)^ranks=%d .*$" % n, p.stdout)
        if not line:
            fail("no line for %d ranks" % n)
        # Rank 0's line of each timed job (ordorun prefixes each line with its rank).
        messages = sorted(int(re.search(r"(?m)^\[0\] app=heat2d .* control_messages=(\d+)",
                                        j).group(1)) for j in quiet)
        median = "%.0f" % ((messages[0] + messages[1]) / 2)
        for key, want in (("store_bytes_per_rank", sent.group(1)),
                          ("addresses_per_rank", str(want_held)),
                          ("control_messages_per_rank_per_run", median)):
            got = re.search(r" %s=(-?\d+)" % key, line.group(0))
            if not got or got.group(1) != want:
                fail("%d ranks: %s is %s, ordorun and the ranks say %s" %
                     (n, key, got.group(1) if got else "missing", want))
        print("%d ranks: one verbose job, 2 timed without; store_bytes_per_rank=%s "
              "addresses_per_rank=%d control_messages_per_rank_per_run=%s as the jobs said" %
              (n, sent.group(1), want_held, median))


if __name__ == "__main__":
    main()
