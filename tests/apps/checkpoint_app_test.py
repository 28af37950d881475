#!/usr/bin/env python3
"""--checkpoint / --restart of the stencil apps (multiprocess suite): a killed job loses nothing.

  checkpoint_app_test.py ORDORUN BIN RANKS TLS -- ARGS...
      1. `ordorun -n RANKS BIN ARGS --output plain.npy`: the uninterrupted run.
      2. The same with --checkpoint DIR --checkpoint-every 25 --output out.npy, started in the
         background; once a checkpoint is complete (its manifest exists) the last rank is sent
         SIGKILL from outside, as a dying node would be: ordorun must end the job with a
         non-zero status and out.npy must not exist.
      3. The same command plus --restart DIR: exit 0, "resumed after step k of n" with
         0 < k < n, out.npy byte-identical to plain.npy and the same iters= on the result
         line. With --tol in ARGS the uninterrupted run must stop before --iters (the
         tolerance, not the step count, ends it), and the restarted one at the same step.
      With 2 ranks over shared memory, `ordorun --restarts 1` with the last rank killed after
      a complete checkpoint: the relaunch resumes part-way, exit 0, the same --output.
      4. The checkpoint restarted on RANKS + 1 ranks: exit 0, the same --output.
      5. Refusals, each exit 2 with the message naming the mismatch: the checkpoint restarted
         with other --blocks (another graph), --checkpoint without --checkpoint-every.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env, expect_refusal)


def parent_of(pid):
    with open("/proc/%s/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def is_descendant(pid, ancestor, depth=3):
    """Whether `ancestor` started `pid`, directly or through at most `depth` - 1 processes (a
    shell between ordorun and the app)."""
    for _ in range(depth):
        pid = parent_of(pid)
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def rank_pids(ordorun_pid, binary):
    """Rank number -> pid of the ranks that ordorun (`ordorun_pid`) started on this host
    (ORDO_RANK in their environment). Only that job's: other jobs of the same binary may run
    beside it (other worktrees' tests), and the caller kills what it finds."""
    ranks = {}
    name = os.path.basename(binary)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if not is_descendant(int(pid), ordorun_pid):
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            if not argv or os.path.basename(argv[0].decode(errors="replace")) != name:
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            if env.get(b"ORDO_STORE") is None:
                continue
            ranks[int(env[b"ORDO_RANK"])] = int(pid)
        except (OSError, ValueError, KeyError):
            continue
    return ranks


def has_complete_checkpoint(ckpt):
    if not os.path.isdir(ckpt):
        return False
    return any(os.path.exists(os.path.join(ckpt, d, "manifest"))
               for d in os.listdir(ckpt) if d.startswith("ckpt-"))


def iters_of(stdout, what):
    """The iters= of the one result line in `stdout` (with --tol: the iterations run)."""
    found = re.findall(r"\bapp=\S+ .*\biters=(\d+) ", stdout)
    if len(found) != 1:
        mp.fail("%s: expected one result line with iters=, got %r" % (what, stdout))
    return int(found[0])


def killed_after_checkpoint(cmd, env, ckpt, binary, rank):
    """Runs cmd and sends SIGKILL to its rank `rank` once a checkpoint in ckpt is complete, as
    a dying node would be: (job, the killed pid or None, stdout, stderr) once the job ended."""
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    killed = None
    while time.monotonic() < deadline and job.poll() is None:
        if has_complete_checkpoint(ckpt):
            pids = rank_pids(job.pid, binary)
            if rank in pids:
                os.kill(pids[rank], signal.SIGKILL)
                killed = pids[rank]
                break
        time.sleep(0.005)
    try:
        stdout, stderr = job.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        job.kill()
        mp.fail("the job did not end after rank %d was killed (a hang)" % rank)
    return job, killed, stdout, stderr


def relaunched(ordorun, binary, args, env, tmp, plain):
    """ordorun --restarts 1: the last rank killed from outside once a checkpoint is complete;
    the relaunched job resumes from the newest complete checkpoint (ordo::resume) and ends
    with exit 0 and the uninterrupted --output."""
    ckpt, out = os.path.join(tmp, "ckpt-relaunch"), os.path.join(tmp, "relaunched.npy")
    cmd = [ordorun, "--restarts", "1", "--timeout", "120", "-n", "2", binary] + args + [
        "--checkpoint", ckpt, "--checkpoint-every", "25", "--output", out]
    job, killed, _, stderr = killed_after_checkpoint(cmd, env, ckpt, binary, 1)
    if killed is None:
        mp.fail("ordorun --restarts: the run ended before a rank could be killed")
    m = re.search(r"resumed after step (\d+) of (\d+)", stderr)
    if job.returncode != 0 or "relaunch 1" not in stderr or not m or int(m.group(1)) == 0:
        mp.fail("ordorun --restarts 1, rank 1 killed after a checkpoint: exit %d, expected 0, "
                "a relaunch resumed part-way; stderr: %s" % (job.returncode, stderr))
    with open(plain, "rb") as a, open(out, "rb") as b:
        if a.read() != b.read():
            mp.fail("ordorun --restarts: the relaunched job's --output differs")
    print("ordorun --restarts 1, rank 1 killed: relaunched, resumed after step %s, --output "
          "byte-identical" % m.group(1))


def main():
    sep = sys.argv.index("--")
    ordorun, binary, ranks, tls = sys.argv[1:sep]
    args = sys.argv[sep + 1:]
    ranks = int(ranks)
    env = mp.ucx_env(tls + ",self")
    tmp = tempfile.mkdtemp(prefix="ordo-ckpt-app-%d-" % os.getpid())
    try:
        plain, out = os.path.join(tmp, "plain.npy"), os.path.join(tmp, "out.npy")
        ckpt = os.path.join(tmp, "ckpt")
        run = [ordorun, "--timeout", "120", "-n", str(ranks), binary] + args
        p, _ = mp.run(run + ["--output", plain], env=env, timeout=240)
        if p.returncode != 0:
            mp.fail("the uninterrupted run exited %d" % p.returncode)
        plain_iters = iters_of(p.stdout, "the uninterrupted run")
        if "--tol" in args and not plain_iters < int(args[args.index("--iters") + 1]):
            mp.fail("the uninterrupted --tol run ran all its --iters (%d): give a larger "
                    "--tol, so that the tolerance ends it" % plain_iters)

        with_ckpt = run + ["--checkpoint", ckpt, "--checkpoint-every", "25", "--output", out]
        print("$ %s  (killed once a checkpoint is complete)" % " ".join(with_ckpt))
        job, killed, stdout, stderr = killed_after_checkpoint(with_ckpt, env, ckpt, binary,
                                                              ranks - 1)
        print("-> exit %d\nstdout:\n%sstderr:\n%s" % (job.returncode, stdout, stderr))
        if killed is None:
            mp.fail("the run ended (exit %d) before a rank could be killed after its first "
                    "checkpoint; give it more --iters" % job.returncode)
        if job.returncode == 0:
            mp.fail("ordorun exited 0 although rank %d was killed" % (ranks - 1))
        if os.path.exists(out):
            mp.fail("the killed job left %s" % out)
        print("rank %d (pid %d) killed after a complete checkpoint; the job ended with exit %d"
              % (ranks - 1, killed, job.returncode))

        p, _ = mp.run(with_ckpt + ["--restart", ckpt], env=env, timeout=240)
        if p.returncode != 0:
            mp.fail("the restarted run exited %d" % p.returncode)
        m = re.search(r"resumed after step (\d+) of (\d+)", p.stderr)
        if not m or not 0 < int(m.group(1)) < int(m.group(2)):
            mp.fail("the restarted run did not say it resumed part-way (after step k of n, "
                    "0 < k < n)")
        with open(plain, "rb") as a, open(out, "rb") as b:
            if a.read() != b.read():
                mp.fail("the restarted run's --output differs from the uninterrupted run's")
        restarted_iters = iters_of(p.stdout, "the restarted run")
        if restarted_iters != plain_iters:
            mp.fail("the restarted run reports iters=%d, the uninterrupted one iters=%d"
                    % (restarted_iters, plain_iters))
        print("restarted after step %s of %s: --output byte-identical to the uninterrupted "
              "run's, iters=%d in both" % (m.group(1), m.group(2), plain_iters))

        if ranks == 2 and tls == "shm":
            relaunched(ordorun, binary, args, env, tmp, plain)

        blocks = args.index("--blocks")
        other = list(args)
        # A block grid of as many blocks as ranks, with the app's dimensions.
        dims = args[blocks + 1].count("x") + 1
        other[blocks + 1] = "x".join(["1"] * (dims - 1) + [str(ranks)])
        mp.expect_refusal([ordorun, "--timeout", "60", "-n", str(ranks), binary] + other +
                          ["--restart", ckpt], env, ["belongs to another graph"], "other --blocks")
        # Checkpoints name locations, not ranks, and leave out the exchange the layer declares
        # by rank count: a restart on another rank count gives the same bytes.
        more = os.path.join(tmp, "more.npy")
        p, _ = mp.run([ordorun, "--timeout", "60", "-n", str(ranks + 1), binary] + args +
                      ["--restart", ckpt, "--output", more], env=env)
        if p.returncode != 0:
            mp.fail("the restart on %d rank(s) exited %d; stderr: %s" %
                    (ranks + 1, p.returncode, p.stderr))
        with open(plain, "rb") as a, open(more, "rb") as b:
            if a.read() != b.read():
                mp.fail("the restart on %d rank(s) gave another --output" % (ranks + 1))
        print("restart on %d rank(s): --output byte-identical" % (ranks + 1))
        mp.expect_refusal(run + ["--checkpoint", ckpt], env,
                          ["--checkpoint needs --checkpoint-every"], "--checkpoint alone")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
