#!/usr/bin/env python3
"""Checkpoints and restart (multiprocess suite): nothing done before the last checkpoint is lost.

  checkpoint_test.py ORDORUN CHECKPOINT_RANKS [--full-disk]

On 1 and 2 ranks (2 ranks: UCX shared memory and TCP on loopback, locations shared or copied):
  1. an uninterrupted run of 30 iterations writes every rank's home blocks and reduced energy;
  2. the same run with a checkpoint every 4 iterations is killed (SIGKILL, on the last rank) in
     iteration 13, so ordorun ends the job with a non-zero status;
  3. the same command plus --restart DIR must say it resumed at 12 (the newest complete
     checkpoint) and end with files byte-identical to the uninterrupted run's.
run_until with checkpoints checks its condition as often as without and ends with the same
bytes. Any rank count restarts any other's checkpoint: written on 1, 2 and 3 ranks (killed in
iteration 13), each restarted on 1, 2 and 3 ranks ends with the blocks and energy of an
uninterrupted 1-rank run, byte for byte (the blocks of every rank's output, in rank order).
ordorun --restarts 2 -n 3 with a rank that kills itself once (SIGKILL) relaunches the job by
itself, which resumes at 12 and ends with exit 0 and the uninterrupted bytes; a rank that dies
in every attempt stops it after the third with exit 2, naming the rank. Only the newest 2
complete checkpoints stay (1 with ORDO_CHECKPOINT_KEEP=1), and a second job given the
directory of a running one is refused (the running 1-rank job's rank then ends within 10 s of
a SIGKILL of its ordorun). A rank killed at each stage of a checkpoint's writing
(copy, write, fsync, rename, manifest, removal of an older one; ORDO_CHECKPOINT_TEST_KILL), with
and without the copy, leaves the previous complete checkpoint, from which the restart ends with
the uninterrupted bytes. Since checkpoints are written while the run goes on, a kill in
iteration 13 resumes at 12 or, while 12 was still being written, at 8. Then the refusals, each exit 2 with a message naming
the mismatch: a checkpoint of another graph (other --blocks), one left incomplete (its manifest
removed; a part truncated), one of an older format, and a directory with no checkpoint.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env, expect_refusal)

ITERS, EVERY, DIE_AT = "30", "4", "13"


def read_outputs(prefix, ranks):
    out = []
    for r in range(ranks):
        with open("%s.%d" % (prefix, r), "rb") as f:
            out.append(f.read())
    return out


def combined(prefix, ranks):
    """Every rank's blocks in rank order (the blocks' order: homes are chunks of it), then the
    energy, which every rank holds."""
    parts = read_outputs(prefix, ranks)
    return b"".join(p[:-8] for p in parts) + parts[0][-8:]


def newest_complete(ckpt):
    """The iteration of the newest checkpoint in ckpt with a manifest, or None."""
    done = [int(d[5:]) for d in os.listdir(ckpt)
            if d.startswith("ckpt-") and os.path.exists(os.path.join(ckpt, d, "manifest"))]
    return max(done) if done else None


def resumed_point(ckpt, what):
    """Where a restart from ckpt must resume after a kill in iteration DIE_AT: the newest
    complete checkpoint, 12, or 8 while 12's parts were still being written when the rank
    died (the checkpoints are written while the run goes on)."""
    k = newest_complete(ckpt)
    if k not in (8, 12):
        mp.fail("%s: the newest complete checkpoint is %s, expected 12 or 8 after a kill in "
                "iteration %s" % (what, k, DIE_AT))
    return k


def across_rank_counts(ordorun, binary, tmp):
    env = mp.ucx_env("shm,self")
    base = lambda n: [ordorun, "--timeout", "60", "-n", str(n), binary, "--iters", ITERS,
                      "--blocks", "6"]
    ref = os.path.join(tmp, "x-plain")
    p, _ = mp.run(base(1) + ["--out", ref], env=env)
    if p.returncode != 0:
        mp.fail("the uninterrupted 1-rank run (6 blocks) exited %d" % p.returncode)
    want = combined(ref, 1)
    for writers in (1, 2, 3):
        ckpt = os.path.join(tmp, "x-ckpt-%d" % writers)
        p, _ = mp.run(base(writers) + ["--checkpoint", ckpt, "--every", EVERY, "--die-at", DIE_AT,
                                       "--die-rank", str(writers - 1)], env=env)
        if p.returncode == 0:
            mp.fail("%d writer(s): the run that kills itself exited 0" % writers)
        k = resumed_point(ckpt, "%d writer(s)" % writers)
        for readers in (1, 2, 3):
            out = os.path.join(tmp, "x-%d-%d" % (writers, readers))
            p, _ = mp.run(base(readers) + ["--restart", ckpt, "--out", out], env=env)
            if p.returncode != 0 or "resumed_at=%d" % k not in p.stdout:
                mp.fail("written on %d rank(s), restarted on %d: exit %d, expected to resume at "
                        "%d; stderr: %s" % (writers, readers, p.returncode, k, p.stderr))
            if combined(out, readers) != want:
                mp.fail("written on %d rank(s), restarted on %d: the bytes differ from the "
                        "uninterrupted run's" % (writers, readers))
        print("written on %d rank(s): restarted on 1, 2 and 3 ranks, each byte-identical to "
              "the uninterrupted run" % writers)


def relaunch(ordorun, binary, tmp):
    env = mp.ucx_env("shm,self")
    ref = os.path.join(tmp, "r-plain")
    job = [ordorun, "--timeout", "60", "-n", "3", binary, "--iters", ITERS, "--blocks", "6"]
    p, _ = mp.run(job + ["--out", ref], env=env)
    if p.returncode != 0:
        mp.fail("the uninterrupted 3-rank run exited %d" % p.returncode)
    ckpt = os.path.join(tmp, "r-ckpt")
    out = os.path.join(tmp, "r-relaunched")
    once = os.path.join(tmp, "r-died")
    restarts = [ordorun, "--restarts", "2"] + job[1:]
    p, _ = mp.run(restarts + ["--checkpoint", ckpt, "--every", EVERY, "--die-at", DIE_AT,
                              "--die-rank", "1", "--die-once", once, "--out", out], env=env)
    if p.returncode != 0:
        mp.fail("ordorun --restarts 2 with a rank killed once: exit %d; stderr: %s"
                % (p.returncode, p.stderr))
    for said in ["rank 1", "relaunching the job on 3 rank(s)", "relaunch 1 of 2",
                 "on 3 rank(s)"]:
        if said not in p.stderr:
            mp.fail("ordorun --restarts: stderr does not say %r: %s" % (said, p.stderr))
    if not re.search(r"resumed after iteration (8|12) ", p.stderr):
        mp.fail("ordorun --restarts: stderr does not say it resumed after iteration 12 (or 8, "
                "while 12 was still being written): %s" % p.stderr)
    if read_outputs(out, 3) != read_outputs(ref, 3):
        mp.fail("ordorun --restarts: the relaunched job's bytes differ from the uninterrupted run's")
    print("ordorun --restarts 2 -n 3, rank 1 killed in iteration 13: relaunched, resumed at the "
          "newest complete checkpoint, exit 0, bytes identical")
    # Killed in every attempt: three failures the same way end with exit 2, not a loop.
    shutil.rmtree(ckpt)
    p, _ = mp.run(restarts + ["--checkpoint", ckpt, "--every", EVERY, "--die-at", DIE_AT,
                              "--die-rank", "1", "--out", out], env=env)
    if p.returncode != 2 or "failed 3 times the same way (rank 1" not in p.stderr:
        mp.fail("a rank killed in every attempt: exit %d, expected 2 naming rank 1; stderr: %s"
                % (p.returncode, p.stderr))
    print("a rank killed in every attempt: exit 2 after 3 attempts, naming it")


def interrupted_at_every_stage(ordorun, binary, tmp):
    """A rank killed at each stage of writing the checkpoint of iteration 12 (its copy, its
    part's write, fsync and rename, rank 0's manifest, the removal of an older one) leaves the
    previous complete checkpoint usable: the restart resumes there and ends with the
    uninterrupted run's bytes. With and without the copy (ORDO_CHECKPOINT_COPY)."""
    env = mp.ucx_env("shm,self")
    job = [ordorun, "--timeout", "60", "-n", "2", binary, "--iters", ITERS]
    ref = os.path.join(tmp, "s-plain")
    p, _ = mp.run(job + ["--out", ref], env=env)
    if p.returncode != 0:
        mp.fail("the uninterrupted 2-rank run exited %d" % p.returncode)
    want = read_outputs(ref, 2)
    for copy in ("1", "0"):
        stages = ["copy"] if copy == "1" else []
        stages += ["write", "fsync", "rename", "manifest", "remove"]
        for stage in stages:
            rank = 0 if stage in ("manifest", "remove") else 1
            what = "killed at stage %s of checkpoint 12 (rank %d, ORDO_CHECKPOINT_COPY=%s)" % (
                stage, rank, copy)
            ckpt = os.path.join(tmp, "s-%s-%s" % (copy, stage))
            out = os.path.join(tmp, "s-out-%s-%s" % (copy, stage))
            e = dict(env, ORDO_CHECKPOINT_COPY=copy,
                     ORDO_CHECKPOINT_TEST_KILL="%s:12:%d" % (stage, rank))
            cmd = job + ["--checkpoint", ckpt, "--every", EVERY, "--out", out]
            p, _ = mp.run(cmd, env=e)
            said = "rank %d killed at stage '%s' of checkpoint 12" % (rank, stage)
            if p.returncode == 0 or said not in p.stderr:
                mp.fail("%s: exit %d, expected the hook to kill the rank; stderr: %s"
                        % (what, p.returncode, p.stderr))
            # Only the removal comes after the manifest: then 12 is complete, else 8 is newest.
            # Killed in the copy, rank 1 may be ahead of rank 0, which completes 8 (writes its
            # manifest) in the same pause, before its own copy: then 4 is the newest complete.
            k = 12 if stage == "remove" else 8
            allowed = (4, 8) if stage == "copy" else (k,)
            if newest_complete(ckpt) not in allowed:
                mp.fail("%s: the newest complete checkpoint is %s, expected %s"
                        % (what, newest_complete(ckpt), " or ".join(map(str, allowed))))
            k = newest_complete(ckpt)
            del e["ORDO_CHECKPOINT_TEST_KILL"]
            p, _ = mp.run(cmd + ["--restart", ckpt], env=e)
            if p.returncode != 0 or "resumed_at=%d" % k not in p.stdout:
                mp.fail("%s: the restart exited %d, expected to resume at %d; stderr: %s"
                        % (what, p.returncode, k, p.stderr))
            if read_outputs(out, 2) != want:
                mp.fail("%s: the restarted run's bytes differ from the uninterrupted run's" % what)
        print("ORDO_CHECKPOINT_COPY=%s: killed at each stage (%s), restarted from the previous "
              "complete checkpoint, bytes identical" % (copy, ", ".join(stages)))


def kept_and_locked(ordorun, binary, tmp):
    env = mp.ucx_env("shm,self")
    for keep, want in ((None, ["ckpt-%020d" % k for k in (24, 28)]), ("1", ["ckpt-%020d" % 28])):
        ckpt = os.path.join(tmp, "k-%s" % keep)
        e = dict(env)
        if keep:
            e["ORDO_CHECKPOINT_KEEP"] = keep
        p, _ = mp.run([ordorun, "--timeout", "60", "-n", "2", binary, "--iters", ITERS,
                       "--checkpoint", ckpt, "--every", EVERY], env=e)
        got = sorted(d for d in os.listdir(ckpt) if d.startswith("ckpt-"))
        if p.returncode != 0 or got != want:
            mp.fail("keep %s: exit %d, checkpoints %s, expected %s" % (keep, p.returncode, got, want))
    print("the newest 2 checkpoints kept (1 with ORDO_CHECKPOINT_KEEP=1)")
    # A second job on the directory of a running one (it holds its lock while it runs).
    ckpt = os.path.join(tmp, "k-busy")
    first = subprocess.Popen([ordorun, "--timeout", "60", "-n", "1", binary, "--iters", "100000000",
                              "--checkpoint", ckpt, "--every", "100000"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks = []
    try:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(ckpt, "lock")) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the lock file is created, then locked
        mp.expect_refusal([ordorun, "--timeout", "60", "-n", "2", binary, "--iters", ITERS,
                           "--checkpoint", ckpt, "--every", EVERY], env,
                          ["is in use by another job"], "a directory another job writes")
        # The busy rank of a 1-rank job ends with its launcher (its lifeline to ordorun's
        # store), as a larger job's ranks do: killed with ordorun, it once ran on, an orphan.
        ranks = mp.children_of(first.pid)
        if len(ranks) != 1:
            mp.fail("ordorun -n 1 has %d child processes, expected its one rank" % len(ranks))
        first.kill()
        first.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not mp.process_gone(ranks[0]):
            time.sleep(0.1)
        if not mp.process_gone(ranks[0]):
            mp.fail("the rank of a 1-rank job outlived its launcher (ordorun killed) by 10 s")
        print("a second job on a running job's directory refused; the running job's one rank "
              "ended with its launcher")
    finally:
        first.kill()
        first.wait()
        for pid in ranks:
            if not mp.process_gone(pid):
                os.kill(pid, 9)


def full_disk(ordorun, binary, tmp):
    """A checkpoint directory on a full disk (a 1300 KiB tmpfs in a mount namespace of its own:
    two checkpoints of 513 KiB fit, the third does not). By default the run stops, naming the
    failed checkpoint and the error; with ORDO_CHECKPOINT_ON_FAILURE=continue it ends with the
    uninterrupted bytes and says each failure. Either way the last complete checkpoint (8) is
    intact: restarted from a copy of it, the run ends with the uninterrupted bytes."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "true"], stderr=subprocess.DEVNULL).returncode != 0:
        print("SKIP: a tmpfs of a private mount namespace needs root and unshare -m")
        sys.exit(77)
    env = mp.ucx_env("shm,self")
    job = [ordorun, "--timeout", "60", "-n", "1", binary, "--iters", ITERS, "--width", "8192"]
    ref = os.path.join(tmp, "f-plain")
    p, _ = mp.run(job + ["--out", ref], env=env)
    if p.returncode != 0:
        mp.fail("the uninterrupted run exited %d" % p.returncode)
    want = read_outputs(ref, 1)
    for policy in ("stop", "continue"):
        small = os.path.join(tmp, "f-disk-" + policy)
        kept = os.path.join(tmp, "f-kept-" + policy)
        out = os.path.join(tmp, "f-out-" + policy)
        os.makedirs(small)
        ckpt = os.path.join(small, "ckpt")
        # Mounted, run, and what is left copied out, inside the namespace (the tmpfs goes with it).
        script = ('mount -t tmpfs -o size=1300k tmpfs "$1" || exit 90; shift; kept="$1"; shift; '
                  '"$@"; rc=$?; cp -a "$0" "$kept" || exit 91; exit $rc')
        e = dict(env)
        if policy == "continue":
            e["ORDO_CHECKPOINT_ON_FAILURE"] = "continue"
        p, _ = mp.run(["unshare", "-m", "sh", "-c", script, ckpt, small, kept] + job +
                      ["--checkpoint", ckpt, "--every", EVERY, "--out", out], env=e)
        if p.returncode in (90, 91):
            mp.fail("%s: cannot mount the tmpfs or copy what it holds (exit %d): %s"
                    % (policy, p.returncode, p.stderr))
        said = "the checkpoint of iteration 12 in '%s' failed" % ckpt
        if policy == "stop":
            if p.returncode == 0 or said not in p.stderr or "No space left" not in p.stderr:
                mp.fail("a full disk: exit %d, expected the run to stop saying %r and the "
                        "error; stderr: %s" % (p.returncode, said, p.stderr))
        else:
            if p.returncode != 0 or said not in p.stderr or "the run goes on" not in p.stderr:
                mp.fail("a full disk, ORDO_CHECKPOINT_ON_FAILURE=continue: exit %d, expected 0 "
                        "and a warning %r; stderr: %s" % (p.returncode, said, p.stderr))
            if read_outputs(out, 1) != want:
                mp.fail("a full disk, continue: the run's bytes differ from the uninterrupted run's")
        if newest_complete(kept) != 8:
            mp.fail("%s: after the full disk the newest complete checkpoint is %s, expected 8"
                    % (policy, newest_complete(kept)))
        p, _ = mp.run(job + ["--restart", kept, "--out", out + "-r"], env=env)
        if p.returncode != 0 or "resumed_at=8" not in p.stdout:
            mp.fail("%s: the restart from the last complete checkpoint exited %d, expected to "
                    "resume at 8; stderr: %s" % (policy, p.returncode, p.stderr))
        if read_outputs(out + "-r", 1) != want:
            mp.fail("%s: restarted from the checkpoint kept on the full disk, the bytes differ "
                    "from the uninterrupted run's" % policy)
        print("a full disk (%s): checkpoint 12 failed, %s; checkpoint 8 intact, restarted "
              "byte-identical" % (policy, "the run stopped" if policy == "stop"
                                  else "the run went on to the uninterrupted bytes"))


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="ordo-ckpt-%d-" % os.getpid())
    if sys.argv[3:] == ["--full-disk"]:
        try:
            full_disk(ordorun, binary, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    try:
        across_rank_counts(ordorun, binary, tmp)
        relaunch(ordorun, binary, tmp)
        kept_and_locked(ordorun, binary, tmp)
        interrupted_at_every_stage(ordorun, binary, tmp)
        for ranks, tls in ((1, "shm,self"), (2, "shm,self"), (2, "tcp,self")):
            what = "%d rank(s) over %s" % (ranks, tls.split(",")[0])
            env = mp.ucx_env(tls)
            case = os.path.join(tmp, "%d-%s" % (ranks, tls.split(",")[0]))
            os.makedirs(case)
            ckpt = os.path.join(case, "ckpt")
            base = [ordorun, "--timeout", "60", "-n", str(ranks), binary, "--iters", ITERS]
            p, _ = mp.run(base + ["--out", os.path.join(case, "plain")], env=env)
            if p.returncode != 0:
                mp.fail("%s: the uninterrupted run exited %d" % (what, p.returncode))
            want = read_outputs(os.path.join(case, "plain"), ranks)

            with_ckpt = base + ["--checkpoint", ckpt, "--every", EVERY,
                                "--out", os.path.join(case, "resumed")]
            p, _ = mp.run(with_ckpt + ["--die-at", DIE_AT, "--die-rank", str(ranks - 1)], env=env)
            if p.returncode == 0:
                mp.fail("%s: the run that kills itself in iteration %s exited 0" % (what, DIE_AT))
            if os.path.exists(os.path.join(case, "resumed.0")):
                mp.fail("%s: the killed run wrote its output" % what)
            k = resumed_point(ckpt, what)
            p, _ = mp.run(with_ckpt + ["--restart", ckpt], env=env)
            if p.returncode != 0:
                mp.fail("%s: the restarted run exited %d" % (what, p.returncode))
            if "resumed_at=%d" % k not in p.stdout:
                mp.fail("%s: expected to resume at iteration %d (the newest complete "
                        "checkpoint before %s)" % (what, k, DIE_AT))
            got = read_outputs(os.path.join(case, "resumed"), ranks)
            if got != want:
                mp.fail("%s: the restarted run's blocks differ from the uninterrupted run's"
                        % what)
            print("%s: killed in iteration %s, resumed at %d, %d byte(s) identical to the "
                  "uninterrupted run" % (what, DIE_AT, k, sum(len(b) for b in got)))

        # run_until with checkpoints: its condition is still checked every 3 iterations of the
        # run (10 checks in 30 iterations) between the checkpoints every 4, and the result is
        # the run without checkpoints'.
        for ranks in (1, 2):
            env = mp.ucx_env("shm,self")
            case = os.path.join(tmp, "until-%d" % ranks)
            os.makedirs(case)
            base = [ordorun, "--timeout", "60", "-n", str(ranks), binary, "--iters", ITERS,
                    "--until", "1"]
            outs = []
            for extra in ([], ["--checkpoint", os.path.join(case, "ckpt"), "--every", EVERY]):
                prefix = os.path.join(case, "ck" if extra else "plain")
                p, _ = mp.run(base + extra + ["--out", prefix], env=env)
                if p.returncode != 0 or "checks=10" not in p.stdout:
                    mp.fail("run_until on %d rank(s)%s: exit %d, expected checks=10" % (
                        ranks, " with checkpoints" if extra else "", p.returncode))
                outs.append(read_outputs(prefix, ranks))
            if outs[0] != outs[1]:
                mp.fail("run_until on %d rank(s): checkpoints changed the result" % ranks)
            print("run_until on %d rank(s): 10 checks with and without checkpoints, same bytes"
                  % ranks)

        # Refusals, from the 2-rank checkpoint (the restarted run wrote checkpoints up to 28).
        ckpt = os.path.join(tmp, "2-shm", "ckpt")
        env = mp.ucx_env("shm,self")
        two = [ordorun, "--timeout", "60", "-n", "2", binary, "--iters", ITERS]
        mp.expect_refusal(two + ["--blocks", "6", "--restart", ckpt], env,
                       ["belongs to another graph"], "another graph")
        found = sorted(d for d in os.listdir(ckpt) if d.startswith("ckpt-"))
        if len(found) != 2:
            mp.fail("expected the newest 2 checkpoints, found %s" % found)
        newest = found[-1]
        # An older ordo's checkpoint (format 1): refused, naming the format.
        older = os.path.join(tmp, "older")
        shutil.copytree(ckpt, older)
        manifest = os.path.join(older, newest, "manifest")
        with open(manifest) as f:
            text = f.read()
        with open(manifest, "w") as f:
            f.write(text.replace("ordo checkpoint 2", "ordo checkpoint 1"))
        mp.expect_refusal(two + ["--restart", older], env,
                       ["older ordo (checkpoint format 1"], "a checkpoint of an older format")
        part = os.path.join(ckpt, newest, "rank-1.part")
        with open(part, "r+b") as f:
            f.truncate(os.path.getsize(part) - 8)
        mp.expect_refusal(two + ["--restart", ckpt], env,
                       ["rank-1.part", "is incomplete", "truncated"], "a truncated part")
        for d in found:
            os.remove(os.path.join(ckpt, d, "manifest"))
        mp.expect_refusal(two + ["--restart", ckpt], env,
                       ["only incomplete checkpoints", "manifest is missing"],
                       "checkpoints without their manifests")
        empty = os.path.join(tmp, "empty")
        os.makedirs(empty)
        mp.expect_refusal(two + ["--restart", empty], env, ["holds no checkpoint"],
                       "a directory without checkpoints")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
