#!/usr/bin/env python3
"""The apps across ranks (multiprocess suite): same bits as one rank, one .npy written in slabs.

  ranks_test.py ORDORUN det BIN CONFIGS -- ARGS...
      CONFIGS: comma-separated RANKSxWORKERS:TLS (e.g. 2x1:shm,3x2:tcp). Every run starts from
      one pseudo-random --input grid (read by every rank). One run on one rank writes the
      reference .npy; then each config runs `ordorun -n RANKS BIN ARGS --workers W
      --verify --output F` with UCX_TLS (shared memory or TCP on loopback) over a stale, longer
      file F. Each must exit 0 with one result line (rank 0's) saying verify=ok ranks=RANKS,
      and F must equal the one-rank file byte for byte (cmp).
  ranks_test.py ORDORUN restart BIN RANKS -- ARGS...
      3 steps across RANKS ranks to a file, 4 more from it (--input) across RANKS ranks: the
      same bytes as 7 steps on one rank.
  ranks_test.py ORDORUN slab_input BIN HALO -- ARGS...
      --input by slabs: on 1, 2 and 3 ranks (under strace), each rank reads from the --input
      file only the rows of its own blocks and their halos (HALO points wide; counted from its
      pread64 calls on the file), together they read all of it, and the --output equals the
      one-rank output byte for byte. Skipped where strace cannot trace.
  ranks_test.py ORDORUN too_few_blocks BIN RANKS -- ARGS...
      more ranks than blocks: exit 2 and the message from every rank, no hang, no file.
  ranks_test.py ORDORUN too_large BIN RANKS -- ARGS...
      a --size too large for the host: every rank exits 2 before filling its blocks, naming
      every rank with the bytes of its own blocks.
  ranks_test.py ORDORUN output_error BIN RANKS -- ARGS...
      --output into a missing directory: every rank says so, exit 2, no hang.
  ranks_test.py ORDORUN output_atomic BIN RANKS -- ARGS...
      rank 1 killed while it writes its slab (SIGXFSZ), or its write failing (EFBIG): the
      previous output stays byte for byte; then a good run replaces it.
  ranks_test.py ORDORUN peer_killed BIN RANKS -- ARGS...
      RANKS ranks with --checkpoint; once a checkpoint is complete rank 1 is sent SIGKILL from
      outside. The others ignore ordorun's SIGTERM (a shell's trap: the ending is left to
      ordo, as under a launcher that does not stop them), so each must end on its own with
      exit 2 and a message naming rank 1, where to look, and --restart; ordorun names rank 1
      and exits 137.
  ranks_test.py ORDORUN endpoints BIN RANKS -- ARGS...
      RANKS ranks over TCP with ORDO_VERBOSE=1, --verify and --output (the run, the apps'
      result gathers onto every rank, the output's): each rank's endpoints and the rank
      addresses it holds, as it reports them when its Runtime ends, are at most its
      control-plane tree neighbours and its block rows' neighbours (ARGS give each rank one row
      of blocks), and the output equals one rank's.
  ranks_test.py ORDORUN cores|mpirun_cores BIN RANKS -- ARGS...
      RANKS ranks on this host (ORDO_VERBOSE=1), with the default, 1 and 3 workers each: when
      the host has at least RANKS cores, the ranks' shares are disjoint and hold their workers;
      otherwise every rank says the host is oversubscribed. mpirun_cores: the same under
      mpirun -n RANKS, whose PMIx server gives the local ranks (the PMIx bootstrap).
  ranks_test.py ORDORUN netns BIN -- ARGS...
      two ranks in two network namespaces (ordorun --hosts --rsh "ip netns exec", UCX over TCP).
  ranks_test.py ORDORUN mpirun BIN -- ARGS...      mpirun -n 2 (PMIx bootstrap)
  ranks_test.py ORDORUN slurm BIN -- ARGS...       salloc -n 2 ordorun -n 2 (srun, PMIx) in a
      one-node Slurm cluster stood up by the test.
The launchers' set-up (namespaces, Slurm, UCX environment) is tests/comm/multiprocess.py's.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, skip, ucx_env, netns_hosts, slurm_cluster)
import app_test  # noqa: E402  (write_npy: an independent .npy writer)
import checkpoint_app_test as ckpt_test  # noqa: E402  (rank_pids, has_complete_checkpoint)

fail, run = mp.fail, mp.run
# The rank prefixes: ordorun's "[r] ", srun's "r: ", mpirun --tag-output's "[job,r]<stdout>:".
LINE = re.compile(r"^(?:\[(\d+)\] |(\d+): |\[\d+,(\d+)\]<stdout>:)?(app=\S+ .*)$")


def result_lines(out):
    """The result lines of a job's stdout, with the rank prefix its launcher added."""
    return [m for m in (LINE.match(l) for l in out.splitlines()) if m]


def check_job(p, ranks, what):
    if p.returncode != 0:
        fail("%s: exit %d" % (what, p.returncode))
    lines = result_lines(p.stdout)
    if len(lines) != 1:
        fail("%s: expected one result line (rank 0's), got %d" % (what, len(lines)))
    prefix = lines[0].group(1) or lines[0].group(2) or lines[0].group(3)
    if prefix not in (None, "0"):
        fail("%s: the result line comes from rank %s, not rank 0" % (what, prefix))
    line = lines[0].group(4)
    if "verify=" in line and " verify=ok" not in line and " verify=skipped" not in line:
        fail("%s: %s" % (what, line))
    if ranks > 1 and (" ranks=%d" % ranks) not in line:
        fail("%s: the result line lacks ranks=%d: %s" % (what, ranks, line))
    # Every rank's peak resident memory, reported through rank 0's line (ordo-bench-memory).
    peaks = re.search(r" peak_rss=([0-9,]+)$", line)
    if " system=" not in line and (
            not peaks or len([p for p in peaks.group(1).split(",") if int(p) > 0]) != ranks):
        fail("%s: the result line lacks peak_rss for each of %d rank(s): %s" % (what, ranks, line))
    return line


def same_file(a, b, what):
    with open(a, "rb") as f:
        x = f.read()
    with open(b, "rb") as f:
        y = f.read()
    if x != y:
        first = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), min(len(x), len(y)))
        fail("%s: %s differs from the one-rank output (%d vs %d bytes, first difference at byte "
             "%d)" % (what, b, len(y), len(x), first))


def stale(path, size):
    """A leftover file longer than the output, full of junk: the slab writers must replace it."""
    with open(path, "wb") as f:
        f.write(b"\xa5" * (size + 4096))


def random_input(args, d):
    """Every case starts from a pseudo-random grid (--input, read by every rank): the apps'
    own initial grids are zero over whole slabs (heat2d, heat3d), where a slab left unwritten
    or written from the wrong rows could go unnoticed."""
    shape = [int(x) for x in args[args.index("--size") + 1].split("x")]
    n = 1
    for s in shape:
        n *= s
    rng = random.Random(20261121)
    path = os.path.join(d, "input.npy")
    app_test.write_npy(path, shape, [rng.uniform(-1.0, 1.0) for _ in range(n)])
    return args + ["--input", path]


def ordorun(n, argv, timeout=60):
    return [ORDORUN, "--timeout", str(timeout), "--timeout-startup", "30", "-n", str(n)] + argv


def case_det(binary, configs, args):
    with tempfile.TemporaryDirectory() as d:
        args = random_input(args, d)
        ref = os.path.join(d, "ref.npy")
        p, _ = run([binary] + args + ["--workers", "1", "--verify", "--output", ref])
        line = check_job(p, 1, "one rank")
        if "verify=ok" not in line:
            fail("one rank: " + line)
        size = os.path.getsize(ref)
        for c in configs.split(","):
            m = re.match(r"^(\d+)x(\d+):(shm|tcp)$", c)
            if not m:
                fail("bad config %r" % c)
            n, w, tls = int(m.group(1)), m.group(2), m.group(3)
            out = os.path.join(d, "out_%s.npy" % c.replace(":", "_"))
            stale(out, size)
            p, _ = run(ordorun(n, [binary] + args + ["--workers", w, "--verify", "--output", out]),
                       env=mp.ucx_env(tls + ",self"), timeout=120)
            line = check_job(p, n, c)
            if "verify=ok" not in line:
                fail("%s: %s" % (c, line))
            same_file(ref, out, c)
            print("%s: verify=ok, output identical to one rank" % c)


def case_restart(binary, n, args):
    n = int(n)
    with tempfile.TemporaryDirectory() as d:
        a, b, ref = (os.path.join(d, x + ".npy") for x in ("a", "b", "ref"))
        first = random_input(args, d)
        p, _ = run([binary] + first + ["--iters", "7", "--output", ref])
        check_job(p, 1, "7 steps on one rank")
        env = mp.ucx_env("shm,self")
        p, _ = run(ordorun(n, [binary] + first + ["--iters", "3", "--output", a]), env=env)
        check_job(p, n, "3 steps across ranks")
        p, _ = run(ordorun(n, [binary] + args + ["--iters", "4", "--input", a, "--output", b,
                                                 "--verify"]), env=env)
        line = check_job(p, n, "4 more steps across ranks")
        if "verify=ok" not in line:
            fail(line)
        same_file(ref, b, "3 + 4 steps across %d ranks" % n)
        print("restart across %d ranks: identical to 7 steps on one rank" % n)


def block_ranges(size, blocks):
    """Per block (row-major over the block grid): [(lo, hi)] per dimension, lo = i*n//b."""
    out = [[]]
    for n, b in zip(size, blocks):
        out = [r + [(i * n // b, (i + 1) * n // b)] for r in out for i in range(b)]
    return out


def input_bytes_read(trace, path):
    """Bytes that the traced process read from `path` with pread64 past offset 0 (the data; the
    header check reads the file's first 64 KiB at offset 0), from an strace -f log."""
    fds, total = set(), 0
    for line in trace.splitlines():
        m = re.match(r"^(\d+) +openat\(AT_FDCWD, \"([^\"]*)\", .*\) = (\d+)$", line)
        if m and m.group(2) == path:
            fds.add((m.group(1), m.group(3)))
            continue
        m = re.match(r"^(\d+) +close\((\d+)\)", line)
        if m:
            fds.discard((m.group(1), m.group(2)))
            continue
        m = re.match(r"^(\d+) +pread64\((\d+), .*, (\d+), (\d+)\) += (\d+)$", line)
        if m and (m.group(1), m.group(2)) in fds and int(m.group(4)) > 0:
            total += int(m.group(5))
    return total


def case_slab_input(binary, halo, args):
    halo = int(halo)
    strace = shutil.which("strace")
    if strace is None:
        mp.skip("strace is not installed (Debian package strace)")
    probe = subprocess.run([strace, "-o", "/dev/null", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        mp.skip("strace cannot trace here: " + probe.stderr.strip())
    size = [int(x) for x in args[args.index("--size") + 1].split("x")]
    blocks = [int(x) for x in args[args.index("--blocks") + 1].split("x")]
    ranges = block_ranges(size, blocks)
    points = 1
    for n in size:
        points *= n
    with tempfile.TemporaryDirectory() as d:
        args = random_input(args, d)
        path = os.path.realpath(args[args.index("--input") + 1])
        ref = os.path.join(d, "ref.npy")
        p, _ = run([binary] + args + ["--workers", "1", "--verify", "--output", ref])
        if "verify=ok" not in check_job(p, 1, "one rank"):
            fail("one rank did not verify")
        for n in (1, 2, 3):
            out = os.path.join(d, "out%d.npy" % n)
            prefix = os.path.join(d, "trace%d" % n)
            # One log per rank: strace -f follows the rank's threads into the same file.
            wrapped = ["sh", "-c", 'p=$1; shift; exec "$0" -f -e trace=openat,pread64,close '
                       '-o "$p.$ORDO_RANK" "$@"', strace, prefix, binary] + args + [
                           "--workers", "1", "--output", out]
            p, _ = run(ordorun(n, wrapped, timeout=120), env=mp.ucx_env("shm,self"), timeout=180)
            check_job(p, n, "%d rank(s) under strace" % n)
            same_file(ref, out, "%d rank(s)" % n)
            total = 0
            for r in range(n):
                with open("%s.%d" % (prefix, r)) as f:
                    got = input_bytes_read(f.read(), path)
                # Rank r's blocks (b * n // blocks == r), each with its halo, clipped to the grid.
                mine = 0
                for b, rg in enumerate(ranges):
                    if b * n // len(ranges) != r:
                        continue
                    box = 1
                    for (lo, hi), ext in zip(rg, size):
                        box *= min(hi + halo, ext) - max(lo - halo, 0)
                    mine += box
                if got == 0 or got > 8 * mine:
                    fail("%d rank(s): rank %d read %d bytes of the input's data; its blocks and "
                         "halos hold %d" % (n, r, got, 8 * mine))
                print("%d rank(s): rank %d read %d bytes of %d (its blocks and halos: %d)"
                      % (n, r, got, 8 * points, 8 * mine))
                total += got
            if total < 8 * points:
                fail("%d rank(s): the ranks read %d bytes of the input's %d" % (n, total, 8 * points))


def case_too_few_blocks(binary, n, args):
    n = int(n)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "never.npy")
        p, elapsed = run(ordorun(n, [binary] + args + ["--workers", "1", "--output", out],
                                 timeout=30), env=mp.ucx_env("shm,self"), timeout=60)
        if p.returncode != 2:
            fail("expected exit 2, got %d" % p.returncode)
        for r in range(n):
            if not re.search(r"^\[%d\] .*error: --blocks .* ranks: every rank needs at least one "
                             r"block" % r, p.stderr, re.M):
                fail("rank %d does not say why the decomposition does not fit" % r)
        if os.path.exists(out):
            fail("a refused run wrote %s" % out)
        print("refused on every rank in %.1f s" % elapsed)


def case_too_large(binary, n, args):
    """A grid too large for the host, on N ranks of it: every rank exits 2 before filling a
    block, naming every rank with the bytes of its own blocks (block b on rank b * N / blocks,
    balanced extents), not of the whole grid."""
    n = int(n)
    size = [int(x) for x in args[args.index("--size") + 1].split("x")]
    blocks = [int(x) for x in args[args.index("--blocks") + 1].split("x")]
    count = 1
    for b in blocks:
        count *= b
    need = [0] * n
    for b in range(count):
        points, rest = 1, b
        for k in reversed(range(len(size))):
            i = rest % blocks[k]
            rest //= blocks[k]
            points *= (i + 1) * size[k] // blocks[k] - i * size[k] // blocks[k]
        need[b * n // count] += 8 * points
    p, elapsed = run(ordorun(n, [binary] + args + ["--workers", "1"], timeout=30),
                     env=mp.ucx_env("shm,self"), timeout=60)
    if p.returncode != 2:
        fail("expected exit 2, got %d" % p.returncode)
    for r in range(n):
        line = re.search(r"^\[%d\] .*error: (--size .* do not fit in memory: .*)$" % r, p.stderr,
                         re.M)
        if not line:
            fail("rank %d does not say that its blocks do not fit:\n%s" % (r, p.stderr))
        for q in range(n):
            if not re.search(r"rank %d needs [0-9.]+ [KMGTPE]iB \(%d bytes\)" % (q, need[q]),
                             line.group(1)):
                fail("rank %d's refusal does not name rank %d with %d bytes: %s"
                     % (r, q, need[q], line.group(1)))
    print("refused on every rank in %.1f s, each rank's blocks named: %s" % (elapsed, need))


def case_output_error(binary, n, args):
    n = int(n)
    p, _ = run(ordorun(n, [binary] + args + ["--workers", "1", "--output",
                                             "/nonexistent-dir/never.npy"], timeout=30),
               env=mp.ucx_env("shm,self"), timeout=60)
    if p.returncode != 2:
        fail("expected exit 2, got %d" % p.returncode)
    for r in range(n):
        if not re.search(r"^\[%d\] .*error: cannot write '/nonexistent-dir/never.npy'" % r,
                         p.stderr, re.M):
            fail("rank %d does not say it cannot write the output" % r)
    print("every rank reports the failed write, exit 2")


def case_output_atomic(binary, n, args):
    n = int(n)
    # TCP and no shared memory: a file-size limit would also stop shared-memory segments.
    env = mp.ucx_env("tcp,self")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "u.npy")
        p, _ = run(ordorun(n, [binary] + args + ["--iters", "3", "--output", out]), env=env, timeout=120)
        if p.returncode != 0:
            fail("the first run exited %d" % p.returncode)
        with open(out, "rb") as f:
            before = f.read()
        # Rank 1 alone may write 512 bytes to a file: past that it gets SIGXFSZ (killed while
        # writing its slab) or, with the signal ignored, EFBIG (as on a full disk).
        for how, trap in (("killed", ""), ("failing", 'trap "" XFSZ; ')):
            script = trap + 'if [ "$ORDO_RANK" = 1 ]; then ulimit -f 1; fi; exec "$0" "$@"'
            p, _ = run(ordorun(n, ["sh", "-c", script, binary] + args + ["--iters", "5", "--output", out]),
                       env=env, timeout=120)
            if p.returncode == 0:
                fail("rank 1 %s while writing, yet the job exited 0" % how)
            with open(out, "rb") as f:
                if f.read() != before:
                    fail("rank 1 %s while writing changed the previous output" % how)
            if how == "failing":
                if p.returncode != 2:
                    fail("a failed write must give exit 2, got %d" % p.returncode)
                for r in range(n):
                    if not re.search(r"^\[%d\] .*error: .*(cannot write|rank 1 could not write)" % r, p.stderr, re.M):
                        fail("rank %d does not report the failed write" % r)
                left = [f for f in os.listdir(d) if f.startswith("u.npy.tmp-")]
                if len(left) > 1:  # the killed run's temporary may remain; the failed one's not
                    fail("the failed write left its temporary file: %s" % left)
        p, _ = run(ordorun(n, [binary] + args + ["--iters", "5", "--output", out]), env=env, timeout=120)
        with open(out, "rb") as f:
            if p.returncode != 0 or f.read() == before:
                fail("a good run did not replace the output (exit %d)" % p.returncode)
    print("a killed and a failing rank left the previous output byte for byte")


def case_peer_killed(binary, n, args):
    n = int(n)
    name = os.path.basename(binary)
    with tempfile.TemporaryDirectory() as d:
        ckpt = os.path.join(d, "ckpt")
        # Rank 1 is the app itself (exec), so that ordorun sees it killed; the others run it
        # under a shell that ignores SIGTERM and prints the app's exit status.
        script = ('if [ "$ORDO_RANK" = 1 ]; then exec "$0" "$@"; fi; trap "" TERM; "$0" "$@"; '
                  's=$?; echo "rank $ORDO_RANK exited $s" >&2; exit $s')
        cmd = [ORDORUN, "--timeout", "120", "--grace", "60", "-n", str(n), "sh", "-c", script,
               binary] + args + ["--workers", "1", "--checkpoint", ckpt, "--checkpoint-every", "25"]
        job = subprocess.Popen(cmd, env=mp.ucx_env("shm,self"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        killed = False
        while not killed and time.monotonic() < deadline and job.poll() is None:
            if ckpt_test.has_complete_checkpoint(ckpt):
                pids = ckpt_test.rank_pids(job.pid, binary)
                if 1 in pids:
                    os.kill(pids[1], signal.SIGKILL)
                    killed = True
            time.sleep(0.005)
        try:
            _, stderr = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            fail("the job did not end after rank 1 was killed (a hang)")
        print("exit %d\n%s" % (job.returncode, stderr))
        if not killed:
            fail("the job ended (exit %d) before rank 1 could be killed after a checkpoint"
                 % job.returncode)
        if job.returncode != 137 or not re.search(
                r"ordorun: rank 1 \(pid \d+ on host \S+\) was killed by signal 9", stderr):
            fail("ordorun did not end with rank 1's status (137), naming it")
        for r in range(n):
            if r == 1:
                continue
            said = re.search(r"^\[%d\] %s: error: (.*)$" % (r, re.escape(name)), stderr, re.M)
            if not said:
                fail("rank %d did not say why it stopped" % r)
            for want in ("rank 1 failed", "this rank stopped because rank 1 failed: rank 1's own "
                         "message (or the launcher's) says why; mend that and run the job again "
                         "with --restart %s, which goes on from its newest complete checkpoint"
                         % ckpt,):
                if want not in said.group(1):
                    fail("rank %d's message lacks '%s': %s" % (r, want, said.group(1)))
            if not re.search(r"^\[%d\] rank %d exited 2$" % (r, r), stderr, re.M):
                fail("rank %d did not end on its own with exit 2" % r)
    print("every surviving rank ended on its own with exit 2, naming rank 1 and --restart")


def tree_neighbours(r, n):
    """The control plane's binomial tree (runtime/tree.hpp): r's parent and children."""
    out = set()
    if r:
        out.add(r & (r - 1))
    low = (r & -r) if r else 1 << 62
    bit = 1
    while bit < low and r + bit < n:
        out.add(r + bit)
        bit <<= 1
    return out


def case_endpoints(binary, n, args):
    n = int(n)
    with tempfile.TemporaryDirectory() as d:
        args = random_input(args, d)
        ref = os.path.join(d, "ref.npy")
        p, _ = run([binary] + args + ["--workers", "1", "--output", ref])
        check_job(p, 1, "one rank")
        out = os.path.join(d, "out.npy")
        env = dict(mp.ucx_env("tcp,self"), ORDO_VERBOSE="1")
        p, _ = run(ordorun(n, [binary] + args + ["--workers", "1", "--verify", "--output", out]),
                   env=env, timeout=120)
        line = check_job(p, n, "%d ranks" % n)
        if "verify=ok" not in line:
            fail("%d ranks: %s" % (n, line))
        same_file(ref, out, "%d ranks" % n)
        reports = {int(m.group(1)): (int(m.group(2)), int(m.group(3))) for m in re.finditer(
            r"^\[(\d+)\] ordo: endpoints: this rank opened (\d+), to %d other rank\(s\); "
            r"it holds (\d+) rank address" % (n - 1), p.stderr, re.M)}
        opened = {r: e for r, (e, _) in reports.items()}
        held = {r: a for r, (_, a) in reports.items()}
        if sorted(opened) != list(range(n)):
            fail("ranks %s did not report their endpoints: %s" % (
                sorted(set(range(n)) - set(opened)), p.stderr[-3000:]))
        for r in range(n):
            allowed = tree_neighbours(r, n) | ({r - 1, r + 1} & set(range(n)))
            if opened[r] > len(allowed):
                fail("rank %d opened %d endpoints; its tree and block-row neighbours are %s" % (
                    r, opened[r], sorted(allowed)))
            # Addresses are fetched for those neighbours only, not received for every rank.
            if held[r] > len(allowed):
                fail("rank %d holds %d rank addresses; its tree and block-row neighbours are %s" % (
                    r, held[r], sorted(allowed)))
        print("endpoints per rank: %s, addresses held: %s (of %d ranks), output identical to "
              "one rank" % ([opened[r] for r in range(n)], [held[r] for r in range(n)], n))


def units(text):
    """The OS indices of "1,4-6"."""
    out = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def host_cores():
    """Cores (not hardware threads) this process may run on, as the kernel describes them."""
    cores = set()
    for cpu in os.sched_getaffinity(0):
        base = "/sys/devices/system/cpu/cpu%d/topology/" % cpu
        try:
            with open(base + "physical_package_id") as f, open(base + "core_id") as g:
                cores.add((f.read().strip(), g.read().strip()))
        except OSError:
            cores.add(("cpu", str(cpu)))
    return len(cores)


def mpirun_command(n):
    """mpirun -n N on this host, each output line prefixed with its rank ([1,r]<stderr>:)."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        mp.skip("mpirun (openmpi-bin) is not installed")
    cmd = [mpirun, "-n", str(n), "--oversubscribe", "--tag-output"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def case_cores(binary, n, args, launcher="ordorun"):
    """Each rank's start-up report (ORDO_VERBOSE=1) with the default worker count and with 1
    and 3 workers per rank: with at least as many cores as ranks, the ranks' shares are
    disjoint and every worker sits in its rank's share; with fewer, every rank says the host is
    oversubscribed. Under ordorun (ORDO_LOCAL_RANK and ORDO_LOCAL_SIZE) or mpirun (the PMIx
    bootstrap: PMIX_LOCAL_RANK and PMIX_LOCAL_SIZE from mpirun's PMIx server)."""
    n = int(n)
    cores = host_cores()
    env = dict(mp.ucx_env("shm,self"), ORDO_VERBOSE="1")
    if launcher == "mpirun":
        start, prefix = (lambda argv: mpirun_command(n) + argv), r"^\[\d+,(\d+)\]<stderr>:"
    else:
        start, prefix = (lambda argv: ordorun(n, argv)), r"^\[(\d+)\] "
    for workers in ([], ["--workers", "1"], ["--workers", "3"]):
        what = "%s: %d ranks, %s" % (launcher, n, " ".join(workers) or "default workers")
        p, _ = run(start([binary] + args + workers), env=env, timeout=60)
        if p.returncode != 0:
            fail("%s: exit %d: %s" % (what, p.returncode, p.stderr[-2000:]))
        check_job(p, n, what)
        if cores < n:
            for r in range(n):
                if not re.search(prefix.replace(r"(\d+)", str(r)) +
                                 r"ordo: oversubscribed: %d processes on this machine" % n,
                                 p.stderr, re.M):
                    fail("%s on %d cores: rank %d does not say the host is oversubscribed: %s"
                         % (what, cores, r, p.stderr[-2000:]))
            print("%s: every rank reports the oversubscribed host" % what)
            continue
        shares, maps = {}, {}
        for m in re.finditer(prefix + r"ordo: local rank (\d+) of %d on this machine: "
                             r"cores \S+ \(pu ([\d,-]+)," % n, p.stderr, re.M):
            shares[int(m.group(1))] = units(m.group(3))
        for m in re.finditer(prefix + r"ordo: workers (.*)$", p.stderr, re.M):
            maps[int(m.group(1))] = {int(x) for x in re.findall(r"\d+:pu(\d+)/", m.group(2))}
        if sorted(shares) != list(range(n)) or sorted(maps) != list(range(n)):
            fail("%s: not every rank reported its share and workers: %s"
                 % (what, p.stderr[-2000:]))
        for a in range(n):
            if not maps[a] <= shares[a]:
                fail("%s: rank %d's workers %s are outside its share %s"
                     % (what, a, sorted(maps[a]), sorted(shares[a])))
            for b in range(a):
                if shares[a] & shares[b]:
                    fail("%s: ranks %d and %d share units %s" % (what, a, b, shares[a] & shares[b]))
        print("%s: shares %s" % (what, {r: sorted(s) for r, s in shares.items()}))


def reference(binary, args, d):
    """The one-rank output from a random input; returns (its path, args with that input)."""
    args = random_input(args, d)
    ref = os.path.join(d, "ref.npy")
    p, _ = run([binary] + args + ["--workers", "1", "--output", ref])
    check_job(p, 1, "one rank")
    return ref, args


def case_netns(binary, args):
    # Namespaces are joined to this host's file system: both ranks write the one file.
    with tempfile.TemporaryDirectory() as d:
        ref, args = reference(binary, args, d)
        out = os.path.join(d, "out.npy")
        stale(out, os.path.getsize(ref))
        with mp.netns_hosts(ORDORUN) as (launch, env, hosts):
            p, _ = run(launch + [binary] + args + ["--workers", "1", "--verify", "--output", out],
                       env=env, timeout=120)
        line = check_job(p, 2, "two namespaces")
        if "verify=ok" not in line:
            fail(line)
        same_file(ref, out, "ranks in namespaces %s and %s" % hosts)
        print("two namespaces: verify=ok, output identical to one rank")


def case_mpirun(binary, args):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        mp.skip("mpirun (openmpi-bin) is not installed")
    with tempfile.TemporaryDirectory() as d:
        ref, args = reference(binary, args, d)
        out = os.path.join(d, "out.npy")
        stale(out, os.path.getsize(ref))
        cmd = [mpirun, "-n", "2", "--oversubscribe"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        p, _ = run(cmd + [binary] + args + ["--workers", "1", "--verify", "--output", out],
                   env=mp.ucx_env("tcp,self"), timeout=120)
        if p.returncode != 0 and "PMIx" in p.stderr and "initialisation" in p.stderr:
            mp.skip("mpirun's PMIx server does not talk to this libpmix client: " +
                    p.stderr.strip()[:300])
        line = check_job(p, 2, "mpirun -n 2")
        if "verify=ok" not in line:
            fail(line)
        same_file(ref, out, "mpirun -n 2")
        print("mpirun -n 2: verify=ok, output identical to one rank")


def case_slurm(binary, args):
    with tempfile.TemporaryDirectory() as d:
        ref, args = reference(binary, args, d)
        out = os.path.join(d, "out.npy")
        stale(out, os.path.getsize(ref))
        with mp.slurm_cluster() as env:
            p, _ = run(["salloc", "-n", "2", "--overcommit", ORDORUN, "-n", "2", binary] + args +
                       ["--workers", "1", "--verify", "--output", out], env=env, timeout=120)
        line = check_job(p, 2, "salloc -n 2 ordorun -n 2")
        if "verify=ok" not in line:
            fail(line)
        same_file(ref, out, "Slurm, 2 ranks")
        print("Slurm (srun, PMIx), 2 ranks: verify=ok, output identical to one rank")


def main():
    global ORDORUN
    ORDORUN, case = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    sep = rest.index("--")
    pos, args = rest[:sep], rest[sep + 1:]
    cases = {"det": case_det, "restart": case_restart, "slab_input": case_slab_input,
             "too_few_blocks": case_too_few_blocks, "too_large": case_too_large,
             "output_error": case_output_error, "output_atomic": case_output_atomic, "cores": case_cores,
             "peer_killed": case_peer_killed, "endpoints": case_endpoints,
             "mpirun_cores": lambda binary, n, args: case_cores(binary, n, args, "mpirun"),
             "netns": case_netns, "mpirun": case_mpirun, "slurm": case_slurm}
    if case not in cases:
        fail("unknown case %s" % case)
    cases[case](*pos, args)
    print("PASS")


if __name__ == "__main__":
    main()
