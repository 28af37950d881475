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
bytes. Then the refusals, each exit 2 with a message naming the mismatch: a checkpoint of another
graph (other --blocks), of another rank count (2 ranks' checkpoint on 1 rank), one left
incomplete (its manifest removed; a part truncated), and a directory with no checkpoint.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env, expect_refusal)

ITERS, EVERY, DIE_AT = "30", "4", "13"


def read_outputs(prefix, ranks):
    out = []
    for r in range(ranks):
        with open("%s.%d" % (prefix, r), "rb") as f:
            out.append(f.read())
    return out


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="ordo-ckpt-%d-" % os.getpid())
    try:
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
        mp.expect_refusal([ordorun, "--timeout", "60", "-n", "1", binary, "--iters", ITERS,
                        "--restart", ckpt], env,
                       ["written by 2 rank(s), and this job has 1"], "another rank count")
        newest = sorted(d for d in os.listdir(ckpt) if d.startswith("ckpt-"))[-1]
        part = os.path.join(ckpt, newest, "rank-1.part")
        with open(part, "r+b") as f:
            f.truncate(os.path.getsize(part) - 8)
        mp.expect_refusal(two + ["--restart", ckpt], env,
                       ["rank 1:", "is incomplete", "truncated"], "a truncated part")
        os.remove(os.path.join(ckpt, newest, "manifest"))
        mp.expect_refusal(two + ["--restart", ckpt], env,
                       ["only incomplete checkpoints", "manifest is missing"],
                       "a checkpoint without its manifest")
        empty = os.path.join(tmp, "empty")
        os.makedirs(empty)
        mp.expect_refusal(two + ["--restart", empty], env, ["holds no checkpoint"],
                       "a directory without checkpoints")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
