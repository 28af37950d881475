#!/usr/bin/env python3
"""ordo-spcg and ordo-pagerank, the sparse layer's apps (stdlib only).

  sparse_test.py hostile SPCG PAGERANK [ORDORUN]
      Matrix Market files that lie (size, entry count), reach past n, repeat an entry, are not
      symmetric, or are not Matrix Market at all, and edge lists with ids past their count, the
      wrong edge count, or a vertex count no memory holds: each refused with exit 2 and its
      message, without a result line.
      Then a small general file that is symmetric, and the same matrix stored symmetric, must
      both solve with verify=ok and the same residual. With ORDORUN: a duplicate entry in rank
      0's rows only, on 2 ranks: rank 0 names it, rank 1 says rank 0 refused, both exit 2.
  sparse_test.py ranks ORDORUN BIN CONFIGS -- ARGS...
      CONFIGS: comma-separated RANKSxWORKERS:TLS[:private] (private: ORDO_SHARED_MEMORY=0).
      An argument @grid:WxH stands for a graph this script writes (a shuffled grid). One rank
      with one worker writes the reference output; each config runs
      `ordorun -n RANKS BIN ARGS --workers W --verify --output F` (multiprocess.compare_ranks):
      exit 0, rank 0's result line with verify=ok (every rank checked its parts against the
      sequential version in the binary), the same iters= as one rank, F identical to the
      reference byte for byte, bytes_sent= equal to bytes_min= on every rank, and bytes_wire=
      (what the transport was handed) equal to bytes_min= with copied locations, 0 with
      shared ones. For a block partition of a Laplacian or of a graph written here, bytes_min=
      must be the minimum this script computes from the index sets itself.
  sparse_test.py cut PAGERANK ARGS...
      ordo-pagerank with --partition block and metis (ARGS with an @grid:WxH graph): both
      verify=ok, block's edge_cut= the cut counted here, METIS's at most half of it, and the
      two outputs (both in the file's numbering) the same PageRank within 1e-8 (L1).
"""
import bisect
import os
import random
import re
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env, compare_ranks)
import app_test  # noqa: E402  (read_npy: an independent .npy reader)

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
        # A header stating more vertices than the memory holds (2^40, in parts small enough for
        # a part's numbering): refused, naming the count, before anything is sized by it. Under
        # an 8 GiB address-space limit, so that a regression fails at once instead of filling
        # the host.
        path = os.path.join(d, "huge.txt")
        with open(path, "w") as f:
            f.write("1099511627776 2\n0 1\n1 2\n")
        limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # noqa: E731
        try:
            p = subprocess.run([pagerank, "--graph", path, "--workers", "1", "--parts", "1024"],
                               capture_output=True, text=True, timeout=60, preexec_fn=limit)
        except subprocess.TimeoutExpired:
            fail("a header of 2^40 vertices: no answer within 60 s")
        out = p.stdout + p.stderr
        for words in ("1099511627776 vertices", "the header of '%s'" % path, "give the true counts"):
            if p.returncode != 2 or words not in out or "app=pagerank" in out:
                fail("a header of 2^40 vertices: expected exit 2 and %r, got %d:\n%s"
                     % (words, p.returncode, out))
        print("a header of 2^40 vertices: refused (%s)" % out.strip().splitlines()[-1])
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


# Graphs this script writes itself (an argument "@grid:WxH" stands for one): a W x H grid whose
# neighbours are joined by an edge each way with probability 0.85 (some edges twice, some
# self-loops), the vertices numbered in a shuffled order, so that blocks of numbers are
# scattered over the grid and a block partition cuts most edges, METIS few.
def grid_edges(w, h, seed=5):
    rng = random.Random(seed)
    perm = list(range(w * h))
    rng.shuffle(perm)
    edges = []
    for y in range(h):
        for x in range(w):
            for dx, dy in ((1, 0), (0, 1)):
                if x + dx < w and y + dy < h:
                    a, b = perm[y * w + x], perm[(y + dy) * w + x + dx]
                    for u, v in ((a, b), (b, a)):
                        if rng.random() < 0.85:
                            edges.append((u, v))
                            if rng.random() < 0.03:
                                edges.append((u, v))
            if rng.random() < 0.02:
                edges.append((perm[y * w + x],) * 2)
    rng.shuffle(edges)
    return w * h, edges


def write_graph(path, n, edges):
    with open(path, "w") as f:
        f.write("# a shuffled grid\n%d %d\n" % (n, len(edges)))
        f.writelines("%d %d\n" % e for e in edges)


def expand_graphs(args, d):
    """Writes each @grid:WxH argument's graph into d; returns the arguments with their paths,
    and {path: (n, edges)}."""
    out, graphs = [], {}
    for a in args:
        m = re.match(r"^@grid:(\d+)x(\d+)$", a)
        if m:
            path = os.path.join(d, "grid_%s.txt" % a[6:])
            graphs[path] = grid_edges(int(m.group(1)), int(m.group(2)))
            write_graph(path, *graphs[path])
            a = path
        out.append(a)
    return out, graphs


def block_starts(n, parts):
    base, extra = divmod(n, parts)
    starts = [0]
    for p in range(parts):
        starts.append(starts[-1] + base + (1 if p < extra else 0))
    return starts


def opt(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


def pattern(args, graphs):
    """(n, reads): the matrix's size and, for each row, the columns it reads, computed here
    from the generator's formula or the edge list; None where the test cannot (a matrix file,
    an R-MAT or random graph, or --random-spd)."""
    if "--laplace2d" in args or "--laplace3d" in args:
        shape = [int(x) for x in opt(args, "--laplace2d", opt(args, "--laplace3d")).split("x")]
        n = 1
        for e in shape:
            n *= e
        reads = []
        for i in range(n):
            coord, rest = [], i
            for e in shape:  # the first extent varies fastest
                coord.append(rest % e)
                rest //= e
            cols, stride = [i], 1
            for axis, e in enumerate(shape):
                if coord[axis] > 0:
                    cols.append(i - stride)
                if coord[axis] + 1 < e:
                    cols.append(i + stride)
                stride *= e
            reads.append(cols)
        return n, reads
    path = opt(args, "--graph")
    if path in graphs:
        n, edges = graphs[path]
        reads = [[] for _ in range(n)]
        for u, v in edges:  # row v of PageRank's matrix reads u
            reads[v].append(u)
        return n, reads
    return None


def least_bytes(n, reads, parts, ranks):
    """Per rank, the bytes one exchange must send at least: each value a part on another rank
    reads, once per reading part (8-byte values; part p on rank p * ranks // parts)."""
    starts = block_starts(n, parts)
    owner = lambda i: bisect.bisect_right(starts, i) - 1  # noqa: E731
    home = lambda p: p * ranks // parts  # noqa: E731
    least = [0] * ranks
    for q in range(parts):
        ghosts = {j for i in range(starts[q], starts[q + 1]) for j in reads[i] if owner(j) != q}
        for j in ghosts:
            if home(owner(j)) != home(q):
                least[home(owner(j))] += 8
    return least


def cut_edges(n, reads, parts):
    """Distinct entries (row i, column j) of different parts under the block partition."""
    starts = block_starts(n, parts)
    owner = lambda i: bisect.bisect_right(starts, i) - 1  # noqa: E731
    return sum(len({j for j in reads[i] if owner(j) != owner(i)}) for i in range(n))


def cmd_ranks(ordorun, binary, configs, args):
    with tempfile.TemporaryDirectory() as d:
        args, graphs = expand_graphs(args, d)
        runs = mp.compare_ranks(ordorun, binary, configs, args, result, ("iters",))
        pat = None if opt(args, "--partition") == "metis" else pattern(args, graphs)
        parts = int(opt(args, "--parts", "8"))
        for c, n, shared, f in runs[1:]:
            iters = int(f["iters"])
            wire = [int(b) for b in f["bytes_wire"].split(",")]
            plan = [int(b) for b in f["bytes_min"].split(",")]
            # What the transport was handed for the program's locations: nothing where the ranks
            # share their locations, else exactly the minimum per iteration.
            want = [0] * n if shared else plan
            if pat is not None:
                least = [b * iters for b in least_bytes(pat[0], pat[1], parts, n)]
                if plan != least:
                    fail("%s: bytes_min=%s, the index sets' minimum computed here is %s"
                         % (c, f["bytes_min"], least))
            if wire != want:
                fail("%s: bytes_wire=%s, expected %s (%s)" % (
                    c, f["bytes_wire"], ",".join(map(str, want)),
                    "the ranks share their locations" if shared else "the minimum per iteration"))
            print("%s: bytes_wire=%s%s" % (c, f["bytes_wire"], "" if pat is None else
                                           ", the minimum computed here" if not shared else ""))


def cmd_cut(pagerank, args):
    """ordo-pagerank with --partition block and metis on a graph this script writes: both
    verify=ok; block's edge_cut= equals the cut counted here; METIS's is at most half of it (a
    shuffled grid, where blocks of numbers are scattered and METIS finds the grid's strips)."""
    with tempfile.TemporaryDirectory() as d:
        args, graphs = expand_graphs(args, d)
        n, reads = pattern(args, graphs)
        parts = int(opt(args, "--parts", "8"))
        cut, ranks = {}, {}
        for part in ("block", "metis"):
            out = os.path.join(d, part + ".npy")
            p, _ = run([pagerank] + args + ["--partition", part, "--workers", "2", "--verify",
                                            "--output", out])
            f = result(p, part)
            if f["partition"] != part:
                fail("%s: partition=%s" % (part, f["partition"]))
            cut[part] = int(f["edge_cut"])
            shape, ranks[part] = app_test.read_npy(out)
            if shape != (n,):
                fail("%s: the ranks have shape %r" % (part, shape))
        # One graph, two numberings: the same PageRank (in the file's numbering) up to rounding
        # and the stopping rule (an L1 change of at most 1e-9 per iteration).
        diff = sum(abs(a - b) for a, b in zip(ranks["block"], ranks["metis"]))
        if not diff <= 1e-8 or abs(sum(ranks["metis"]) - 1) > 1e-8:
            fail("METIS's PageRank differs from the block partition's by %g (L1), sums to %r"
                 % (diff, sum(ranks["metis"])))
        want = cut_edges(n, reads, parts)
        if cut["block"] != want:
            fail("block partition: edge_cut=%d, counted here %d" % (cut["block"], want))
        if not 0 < cut["metis"] <= want // 2:
            fail("METIS: edge_cut=%d, the block partition's is %d" % (cut["metis"], want))
        print("edge_cut: block %d (counted here alike), METIS %d; the ranks agree within %.1e (L1)"
              % (cut["block"], cut["metis"], diff))


def main():
    if sys.argv[1] == "hostile":
        cmd_hostile(*sys.argv[2:5])
    elif sys.argv[1] == "cut":
        cmd_cut(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "ranks":
        sep = sys.argv.index("--")
        cmd_ranks(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[sep + 1:])
    else:
        fail("unknown mode " + sys.argv[1])


if __name__ == "__main__":
    main()
