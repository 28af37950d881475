#!/usr/bin/env python3
"""The edges of a job across ranks (multiprocess suite): a rank that leaves, calls with other
arguments, or fails in its run_until condition ends every rank, naming it, within a bound.

  edges_ranks_test.py ORDORUN EDGES_RANKS [CASE ...]

runs EDGES_RANKS (edges_ranks.cpp) under `ordorun -n R` for R = 2 and 3, over UCX shared
memory with the ranks sharing location memory (ORDO_SHARED_MEMORY=1) and over TCP with
locations copied (=0), for each case (all without arguments). The last rank does the odd thing
and prints when (the steady clock, which is Python's monotonic clock); the job must end within
LIMIT seconds of it (a hang, or a 32 s bootstrap timeout, fails), ordorun and every other
rank must exit 2 (3 for abort) and each of the others must say what happened, naming the last
rank, and so must ordorun (but for a mismatch, whose sides are equally to blame). LIMIT is far above the 2 s the job takes, so that a loaded machine does not fail it; it
bounds, it does not measure.
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env)

LIMIT = 10.0

# case -> (ordorun's status, what each other rank must say; {L} is the last rank)
CASES = {
    "return-in-run": (2, r"PeerFailure of rank {L}: rank {L} left the job"),
    "return-in-until": (2, r"PeerFailure of rank {L}: rank {L} left the job"),
    "return-in-gather": (2, r"PeerFailure of rank {L}: Runtime::gather of location 'x0' failed: "
                            r"rank {L} left the job"),
    "return-before-runtime": (2, r"Error: cannot connect to the other ranks: .*rank {L} \(pid "
                                 r"\d+ on host [^)]*\) exited with status 0 before it connected"),
    # Its peers' transports see the process go; ordorun names it by its status 0 without the
    # Runtime's "done" (the ranks' own words are checked by ranks_peer_killed_heat2d's kind).
    "exit-in-run": (2, r"PeerFailure of rank {L}: "),
    "mismatch-run": (2, r"GraphMismatch: ranks 0 and {L} made different collective calls "
                        r"\(rank 0: Runtime::run for 10 iteration\(s\) on graph 0; rank {L}: "
                        r"Runtime::run for 5 iteration\(s\) on graph 0\)"),
    "mismatch-until": (2, r"GraphMismatch: ranks 0 and {L} made different collective calls "
                          r"\(rank 0: Runtime::run_until for at most 9 iteration\(s\), checked "
                          r"every 1 on graph 0; rank {L}: Runtime::run_until for at most 7 "),
    "mismatch-gather": (2, r"GraphMismatch: Runtime::gather of location 'x0' failed: ranks 0 "
                           r"and {L} made different collective calls "
                           r"\(rank 0: Runtime::gather of location 'x0' .* onto every rank; "
                           r"rank {L}: Runtime::gather of location 'x0' .* onto rank 0\)"),
    "throwing-condition": (2, r"PeerFailure of rank {L}: rank {L} failed: the condition "
                              r"cannot read its input"),
    "throwing-reads": (2, r"PeerFailure of rank {L}: rank {L} failed: the check cannot read "
                          r"its sum"),
    "abort": (3, r"ordo: rank {L} aborted the job: the input is unusable"),
}


def check(ordorun, binary, case, ranks, tls):
    status, said = CASES[case]
    last = ranks - 1
    what = "%s on %d ranks over %s" % (case, ranks, tls.split(",")[0])
    cmd = [ordorun, "--timeout", "90", "-n", str(ranks), binary, "--case", case]
    p, _ = mp.run(cmd, env=mp.ucx_env(tls), timeout=120)
    ended = time.monotonic_ns()
    out = p.stdout + p.stderr
    m = re.search(r"^\[%d\] edges: rank %d event at (\d+)$" % (last, last), out, re.M)
    if not m:
        mp.fail("%s: rank %d never reached its odd call" % (what, last))
    took = (ended - int(m.group(1))) / 1e9
    if took > LIMIT:
        mp.fail("%s: the job ended %.1f s after rank %d's odd call (at most %.0f s)"
                % (what, took, last, LIMIT))
    if p.returncode != status:
        mp.fail("%s: ordorun exited %d, expected %d" % (what, p.returncode, status))
    pattern = said.replace("{L}", str(last))
    for r in range(ranks - 1):
        if case == "abort":
            line = r"^\[%d\] %s$" % (r, pattern)
        else:
            line = r"^\[%d\] edges: rank %d: %s" % (r, r, pattern)
        if not re.search(line, out, re.M):
            mp.fail("%s: rank %d did not say /%s/" % (what, r, pattern))
    # ordorun names the rank that did the odd thing, not the first of the others to exit (in a
    # mismatch, each side is as much the cause as the other).
    if not case.startswith("mismatch-") and not re.search(
            r"^ordorun: rank %d \(pid \d+ on host [^)]*\) " % last, p.stderr, re.M):
        mp.fail("%s: ordorun did not name rank %d as the cause:\n%s" % (what, last, p.stderr))
    if case == "exit-in-run" and "exited with status 0 without ending its Runtime" not in p.stderr:
        mp.fail("%s: ordorun did not say rank %d exited 0 without ending its Runtime:\n%s"
                % (what, last, p.stderr))
    if re.search(r"edges: rank \d+ finished", out):
        mp.fail("%s: a rank finished as if nothing had happened" % what)
    print("%s: every rank ended %.2f s after it, naming rank %d (exit %d)"
          % (what, took, last, status))


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    cases = sys.argv[3:] or list(CASES)
    for case in cases:
        for ranks in (2, 3):
            for tls in ("shm,self", "tcp,self"):
                check(ordorun, binary, case, ranks, tls)


main()
