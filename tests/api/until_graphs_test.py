#!/usr/bin/env python3
"""run_until on random graphs against a sequential loop that tests after every iteration.

  until_graphs_test.py ORDORUN UNTIL_GRAPHS [--quick]
      runs UNTIL_GRAPHS alone on 1-4 workers and under `ordorun -n R` for R = 2, 3 on 1 and 2
      workers, over UCX shared memory (locations shared) and TCP on loopback (copied), each
      with and without checkpoints (a run cut after a checkpoint and restarted from it). Every
      process checks itself against the sequential loop (stop iteration, the values at every
      check, every home location's bits; its line says sequential=same, exit 0), and every
      rank of every run must print the same line: the seeds' digest does not depend on the
      worker or rank count.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env)

LINE = re.compile(r"^(?:\[(\d+)\] )?(seeds=.*)$")
SEEDS = "40"


def check(what, p, ranks, want):
    if p.returncode != 0:
        mp.fail("%s: exit %d\nstdout:\n%s\nstderr:\n%s" % (what, p.returncode, p.stdout, p.stderr))
    lines = {}
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if m:
            lines[int(m.group(1) or 0)] = m.group(2)
    if sorted(lines) != list(range(ranks)):
        mp.fail("%s: expected a line from each of %d rank(s), got %s" % (what, ranks, sorted(lines)))
    for rank, line in lines.items():
        if "sequential=same" not in line:
            mp.fail("%s: rank %d: %s" % (what, rank, line))
        if want and line != want[0]:
            mp.fail("%s: rank %d printed\n  %s\nwhere the first run printed\n  %s"
                    % (what, rank, line, want[0]))
        if not want:
            want.append(line)
    print("%s: %s" % (what, lines[0]))


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    want = []
    with tempfile.TemporaryDirectory() as tmp:
        for ckpt in (False, True):
            extra = ["--checkpoint", os.path.join(tmp, "ckpt")] if ckpt else []
            tag = ", checkpoint and restart" if ckpt else ""
            for workers in (1, 2, 3, 4):
                p, _ = mp.run([binary, "--seeds", SEEDS, "--workers", str(workers)] + extra,
                              env=dict(os.environ), timeout=240)
                check("1 process x %d worker(s)%s" % (workers, tag), p, 1, want)
            for ranks in (2, 3):
                for tls in ("shm,self", "tcp,self"):
                    for workers in (1, 2):
                        what = "%d ranks x %d worker(s) over %s%s" % (
                            ranks, workers, tls.split(",")[0], tag)
                        p, _ = mp.run([ordorun, "--timeout", "200", "-n", str(ranks), binary,
                                       "--seeds", SEEDS, "--workers", str(workers)] + extra,
                                      env=mp.ucx_env(tls), timeout=240)
                        check(what, p, ranks, want)


if __name__ == "__main__":
    main()
