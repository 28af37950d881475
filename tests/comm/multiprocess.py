#!/usr/bin/env python3
"""Multi-process tests of comm/ and ordorun. One case per invocation:
(Over 600 lines: the cases share the process, namespace and launcher set-up below, which the
app and checkpoint tests import as well.)

    multiprocess.py ORDORUN PINGPONG CASE [ARGS...]

Every case bounds each process it starts (subprocess timeouts) so that a bug fails the test
instead of hanging it; exit 77 tells meson the case was skipped (with the reason printed).
Other drivers import it for its helpers: run, ucx_env, the one-node Slurm cluster
(slurm_cluster) and the network namespaces (netns_hosts).
"""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def ucx_env(tls, devices="lo"):
    env = dict(os.environ)
    if tls == "default":  # UCX's own choice of transports (networks still limited to lo)
        env.pop("UCX_TLS", None)
    else:
        env["UCX_TLS"] = tls
    if devices:
        env["UCX_NET_DEVICES"] = devices
    # Ranks on one host share their locations' memory (no bytes on the wire); over TCP the tests
    # stand for ranks on separate hosts, so the locations travel as payloads, as they would there.
    env["ORDO_SHARED_MEMORY"] = "0" if tls.startswith("tcp") else "1"
    # Keep stray Slurm variables from turning the launch into an srun handoff.
    for k in list(env):
        if k.startswith("SLURM_"):
            del env[k]
    return env


def run(cmd, env=None, timeout=120):
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        fail("timed out after %d s (a hang): %s\nstdout:\n%s\nstderr:\n%s" % (
            timeout, " ".join(cmd), e.stdout, e.stderr))
    elapsed = time.monotonic() - start
    print("$ %s\n-> exit %d in %.2f s\nstdout:\n%sstderr:\n%s" % (
        " ".join(cmd), p.returncode, elapsed, p.stdout, p.stderr))
    return p, elapsed


def compare_ranks(ordorun, binary, configs, args, parse, same):
    """The apps' rank-comparison runs. CONFIGS: comma-separated RANKSxWORKERS:TLS[:private]
    (private: ORDO_SHARED_MEMORY=0 on shared memory too). One rank with one worker writes the
    reference output; each config runs `ordorun -n RANKS BINARY ARGS --workers W --verify
    --output F`. parse(p, what, ranks) checks a run (exit 0, its result line, verify=ok) and
    returns its fields, a dict; each field named in `same` must equal one rank's, and F the
    reference byte for byte. Returns [(config, ranks, shared, fields)], one rank's run first
    ("one rank", 1, False), for the caller's own checks (shared: the ranks shared their
    locations' memory)."""
    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "ref.npy")
        p, _ = run([binary] + args + ["--workers", "1", "--verify", "--output", ref])
        one = parse(p, "one rank", 1)
        runs = [("one rank", 1, False, one)]
        for c in configs.split(","):
            k = re.match(r"^(\d+)x(\d+):(shm|tcp)(:private)?$", c)
            if not k:
                fail("bad config %r" % c)
            n, w, tls = int(k.group(1)), k.group(2), k.group(3)
            env = ucx_env(tls + ",self")
            if k.group(4):
                env["ORDO_SHARED_MEMORY"] = "0"
            out = os.path.join(d, "out_%d.npy" % len(runs))
            p, _ = run([ordorun, "--timeout", "60", "--timeout-startup", "30", "-n", str(n), binary]
                       + args + ["--workers", w, "--verify", "--output", out], env=env, timeout=120)
            f = parse(p, c, n)
            for key in same:
                if f[key] != one[key]:
                    fail("%s: %s=%s, one rank %s=%s" % (c, key, f[key], key, one[key]))
            with open(ref, "rb") as a, open(out, "rb") as b:
                if a.read() != b.read():
                    fail("%s: the output differs from the one-rank output" % c)
            print("%s: verify=ok, %s as one rank, output identical to one rank"
                  % (c, " ".join("%s=%s" % (key, f[key]) for key in same)))
            runs.append((c, n, env["ORDO_SHARED_MEMORY"] == "1", f))
        return runs


def expect_refusal(cmd, env, words, what):
    """Runs cmd, which must exit 2 with each of `words` in its stderr."""
    p, _ = run(cmd, env=env)
    if p.returncode != 2:
        fail("%s: expected exit 2, got %d" % (what, p.returncode))
    for w in words:
        if w not in p.stderr:
            fail("%s: the message does not say %r" % (what, w))
    print("%s: refused (exit 2), naming it" % what)


def check_pingpong(p, n, expect_rndv=True):
    if p.returncode != 0:
        fail("pingpong exited %d" % p.returncode)
    lines = [l for l in p.stdout.splitlines() if "received" in l]
    if len(lines) != n:
        fail("expected %d rank summaries, got %d" % (n, len(lines)))
    seen = set()
    for l in lines:
        m = re.match(r"\[(\d+)\] rank (\d+) of (\d+) \((\w+)\): received (\d+) messages "
                     r"\((\d+) eager, (\d+) rendezvous\), (\d+) wrong, (\d+) send failures", l)
        if not m:
            fail("unexpected summary line: " + l)
        prefix, rank, size, _, got, _, rndv, wrong, sfail = map(
            lambda x: int(x) if x.isdigit() else x, m.groups())
        if prefix != rank or size != n or wrong or sfail:
            fail("bad summary: " + l)
        if got != 2 * 7 * n:
            fail("rank %d received %d messages, expected %d" % (rank, got, 2 * 7 * n))
        if expect_rndv and rndv == 0:
            fail("rank %d received no payload by rendezvous: the large-payload path went untested" % rank)
        seen.add(rank)
    if seen != set(range(n)):
        fail("ranks reporting: %s" % sorted(seen))


def case_pingpong():
    tls, n = ARGS[0], int(ARGS[1])
    extra = ARGS[2:]
    p, _ = run([ORDORUN, "--timeout", "90", "--timeout-startup", "20", "-n", str(n), PINGPONG] + extra,
               env=ucx_env(tls))
    check_pingpong(p, n)


def case_kill():
    tls = ARGS[0]
    p, elapsed = run([ORDORUN, "--timeout", "60", "-n", "3", PINGPONG, "--die-rank", "1", "--rounds", "4"],
                     env=ucx_env(tls), timeout=60)
    if p.returncode == 0:
        fail("the job succeeded although rank 1 was killed")
    if elapsed > 10:
        fail("the job took %.1f s to end after a rank died (limit 10 s)" % elapsed)
    if not re.search(r"ordorun: rank 1 \(pid \d+ on host \S+\) was killed by signal 9", p.stderr):
        fail("ordorun's message does not name rank 1 and signal 9")
    if p.returncode != 128 + 9:
        fail("exit status %d, expected 137 (the first failing rank's)" % p.returncode)


def case_transport_detects():
    # Survivors ignore ordorun's SIGTERM, so before its SIGKILL (--grace 20: room for a loaded
    # machine) only the transport can end them: it must report rank 1 to the others' failure
    # callbacks. ARGS: the UCX_TLS, then
    #   "pidfd": ranks of one host are watched through pidfds, with any transport (shared memory
    #     included). Rank 1 dies while the ranks wait for messages that never come: no traffic,
    #     so nothing but the pidfd can tell, and both survivors must report it that way.
    #   "ucx" (--ucx-detection): UCX's peer failure handling, which needs a transport that has
    #     it (TCP); rank 1 dies mid-traffic.
    tls, how = ARGS[0], ARGS[1]
    extra = ["--ucx-detection"] if how == "ucx" else ["--hang-after-connect"]
    p, elapsed = run([ORDORUN, "--grace", "20", "-n", "3", PINGPONG, "--die-rank", "1", "--rounds", "4",
                      "--ignore-sigterm"] + extra, env=ucx_env(tls), timeout=60)
    if p.returncode == 0:
        fail("the job succeeded although rank 1 was killed")
    reports = {r: [m.group(1) for m in re.finditer(
        r"^\[%d\] rank %d: peer rank 1 failed \(\w+\): (.*)$" % (r, r), p.stderr, re.M)]
        for r in (0, 2)}
    if how == "pidfd":
        for r in (0, 2):
            if not any("process exited" in c for c in reports[r]):
                fail("rank %d did not see rank 1's exit through its pidfd: %s" % (r, reports[r]))
    else:
        # At least one survivor's transport names rank 1. (Under load UCX can also time out a
        # survivor's endpoint to the other survivor while it wires up; that survivor then
        # reports that peer first, which says nothing about detecting rank 1.)
        found = reports[0] + reports[2]
        if not found:
            fail("no survivor's transport reported rank 1's failure")
        if any("process exited" in c for c in found):
            fail("--ucx-detection, yet rank 1 was watched through a pidfd: %s" % found)
    if "sending SIGKILL" in p.stderr:
        fail("a survivor had to be SIGKILLed: the transport did not end it")


def case_dies_in_bootstrap():
    # Rank 1 exits before its first put; ranks 0 and 2 wait in the store for it and ignore
    # ordorun's SIGTERM (--grace 20), so only the store can end them before the SIGKILL: it
    # answers their gets with why the job stops. Before, they waited for the SIGKILL. SIGTERM
    # is ignored from the start (the shell's trap, kept across exec), so that a rank SIGTERMed
    # before it reads its arguments on a loaded machine does not die of it.
    p, elapsed = run([ORDORUN, "--grace", "20", "-n", "3", "sh", "-c", 'trap "" TERM; exec "$@"', "sh",
                      PINGPONG, "--exit-before-bootstrap", "1"], env=ucx_env("tcp,self"), timeout=60)
    if p.returncode != 5:
        fail("exit status %d, expected 5 (rank 1's)" % p.returncode)
    for r in (0, 2):
        if not re.search(r"^\[%d\] comm: rank %d stopped waiting for [^:]+: ordorun is stopping the job "
                         r"\(rank 1 \(pid \d+ on host \S+\) exited with status 5\)$" % (r, r), p.stderr, re.M):
            fail("rank %d does not say that it stopped because rank 1 exited" % r)
    if "sending SIGKILL" in p.stderr:
        fail("a rank waiting in the store had to be SIGKILLed")
    if elapsed > 15:
        fail("took %.1f s to end the job" % elapsed)


def case_late():
    p, elapsed = run([ORDORUN, "--timeout-startup", "2", "-n", "3", PINGPONG,
                      "--late-rank", "2", "--late-seconds", "60"], env=ucx_env("tcp,self"), timeout=60)
    if p.returncode == 0:
        fail("the job succeeded although rank 2 never connected")
    if elapsed > 10:
        fail("took %.1f s to report the missing rank" % elapsed)
    if not re.search(r"rank 2 \(pid \d+ on host \S+\) did not connect to the store within 2 s", p.stderr):
        fail("no clear timeout message naming rank 2")


def case_prefix():
    script = 'echo "out $ORDO_RANK"; echo "err $ORDO_RANK" >&2; printf "tail $ORDO_RANK"'
    p, _ = run([ORDORUN, "-n", "3", "sh", "-c", script], timeout=30)
    if p.returncode != 0:
        fail("exit %d" % p.returncode)
    out = sorted(p.stdout.splitlines())
    err = sorted(p.stderr.splitlines())
    want_out = sorted(["[%d] out %d" % (r, r) for r in range(3)] + ["[%d] tail %d" % (r, r) for r in range(3)])
    want_err = sorted(["[%d] err %d" % (r, r) for r in range(3)])
    if out != want_out:
        fail("stdout lines %s, expected %s" % (out, want_out))
    if err != want_err:
        fail("stderr lines %s, expected %s" % (err, want_err))


def case_exit_status():
    # Rank 1 fails first with 5; rank 0 would fail later with 7 but is stopped first.
    p, _ = run([ORDORUN, "-n", "2", "sh", "-c",
                'if [ "$ORDO_RANK" = 1 ]; then exit 5; fi; sleep 20; exit 7'], timeout=30)
    if p.returncode != 5:
        fail("exit status %d, expected 5 (rank 1's)" % p.returncode)
    if "rank 1 (pid" not in p.stderr or "exited with status 5" not in p.stderr:
        fail("no message naming rank 1 and its status")
    p, _ = run([ORDORUN, "-n", "2", "sh", "-c", "exit 0"], timeout=30)
    if p.returncode != 0:
        fail("all ranks succeeded but ordorun exited %d" % p.returncode)
    p, _ = run([ORDORUN, "-n", "2", "sh", "-c", 'if [ "$ORDO_RANK" = 0 ]; then kill -SEGV $$; fi'], timeout=30)
    if p.returncode != 128 + signal.SIGSEGV:
        fail("exit status %d, expected %d for a SIGSEGV death" % (p.returncode, 128 + signal.SIGSEGV))
    p, _ = run([ORDORUN, "-n", "2", "/nonexistent/program"], timeout=30)
    if p.returncode != 127 or "cannot execute '/nonexistent/program'" not in p.stderr:
        fail("a missing program must give 127 and say so")
    # A remote shell that cannot reach its host (ssh exits 255): named, with the hint, and never
    # mistaken for a signal to ordorun.
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix="_rsh", delete=False) as f:
        f.write("#!/bin/sh\nexit 255\n")
    try:
        os.chmod(f.name, 0o755)
        p, _ = run([ORDORUN, "--hosts", "nohost:1,other:1", "--store-addr", "127.0.0.1", "--rsh", f.name, "true"],
                   timeout=30)
    finally:
        os.unlink(f.name)
    # Both remote shells fail at once: either rank may be reported first.
    hinted = any(("did '%s %s' fail?" % (f.name, h)) in p.stderr for h in ("nohost", "other"))
    if p.returncode != 255 or not hinted or "forwarding" in p.stderr:
        fail("a failing remote shell must give 255 with a hint naming the command")


def case_usage():
    # Numbers are read strictly: no hex, no sign, no nan, nothing absurd.
    for args in ([], ["-n", "0", "true"], ["--hosts", "a:x", "true"], ["--hosts", "a:1,b:1", "-n", "3", "true"],
                 ["--srun", "--no-srun", "true"], ["-n", "0x10", "true"], ["-n", "-1", "true"],
                 ["-n", "99999999999", "true"], ["--timeout", "nan", "true"], ["--grace", "-1", "true"],
                 ["--timeout-startup", "1e999", "true"], ["--hosts", "a:999999,b:999999", "true"]):
        p, _ = run([ORDORUN] + args, timeout=30)
        if p.returncode != 2:
            fail("bad usage %s gave exit %d, expected 2" % (args, p.returncode))
        if not p.stderr.strip():
            fail("bad usage %s printed no explanation" % args)


def case_too_many_ranks():
    """More ranks than the host can start are refused before any starts, with what to change:
    here ordorun may open 64 files (ulimit -n), too few for 40 ranks' pipes."""
    with tempfile.TemporaryDirectory() as d:
        mark = os.path.join(d, "started")
        p, _ = run(["sh", "-c", 'ulimit -n 64 && ulimit -Hn 64 && exec "$0" -n 40 sh -c '
                    '"echo started >> $1" sh "$1"', ORDORUN, mark], timeout=30)
        if p.returncode != 2:
            fail("40 ranks with 64 open files: exit %d, expected 2" % p.returncode)
        if not re.search(r"cannot start 40 rank\(s\).*open files.*at most \d+ ranks", p.stderr):
            fail("the refusal does not say what is short and what fits: %r" % p.stderr)
        if os.path.exists(mark):
            fail("ranks started before the refusal")
        if "--no-host-check" not in p.stderr:
            fail("the refusal does not name the way past it")
        p, _ = run([ORDORUN, "-n", "1000000", "true"], timeout=30)
        if p.returncode != 2 or "cannot start 1000000 rank(s)" not in p.stderr:
            fail("-n 1000000: exit %d: %r" % (p.returncode, p.stderr))


def wait_ready(proc, n, seconds):
    # Reads proc's stdout until n lines said "ready" (or it ends, or time runs out); returns
    # those lines.
    lines = []
    deadline = time.monotonic() + seconds
    while len(lines) < n and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "ready" in line:
            lines.append(line)
    return lines


def terminate(proc, seconds):
    # SIGTERM to ordorun, then its output; None (after a SIGKILL) when it did not end in time.
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None


def case_signals():
    script = 'trap "echo got-term $ORDO_RANK; exit 0" TERM; echo ready; while :; do sleep 0.05; done'
    proc = subprocess.Popen([ORDORUN, "-n", "2", "sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        if len(wait_ready(proc, 2, 20)) < 2:
            fail("ranks did not start")
    except BaseException:
        proc.kill()
        raise
    ended = terminate(proc, 20)
    if ended is None:
        fail("ordorun did not end after SIGTERM")
    out, err = ended
    print("stdout:\n" + out + "stderr:\n" + err)
    for r in range(2):
        if "[%d] got-term %d" % (r, r) not in out:
            fail("rank %d did not receive the forwarded SIGTERM" % r)
    if "forwarding" not in err:
        fail("ordorun did not say it forwarded the signal")


def process_gone(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return any(l.startswith("State:") and "Z" in l.split()[1] for l in f)
    except OSError:
        return True


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case_launcher_idle():
    # ordorun waits on its ranks without using CPU, also past --timeout-startup once every rank
    # has connected (a deadline left in the past once made its poll() spin).
    proc = subprocess.Popen([ORDORUN, "--timeout-startup", "1", "--timeout", "30", "-n", "2", PINGPONG,
                             "--hang-after-connect"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ucx_env("tcp,self"))
    try:
        if len(wait_ready(proc, 2, 30)) < 2:
            fail("ranks did not report ready")
        time.sleep(1.5)  # now past the startup deadline
        before = cpu_seconds(proc.pid)
        time.sleep(2.0)
        used = cpu_seconds(proc.pid) - before
        print("ordorun used %.2f s of CPU in 2 s of waiting" % used)
        if used > 0.5:
            fail("ordorun used %.2f s of CPU in 2 s while its ranks waited (a busy loop)" % used)
    finally:
        terminate(proc, 30)


def case_launcher_killed():
    # ordorun dies (kill -9) while its ranks wait on each other: the ranks must not live on.
    proc = subprocess.Popen([ORDORUN, "-n", "2", PINGPONG, "--hang-after-connect"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ucx_env("tcp,self"))
    pids = []
    try:
        pids = [int(m.group(1)) for m in (re.search(r"pid (\d+) ready", l) for l in wait_ready(proc, 2, 30)) if m]
        if len(pids) < 2:
            fail("ranks did not report ready")
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(process_gone(p) for p in pids):
            time.sleep(0.1)
        alive = [p for p in pids if not process_gone(p)]
        if alive:
            fail("ranks %s outlived their launcher by 10 s" % alive)
    finally:
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()


def case_ssh_quoting():
    # A stand-in for ssh that behaves like it: joins its arguments after the host into one
    # string and runs it with the remote shell, in a clean environment (ssh passes none).
    import tempfile
    tmp = tempfile.mkdtemp(prefix="ordo_fake_ssh_")
    try:
        fake = os.path.join(tmp, "ssh")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\nhost="$1"; shift\nexec env -i PATH="$PATH" FAKE_HOST="$host" sh -c "$*"\n')
        os.chmod(fake, 0o755)
        env = dict(os.environ)
        env["UCX_ORDO_PROBE"] = "ucx value"
        env["MY_VAR"] = "mine; $(not run)"
        script = 'printf "%s|%s|%s|%s|%s|%s\\n" "$FAKE_HOST" "$ORDO_RANK" "$1" "$2" "$UCX_ORDO_PROBE" "$MY_VAR"'
        p, _ = run([ORDORUN, "--hosts", "h1:1,h2:1", "--store-addr", "127.0.0.1", "--rsh", fake, "-x", "MY_VAR",
                    "sh", "-c", script, "x",
                    "two words", "it's \"quoted\" $HOME"], env=env, timeout=30)
        if p.returncode != 0:
            fail("exit %d" % p.returncode)
        for r, h in ((0, "h1"), (1, "h2")):
            want = "[%d] %s|%d|two words|it's \"quoted\" $HOME|ucx value|mine; $(not run)" % (r, h, r)
            if want not in p.stdout.splitlines():
                fail("expected the line %r: arguments or exported variables were mangled" % want)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_store_auth():
    # The store answers only clients that first say hello with the job's token and a valid rank.
    import socket
    import struct
    proc = subprocess.Popen([ORDORUN, "-n", "1", "sh", "-c", 'echo "$ORDO_STORE $ORDO_STORE_TOKEN"; sleep 30'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        if len(line) != 3:
            fail("the rank did not print its store and token")
        host, port = line[1].rsplit(":", 1)
        token = line[2].encode()

        def req(op, key, value=b""):
            return struct.pack(">BII", op, len(key), len(value)) + key + value

        def answer(*msgs):
            with socket.create_connection((host, int(port)), timeout=10) as c:
                try:
                    for m in msgs:
                        c.sendall(m)
                except (BrokenPipeError, ConnectionResetError):
                    return b""  # refused before it had read everything
                data = b""
                while True:
                    try:
                        chunk = c.recv(4096)
                    except (socket.timeout, ConnectionResetError):
                        # A store that drops a refused client while its put is still unread
                        # makes the kernel reset the connection instead of closing it.
                        break
                    if not chunk:
                        break
                    data += chunk
                    if len(data) >= 5 * len(msgs):
                        break
                return data
        put = req(2, b"k", b"v")
        if answer(put) != b"":
            fail("a put without hello was answered")
        # A refused hello may be answered bad_request before the drop (which a reset after the
        # unread put can overtake), never more.
        refused = (b"", b"\1\0\0\0\0")
        if answer(req(1, b"0", b"wrong-token"), put) not in refused:
            fail("a hello with a wrong token was answered")
        if answer(req(1, b"7", token), put) not in refused:
            fail("a hello with a rank outside the job was answered")
        got = answer(req(1, b"0", token), put, req(3, b"k"))
        if got != b"\0\0\0\0\0" + b"\0\0\0\0\0" + b"\0\0\0\0\1v":
            fail("a proper client got %r" % got)
    finally:
        if terminate(proc, 20) is None:
            fail("ordorun did not end after SIGTERM")


class Strangers:
    """`n` connections to host:port that never say hello, held open from a thread of their own;
    with `reconnect`, each one the store drops is opened again at once (the harder flood)."""

    def __init__(self, host, port, n, reconnect):
        import socket
        import threading
        self.socket, self.addr, self.reconnect = socket, (host, port), reconnect
        self.socks = [self.open() for _ in range(n)]
        self.reopened = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.hold, daemon=True)
        self.thread.start()

    def open(self):
        s = self.socket.socket(self.socket.AF_INET, self.socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(self.addr)  # not waited for: a full backlog must not stall the test
        return s

    def hold(self):
        import select
        while not self.stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for s in ready:
                try:
                    gone = s.recv(1) == b""
                except (BlockingIOError, InterruptedError):
                    gone = False
                except OSError:
                    gone = True
                if gone and self.reconnect:
                    self.socks[self.socks.index(s)] = self.open()
                    s.close()
                    self.reopened += 1
                elif gone:
                    self.socks.remove(s)
                    s.close()

    def close(self):
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


def case_strangers():
    # 300 strangers hold connections to the store (on loopback, the ranks' own address) while a
    # 2-rank job starts: its start-up must stay within twice its time alone, measured here in
    # the same run (with a floor of 4 s for a loaded 2-core machine; a store that waits for
    # strangers' authentication deadlines takes 10 s or more). The strangers are held for
    # longer than the ranks' bootstrap timeout (--timeout-startup 3: 5 s), which they must not
    # reach. Each rank waits, before it bootstraps, until the strangers are connected.
    with tempfile.TemporaryDirectory() as d:
        script = ('echo "$ORDO_STORE" > %s/store.$ORDO_RANK; '
                  'while [ ! -e %s/go ]; do sleep 0.01; done; exec "$@"') % (d, d)

        def start_job(strangers, reconnect):
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            proc = subprocess.Popen([ORDORUN, "--timeout", "60", "--timeout-startup", "3", "-n", "2",
                                     "sh", "-c", script, "sh", PINGPONG],
                                    env=ucx_env("tcp,self"), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(d, "store.0")) and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.05)  # the line is written
            with open(os.path.join(d, "store.0")) as f:
                host, port = f.read().strip().rsplit(":", 1)
            flood = Strangers(host, int(port), strangers, reconnect) if strangers else None
            if flood:
                time.sleep(1.0)  # every stranger has reached the store (or its backlog)
            start = time.monotonic()
            open(os.path.join(d, "go"), "w").close()
            try:
                out, err = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                fail("the job hung with %d strangers:\n%s" % (strangers, err))
            elapsed = time.monotonic() - start
            if flood:
                # Held past the ranks' bootstrap timeout (5 s) before they are let go.
                while time.monotonic() - start < 6:
                    time.sleep(0.1)
                flood.close()
            print("%d strangers%s: exit %d in %.2f s%s\nstderr:\n%s" % (
                strangers, " reconnecting" if reconnect else "", proc.returncode, elapsed,
                " (%d reopened)" % flood.reopened if flood else "", err))
            if proc.returncode != 0:
                fail("the job failed with %d strangers on the store's port" % strangers)
            check_pingpong(subprocess.CompletedProcess([], 0, out, err), 2, expect_rndv=False)
            return elapsed

        alone = start_job(0, False)
        bound = max(2 * alone, 4.0)
        for reconnect in (False, True):
            crowded = start_job(300, reconnect)
            if crowded > bound:
                fail("with 300 strangers%s the job took %.2f s, alone %.2f s (bound %.2f s)" % (
                    " reconnecting" if reconnect else "", crowded, alone, bound))


def case_missing_device():
    # A device that UCX_NET_DEVICES names but the host lacks: the message names UCX_NET_DEVICES
    # (it said "check UCX_TLS", which was not the cause).
    env = ucx_env("tcp", devices="nosuch0")
    p, _ = run([ORDORUN, "--timeout", "60", "-n", "2", PINGPONG], env=env, timeout=90)
    if p.returncode == 0:
        fail("the job ran without the device it was given")
    if not re.search(r"^\[\d\] comm: UCX found no network device to use .*UCX_NET_DEVICES", p.stderr, re.M):
        fail("the ranks' message does not name UCX_NET_DEVICES")


def children_of(pid):
    # The pids whose parent is pid (from /proc; zombies included).
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def case_start_failure():
    # ordorun runs out of file descriptors while it starts ranks: the ranks it had started must
    # end with it (they would wait for the missing ranks: ordo ranks 30 s, others for ever).
    # The test is a subreaper, so ranks left behind become its children, where it finds them.
    if not shutil.which("prlimit"):
        skip("prlimit (util-linux) is not installed")
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    # --no-host-check: ordorun would otherwise refuse the job before starting any rank.
    p, elapsed = run(["prlimit", "--nofile=24", ORDORUN, "--no-host-check", "--grace", "1", "-n", "40", "sh", "-c",
                      "exec sleep 60"],
                     timeout=60)
    deadline = time.monotonic() + 10
    left = children_of(os.getpid())
    while left and time.monotonic() < deadline:
        for pid in left:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.1)
        left = children_of(os.getpid())
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    if left:
        fail("%d rank(s) that ordorun had started outlived it by 10 s" % len(left))
    if "cannot start rank" not in p.stderr or "Too many open files" not in p.stderr:
        fail("ordorun did not say which rank it could not start and why")
    if p.returncode == 0:
        fail("ordorun exited 0 although it could not start every rank")
    if elapsed > 10:
        fail("ordorun took %.1f s to end after a failed start" % elapsed)


def case_sighup():
    # SIGHUP to ordorun (its session ended) stops an ordo job, although UCX in the ranks catches
    # SIGHUP: the ranks must end from the SIGTERM ordorun sends them, not from a SIGKILL after
    # --grace, and the message names what was sent.
    proc = subprocess.Popen([ORDORUN, "--grace", "20", "-n", "2", PINGPONG, "--hang-after-connect"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ucx_env("tcp,self"))
    try:
        if len(wait_ready(proc, 2, 30)) < 2:
            fail("ranks did not report ready")
        start = time.monotonic()
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - start
    except BaseException:
        proc.kill()
        raise
    print("exit %d after %.2f s\nstdout:\n%sstderr:\n%s" % (proc.returncode, elapsed, out, err))
    if "sending SIGKILL" in err:
        fail("the ranks did not stop on ordorun's SIGHUP; they had to be killed")
    if elapsed > 10:
        fail("took %.1f s to stop after SIGHUP" % elapsed)
    if "SIGHUP" not in err or "as SIGTERM" not in err:
        fail("ordorun's message does not say it stops the ranks with SIGTERM on SIGHUP")
    if proc.returncode != 128 + signal.SIGHUP:
        fail("exit status %d, expected %d" % (proc.returncode, 128 + signal.SIGHUP))


def case_token_hidden():
    # With --hosts the store's token never appears on a command line (which every user can read
    # in ps): not on the remote shell's, not on the remote side. A stand-in for ssh that keeps
    # running while its command runs (as ssh does) and passes standard input on; the ranks
    # bootstrap through the store, so the token did arrive.
    import tempfile
    tmp = tempfile.mkdtemp(prefix="ordo_fake_ssh_")
    proc = None
    try:
        fake = os.path.join(tmp, "ssh")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\nhost="$1"; shift\nenv -i PATH="$PATH" sh -c "$*"\nexit $?\n')
        os.chmod(fake, 0o755)
        show = 'printf "token=%s\\n" "$ORDO_STORE_TOKEN"; exec "$0" "$@"'
        proc = subprocess.Popen([ORDORUN, "--hosts", "h1:1,h2:1", "--store-addr", "127.0.0.1", "--rsh", fake,
                                 "--timeout", "60", "sh", "-c", show, PINGPONG, "--hang-after-connect"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ucx_env("tcp,self"))
        tokens, ready = set(), 0
        deadline = time.monotonic() + 30
        while ready < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            print(line, end="")
            m = re.search(r"token=(\S*)", line)
            if m:
                tokens.add(m.group(1))
            ready += "ready" in line
        if ready < 2:
            fail("the ranks did not bootstrap through the store")
        if len(tokens) != 1 or len(next(iter(tokens))) != 32:
            fail("the ranks did not get one 32-digit token: %s" % tokens)
        token = next(iter(tokens)).encode()
        seen = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if token in cmdline:
                seen.append("%s: %s" % (entry, cmdline.replace(b"\0", b" ")[:200]))
        if seen:
            fail("the store token is on a command line every user can read:\n" + "\n".join(seen))
    finally:
        if proc is not None and terminate(proc, 20) is None:
            fail("ordorun did not end after SIGTERM")
        shutil.rmtree(tmp, ignore_errors=True)


def case_srun_handoff():
    # A fake srun records how ordorun hands the launch over; no Slurm needed.
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ordo_fake_srun_%d" % os.getpid())
    os.makedirs(tmp, exist_ok=True)
    try:
        fake = os.path.join(tmp, "srun")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\necho "srun-args: $*"\n')
        os.chmod(fake, 0o755)
        env = dict(os.environ)
        env["PATH"] = tmp + ":" + env["PATH"]
        p, _ = run([ORDORUN, "--srun", "-n", "3", "prog", "--x", "1"], env=env, timeout=30)
        if p.returncode != 0 or "srun-args: --mpi=pmix --label -n 3 prog --x 1" not in p.stdout:
            fail("explicit --srun handoff did not exec srun --mpi=pmix -n 3 prog --x 1")
        env["SLURM_JOB_ID"] = "42"
        env["SLURM_NTASKS"] = "4"
        p, _ = run([ORDORUN, "-n", "2", "prog"], env=env, timeout=30)
        if "srun-args: --mpi=pmix --label -n 2 prog" not in p.stdout:
            fail("inside an allocation with room, ordorun did not hand over to srun")
        p, _ = run([ORDORUN, "-n", "8", "true"], env=env, timeout=30)
        if "srun-args" in p.stdout or p.returncode != 0:
            fail("-n 8 does not fit SLURM_NTASKS=4: ordorun must launch locally")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_mpirun():
    mpirun = shutil.which("mpirun")
    if not mpirun:
        skip("mpirun (openmpi-bin) is not installed")
    cmd = [mpirun, "-n", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    env = ucx_env("tcp,self")
    p, _ = run(cmd + [PINGPONG, "--expect-bootstrap", "pmix"], env=env, timeout=120)
    if p.returncode != 0 and ("PMIx" in p.stderr and "initialisation" in p.stderr):
        skip("mpirun's PMIx server does not talk to this libpmix client: " + p.stderr.strip()[:300])
    if p.returncode != 0:
        fail("pingpong under mpirun exited %d" % p.returncode)
    if p.stdout.count("(pmix): received 28 messages") != 2:
        fail("both ranks must report 28 messages over a PMIx bootstrap")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def slurm_cluster():
    """One-node Slurm: munged, slurmctld and slurmd in the foreground as children of this test,
    with their own key, socket, ports and state in a scratch directory. Yields the environment
    to run salloc/srun in (UCX over TCP on loopback); skips when Slurm or root is missing."""
    need = ["munged", "munge", "slurmctld", "slurmd", "srun", "salloc", "sinfo"]
    missing = [b for b in need if not shutil.which(b)]
    if missing:
        skip("Slurm/munge not installed (missing %s): apt-get install slurmctld slurmd slurm-client munge"
             % ", ".join(missing))
    if os.geteuid() != 0:
        skip("the one-node Slurm test runs slurmd and needs root")
    import ctypes
    import tempfile
    # Become a subreaper: slurmd's step daemons detach from it, and this test, not init (which
    # may not reap in a container), collects them.
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    scratch = tempfile.mkdtemp(prefix="ordo_slurm_")
    os.chmod(scratch, 0o700)
    daemons = []
    try:
        for d in ("state", "spool"):
            os.makedirs(os.path.join(scratch, d))
        key = os.path.join(scratch, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = os.path.join(scratch, "munge.sock")
        log = open(os.path.join(scratch, "daemons.log"), "w")
        daemons.append(subprocess.Popen(
            ["munged", "-F", "--force", "--key-file=" + key, "--socket=" + sock,
             "--pid-file=" + os.path.join(scratch, "munged.pid"), "--log-file=" + os.path.join(scratch, "munged.log"),
             "--seed-file=" + os.path.join(scratch, "munged.seed")], stdout=log, stderr=log))
        host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
        conf = os.path.join(scratch, "slurm.conf")
        with open(conf, "w") as f:
            f.write("""ClusterName=ordotest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={p1}
SlurmdPort={p2}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={s}/state
SlurmdSpoolDir={s}/spool
SlurmctldPidFile={s}/slurmctld.pid
SlurmdPidFile={s}/slurmd.pid
SlurmctldLogFile={s}/slurmctld.log
SlurmdLogFile={s}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
InactiveLimit=0
MinJobAge=5
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
""".format(host=host, p1=free_port(), p2=free_port(), sock=sock, s=scratch))
        env = ucx_env("tcp,self")
        env["SLURM_CONF"] = conf
        deadline = time.monotonic() + 20
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.1)
        daemons.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", conf], stdout=log, stderr=log, env=env))
        daemons.append(subprocess.Popen(["slurmd", "-D", "-f", conf], stdout=log, stderr=log, env=env))
        deadline = time.monotonic() + 40
        state = ""
        while time.monotonic() < deadline:
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env, timeout=10)
            state = r.stdout.strip()
            if state == "idle":
                break
            time.sleep(0.5)
        if state != "idle":
            with open(os.path.join(scratch, "daemons.log")) as f:
                print(f.read())
            fail("the one-node Slurm cluster did not come up (node state '%s')" % state)
        yield env
        # Let slurmd's step daemons finish before slurmd goes, so none is left behind.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env, timeout=10)
            if not r.stdout.strip():
                break
            time.sleep(0.2)
    finally:
        for d in reversed(daemons):
            d.terminate()
            try:
                d.wait(timeout=10)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.1)
        shutil.rmtree(scratch, ignore_errors=True)


def case_slurm():
    """ordorun inside an salloc allocation of the one-node cluster hands the launch to
    srun --mpi=pmix and the ranks bootstrap via PMIx."""
    with slurm_cluster() as env:
        p, _ = run(["salloc", "-n", "2", "--overcommit", ORDORUN, "-n", "2", PINGPONG, "--expect-bootstrap", "pmix"],
                   env=env, timeout=120)
        if p.returncode != 0:
            fail("ordorun inside salloc exited %d" % p.returncode)
        for r in range(2):
            if not re.search(r"^%d: rank %d of 2 \(pmix\): received 28 messages" % (r, r), p.stdout, re.M):
                fail("rank %d did not report 28 messages over PMIx with srun's label" % r)


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def netns_hosts(ordorun, per_host=1):
    """Two network namespaces ("hosts") joined by veth pairs to a bridge in a third, where
    ordorun runs. Yields (launch, env, hosts): the ordorun command line starting `per_host`
    ranks on each host through `ip netns exec` (append the program), the environment with UCX
    over TCP on the veth device, and the two namespace names. Skips where namespaces are not
    permitted."""
    if not shutil.which("ip"):
        skip("iproute2's ip is not installed")
    tag = "o%d" % (os.getpid() % 100000)
    hub, a, b = tag + "hub", tag + "a", tag + "b"
    probe = sh("ip netns add %s" % hub)
    if probe.returncode != 0:
        skip("creating network namespaces is not permitted here: " + probe.stderr.strip())
    try:
        setup = [
            "ip netns exec {h} ip link set lo up",
            "ip netns exec {h} ip link add br0 type bridge",
            "ip netns exec {h} ip addr add 10.77.0.1/24 dev br0",
            "ip netns exec {h} ip link set br0 up",
        ]
        for i, ns in enumerate([a, b]):
            setup += [
                "ip netns add {ns}",
                "ip netns exec {ns} ip link set lo up",
                "ip netns exec {h} ip link add v{i} type veth peer name ordo0 netns {ns}",
                "ip netns exec {h} ip link set v{i} master br0",
                "ip netns exec {h} ip link set v{i} up",
                "ip netns exec {ns} ip addr add 10.77.0.%d/24 dev ordo0" % (i + 2),
                "ip netns exec {ns} ip link set ordo0 up",
            ]
            setup = [c.replace("{ns}", ns).replace("{i}", str(i)) for c in setup]
        for c in setup:
            r = sh(c.format(h=hub))
            if r.returncode != 0:
                skip("network namespace setup failed (%s): %s" % (c.format(h=hub), r.stderr.strip()))
        env = ucx_env("tcp,self", devices="ordo0")
        launch = ["ip", "netns", "exec", hub, ordorun,
                  "--hosts", "%s:%d,%s:%d" % (a, per_host, b, per_host), "--rsh", "ip netns exec",
                  "--store-addr", "10.77.0.1", "--timeout", "90", "--timeout-startup", "20"]
        yield launch, env, (a, b)
    finally:
        for ns in (a, b, hub):
            sh("ip netns del %s" % ns)


def case_netns():
    """Ranks in two namespaces; ordorun starts them through `ip netns exec`, UCX talks TCP."""
    with netns_hosts(ORDORUN) as (launch, env, (a, b)):
        mode = ARGS[0] if ARGS else "pingpong"
        if mode == "pingpong":
            p, _ = run(launch + [PINGPONG], env=env, timeout=120)
            check_pingpong(p, 2)
        else:
            p, elapsed = run(launch + [PINGPONG, "--die-rank", "1", "--rounds", "4"], env=env, timeout=60)
            if p.returncode == 0 or elapsed > 10:
                fail("a killed remote rank must end the job non-zero within 10 s")
            if not re.search(r"rank 1 \(pid \d+ on host %s\) was killed by signal 9" % b, p.stderr):
                fail("ordorun's message does not name rank 1 on host %s" % b)



def listening(ns):
    """The local addresses of the TCP sockets listening in namespace `ns` (IPv4 and IPv6)."""
    r = sh("ip netns exec %s ss -Hltn" % ns)
    return [line.split()[3].rsplit(":", 1)[0] for line in r.stdout.splitlines() if line.strip()]


def case_listen_devices():
    """What a rank exposes (docs/comm.md): in a namespace with a second device (10.78.0.1 on a
    veth), two ranks over TCP listen on that device too, unless ORDO_NET_DEVICES=lo restricts
    UCX to loopback; then every listening socket of the job is on 127.0.0.1."""
    app = ARGS[0]
    if not shutil.which("ip") or not shutil.which("ss"):
        skip("iproute2's ip and ss are needed")
    ns = "o%dl" % (os.getpid() % 100000)
    probe = sh("ip netns add %s" % ns)
    if probe.returncode != 0:
        skip("creating network namespaces is not permitted here: " + probe.stderr.strip())
    try:
        # The second device: one end of a veth pair whose other end stays in the namespace too.
        for c in ["ip netns exec {n} ip link set lo up",
                  "ip netns exec {n} ip link add d0 type veth peer name d1",
                  "ip netns exec {n} ip addr add 10.78.0.1/24 dev d0",
                  "ip netns exec {n} ip link set d1 up", "ip netns exec {n} ip link set d0 up"]:
            r = sh(c.format(n=ns))
            if r.returncode != 0:
                skip("network namespace setup failed (%s): %s" % (c.format(n=ns), r.stderr.strip()))
        seen = {}
        for restricted in (False, True):
            env = ucx_env("tcp,self", devices=None)
            env.pop("UCX_NET_DEVICES", None)
            env.pop("ORDO_NET_DEVICES", None)
            if restricted:
                env["ORDO_NET_DEVICES"] = "lo"
            # A run long enough to be looked at, ended by SIGTERM once the ranks listen.
            cmd = ["ip", "netns", "exec", ns, ORDORUN, "-n", "2", "--timeout", "60", app,
                   "--size", "64x64", "--blocks", "2x1", "--iters", "100000000", "--workers", "1"]
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            try:
                # ordorun's store, then one UCX listener per rank per device it may use.
                deadline = time.monotonic() + 30
                addrs = []
                while time.monotonic() < deadline and proc.poll() is None:
                    addrs = listening(ns)
                    if len(addrs) >= 3 and (restricted or any("10.78.0.1" in a for a in addrs)):
                        time.sleep(0.5)  # let the second rank's listeners appear too
                        addrs = listening(ns)
                        break
                    time.sleep(0.1)
            finally:
                out = terminate(proc, 15)
            print("ORDO_NET_DEVICES=%s: listening on %s" % ("lo" if restricted else "(unset)", addrs))
            if out is not None and proc.returncode not in (0, 128 + signal.SIGTERM) and len(addrs) < 3:
                print("stdout:\n%s\nstderr:\n%s" % out)
            seen[restricted] = addrs
        if not any("10.78.0.1" in a for a in seen[False]):
            fail("unrestricted, no rank listened on the second device: the test cannot tell")
        if len(seen[True]) < 3:
            fail("with ORDO_NET_DEVICES=lo the ranks never listened (expected the store and 2 ranks)")
        others = [a for a in seen[True] if a not in ("127.0.0.1", "[::ffff:127.0.0.1]")]
        if others:
            fail("with ORDO_NET_DEVICES=lo the job still listens on %s" % others)
    finally:
        sh("ip netns del %s" % ns)


if __name__ == "__main__":
    ORDORUN, PINGPONG = sys.argv[1], sys.argv[2]
    CASE, ARGS = sys.argv[3], sys.argv[4:]
    CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
    if CASE not in CASES:
        print("unknown case %s; known: %s" % (CASE, ", ".join(sorted(CASES))))
        sys.exit(2)
    CASES[CASE]()
    print("PASS")
