#!/usr/bin/env python3
"""ordo-cg: the conjugate gradient app (stdlib only).

  cg_test.py verify BIN ARGS...
      exit 0, verify=ok (x, the iteration count and r.r bit for bit against the sequential
      CG in the binary, on every rank), then the .npy of x against this script's own
      residual: b - A x computed here from the right-hand side's formula (splitmix64, as
      apps/common/stencil_app.hpp's hash01) must have the norm the app reports, relative to
      |b|, and with --tol at most TOL (the app solves the Poisson problem, not only agrees
      with itself).
  cg_test.py exact BIN
      every grid from 1x1 to 4x4, on one block and on one block per point, with --iters 300
      and no --tol: rounding takes r.r to exactly 0 within 300 iterations, and CG must
      stop there, with verify=ok, fewer than 300 iterations, a finite residual and x, and
      b - A x of the output (recomputed here) below 1e-12 of |b| (no 0/0 after r.r = 0).
  cg_test.py ranks ORDORUN BIN CONFIGS -- ARGS...
      CONFIGS: comma-separated RANKSxWORKERS:TLS[:private] (private: ORDO_SHARED_MEMORY=0 on
      shared memory too). One rank with one worker writes the reference x; each config runs
      `ordorun -n RANKS BIN ARGS --workers W --verify --output F`: exit 0, one result line
      (rank 0's) with verify=ok (every rank checked its blocks, its iteration count and r.r),
      the same iters= and residual= as one rank, and F equal to the reference byte for byte.
"""
import math
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, compare_ranks)
import app_test  # noqa: E402  (read_npy: an independent .npy reader)

fail, run = mp.fail, mp.run
LINE = re.compile(
    r"^(?:\[(\d+)\] )?(app=cg size=(\d+)x(\d+) blocks=\d+x\d+ iters=(\d+) workers=\d+ "
    r"seconds=[0-9.]+ gstencils=[0-9.]+ residual=(\S+) verify=(ok|fail|skipped)( ranks=\d+)?)$")
MASK = (1 << 64) - 1


def hash01(i):
    z = (i + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return (z >> 11) * 2.0 ** -53


def result(p, what, ranks=1):
    if p.returncode != 0:
        fail("%s: exit %d\n%s%s" % (what, p.returncode, p.stdout, p.stderr))
    lines = [m for m in (LINE.match(l) for l in p.stdout.splitlines()) if m]
    if len(lines) != 1:
        fail("%s: expected one result line, got %r" % (what, p.stdout))
    m = lines[0]
    if m.group(1) not in (None, "0"):
        fail("%s: the result line comes from rank %s" % (what, m.group(1)))
    if m.group(7) != "ok":
        fail("%s: %s" % (what, m.group(2)))
    if ranks > 1 and (" ranks=%d" % ranks) not in m.group(2):
        fail("%s: no ranks=%d in %s" % (what, ranks, m.group(2)))
    return m


def true_residual(n, m, x):
    """|b - A x| / |b| with A the 5-point Laplacian and zero values around the grid."""
    num = den = 0.0
    for i in range(n):
        for j in range(m):
            c = x[i * m + j]
            ax = 4.0 * c
            if i > 0:
                ax -= x[(i - 1) * m + j]
            if i + 1 < n:
                ax -= x[(i + 1) * m + j]
            if j > 0:
                ax -= x[i * m + j - 1]
            if j + 1 < m:
                ax -= x[i * m + j + 1]
            b = hash01(i * m + j)
            num += (b - ax) ** 2
            den += b * b
    return math.sqrt(num / den)


def cmd_verify(binary, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "x.npy")
        p, _ = run([binary] + args + ["--verify", "--output", out])
        m = result(p, "--verify")
        n, cols, reported = int(m.group(3)), int(m.group(4)), float(m.group(6))
        shape, x = app_test.read_npy(out)
        if shape != (n, cols):
            fail("x has shape %r, expected %r" % (shape, (n, cols)))
        actual = true_residual(n, cols, x)
        # CG's recurred residual drifts from b - A x by rounding only.
        if abs(actual - reported) > 1e-9 + 1e-6 * reported:
            fail("|b - Ax|/|b| of the output is %.9e, the app reports %.9e" % (actual, reported))
        if "--tol" in args:
            tol = float(args[args.index("--tol") + 1])
            iters = int(args[args.index("--iters") + 1])
            if int(m.group(5)) >= iters or reported > tol:
                fail("--tol %g: stopped after %s iterations at %.3e" % (tol, m.group(5), reported))
        print("%s\n|b - Ax|/|b| = %.6e" % (m.group(2), actual))


def cmd_exact(binary):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "x.npy")
        for n in range(1, 5):
            for cols in range(1, 5):
                for blocks in ("1x1", "%dx%d" % (n, cols)):
                    what = "--size %dx%d --blocks %s" % (n, cols, blocks)
                    p, _ = run([binary, "--size", "%dx%d" % (n, cols), "--blocks", blocks,
                                "--iters", "300", "--verify", "--output", out])
                    m = result(p, what)
                    iters, reported = int(m.group(5)), float(m.group(6))
                    _, x = app_test.read_npy(out)
                    if not all(math.isfinite(v) for v in x) or not math.isfinite(reported):
                        fail("%s: non-finite result: %s" % (what, m.group(2)))
                    if iters >= 300:
                        fail("%s: ran all 300 iterations, past the exact solution: %s"
                             % (what, m.group(2)))
                    actual = true_residual(n, cols, x)
                    if not actual <= 1e-12:
                        fail("%s: |b - Ax|/|b| = %r after %d iterations" % (what, actual, iters))
                    print("%s: stopped after %d iteration(s), |b - Ax|/|b| = %.3e"
                          % (what, iters, actual))


def cmd_ranks(ordorun, binary, configs, args):
    def parse(p, what, ranks):
        m = result(p, what, ranks)
        return {"iters": m.group(5), "residual": m.group(6)}
    mp.compare_ranks(ordorun, binary, configs, args, parse, ("iters", "residual"))


def main():
    if sys.argv[1] == "verify":
        cmd_verify(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "exact":
        cmd_exact(sys.argv[2])
    elif sys.argv[1] == "ranks":
        sep = sys.argv.index("--")
        cmd_ranks(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[sep + 1:])
    else:
        fail("unknown mode " + sys.argv[1])


if __name__ == "__main__":
    main()
