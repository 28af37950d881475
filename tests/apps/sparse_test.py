#!/usr/bin/env python3
"""ordo-spcg and ordo-pagerank, the sparse layer's apps (stdlib only).

  sparse_test.py hostile SPCG PAGERANK [ORDORUN]
      Matrix Market files that lie (size, entry count), reach past n, repeat an entry, are not
      symmetric, or are not Matrix Market at all, and edge lists with ids past their count or
      the wrong edge count: each refused with exit 2 and its message, without a result line.
      Then a small general file that is symmetric, and the same matrix stored symmetric, must
      both solve with verify=ok and the same residual. With ORDORUN: a duplicate entry in rank
      0's rows only, on 2 ranks: rank 0 names it, rank 1 says rank 0 refused, both exit 2.
  sparse_test.py ranks ORDORUN BIN CONFIGS -- ARGS...
      CONFIGS: comma-separated RANKSxWORKERS:TLS[:private] (private: ORDO_SHARED_MEMORY=0).
      One rank with one worker writes the reference output; each config runs
      `ordorun -n RANKS BIN ARGS --workers W --verify --output F`: exit 0, rank 0's result
      line with verify=ok (every rank checked its parts against the sequential version in the
      binary), the same iters= as one rank, bytes_sent= equal to bytes_min= on every rank, and
      F identical to the reference byte for byte.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env)

fail, run = mp.fail, mp.run
MM = "%%MatrixMarket matrix coordinate real "
LAPLACE = [(1, 1, 4), (2, 1, -1), (2, 2, 4), (3, 2, -1), (3, 3, 4), (4, 3, -1), (4, 4, 4)]


def mm_general(entries, n=4, count=None):
    full = []
    for i, j, v in entries:
        full.append((i, j, v))
        if i != j:
            full.append((j, i, v))
    return mm_lines("general", full, n, count)


def mm_lines(kind, entries, n=4, count=None):
    body = "".join("%d %d %g\n" % e for e in entries)
    return MM + kind + "\n%d %d %d\n" % (n, n, len(entries) if count is None else count) + body


HOSTILE_MM = [
    ("lying entry count", mm_lines("symmetric", LAPLACE, count=4000000000),
     "more than a file of"),
    ("fewer entries than said", mm_lines("symmetric", LAPLACE, count=9),
     "the header says 9 entries, the file holds 7"),
    ("more entries than said", mm_lines("symmetric", LAPLACE, count=5), "more entries than the header's 5"),
    ("lying size", mm_lines("symmetric", LAPLACE, n=1000000000), "some row would be empty"),
    ("index past n", mm_lines("symmetric", LAPLACE[:-1] + [(5, 4, -1)]), "lies outside the 4 x 4 matrix"),
    ("duplicate entry", mm_lines("symmetric", LAPLACE + [(2, 2, 1)]), "entry (2, 2) is given twice"),
    ("missing mirror", MM + "general\n2 2 3\n1 1 4\n1 2 -1\n2 2 4\n", "the matrix is not symmetric"),
    ("different mirror", MM + "general\n2 2 4\n1 1 4\n1 2 -1\n2 1 -2\n2 2 4\n", "differs from its mirror"),
    ("upper triangle in a symmetric file", MM + "symmetric\n2 2 3\n1 1 4\n1 2 -1\n2 2 4\n",
     "above the diagonal"),
    ("not Matrix Market", "hello\n", "this is not a Matrix Market file"),
    ("dense format", "%%MatrixMarket matrix array real general\n2 2\n1\n0\n0\n1\n", "only sparse"),
    ("bad value", MM + "general\n2 2 2\n1 1 nan\n2 2 1\n", "is not a finite number"),
    ("empty row", MM + "general\n2 2 1\n1 1 4\n", "some row would be empty"),
]

HOSTILE_EDGES = [
    ("id past the count", "# a graph\n3 2\n0 1\n1 3\n", "names a vertex past the header's 3"),
    ("lying edge count", "3 4000000000\n0 1\n", "more than a file of"),
    ("fewer edges than said", "3 3\n0 1\n1 2\n", "the header says 3 edges, the file holds 2"),
    ("no header", "# nothing\n", "no header line"),
]


def cmd_hostile(spcg, pagerank, ordorun=None):
    with tempfile.TemporaryDirectory() as d:
        for name, text, message in HOSTILE_MM:
            path = os.path.join(d, "m.mtx")
            with open(path, "w") as f:
                f.write(text)
            p, _ = run([spcg, "--matrix", path, "--iters", "3", "--workers", "1", "--parts", "2"])
            out = p.stdout + p.stderr
            if p.returncode != 2 or message not in out or "app=spcg" in out:
                fail("%s: expected exit 2 and %r, got %d:\n%s" % (name, message, p.returncode, out))
            print("%s: refused (%s)" % (name, message))
        for name, text, message in HOSTILE_EDGES:
            path = os.path.join(d, "g.txt")
            with open(path, "w") as f:
                f.write(text)
            p, _ = run([pagerank, "--graph", path, "--workers", "1", "--parts", "2"])
            out = p.stdout + p.stderr
            if p.returncode != 2 or message not in out or "app=pagerank" in out:
                fail("%s: expected exit 2 and %r, got %d:\n%s" % (name, message, p.returncode, out))
            print("%s: refused (%s)" % (name, message))
        # The same matrix as a symmetric file and as a general one: the same solve.
        residuals = []
        for kind, text in (("symmetric", mm_lines("symmetric", LAPLACE)), ("general", mm_general(LAPLACE))):
            path = os.path.join(d, kind + ".mtx")
            with open(path, "w") as f:
                f.write(text)
            p, _ = run([spcg, "--matrix", path, "--iters", "3", "--workers", "2", "--parts", "2", "--verify"])
            m = re.search(r"residual=(\S+) .*verify=ok", p.stdout)
            if p.returncode != 0 or not m:
                fail("%s file: %d\n%s%s" % (kind, p.returncode, p.stdout, p.stderr))
            residuals.append(m.group(1))
        if residuals[0] != residuals[1]:
            fail("symmetric and general files of one matrix solve differently: %s" % residuals)
        print("symmetric and general files: verify=ok, residual %s" % residuals[0])
        if ordorun is None:
            return
        path = os.path.join(d, "dup.mtx")
        with open(path, "w") as f:
            f.write(mm_lines("symmetric", LAPLACE + [(1, 1, 2)]))
        p, _ = run([ordorun, "--timeout", "60", "-n", "2", spcg, "--matrix", path, "--parts", "2",
                    "--workers", "1"], env=mp.ucx_env("shm,self"), timeout=120)
        out = p.stdout + p.stderr
        if (p.returncode != 2 or not re.search(r"\[0\] .*entry \(1, 1\) is given twice", out)
                or not re.search(r"\[1\] .*rank 0 refused its part of the input", out)):
            fail("a bad row on rank 0 only: expected both ranks to stop with exit 2, got %d:\n%s"
                 % (p.returncode, out))
        print("a bad row on rank 0 only: rank 0 names it, rank 1 stops too")


LINE = re.compile(r"^(?:\[(\d+)\] )?(app=(?:spcg|pagerank) .*)$")


def result(p, what, ranks=1):
    if p.returncode != 0:
        fail("%s: exit %d\n%s%s" % (what, p.returncode, p.stdout, p.stderr))
    lines = [m for m in (LINE.match(l) for l in p.stdout.splitlines()) if m]
    if len(lines) != 1:
        fail("%s: expected one result line, got %r" % (what, p.stdout))
    m = lines[0]
    if m.group(1) not in (None, "0"):
        fail("%s: the result line comes from rank %s" % (what, m.group(1)))
    fields = dict(t.split("=", 1) for t in m.group(2).split() if "=" in t)
    if fields.get("verify") != "ok":
        fail("%s: %s" % (what, m.group(2)))
    if ranks > 1 and fields.get("ranks") != str(ranks):
        fail("%s: no ranks=%d in %s" % (what, ranks, m.group(2)))
    if fields["bytes_sent"] != fields["bytes_min"]:
        fail("%s: bytes_sent=%s, the minimum is %s" % (what, fields["bytes_sent"], fields["bytes_min"]))
    if ranks > 1 and all(b == "0" for b in fields["bytes_sent"].split(",")):
        fail("%s: no rank sent anything (%s): the test does not exercise the exchange" % (what, m.group(2)))
    return fields


def cmd_ranks(ordorun, binary, configs, args):
    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "ref.npy")
        p, _ = run([binary] + args + ["--workers", "1", "--verify", "--output", ref])
        one = result(p, "one rank")
        for c in configs.split(","):
            k = re.match(r"^(\d+)x(\d+):(shm|tcp)(:private)?$", c)
            if not k:
                fail("bad config %r" % c)
            n, w, tls = int(k.group(1)), k.group(2), k.group(3)
            env = mp.ucx_env(tls + ",self")
            if k.group(4):
                env["ORDO_SHARED_MEMORY"] = "0"
            out = os.path.join(d, "out_%d.npy" % len(os.listdir(d)))
            p, _ = run([ordorun, "--timeout", "60", "--timeout-startup", "30", "-n", str(n), binary]
                       + args + ["--workers", w, "--verify", "--output", out], env=env, timeout=120)
            f = result(p, c, n)
            if f["iters"] != one["iters"]:
                fail("%s: iters=%s, one rank iters=%s" % (c, f["iters"], one["iters"]))
            with open(ref, "rb") as a, open(out, "rb") as b:
                if a.read() != b.read():
                    fail("%s: the output differs from the one-rank output" % c)
            print("%s: verify=ok, iters=%s, bytes_sent=%s at the minimum, output identical to one rank"
                  % (c, f["iters"], f["bytes_sent"]))


def main():
    if sys.argv[1] == "hostile":
        cmd_hostile(*sys.argv[2:5])
    elif sys.argv[1] == "ranks":
        sep = sys.argv.index("--")
        cmd_ranks(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[sep + 1:])
    else:
        fail("unknown mode " + sys.argv[1])


if __name__ == "__main__":
    main()
