#!/usr/bin/env python3
"""Runs one ordo app binary and checks its behaviour (stdlib only, no numpy).

  app_test.py verify BIN ARGS...        exit 0, result line well formed, verify=ok
  app_test.py error BIN TEXT ARGS...    exit 2, TEXT in the error message
  app_test.py roundtrip BIN ARGS...     .npy written, read back, continued: same bits as one run
  app_test.py steady BIN                heat2d converges to the analytic discrete solution
  app_test.py harris BIN ARGS...        ordo-harris's .npy output equals a Python Harris
  app_test.py polybench BIN DATASET ARGS...  ordo-heat3d-polybench's .npy output equals
                                        PolyBench's heat-3d loop written in Python
  app_test.py badnpy BIN TEXT           an input of the wrong rank or truncated exits 2
  app_test.py refuse BIN TEXT ARGS...   exit 2 with TEXT, within 10 s and 256 MiB (no run, no
                                        allocation that the bad input decides)
  app_test.py lyingnpy BIN              .npy headers that claim more than the file holds, or a
                                        shape past 2^64 elements: refused like `refuse`
  app_test.py inputshape BIN           an --input of another shape than --size: refused like
                                        `refuse`, before its 256 MiB of data are read
  app_test.py peak BIN ARGS...          without --bandwidth, the reported peak_rss is the process's
                                        peak (wait4's, as /usr/bin/time); with it, a fraction;
                                        ARGS without --size: a square grid beyond this machine's
                                        last-level cache
  app_test.py output BIN ARGS...        --output is atomic: a run killed while writing, or one
                                        that cannot write, leaves the previous file byte for
                                        byte; a directory that cannot be written is refused
                                        before the run
"""
import math
import random
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile
import time

LINE = re.compile(
    r"^app=([\w-]+) size=(\d+(x\d+)*) blocks=(\d+(x\d+)*) iters=\d+ workers=\d+ seconds=[0-9.]+ "
    r"gstencils=[0-9.]+ verify=(ok|fail|skipped)( bandwidth_fraction=[0-9.]+)?( tb=\d+)?"
    r"( ranks=\d+ control_messages=\d+)? peak_rss=[1-9]\d*(,[1-9]\d*)*$")


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def result_line(out):
    lines = [l for l in out.splitlines() if l.startswith("app=")]
    if len(lines) != 1:
        fail("expected one result line, got: %r" % out)
    if not LINE.match(lines[0]):
        fail("malformed result line: %r" % lines[0])
    return lines[0]


def read_npy(path):
    """Independent .npy reader: version 1.0, '<f8', C order."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY" or data[6:8] != b"\x01\x00":
        fail("%s: bad magic/version" % path)
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode("latin1")
    if (10 + hlen) % 64 != 0:
        fail("%s: header not padded to 64 bytes" % path)
    if "'descr': '<f8'" not in header or "'fortran_order': False" not in header:
        fail("%s: unexpected header %r" % (path, header))
    shape = tuple(int(x) for x in re.search(r"\(([^)]*)\)", header).group(1).split(",") if x.strip())
    body = data[10 + hlen:]
    n = 1
    for s in shape:
        n *= s
    if len(body) != 8 * n:
        fail("%s: %d data bytes for shape %r" % (path, len(body), shape))
    return shape, struct.unpack("<%dd" % n, body)


def cmd_verify(binary, args):
    rc, out, err = run([binary] + args + ["--verify"])
    if rc != 0:
        fail("exit %d\n%s%s" % (rc, out, err))
    line = result_line(out)
    if "verify=ok" not in line:
        fail(line)
    print(line)


def cmd_error(binary, text, args):
    rc, out, err = run([binary] + args)
    if rc != 2:
        fail("expected exit 2, got %d\n%s%s" % (rc, out, err))
    if text not in err:
        fail("expected %r in the error message, got %r" % (text, err))
    print(err.strip())


def cmd_roundtrip(binary, args):
    with tempfile.TemporaryDirectory() as d:
        a, b, c = (os.path.join(d, x + ".npy") for x in "abc")
        # 3 steps, save; continue 4 steps from the file; compare with 7 steps at once.
        for argv in ([binary] + args + ["--iters", "3", "--output", a],
                     [binary] + args + ["--iters", "4", "--input", a, "--output", b, "--verify"],
                     [binary] + args + ["--iters", "7", "--output", c]):
            rc, out, err = run(argv)
            if rc != 0:
                fail("%r: exit %d\n%s%s" % (argv, rc, out, err))
            result_line(out)
        sa, _ = read_npy(a)
        sb, vb = read_npy(b)
        sc, vc = read_npy(c)
        if not (sa == sb == sc):
            fail("shapes differ: %r %r %r" % (sa, sb, sc))
        if open(b, "rb").read() != open(c, "rb").read():
            fail("3 + 4 steps through .npy differ from 7 steps")
        print("round trip ok, shape", sb)


def write_npy(path, shape, values):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%dd" % len(values), *values))


def cmd_npyinput(binary, shape, args):
    """An image written here (independent writer) is read by the app, verified, written back."""
    dims = [int(x) for x in shape.split("x")]
    n = 1
    for d in dims:
        n *= d
    values = [((i * 2654435761) % 1000) / 1000.0 for i in range(n)]
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "in.npy"), os.path.join(d, "out.npy")
        write_npy(src, dims, values)
        rc, so, se = run([binary, "--input", src, "--output", out, "--verify"] + args)
        if rc != 0:
            fail("exit %d\n%s%s" % (rc, so, se))
        line = result_line(so)
        if "verify=ok" not in line or ("size=%s " % shape) not in line:
            fail(line)
        s, _ = read_npy(out)
        # Apps with several time levels stack them on a first axis.
        if list(s[-len(dims):]) != dims or len(s) > len(dims) + 1:
            fail("output shape %r" % (s,))
        print(line)


def harris_python(img, n, m, k=0.04):
    """Harris corner response, plain Python floats (IEEE doubles), the same operation order
    as ordo-harris's stages, 0 outside the image."""
    def at(g, i, j):
        return g[i * m + j] if 0 <= i < n and 0 <= j < m else 0.0
    ix = [0.0] * (n * m)
    iy = [0.0] * (n * m)
    for i in range(n):
        for j in range(m):
            ix[i * m + j] = ((at(img, i - 1, j + 1) + 2.0 * at(img, i, j + 1)) + at(img, i + 1, j + 1)) - \
                            ((at(img, i - 1, j - 1) + 2.0 * at(img, i, j - 1)) + at(img, i + 1, j - 1))
            iy[i * m + j] = ((at(img, i + 1, j - 1) + 2.0 * at(img, i + 1, j)) + at(img, i + 1, j + 1)) - \
                            ((at(img, i - 1, j - 1) + 2.0 * at(img, i - 1, j)) + at(img, i - 1, j + 1))
    xx = [a * a for a in ix]
    yy = [b * b for b in iy]
    xy = [a * b for a, b in zip(ix, iy)]

    def box(g, i, j):
        r = [(at(g, i + d, j - 1) + at(g, i + d, j)) + at(g, i + d, j + 1) for d in (-1, 0, 1)]
        return (r[0] + r[1]) + r[2]
    out = []
    for i in range(n):
        for j in range(m):
            sxx, syy, sxy = box(xx, i, j), box(yy, i, j), box(xy, i, j)
            tr = sxx + syy
            out.append((sxx * syy - sxy * sxy) - k * (tr * tr))
    return out


def cmd_harris(binary, args):
    n, m = 18, 12
    img = [((i * 2654435761) % 997) / 997.0 + (1.0 if (i // m) % 6 < 3 and (i % m) % 8 < 4 else 0.0)
           for i in range(n * m)]
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "img.npy"), os.path.join(d, "r.npy")
        write_npy(src, [n, m], img)
        rc, so, se = run([binary, "--input", src, "--output", out, "--iters", "2"] + args)
        if rc != 0:
            fail("exit %d\n%s%s" % (rc, so, se))
        result_line(so)
        shape, r = read_npy(out)
    if shape != (n, m):
        fail("output shape %r" % (shape,))
    want = harris_python(img, n, m)
    bad = [i for i in range(n * m) if struct.pack("<d", r[i]) != struct.pack("<d", want[i])]
    if bad:
        i = bad[0]
        fail("%d of %d points differ from Python; first at %d: %r != %r" % (len(bad), n * m, i, r[i], want[i]))
    print("ordo-harris output equals the Python Harris response bit for bit (%dx%d)" % (n, m))


POLYBENCH = {"mini": (10, 20), "small": (20, 40), "medium": (40, 100)}  # N, TSTEPS (heat-3d.h)


def polybench_heat3d(n, tsteps, interior=None):
    """PolyBench/C 4.2 heat-3d in Python (same operations in the same order) from its
    initialisation, the interior replaced by `interior` if given: A's interior at the end."""
    idx = lambda i, j, k: (i * n + j) * n + k  # noqa: E731
    a = [float(i + j + (n - k)) * 10 / n for i in range(n) for j in range(n) for k in range(n)]
    inner = [(i, j, k) for i in range(1, n - 1) for j in range(1, n - 1) for k in range(1, n - 1)]
    if interior is not None:
        for x, (i, j, k) in enumerate(inner):
            a[idx(i, j, k)] = interior[x]
    b = list(a)
    for _ in range(tsteps):
        for src, dst in ((a, b), (b, a)):
            for i, j, k in inner:
                c = src[idx(i, j, k)]
                dst[idx(i, j, k)] = (
                    0.125 * (src[idx(i + 1, j, k)] - 2.0 * c + src[idx(i - 1, j, k)])
                    + 0.125 * (src[idx(i, j + 1, k)] - 2.0 * c + src[idx(i, j - 1, k)])
                    + 0.125 * (src[idx(i, j, k + 1)] - 2.0 * c + src[idx(i, j, k - 1)])
                    + c)
    return [a[idx(i, j, k)] for i, j, k in inner]


def cmd_polybench(binary, dataset, args):
    """PolyBench's initialisation is linear, so its Laplacian is almost zero and the grid hardly
    changes: a second run starts from a pseudo-random interior (--input), where every term of
    the kernel shows in the bits."""
    n, tsteps = POLYBENCH[dataset]
    m = n - 2
    rng = random.Random(4242)
    interior = [rng.uniform(-10.0, 10.0) for _ in range(m * m * m)]
    for start in (None, interior):
        with tempfile.TemporaryDirectory() as d:
            out, src = os.path.join(d, "a.npy"), os.path.join(d, "in.npy")
            extra = []
            if start is not None:
                write_npy(src, [m, m, m], start)
                extra = ["--input", src]
            rc, so, se = run([binary, "--dataset", dataset, "--output", out] + extra + args)
            if rc != 0:
                fail("exit %d\n%s%s" % (rc, so, se))
            line = result_line(so)
            shape, got = read_npy(out)
        what = "--dataset %s%s" % (dataset, "" if start is None else " --input (random interior)")
        if shape != (m, m, m) or (" iters=%d " % tsteps) not in line:
            fail("%s: shape %r, line %r (PolyBench: N=%d, TSTEPS=%d)" % (what, shape, line, n, tsteps))
        want = polybench_heat3d(n, tsteps, start)
        bad = [i for i in range(len(want)) if struct.pack("<d", got[i]) != struct.pack("<d", want[i])]
        if bad:
            i = bad[0]
            fail("%s: %d of %d points differ from PolyBench's loop; first at %d: %r != %r"
                 % (what, len(bad), len(want), i, got[i], want[i]))
        print("ordo-heat3d-polybench %s equals PolyBench's heat-3d bit for bit" % what)


def cmd_badnpy(binary, text):
    with tempfile.TemporaryDirectory() as d:
        flat, cut = os.path.join(d, "flat.npy"), os.path.join(d, "cut.npy")
        write_npy(flat, [12], [0.5] * 12)
        write_npy(cut, [4, 4], [0.5] * 16)
        with open(cut, "rb") as f:
            data = f.read()
        with open(cut, "wb") as f:
            f.write(data[:-8])
        for path, want in ((flat, text), (cut, "truncated")):
            rc, so, se = run([binary, "--input", path])
            if rc != 2 or want not in se:
                fail("%s: expected exit 2 and %r, got %d\n%s%s" % (path, want, rc, so, se))
            print(se.strip())



def refused(argv, text, seconds=10, mib=256):
    """Runs argv, which must exit 2 saying `text` within `seconds` and `mib` MiB of memory
    (ru_maxrss of this process's children: run it alone, in a fresh driver)."""
    start = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds * 3)
    except subprocess.TimeoutExpired:
        fail("%s: still running after %d s (a refusal must be immediate)" % (" ".join(argv), seconds * 3))
    elapsed = time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    print("$ %s\n-> exit %d in %.2f s, peak %.0f MiB\n%s" % (" ".join(argv), p.returncode, elapsed, peak,
                                                           p.stderr.strip()))
    if p.returncode != 2 or text not in p.stderr:
        fail("expected exit 2 and %r, got %d\n%s%s" % (text, p.returncode, p.stdout, p.stderr))
    if elapsed > seconds:
        fail("took %.1f s to refuse (limit %d s)" % (elapsed, seconds))
    if peak > mib:
        fail("used %.0f MiB to refuse (limit %d MiB)" % (peak, mib))


def cmd_refuse(binary, text, args):
    refused([binary] + args, text)


def npy_with_header(path, shape_text, data_bytes):
    """A .npy whose header says `shape_text` (written as is) followed by `data_bytes` bytes."""
    d = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % shape_text
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1"))
        f.truncate(f.tell() + data_bytes)  # zeros, sparse


def cmd_lyingnpy(binary):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lie.npy")
        # 8000 x 8000 doubles (512 MB) claimed by a 192-byte file.
        npy_with_header(path, "(8000, 8000)", 192 - 128)
        refused([binary, "--input", path], "the file has 64", mib=128)
        # 2^32 x 2^32 x 16 elements: the product passes 2^64.
        npy_with_header(path, "(4294967296, 4294967296, 16)", 64)
        refused([binary, "--input", path], "larger than any file", mib=128)
        npy_with_header(path, "(99999999999999999999999,)", 64)
        refused([binary, "--input", path], "larger than any file", mib=128)


def cmd_inputshape(binary):
    """An --input whose shape differs from --size is refused before its data is read: a
    (sparse) 4096 x 8192 grid, 256 MiB of data, against --size 64x64, within 10 s and 128 MiB."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.npy")
        npy_with_header(path, "(4096, 8192)", 4096 * 8192 * 8)
        refused([binary, "--input", path, "--size", "64x64"],
                "has shape 4096x8192 but --size is 64x64", mib=128)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def cmd_output(binary, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "u.npy")
        rc, so, se = run([binary] + args + ["--iters", "3", "--output", out])
        if rc != 0:
            fail("exit %d\n%s%s" % (rc, so, se))
        before = read_bytes(out)
        if len(before) < 4096:
            fail("the output must be larger than the 1 KiB file-size limit below")
        # Killed while writing: a file-size limit of 1 KiB, and SIGXFSZ (whose default ends the
        # process) the moment the run writes past it.
        script = 'ulimit -f 1; exec "$0" "$@"'
        p = subprocess.run(["sh", "-c", script, binary] + args + ["--iters", "5", "--output", out],
                           capture_output=True, text=True, timeout=240)
        print("killed while writing: exit %d\n%s" % (p.returncode, p.stderr))
        if p.returncode == 0:
            fail("the run wrote past its file-size limit and still exited 0")
        if read_bytes(out) != before:
            fail("a run killed while writing changed the previous output file")
        # What a killed writer leaves: its temporary file beside the output, which nothing reads.
        for f in os.listdir(d):
            if f != "u.npy":
                if not f.startswith("u.npy.tmp-"):
                    fail("unexpected file %s beside the output" % f)
                os.unlink(os.path.join(d, f))
        # The same limit, SIGXFSZ ignored: the write fails (EFBIG, as on a full disk): exit 2.
        script = 'trap "" XFSZ; ulimit -f 1; exec "$0" "$@"'
        p = subprocess.run(["sh", "-c", script, binary] + args + ["--iters", "5", "--output", out],
                           capture_output=True, text=True, timeout=240)
        print("write fails: exit %d\n%s" % (p.returncode, p.stderr))
        if p.returncode != 2 or "cannot write" not in p.stderr:
            fail("a failed write must exit 2 and say so")
        if read_bytes(out) != before:
            fail("a run whose write failed changed the previous output file")
        left = sorted(f for f in os.listdir(d) if f != "u.npy")
        if left:
            fail("a failed write left files behind: %s" % left)
        # An unwritable place is refused before the run: a million steps would take minutes.
        refused([binary] + args + ["--iters", "1000000", "--output", os.path.join(d, "missing", "u.npy")],
                "cannot write")
        # A good run replaces the file.
        rc, so, se = run([binary] + args + ["--iters", "5", "--output", out])
        if rc != 0 or read_bytes(out) == before:
            fail("a good run did not replace the output (exit %d)" % rc)
    print("output ok: killed and failed writes left the old file intact")


def cmd_steady(binary):
    """heat2d on n x m: the fixed point of the Jacobi iteration is the discrete Laplace
    solution with 1 on the row above the grid and 0 elsewhere, known in closed form by
    separation of variables (discrete sine series in j, sinh in i)."""
    n, m = 8, 6
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "u.npy")
        rc, so, se = run([binary, "--size", "%dx%d" % (n, m), "--blocks", "2x3", "--iters",
                          "1500", "--workers", "2", "--output", out])
        if rc != 0:
            fail("exit %d\n%s%s" % (rc, so, se))
        shape, u = read_npy(out)
    if shape != (n, m):
        fail("shape %r" % (shape,))
    worst = 0.0
    for i in range(n):
        r = i + 1  # rows 1..n; row 0 is the boundary at 1.0, row n+1 the one at 0.0
        for j in range(1, m + 1):
            s = 0.0
            for k in range(1, m + 1):
                th = k * math.pi / (m + 1)
                a = 2.0 / (m + 1) * sum(math.sin(th * q) for q in range(1, m + 1))
                mu = math.acosh(2.0 - math.cos(th))
                s += a * math.sin(th * j) * math.sinh(mu * (n + 1 - r)) / math.sinh(mu * (n + 1))
            worst = max(worst, abs(s - u[i * m + j - 1]))
    if worst > 1e-9:
        fail("max deviation from the analytic steady state: %g" % worst)
    print("steady state ok, max deviation %.3g" % worst)


def last_level_cache_bytes():
    """The largest data or unified cache of cpu0, read from sysfs as the apps read it
    (api/cache_sizes.cpp); 0 when the kernel reports none."""
    best = 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    for entry in os.listdir(root) if os.path.isdir(root) else []:
        try:
            with open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, entry, "size")) as f:
                size = f.read().strip()
        except OSError:
            continue
        m = re.fullmatch(r"(\d+)([KM]?)", size)
        if kind == "Instruction" or not m:
            continue
        best = max(best, int(m.group(1)) << {"": 0, "K": 10, "M": 20}[m.group(2)])
    return best


def cmd_peak(binary, args):
    """Without --bandwidth the app measures only itself: no bandwidth_fraction, and the
    peak_rss it reports is the process's whole peak, the figure /usr/bin/time gives (the
    kernel's maximum resident set at exit, from wait4). With --bandwidth it prints the
    fraction, which it does only for a grid beyond the last-level cache: without --size in
    ARGS, the grid is the smallest square of a multiple of 2048 points a side whose one array
    of doubles is larger than this machine's (2048 where the cache is up to 32 MiB, 8192 on a
    480 MiB one)."""
    if "--size" not in args:
        side = 2048
        while side * side * 8 <= last_level_cache_bytes():
            side += 2048
        args = ["--size", "%dx%d" % (side, side)] + args
    # The first child of this process: the children's maximum resident set is the app's.
    code, out, err = run([binary] + args)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        fail("exit %d: %s" % (code, err))
    line = result_line(out)
    if "bandwidth_fraction=" in line:
        fail("a run without --bandwidth measured the bandwidth: " + line)
    reported = int(re.search(r"peak_rss=(\d+)", line).group(1))
    real = usage.ru_maxrss * 1024
    # Within 1 MiB: what the process allocates after reading its peak (the line, its output)
    # and the kB rounding of both figures. The triad's arrays were hundreds of MiB.
    if abs(real - reported) > 1 << 20:
        fail("peak_rss=%d but the process's peak was %d bytes (%+.1f MiB): the app allocated "
             "after it measured itself" % (reported, real, (real - reported) / 2**20))
    code, out, err = run([binary, "--bandwidth"] + args)
    if code != 0 or "bandwidth_fraction=" not in result_line(out):
        fail("--bandwidth printed no bandwidth_fraction: %r %r" % (out, err))
    print("ok: peak_rss=%d, the process's peak %d bytes; --bandwidth: %s" % (
        reported, real, re.search(r"bandwidth_fraction=[0-9.]+", out).group(0)))


def main():
    mode, binary = sys.argv[1], sys.argv[2]
    if mode == "verify":
        cmd_verify(binary, sys.argv[3:])
    elif mode == "error":
        cmd_error(binary, sys.argv[3], sys.argv[4:])
    elif mode == "roundtrip":
        cmd_roundtrip(binary, sys.argv[3:])
    elif mode == "npyinput":
        cmd_npyinput(binary, sys.argv[3], sys.argv[4:])
    elif mode == "steady":
        cmd_steady(binary)
    elif mode == "harris":
        cmd_harris(binary, sys.argv[3:])
    elif mode == "inputshape":
        cmd_inputshape(binary)
    elif mode == "polybench":
        cmd_polybench(binary, sys.argv[3], sys.argv[4:])
    elif mode == "badnpy":
        cmd_badnpy(binary, sys.argv[3])
    elif mode == "refuse":
        cmd_refuse(binary, sys.argv[3], sys.argv[4:])
    elif mode == "lyingnpy":
        cmd_lyingnpy(binary)
    elif mode == "output":
        cmd_output(binary, sys.argv[3:])
    elif mode == "peak":
        cmd_peak(binary, sys.argv[3:])
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
