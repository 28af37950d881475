#!/usr/bin/env python3
"""An app's files at the edges: what it writes onto and reads from (stdlib only, no numpy).

  edges_test.py outputs BIN     --output and --trace onto a FIFO, a socket, a device node and
                                a symlink to /dev/null are refused (exit 2, saying what the path
                                is) and the node is left as it was; a mode-600 output stays 600
  edges_test.py inputs BIN      --input naming a FIFO, a directory or a device is refused at
                                once (exit 2), never read or waited on
  edges_test.py empty BIN       --input "", --output "", --restart "", --trace "" and
                                --checkpoint "" are refused with exit 2, naming the flag
  edges_test.py npy BIN         a .npy header that gives a key twice, or a zero extent, is
                                refused naming --input (never a --size that was not given)
  edges_test.py nonfinite BIN   --verify fails (exit 1) on a result that holds a NaN, though
                                the sequential reference holds the same NaN
  edges_test.py messages BIN    ORDO_PUS naming a unit the machine lacks is named in the
                                message; "--iters=" names --iters; a restart with nothing
                                left says so, at a rate of 0

BIN is a 2-D stencil app (ordo-heat2d). Nodes are made in a temporary directory only; no test
writes to, or could replace, anything under /dev.
"""
import os
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(argv, timeout=60):
    start = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("hung for %d s: %s" % (timeout, " ".join(argv)))
    print("$ %s\n-> exit %d in %.2f s\n%s%s" % (" ".join(argv), p.returncode,
                                                 time.monotonic() - start, p.stdout, p.stderr))
    return p


def refused(argv, words, what, timeout=60):
    p = run(argv, timeout)
    if p.returncode != 2:
        fail("%s: exit %d, expected 2" % (what, p.returncode))
    for w in words:
        if w not in p.stderr:
            fail("%s: the message does not say %r" % (what, w))


def npy(path, shape, values, header=None):
    """A float64 C-order .npy of `shape` holding `values`; `header` replaces its dict."""
    d = header or "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(e) for e in shape) + ("," if len(shape) == 1 else ""))
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode())
        f.write(struct.pack("<%dd" % len(values), *values))


def nodes(d):
    """(what, path) of special files made in `d`: a FIFO, a socket, a symlink to /dev/null,
    and a character device when this process may make one."""
    made = []
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    made.append(("a FIFO", fifo))
    sock_path = os.path.join(d, "sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(sock_path)
    made.append(("a socket", sock_path))
    link = os.path.join(d, "null-link")
    os.symlink("/dev/null", link)
    made.append(("a character device", link))
    dev = os.path.join(d, "null-node")
    try:
        os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # the null device's numbers
        made.append(("a character device", dev))
    except (PermissionError, OSError) as e:
        print("no device node of our own (%s): the symlink to /dev/null stands for it" % e)
    return made, sock


def kind(path):
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), (os.readlink(path) if stat.S_ISLNK(st.st_mode) else None)


def cmd_outputs(binary):
    base = [binary, "--size", "16x16", "--blocks", "2x2", "--iters", "3", "--workers", "1"]
    with tempfile.TemporaryDirectory() as d:
        made, sock = nodes(d)
        try:
            for what, path in made:
                before = kind(path)
                for flag in ("--output", "--trace"):
                    refused(base + [flag, path], ["it is " + what, "regular files"],
                            "%s onto %s" % (flag, what))
                    if kind(path) != before:
                        fail("%s onto %s changed it: %s, was %s" % (flag, what, kind(path), before))
            leftovers = [f for f in os.listdir(d) if ".tmp" in f or ".probe" in f]
            if leftovers:
                fail("temporaries left beside the refused paths: %s" % leftovers)
        finally:
            sock.close()
        # A private file stays private: the output that replaces it keeps its mode.
        for flag in ("--output", "--trace"):
            path = os.path.join(d, "private" + flag)
            with open(path, "w") as f:
                f.write("old")
            os.chmod(path, 0o600)
            p = run(base + [flag, path])
            if p.returncode != 0:
                fail("%s over a regular file: exit %d" % (flag, p.returncode))
            st = os.stat(path)
            if os.path.getsize(path) <= 3:
                fail("%s did not replace the file" % flag)
            if stat.S_IMODE(st.st_mode) != 0o600:
                fail("%s turned a mode-600 file into %o" % (flag, stat.S_IMODE(st.st_mode)))


def cmd_inputs(binary):
    base = [binary, "--size", "16x16", "--blocks", "2x2", "--iters", "3", "--workers", "1"]
    with tempfile.TemporaryDirectory() as d:
        made, sock = nodes(d)
        try:
            # A FIFO with no writer: opening it to read would wait for ever.
            for what, path in made:
                refused(base + ["--input", path], ["'%s'" % path, "it is " + what], "--input " + what,
                        timeout=20)
            refused(base + ["--input", d], ["it is a directory"], "--input a directory", timeout=20)
        finally:
            sock.close()


def cmd_empty(binary):
    base = [binary, "--size", "16x16", "--iters", "3", "--workers", "1"]
    for flag in ("--input", "--output", "--restart", "--trace", "--checkpoint"):
        refused(base + [flag, ""], [flag, "is empty"], "%s \"\"" % flag)


def cmd_npy(binary):
    base = [binary, "--blocks", "1x1", "--iters", "2", "--workers", "1"]
    with tempfile.TemporaryDirectory() as d:
        # numpy takes the last of two 'shape' keys, ordo took the first: refused, whichever.
        twice = os.path.join(d, "twice.npy")
        npy(twice, None, [0.0] * 16, "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 4), "
                                     "'shape': (2, 8), }")
        refused(base + ["--input", twice], ["'shape' twice"], "two 'shape' keys")
        descr = os.path.join(d, "descr.npy")
        npy(descr, None, [0.0] * 16, "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, "
                                     "'shape': (4, 4), }")
        refused(base + ["--input", descr], ["'descr' twice"], "two 'descr' keys")
        # The same keys once each are read (the test's writer is right).
        once = os.path.join(d, "once.npy")
        npy(once, [4, 4], [0.0] * 16)
        p = run(base + ["--input", once])
        if p.returncode != 0:
            fail("a plain 4x4 .npy was refused")
        # A zero extent is the file's, not a --size the user never gave.
        empty = os.path.join(d, "empty.npy")
        npy(empty, [0, 8], [])
        p = run(base + ["--input", empty])
        if p.returncode != 2 or "--input" not in p.stderr or "--size" in p.stderr:
            fail("a .npy of shape (0, 8): expected exit 2 naming --input and not --size")


def cmd_nonfinite(binary):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "nan.npy")
        values = [1.0] * 64
        values[27] = float("nan")
        npy(path, [8, 8], values)
        p = run([binary, "--input", path, "--blocks", "2x2", "--iters", "2", "--workers", "1",
                 "--verify"])
        if p.returncode != 1 or "verify=fail" not in p.stdout:
            fail("a NaN in the result passed --verify (exit %d)" % p.returncode)
        if "NaN or an infinity" not in p.stderr:
            fail("the message does not say the result is not finite")
        # Finite input: still verify=ok.
        npy(path, [8, 8], [float(i) for i in range(64)])
        p = run([binary, "--input", path, "--blocks", "2x2", "--iters", "2", "--workers", "1",
                 "--verify"])
        if p.returncode != 0 or "verify=ok" not in p.stdout:
            fail("a finite run failed --verify")


def cmd_messages(binary):
    base = [binary, "--size", "16x16", "--blocks", "2x2", "--iters", "4", "--workers", "1"]
    # A processing unit past the machine's, named with the variable it came from.
    env = dict(os.environ, ORDO_PUS="0,999")
    p = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env)
    print("ORDO_PUS=0,999 ->", p.returncode, p.stderr)
    if p.returncode != 2 or "ORDO_PUS=0,999" not in p.stderr:
        fail("a processing unit that does not exist: the message does not name ORDO_PUS")
    # "--iters=" with nothing after '=' names --iters, not the flag that follows it.
    p = run([binary, "--iters=", "--size", "8x8"])
    if p.returncode != 2 or "--iters: the value after '=' is empty" not in p.stderr or "--size" in p.stderr:
        fail("--iters= blames another flag")
    # A restart with nothing left to run: no rate of infinity.
    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "ck")
        p = run(base + ["--checkpoint", ck, "--checkpoint-every", "2"])
        if p.returncode != 0:
            fail("the checkpointed run failed")
        p = run(base + ["--restart", ck])
        if p.returncode != 0 or "nothing left to run" not in p.stderr:
            fail("a restart with nothing left does not say so")
        if "gstencils=inf" in p.stdout or "gstencils=nan" in p.stdout or "gstencils=0.0000" not in p.stdout:
            fail("a restart with nothing left printed a rate other than 0")


def main():
    mode, binary = sys.argv[1], sys.argv[2]
    {"outputs": cmd_outputs, "inputs": cmd_inputs, "empty": cmd_empty, "npy": cmd_npy,
     "nonfinite": cmd_nonfinite, "messages": cmd_messages}[mode](binary)
    print("PASS")


if __name__ == "__main__":
    main()
