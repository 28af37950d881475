#!/usr/bin/env python3
"""A rank killed mid-run ends every other rank on its own, within seconds, on 8 ranks (the
control plane's tree three levels deep): ordorun -n 8 dist_graphs --die-at 50, rank 1 kills
itself; the survivors ignore ordorun's SIGTERM (--ignore-sigterm) and ordorun's SIGKILL is
--grace 60 s away, so each survivor must stop its run and report PeerFailure of rank 1 itself
(rank 0 holds a location rank 1 reads; ranks 2-7 hold nothing and wait in the quiescence
rounds). ordorun's exit is 137 (rank 1's SIGKILL).

Usage: rank_killed_check.py ORDORUN DIST_GRAPHS
"""
import os
import re
import subprocess
import sys
import time

RANKS, GRACE = 8, 60


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def main():
    ordorun, dist_graphs = sys.argv[1:3]
    env = dict(os.environ, UCX_TLS="shm,self", UCX_WARN_UNUSED_ENV_VARS="n")
    start = time.monotonic()
    p = subprocess.run([ordorun, "--timeout", "90", "--grace", str(GRACE), "-n", str(RANKS),
                        dist_graphs, "--die-at", "50", "--workers", "1", "--ignore-sigterm"],
                       env=env, capture_output=True, text=True, timeout=GRACE + 60)
    elapsed = time.monotonic() - start
    out = p.stdout + p.stderr
    if p.returncode != 137:
        fail("exit %d, expected 137 (rank 1 killed):\n%s" % (p.returncode, out[-3000:]))
    for r in [0] + list(range(2, RANKS)):
        if not re.search(r"^\[%d\] dist_graphs: PeerFailure of rank 1: " % r, out, re.M):
            fail("rank %d did not report PeerFailure of rank 1:\n%s" % (r, out[-3000:]))
    # Ended by ordorun's SIGKILL, the job would take the whole grace period.
    if elapsed >= GRACE - 15:
        fail("the job took %.0f s: the survivors waited for ordorun's SIGKILL" % elapsed)
    print("every survivor of %d ranks reported rank 1's death on its own; the job took %.1f s"
          % (RANKS, elapsed))


main()
