#!/usr/bin/env python3
"""Trace times across ranks whose clocks differ, and rank 0's endpoints while they are measured.

Eight ranks of dist_graphs --ring (each rank's graph neighbours are the two ranks beside it),
traced (ORDO_TRACE), each in a time namespace of its own (`unshare -T`) whose monotonic clock runs rank x 1000 s ahead of rank
0's: the transport sees other clocks (Locality's time namespace) and measures the offsets at
start-up over the control plane's tree (runtime/clock_sync.hpp). Checks:
  - every rank but 0 reports (ORDO_VERBOSE) an offset of -rank x 1000 s within the error bound
    it reports with it (the namespaces' offsets are exact, so this is the measurement's error);
  - in the traces, read here (trace_reader.py), every message is received after it was sent on
    the aligned clock, up to the sender's and receiver's error bounds (off by 1000 s without
    alignment, or with an offset composed wrongly along the tree);
  - rank 0 opened endpoints (ORDO_VERBOSE's count when its Runtime ends) to no more ranks than
    its tree children 1, 2, 4 and its graph neighbours 1 and 7: 4, where pinging rank 0 from
    every rank would give 7.
Skips (exit 77) where time namespaces cannot be made.

Usage: clock_check.py DIST_GRAPHS ORDORUN
"""
import os
import re
import subprocess
import sys
import tempfile

from trace_reader import fail, messages, read_rank

RANKS = 8
SECOND = 1_000_000_000


def main():
    dist_graphs, ordorun = sys.argv[1:3]
    probe = subprocess.run(["unshare", "-T", "--monotonic", "1000", "true"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        print("SKIP: time namespaces cannot be made here (unshare -T): " + probe.stderr.strip())
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="ordo-clock-") as d:
        trace = os.path.join(d, "ring.trace")
        env = dict(os.environ, UCX_TLS="shm,self", UCX_NET_DEVICES="lo",
                   UCX_WARN_UNUSED_ENV_VARS="n", ORDO_VERBOSE="1", ORDO_TRACE=trace)
        in_own_time = ["sh", "-c", 'exec unshare -T --monotonic "$((ORDO_RANK * 1000))" "$@"', "sh"]
        p = subprocess.run([ordorun, "--timeout", "60", "-n", str(RANKS)] + in_own_time +
                           [dist_graphs, "--ring", "20", "--workers", "1"],
                           env=env, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail("the job exited %d: %s" % (p.returncode, p.stderr[-3000:]))
        ranks = [read_rank(trace + ".rank%d" % r) for r in range(RANKS)]

    error = {0: 0}
    for r in range(1, RANKS):
        m = re.search(r"^\[%d\] ordo: clock: rank 0's steady clock = this rank's ([+-]\d+) ns "
                      r"\(within (\d+) ns\)$" % r, p.stderr, re.M)
        if not m:
            fail("rank %d reports no measured clock offset: %s" % (r, p.stderr[-3000:]))
        offset, error[r] = int(m.group(1)), int(m.group(2))
        if abs(offset + r * 1000 * SECOND) > error[r]:
            fail("rank %d: offset %d ns, but its clock runs %d s ahead of rank 0's (error bound "
                 "%d ns)" % (r, offset, r * 1000, error[r]))
    print("offsets within their bounds (at most %d ns)" % max(error.values()))

    crossing = messages(ranks)
    if len(crossing) < 2 * (RANKS - 1):
        fail("only %d messages between ranks in the traces" % len(crossing))
    for m in crossing:
        early = m["sent"] - m["received"]
        if early > error[m["sender"]] + error[m["receiver"]]:
            fail("a message from rank %d to rank %d is received %d ns before it was sent on the "
                 "aligned clock (error bounds %d and %d ns)" % (
                     m["sender"], m["receiver"], early, error[m["sender"]], error[m["receiver"]]))
    print("%d messages, each received after it was sent" % len(crossing))

    m = re.search(r"^\[0\] ordo: endpoints: this rank opened (\d+), to %d other rank" % (RANKS - 1),
                  p.stderr, re.M)
    if not m:
        fail("rank 0 does not report its endpoints: " + p.stderr[-3000:])
    if int(m.group(1)) > 4:
        fail("rank 0 opened %s endpoints; its tree children and graph neighbours are 4 ranks"
             % m.group(1))
    print("rank 0's endpoints: %s of %d ranks" % (m.group(1), RANKS - 1))


main()
