#!/usr/bin/env python3
"""Reductions across ranks (multiprocess suite): the same bits everywhere.

  reduce_ranks_test.py ORDORUN REDUCE_RANKS
      runs REDUCE_RANKS under `ordorun -n R` for R = 1, 2, 3 and --workers 1, 2, 4, over UCX
      shared memory (ORDO_SHARED_MEMORY=1) and TCP on loopback (=0, locations copied as between
      hosts), with the default placement and, on 2 and 3 ranks, a scattered one. Each rank
      checks itself against the sequential computation (its line says sequential=same, exit 0);
      every rank of every run must print the same line: the same stop iteration of run_until
      and the same bits of every reduced value.
      Then --throwing-operator on 1, 2 and 3 ranks (shared memory and TCP): a reduction whose
      operator throws in iteration 2 ends the job with exit 2 and the operator's message, on
      the rank that ran it and as the cause on the others; no rank hangs.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env)

LINE = re.compile(r"^\[(\d+)\] (iterations=.*)$")


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    want = None
    for ranks in (1, 2, 3):
        for tls in (("shm,self",) if ranks == 1 else ("shm,self", "tcp,self")):
            for workers in (1, 2, 4):
                for scatter in ((False,) if ranks == 1 else (False, True)):
                    what = "%d rank(s) x %d worker(s) over %s%s" % (
                        ranks, workers, tls.split(",")[0], ", scattered" if scatter else "")
                    cmd = [ordorun, "--timeout", "60", "-n", str(ranks), binary,
                           "--workers", str(workers)] + (["--scatter"] if scatter else [])
                    p, _ = mp.run(cmd, env=mp.ucx_env(tls))
                    if p.returncode != 0:
                        mp.fail("%s: exit %d" % (what, p.returncode))
                    lines = {}
                    for line in p.stdout.splitlines():
                        m = LINE.match(line)
                        if m:
                            lines[int(m.group(1))] = m.group(2)
                    if sorted(lines) != list(range(ranks)):
                        mp.fail("%s: expected a line from each of %d rank(s), got %s" % (
                            what, ranks, sorted(lines)))
                    for rank, line in lines.items():
                        if "sequential=same" not in line:
                            mp.fail("%s: rank %d: %s" % (what, rank, line))
                        if want is None:
                            want = line
                        elif line != want:
                            mp.fail("%s: rank %d printed\n  %s\nwhere the first run printed\n  %s"
                                    % (what, rank, line, want))
    print("every rank of every run: " + want)

    said = "the operator of reduction 'fragile' threw: seven is not allowed"
    for ranks in (1, 2, 3):
        for tls in ("shm,self", "tcp,self"):
            what = "--throwing-operator on %d rank(s) over %s" % (ranks, tls.split(",")[0])
            p, _ = mp.run([ordorun, "--timeout", "60", "-n", str(ranks), binary, "--workers", "2",
                           "--throwing-operator"], env=mp.ucx_env(tls))
            if p.returncode != 2:
                mp.fail("%s: expected exit 2, got %d" % (what, p.returncode))
            if not re.search(r"^\[\d+\] reduce_ranks: (rank \d+ failed: )?" + re.escape(said),
                             p.stderr, re.M):
                mp.fail("%s: no rank names the operator's exception" % what)
            print("%s: exit 2, the operator's exception reported" % what)


if __name__ == "__main__":
    main()
