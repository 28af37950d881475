#!/usr/bin/env python3
"""Checkpoints and restart (multiprocess suite): nothing done before the last checkpoint is lost.

  checkpoint_test.py ORDORUN CHECKPOINT_RANKS

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
directory of a running one is refused. Then the refusals, each exit 2 with a message naming
the mismatch: a checkpoint of another graph (other --blocks), one left incomplete (its manifest
removed; a part truncated), one of an older format, and a directory with no checkpoint.
"""
import os
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
        for readers in (1, 2, 3):
            out = os.path.join(tmp, "x-%d-%d" % (writers, readers))
            p, _ = mp.run(base(readers) + ["--restart", ckpt, "--out", out], env=env)
            if p.returncode != 0 or "resumed_at=12" not in p.stdout:
                mp.fail("written on %d rank(s), restarted on %d: exit %d, expected to resume at "
                        "12; stderr: %s" % (writers, readers, p.returncode, p.stderr))
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
                 "resumed after iteration 12", "on 3 rank(s)"]:
        if said not in p.stderr:
            mp.fail("ordorun --restarts: stderr does not say %r: %s" % (said, p.stderr))
    if read_outputs(out, 3) != read_outputs(ref, 3):
        mp.fail("ordorun --restarts: the relaunched job's bytes differ from the uninterrupted run's")
    print("ordorun --restarts 2 -n 3, rank 1 killed in iteration 13: relaunched, resumed at 12, "
          "exit 0, bytes identical")
    # Killed in every attempt: three failures the same way end with exit 2, not a loop.
    shutil.rmtree(ckpt)
    p, _ = mp.run(restarts + ["--checkpoint", ckpt, "--every", EVERY, "--die-at", DIE_AT,
                              "--die-rank", "1", "--out", out], env=env)
    if p.returncode != 2 or "failed 3 times the same way (rank 1" not in p.stderr:
        mp.fail("a rank killed in every attempt: exit %d, expected 2 naming rank 1; stderr: %s"
                % (p.returncode, p.stderr))
    print("a rank killed in every attempt: exit 2 after 3 attempts, naming it")


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
    try:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(ckpt, "lock")) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the lock file is created, then locked
        mp.expect_refusal([ordorun, "--timeout", "60", "-n", "2", binary, "--iters", ITERS,
                           "--checkpoint", ckpt, "--every", EVERY], env,
                          ["is in use by another job"], "a directory another job writes")
    finally:
        first.kill()
        first.wait()


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="ordo-ckpt-%d-" % os.getpid())
    try:
        across_rank_counts(ordorun, binary, tmp)
        relaunch(ordorun, binary, tmp)
        kept_and_locked(ordorun, binary, tmp)
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
            p, _ = mp.run(with_ckpt + ["--restart", ckpt], env=env)
            if p.returncode != 0:
                mp.fail("%s: the restarted run exited %d" % (what, p.returncode))
            if "resumed_at=12" not in p.stdout:
                mp.fail("%s: expected to resume at iteration 12 (the newest complete "
                        "checkpoint before %s)" % (what, DIE_AT))
            got = read_outputs(os.path.join(case, "resumed"), ranks)
            if got != want:
                mp.fail("%s: the restarted run's blocks differ from the uninterrupted run's"
                        % what)
            print("%s: killed in iteration %s, resumed at 12, %d byte(s) identical to the "
                  "uninterrupted run" % (what, DIE_AT, sum(len(b) for b in got)))

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
